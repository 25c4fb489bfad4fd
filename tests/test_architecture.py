"""The code's shape: normviz pure and acyclic, pages as wiring, one section interface."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
from signals import assert_valid, same_looking

from normviz.errors import Refusal
from normviz.knobs import Knob
from normviz.sections import Section, no_progress
from ui.pages import PAGES

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "normviz"
MAX_FIGURE_BYTES = 1_000_000


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


@pytest.mark.parametrize("name", sorted(MODULES))
def test_normviz_imports_neither_streamlit_nor_the_ui(name: str) -> None:
    bad = [m for m in _imports(MODULES[name]) if m.split(".")[0] in ("streamlit", "ui")]
    assert not bad, f"{name} imports {bad}"


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


@pytest.mark.parametrize("name", sorted(MODULES))
def test_normviz_modules_are_short(name: str) -> None:
    n = len(MODULES[name].read_text().splitlines())
    assert n <= 400, f"{name} has {n} lines (at most 400: split it by topic)"


PAGE_FILES = sorted((ROOT / "pages").glob("*.py"))


@pytest.mark.parametrize("path", PAGE_FILES, ids=lambda p: p.stem)
def test_pages_are_wiring(path: Path) -> None:
    src = path.read_text()
    assert len(src.splitlines()) <= 150, f"{path.name}: {len(src.splitlines())} lines"
    for banned in ("st.cache_", "pd.DataFrame(", "except NormConfigError"):
        assert banned not in src, f"{path.name} contains {banned!r}"
    tree = ast.parse(src)
    for node in ast.walk(tree):
        # prose lives with its topic: no long string literal in a page
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node is getattr(tree.body[0], "value", None):
                continue  # the module docstring
            assert len(node.value) <= 120, f"{path.name}: prose in the page: {node.value[:60]!r}…"


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


@pytest.mark.parametrize(("path", "section"), SECTIONS)
def test_section_interface(path: str, section: Section) -> None:
    assert section.slug and section.slug.replace("-", "").isalnum(), section.slug
    assert section.label and section.intro
    names = [k.name for k in section.knobs]
    assert len(set(names)) == len(names)
    assert all(isinstance(k, Knob) for k in section.knobs)
    mod = TOPICS[path]
    setup = mod.example_setup()
    if section in getattr(mod, "PART_SECTIONS", ()):  # a part runs on its owner's result
        owner = next(s for s in mod.SECTIONS if section in mod.PARTS.get(s.slug, ()))
        setup = mod.part_setup(section, setup, owner.run(setup, owner.defaults(), no_progress))
    ran = 0
    for knobs in (section.defaults(), section.maxima()):
        try:
            res = section.run(setup, knobs, no_progress)
        except Refusal:
            continue
        ran += 1
        assert dataclasses.is_dataclass(res) and res.__dataclass_params__.frozen, type(res)
        for presenter in (False, True):
            fig = section.figure(res, presenter)
            assert fig is None or isinstance(fig, go.Figure)
            if fig is not None:
                assert len(fig.to_json()) <= MAX_FIGURE_BYTES, section.slug
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
    import re

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
