"""The README's links and the teaching path: each opens its view without a warning, in
presenter mode where it asks for it, and the README and the home page list the same path."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from conftest import assert_clean, run_app, texts

from ui import teach

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
LINKS = sorted(set(re.findall(r"\((http://localhost:8501/[^)\s]*\?[^)\s]*)\)", README)))


def test_the_readme_has_the_example_and_the_path() -> None:
    assert any("method=group&groups=3" in link for link in LINKS)
    for step in teach.STEPS:
        assert f"(http://localhost:8501/{step.link[2:]})" in README, step.title
        assert step.what in README
    assert f"{teach.TOTAL_MINUTES}-minute" in README and teach.TOTAL_MINUTES == 50


@pytest.mark.parametrize("link", LINKS)
def test_a_readme_link_opens_without_a_warning(link: str) -> None:
    parts = urlsplit(link)
    at = run_app(parts.path.strip("/") or None, query=dict(parse_qsl(parts.query)))
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    query = dict(parse_qsl(parts.query))
    assert at.session_state["present"] == (query.get("present") == "1")
    for name, value in query.items():  # the link's values are the view's
        got = at.query_params[name]
        assert (got[-1] if isinstance(got, list) else got) == value, name


def test_home_shows_the_teaching_path() -> None:
    at = run_app()
    shown = texts(at)
    for step in teach.STEPS:
        assert f"[{step.title}]({step.link})" in shown
    assert any(e.label.startswith("Teach with normviz") for e in at.expander)


def test_the_detection_step_says_what_the_guide_says() -> None:
    """Issue 24 item 17: detectors do not simply "use GroupNorm"; the page's own Why names
    frozen BatchNorm (published Mask R-CNN) and GroupNorm as Wu & He's experiment."""
    from normviz.choose import guide
    from normviz.sources import SOURCES

    step = next(s for s in teach.STEPS if ("arch", "detection") in s.query)
    why = " ".join(guide.recommend(guide.Situation("detection", 2)).reasons)
    assert "detection models use GroupNorm" not in step.what
    assert "froze" in step.what and "frozen" in why
    assert "GroupNorm" in step.what and SOURCES["wu2018"].authors in step.what
    assert SOURCES["wu2018"].authors in why and "Mask R-CNN" in why
