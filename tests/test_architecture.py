"""The code's shape: normviz pure and acyclic, pages as wiring, one section interface."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
from conftest import starts_a_server
from signals import assert_valid, assert_within_budget, same_looking

from normviz.errors import Refusal
from normviz.figures.spec import Picture
from normviz.knobs import Knob
from normviz.sections import Section, no_progress
from ui.pages import PAGES

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "normviz"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (function-level imports included)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _ui_imports(paths: dict[str, Path]) -> dict[str, list[str]]:
    """Module -> the streamlit or ui modules it imports (only the modules that do)."""
    found = {
        name: sorted(m for m in _imports(path) if m.split(".")[0] in ("streamlit", "ui"))
        for name, path in paths.items()
    }
    return {name: bad for name, bad in found.items() if bad}


def _long_files(paths: dict[str, Path], limit: int) -> dict[str, int]:
    """Module -> its line count, for the modules longer than `limit` lines."""
    counts = {name: len(path.read_text().splitlines()) for name, path in paths.items()}
    return {name: n for name, n in counts.items() if n > limit}


def test_normviz_imports_neither_streamlit_nor_the_ui() -> None:
    assert len(MODULES) > 50  # the walk found the package
    assert not _ui_imports(MODULES), _ui_imports(MODULES)


def test_normviz_has_no_import_cycle() -> None:
    graph = {
        name: {m for m in _imports(path) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }
    # a package's __init__ importing its own submodules is not a cycle of ideas
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not (d.startswith(name + ".") and path_is_pkg(name))}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                cycle = [*stack[stack.index(d) :], d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def path_is_pkg(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def test_normviz_modules_are_short() -> None:
    long = _long_files(MODULES, 400)
    assert not long, f"modules over 400 lines (split them by topic): {long}"


PAGE_FILES = sorted((ROOT / "pages").glob("*.py"))


def _not_wiring(path: Path) -> list[str]:
    """What makes a page more than wiring: length, caching, tables, error handling, prose."""
    src = path.read_text()
    found = [f"{n} lines" for n in [len(src.splitlines())] if n > 150]
    found += [
        f"contains {b!r}"
        for b in ("st.cache_", "pd.DataFrame(", "except NormConfigError")
        if b in src
    ]
    tree = ast.parse(src)
    doc = getattr(tree.body[0], "value", None) if tree.body else None  # the module docstring
    found += [
        f"prose in the page: {node.value[:60]!r}…"  # prose lives with its topic
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if node is not doc and len(node.value) > 120
    ]
    return found


def test_pages_are_wiring() -> None:
    assert len(PAGE_FILES) >= 8  # the walk found the pages
    found = {p.name: bad for p in PAGE_FILES if (bad := _not_wiring(p))}
    assert not found, found


def test_the_structural_checks_catch_an_offender(tmp_path: Path) -> None:
    """The three checks above report every offender they are shown (not only the first)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import streamlit as st\n"
        "def f():\n    from ui import state\n"
        f"x = {'p' * 130!r}\n"
        "st.cache_data\n" + "\n" * 160
    )
    good = tmp_path / "good.py"
    good.write_text('"""A docstring."""\nimport torch\n')
    files = {"bad": bad, "good": good}
    assert _ui_imports(files) == {"bad": ["streamlit", "ui", "ui.state"]}
    assert _long_files(files, 150) == {"bad": 165}
    assert len(_not_wiring(bad)) == 3 and _not_wiring(good) == []


# ---- every section: one interface -------------------------------------------------------

TOPICS = {p.path: importlib.import_module(p.topic) for p in PAGES}
SECTIONS = [
    pytest.param(path, s, id=f"{path}:{s.slug}")
    for path, mod in TOPICS.items()
    for s in (*getattr(mod, "SECTIONS", ()), *getattr(mod, "PART_SECTIONS", ()))
]


@pytest.mark.parametrize("path", sorted(TOPICS))
def test_every_page_declares_its_sections(path: str) -> None:
    mod = TOPICS[path]
    assert mod.SECTIONS, path
    assert all(isinstance(s, Section) for s in mod.SECTIONS)
    slugs = [s.slug for s in mod.SECTIONS]
    assert len(set(slugs)) == len(slugs), slugs
    assert callable(mod.example_setup)


@functools.cache
def _at_defaults(path: str, slug: str) -> object:
    """A section's result on its page's example setup at its default knobs, computed once
    (a part's test runs on its owner's result too)."""
    mod = TOPICS[path]
    section = next(s for s in mod.SECTIONS if s.slug == slug)
    return section.run(mod.example_setup(), section.defaults(), no_progress)


