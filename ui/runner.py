"""The one way a section is shown: cached run, one progress bar, figure, table, notes.

Caching is keyed on plain values only: the page, the section's slug, the page's
hashable setup and the knob values (never on a tensor), as one digest of them
(`_key`). Results are cached as
data (`st.cache_data`: every session gets its own copy), figures as objects
(`st.cache_resource`: building one costs more than sending it; they are never
mutated after they are built). A refusal is shown one way: what torch itself
refuses (`Refusal`, often the lesson) as an info box, any other invalid setting
as an error box that names what to change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from itertools import groupby
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from pandas.io.formats.style import Styler

from normviz import alttext
from normviz.errors import NormConfigError, Refusal
from normviz.figures.spec import Picture
from normviz.knobs import Value
from normviz.sections import Extra, Section
from ui.safe import md_text

KnobItems = tuple[tuple[str, Value], ...]
ALT_LABEL = "Chart as text"  # the fold under every chart that holds its text alternative


def _items(section: Section, knobs: Mapping[str, Value]) -> KnobItems:
    """This section's own knob values, as a hashable key."""
    return tuple((k.name, knobs[k.name]) for k in section.knobs)


def _key(*parts: Any) -> object:
    """One cache key for `parts` (page, slug, setup, knob values...): a digest of their
    pickle. Streamlit hashes a cached call's arguments field by field in Python, about
    0.5 ms for a page's setup dataclass, and every section is two cached calls (its
    result, its figure) per run; pickling the same plain values and hashing the bytes
    takes a few µs. Equal values pickle alike, so equal settings share an entry; a part
    that cannot be pickled is handed to Streamlit's hashing as before."""
    try:
        data = pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return parts
    return hashlib.blake2b(data, digest_size=20).hexdigest()


@st.cache_data(max_entries=64, max_size="64MB", show_spinner=False)  # results are small
def _run(_section: Section, _setup: Any, _items: KnobItems, key: object) -> Any:
    """The section's result; a progress bar while it runs (a cache hit replays nothing).
    `key` is `_key(page, slug, setup, items)`: the cache's key."""
    bar = st.progress(0.0, text=f"{_section.label}: running…")

    def progress(fraction: float, text: str) -> None:
        bar.progress(min(1.0, max(0.0, fraction)), text=text or _section.label)

    try:
        return _section.run(_setup, dict(_items), progress)
    finally:
        bar.empty()


@st.cache_resource(max_entries=64, show_spinner=False)
def _figure(
    _section: Section, _result: Any, big: bool, key: object
) -> tuple[go.Figure, list[str]] | None:
    """The figure and its text alternative (reading a built figure back is slow: once).
    `key` is `_key(page, slug, setup, items)` of the result drawn (with its view)."""
    fig = _section.figure(_result, big)
    return None if fig is None else (fig, _section.alt_text(_result, fig))


def drawn(
    page: str,
    section: Section,
    result: Any,
    setup: Any,
    knobs: Mapping[str, Value],
    presenter: bool = False,
    view: Mapping[str, Value] | None = None,
) -> tuple[go.Figure, list[str]] | None:
    """The section's figure of `result` and its text alternative, cached as every figure
    is: on the page, the section, the setup, the knob values, presenter mode and the
    `view` fields already set on `result` (see `show`)."""
    items = _items(section, knobs) + tuple(sorted((view or {}).items()))
    return _figure(section, result, presenter, _key(page, section.slug, setup, items))


def refusal(e: NormConfigError) -> None:
    """Show why a setting cannot run: a lesson (torch's own refusal) or an error."""
    text = md_text(e, limit=400)
    if isinstance(e, Refusal):
        st.info(f"**torch refuses this setting:** {text}.", icon=":material/school:")
    else:
        st.error(f"**This setting cannot run:** {text}.", icon=":material/block:")


def guard(check: Callable[[], object]) -> bool:
    """Run a page-wide check; show why it refuses (as `refusal`) and return False."""
    try:
        check()
    except NormConfigError as e:
        refusal(e)
        return False
    return True


def result(page: str, section: Section, setup: Any, knobs: Mapping[str, Value]) -> Any | None:
    """The section's cached result, or None after showing why it cannot run."""
    try:
        items = _items(section, knobs)
        return _run(section, setup, items, _key(page, section.slug, setup, items))
    except NormConfigError as e:
        refusal(e)
        return None


LONG_TABLE = 15  # rows: a longer table scrolls up and down in its own box


def _number(fmt: str) -> Callable[[float], str]:
    """A float as `fmt` says: a %-format ("%.4g") or "percent" (0.5 as 50.00%)."""
    if fmt == "percent":
        return lambda v: f"{v:.2%}"
    return lambda v: fmt % v


def _css_string(text: str) -> str:
    """`text` as a CSS string, every character escaped (a header may be an uploaded name)."""
    return '"' + "".join(f"\\{ord(ch):06x}" for ch in text) + '"'


