"""The one shim of Streamlit internals: AppTests share a process's script cache and
component registry (benchmarks.common.share_components).

Streamlit 1.67's AppTest offers no option for either: each run builds a new
ScriptCache and each AppTest scans the installed packages for components. The shim
replaces the names AppTest builds them by. If a Streamlit upgrade moves those names,
the shim silently stops working and the suite gets slower; these tests fail instead.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from streamlit.components.v2.component_manager import BidiComponentManager
from streamlit.runtime.scriptrunner import script_cache

from benchmarks import common

PAGE = "worked-example"  # a light page: its file runs through st.navigation
PAGE_FILE = str(common.ROOT / "pages" / f"{PAGE}.py")


@pytest.fixture
def compiles(monkeypatch) -> Counter:  # type: ignore[no-untyped-def]
    """The scripts a ScriptCache compiles from now on, counted by path (the shared cache
    starts empty: every script AppTest runs is compiled once more, then kept)."""
    seen: Counter = Counter()
    real = compile

    def counting(source, filename, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen[str(Path(filename).resolve())] += 1
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(script_cache, "compile", counting, raising=False)
    common._script_cache().clear()
    return seen


def _run(page: str = PAGE):  # type: ignore[no-untyped-def]
    at = common.app_test(page, timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_two_apptests_share_one_compiled_script(compiles: Counter) -> None:
    _run()
    # the entry script (the runner's cache) and the page (the pages manager's), once each
    assert compiles == {str(common.ENTRY): 1, PAGE_FILE: 1}, compiles
    _run()  # a second AppTest, as every test makes its own
    assert compiles == {str(common.ENTRY): 1, PAGE_FILE: 1}, compiles  # nothing compiled again


def test_two_apptests_share_one_component_registry(monkeypatch) -> None:
    registry = common._components()  # the process's one scan of the installed packages
    scans: list[object] = []
    real = BidiComponentManager.discover_and_register_components

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        scans.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(BidiComponentManager, "discover_and_register_components", counting)
    first, second = _run(), _run()
    assert scans == []  # neither AppTest scanned again
    assert first._bidi_component_manager is second._bidi_component_manager is registry