@pytest.mark.parametrize(("path", "section"), SECTIONS)
def test_section_interface(path: str, section: Section) -> None:
    assert section.slug and section.slug.replace("-", "").isalnum(), section.slug
    assert section.label and section.intro
    names = [k.name for k in section.knobs]
    assert len(set(names)) == len(names)
    assert all(isinstance(k, Knob) for k in section.knobs)
    mod = TOPICS[path]
    setup = mod.example_setup()
    part = section in getattr(mod, "PART_SECTIONS", ())
    if part:  # a part runs on its owner's result
        owner = next(s for s in mod.SECTIONS if section in mod.PARTS.get(s.slug, ()))
        setup = mod.part_setup(section, setup, _at_defaults(path, owner.slug))
    ran = 0
    for knobs in (section.defaults(), section.maxima()):
        try:
            at_defaults = not part and knobs == section.defaults()
            res = (
                _at_defaults(path, section.slug)
                if at_defaults
                else section.run(setup, knobs, no_progress)
            )
        except Refusal:
            continue
        ran += 1
        assert dataclasses.is_dataclass(res) and res.__dataclass_params__.frozen, type(res)
        for presenter in (False, True):
            fig = section.figure(res, presenter)
            assert fig is None or isinstance(fig, go.Figure | Picture)
            if isinstance(fig, Picture):  # cannot be read back: its section says it in words
                assert section.alt(res) and all(isinstance(w, str) and w for w in section.alt(res))
                assert len(fig.html) < 1_000_000
            elif fig is not None:
                assert_within_budget(fig, what=section.slug)
                assert not same_looking(fig), same_looking(fig)  # colour is not the only signal
                assert_valid(fig)
        df = section.table(res)
        assert df is None or isinstance(df, pd.DataFrame)
        notes = list(section.notes(res))
        assert all(isinstance(n, str) and n.strip() for n in notes)
    assert ran, f"{section.slug} refused both its defaults and its maxima"


def test_every_figure_is_built_as_a_spec() -> None:
    """One way to build a figure (normviz/figures/spec.py): plotly's object API, which
    costs 5-40 ms a figure, appears nowhere else."""
    object_api = re.compile(r"make_subplots\(|\bgo\.(?!Figure\b)[A-Z]\w*\(|\bgo\.Figure\(")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("normviz", "ui", "pages")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "spec.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if object_api.search(line)
    ]
    assert not found, found


# ---- the browser mark ---------------------------------------------------------------------

TEST_FILES = sorted((ROOT / "tests").glob("test_*.py"))


def _tests(path: Path) -> Iterator[tuple[str, list[str], set[str], bool]]:
    """(name, arguments, parametrized arguments, marked browser by hand) per test."""
    tree = ast.parse(path.read_text())
    module_mark = any(
        isinstance(n, ast.Assign) and "pytestmark" in ast.unparse(n) and "browser" in ast.unparse(n)
        for n in tree.body
    )
    for f in tree.body:
        if not isinstance(f, ast.FunctionDef) or not f.name.startswith("test"):
            continue
        marks = [ast.unparse(d) for d in f.decorator_list]
        params: set[str] = set()
        for d in f.decorator_list:
            if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("parametrize"):
                names = ast.literal_eval(d.args[0])
                params |= {
                    n.strip() for n in (names.split(",") if isinstance(names, str) else names)
                }
        yield (
            f.name,
            [a.arg for a in f.args.args],
            params,
            module_mark or "pytest.mark.browser" in marks,
        )


def test_the_browser_mark_finds_every_server_test() -> None:
    """conftest marks `browser` every test that starts a server or Chromium, so that
    `pytest -m "not browser"` starts none: it finds each test marked by hand, and none of
    the unit tests."""
    marked = {
        (p, n, tuple(a), frozenset(par)) for p in TEST_FILES for n, a, par, m in _tests(p) if m
    }
    assert len(marked) >= 15
    missed = [f"{p.name}::{n}" for p, n, a, par in marked if not starts_a_server(p, n, a, par)]
    assert not missed, missed
    for name in ("test_core.py", "test_architecture.py", "test_sidebar.py", "test_payloads.py"):
        path = ROOT / "tests" / name
        found = [n for n, a, par, _ in _tests(path) if starts_a_server(path, n, a, par)]
        assert not found, (name, found)


# ---- the README stays true -----------------------------------------------------------------

README = (ROOT / "README.md").read_text()
NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen "
NUMBER_WORDS += "fourteen fifteen sixteen seventeen eighteen nineteen twenty"


def test_the_readme_names_every_page_parameter() -> None:
    """The README's table of page parameters has a row per page naming each of its URL
    parameters (or their `prefix_*`)."""
    from ui.params import PAGE_PARAMS

    rows = {m[1]: m[2] for m in re.finditer(r"^\| `/([\w-]+)` \| (.*) \|$", README, re.M)}
    missing = {
        page: [
            p.name
            for p in params
            if f"`{p.name}`" not in rows.get(page, "")
            and f"`{p.name.split('_')[0]}_*`" not in rows.get(page, "")
        ]
        for page, params in PAGE_PARAMS.items()
    }
    assert not {k: v for k, v in missing.items() if v}, missing


def test_the_readme_counts_the_batchnorm_lab_sections() -> None:
    import normviz.batchnorm as bn

    said = re.search(r"\*\*BatchNorm lab\*\*: (\w+) sections", README)
    assert said, "the tour no longer counts the lab's sections"
    assert NUMBER_WORDS.split().index(said[1]) == len(bn.SECTIONS), said[1]