def _stacked(shown: Styler, columns: Sequence[object]) -> Styler:
    """Each cell's column name, for the stacked layout a phone shows (ui/css.py): a
    table whose id starts "T_nvstack" labels its cells "column: value" there."""
    names = [str(c) for c in columns]
    shown.set_uuid("nvstack" + hashlib.sha1("\x1f".join(names).encode()).hexdigest()[:10])
    return shown.set_table_styles(
        [
            {"selector": f"td:nth-of-type({j})::before", "props": [("content", label)]}
            for j, label in enumerate((_css_string(f"{n}: ") for n in names), start=1)
        ]
    )


def table(df: pd.DataFrame, fmt: str = "%.4g") -> None:
    """A read-only table; floats shown with `fmt`; row labels (an index that is not just
    0..n-1) are shown.

    A static table (st.table), not a canvas grid: its headers and cells wrap to fit the
    column at every width (ui/css.py), so no column hides behind a sideways scroll, and
    it follows presenter mode's text size; on a phone a wide one stacks, one row a block
    of "column: value" lines.
    """
    floats = [c for c, dtype in df.dtypes.items() if pd.api.types.is_float_dtype(dtype)]
    shown = _stacked(df.style.format(_number(fmt), subset=floats, na_rep="NaN"), df.columns)
    # a default (range) index carries nothing; a named or labelled one is the row labels
    hide = isinstance(df.index, pd.RangeIndex)
    box = st.container(height=520) if len(df) > LONG_TABLE else nullcontext()
    with box:
        st.table(shown, hide_index=hide)


def alt(lines: Sequence[str], folded: bool = False) -> None:
    """A chart's text alternative, in a closed fold under it (a caption inside a fold)."""
    body = "\n".join(f"- {md_text(line, limit=600)}" for line in lines)
    if folded:  # folds do not nest
        st.caption(f"{ALT_LABEL}:\n{body}")
        return
    with st.expander(ALT_LABEL, icon=":material/subject:"):
        st.markdown(body)


def chart(fig: go.Figure | Picture, key: str, text: Sequence[str] = (), **kw: Any) -> Any:
    """A Plotly chart and its text alternative (`text`, else read off the figure).

    Every chart of the app goes through here; `kw` goes to `st.plotly_chart`
    (on_select, selection_mode, width...). Returns what `st.plotly_chart` returns.
    A still `Picture` is inline HTML (no Plotly script to load) in a keyed container.
    """
    if isinstance(fig, Picture):
        with st.container(key=key):
            st.html(f'<div class="nv-picture">{fig.html}</div>')
        alt(text)
        return None
    kw.setdefault("config", {"displaylogo": False})
    event = st.plotly_chart(fig, key=key, theme=None, **kw)
    alt(list(text) or alttext.describe(fig))
    return event


def _graphviz(body: str, folded: bool = False) -> None:
    st.graphviz_chart(body, width="stretch")
    alt(alttext.describe_dot(body), folded)


_DRAW = {
    "callout": lambda body: st.success(body, icon=":material/lightbulb:"),
    "caption": st.caption,
    "markdown": st.markdown,
    "static": table,
    "code": lambda body: st.code(body, language="python"),
    "graphviz": _graphviz,
}


def extras(items: Sequence[Extra]) -> None:
    """Draw a section's extra items in order; items sharing a fold sit in one expander."""
    for fold, group in groupby(items, key=lambda e: e.fold):
        with st.expander(fold) if fold else nullcontext():
            for item in group:
                if item.kind == "graphviz":
                    _graphviz(item.body, folded=bool(fold))
                else:
                    _DRAW[item.kind](item.body)


def show(
    page: str,
    section: Section,
    setup: Any,
    knobs: Mapping[str, Value],
    presenter: bool = False,
    intro: bool = True,
    view: Mapping[str, Value] | None = None,
) -> Any | None:
    """Intro, result, figure, table, notes and extras of one section; returns the result.

    `view`: fields of the result that only choose what is drawn (e.g. which channel a
    plot follows); set on the cached result, they never rerun the section. A table's
    `df.attrs["format"]` (e.g. "percent") chooses how its numbers are shown.
    """
    if intro and section.intro:
        st.markdown(section.intro)
    res = result(page, section, setup, knobs)
    if res is None:
        return None
    more = list(section.extras(res))
    extras([e for e in more if e.top])
    if view:
        res = dataclasses.replace(res, **view)
    pair = drawn(page, section, res, setup, knobs, presenter, view)
    if pair is not None:
        chart(pair[0], f"{page}_{section.slug}_fig", pair[1])
    df = section.table(res)
    if df is not None:
        table(df, df.attrs.get("format", "%.4g"))
    for note in section.notes(res):
        st.markdown(note)
    extras([e for e in more if not e.top])
    return res
