"""Every page, fuzzed: random query strings and random widget values (hypothesis + AppTest).

Each example runs the page through app.py, as a shared link or a student's clicks
would. Whatever arrives, the page shows no exception and no internal-error
message. A URL value that cannot be used falls back with a visible warning that
names the parameter; a value that can be used is not reported as invalid.

The oracle for "can be used" is written here from the URL contract (docs/architecture.md
and the Param specs' ranges and choices), not taken from ui.params.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

import keys
import pytest
from conftest import assert_clean
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import element_tree as et

from benchmarks.common import app_test, page_ids, sidebar_drawn
from normviz import pretrained, training
from normviz.layouts import LAYOUTS
from ui.params import MAX_RAW_LEN, PAGE_PARAMS, SHARED, Param, fmt, parse
from ui.state import knob_of

PAGES = page_ids()
# Bounded: ~10 runs per page and test. No shrinking: every step would be an app run
# (minutes), and the failure message already names the query or the widget actions.
FUZZ = settings(
    max_examples=10,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The training lab's lengths, drawn up to each knob's default: a run trains as long as it
# is asked (the DyT sweep at 10 epochs, ~40 CPU-s, five times its default), and a longer
# one is the same code for longer. {knob: its choices the fuzz draws}; the values it
# leaves out are still parsed (test_the_fuzz_leaves_long_training_out).
SHORT = {
    k.name: k.choices[: k.choices.index(k.default) + 1]
    for k in training.KNOBS
    if k.label == "Epochs" and k.choices
}
# Query keys Streamlit keeps for itself (never passed to st.query_params).
RESERVED = {"embed", "embed_options"}
# Printable text without control characters or surrogates.
TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=30)


# ---- one URL value: its text, and whether the app can use it -------------------------


@dataclass(frozen=True)
class Raw:
    """A query value (or repeated values, the last one counts) and our verdict on it."""

    value: str | list[str]
    usable: bool | None  # None: the oracle cannot tell (a cell of a real tensor)


def _junk(p: Param) -> st.SearchStrategy[str]:
    """Values `p` cannot use: empty, NaN/inf, too long, wrong type, unicode, out of range."""
    always = [
        st.sampled_from(["", "   ", "NaN", "nan", "inf", "-inf", "None", "null", "[]", "0x10"]),
        st.just("9" * (MAX_RAW_LEN + 1)),
        st.integers(MAX_RAW_LEN + 1, 3 * MAX_RAW_LEN).map(lambda n: "é" * n),
        # a non-numeric, non-choice character keeps unicode digits (valid!) out
        TEXT.map(lambda t: "🙂" + t),
    ]
    d = p.default
    if isinstance(d, str) and p.choices is None:  # free text (a class code): only its length
        return st.one_of(always[1], always[2])  # (the page itself judges the text)
    if p.multi:  # a comma list of choices, empty for none: blank text is a usable value
        always = [a.filter(lambda v: v.strip() != "") for a in always]
        extra = [st.sampled_from(["batchnorm", "online,,same", ",", "online;same", "SHIFT"])]
    elif isinstance(d, bool):
        extra = [st.sampled_from(["2", "-1", "maybe", "tru", "1.0"])]
    elif p.choices is not None:
        junk = ["batchnorm", "NHWC", "btc ", "1e-7", "0.5", "<script>"]
        extra = [st.sampled_from([v for v in junk if not _parses(p, v)])]
    elif isinstance(d, int):
        lo, hi = int(p.lo or 0), int(p.hi or 2**31)
        extra = [
            st.sampled_from([str(lo - 1), str(hi + 1), "1.5", "abc", "1e400", "-0.5", "1,2"]),
            st.integers(hi + 1, 10**15).map(str),
            st.integers(-(10**15), lo - 1).map(str),
        ]
    else:  # a float range
        lo, hi = float(p.lo or 0), float(p.hi or 0)
        extra = [
            st.sampled_from(["abc", "1..2", "1e400", "--1"]),
            st.floats(hi + 1e-3, 1e12).map(repr),
            st.floats(-1e12, lo - 1e-3).map(repr),
        ]
    return st.one_of(*always, *extra)


def _parses(p: Param, raw: str) -> bool:
    """True when `raw` is one of `p`'s choices after all (e.g. "0.5" for a choice of 0.5)."""
    try:
        parse(p, raw)
    except ValueError:
        return False
    return True


def _good(p: Param) -> st.SearchStrategy[str]:
    """Values `p` can use (sizes kept small, so a run stays quick; the maximum appears too)."""
    d = p.default
    if isinstance(d, str) and p.choices is None:  # free text: anything short enough
        return TEXT
    if isinstance(d, bool):
        return st.sampled_from(["1", "0", "true", "false", "on", "off", "YES"])
    if p.multi:  # any subset, in any order, spaces allowed after the commas
        subset = st.lists(st.sampled_from([str(c) for c in p.choices or ()]), unique=True)
        return st.tuples(subset, st.sampled_from([",", ", "])).map(lambda t: t[1].join(t[0]))
    if p.choices is not None:
        return st.sampled_from([fmt(c) for c in SHORT.get(p.name, p.choices)])
    if isinstance(d, int):
        lo, hi = int(p.lo or 0), int(p.hi or 2**31)
        small = [v for v in (lo, lo + 1, 2, 3, 4, 5, 8) if lo <= v <= hi]
        return st.sampled_from([*small, hi]).map(str)
    return st.floats(float(p.lo or 0), float(p.hi or 0)).map(repr)  # type: ignore[arg-type]


def _raw(p: Param) -> st.SearchStrategy[Raw]:
    """A value for `p`: usable or not, sometimes repeated in the query (the last counts)."""
    one = st.one_of(_good(p).map(lambda v: Raw(v, True)), _junk(p).map(lambda v: Raw(v, False)))
    return st.one_of(
        one,
        st.tuples(_junk(p), one).map(lambda t: Raw([t[0], str(t[1].value)], t[1].usable)),
    )


def _last(value: str | list[str]) -> str:
    """The value that counts: the last one of a repeated parameter."""
    return value[-1] if isinstance(value, list) else value


def _axes_raw(layout: str) -> st.SearchStrategy[Raw]:
    """`axes` for the layout the link ends up with: a non-empty subset of its axes, or junk."""
    names = LAYOUTS[layout].axes
    good = st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True)
    junk = st.sampled_from(["", "Q,Z", "B;T", "🙂", "c", "x" * 300, ",", "NaN"])
    other = {a for lay in LAYOUTS.values() for a in lay.axes} - set(names)
    return st.one_of(
        good.map(lambda axs: Raw(",".join(axs), True)),
        junk.map(lambda v: Raw(v, False)),
        st.sampled_from(sorted(other)).map(lambda a: Raw(a, False)),
    )


@st.composite
def queries(draw: st.DrawFn, page: str) -> tuple[dict[str, str | list[str]], dict[str, Raw], str]:
    """(query, {name: Raw} of the values the page must judge, effective layout)."""
    page_params = {p.name: p for p in PAGE_PARAMS.get(page, ())}
    judged: dict[str, Raw] = {}
    if draw(st.booleans(), label="layout given"):
        judged["layout"] = draw(_raw(SHARED["layout"]), label="layout")
    layout = "BTC"  # the default, unless the link names a usable layout
    if "layout" in judged and judged["layout"].usable:
        v = judged["layout"].value
        layout = v[-1] if isinstance(v, list) else v
    if draw(st.booleans(), label="data given"):
        judged["data"] = draw(_raw(SHARED["data"]), label="data")
    real = "data" in judged and judged["data"].usable and _last(judged["data"].value)
    if real in pretrained.SOURCES:  # a real tensor comes in its own layout, whatever the link
        layout = pretrained.SOURCES[real].layout
    names = ["method", "groups", "centred", "eps", "seed", *LAYOUTS[layout].axes]
    names += list(page_params)
    for name in draw(st.lists(st.sampled_from(names), unique=True, max_size=6), label="names"):
        p = page_params.get(name) or SHARED[name]
        if name in LAYOUTS[layout].axes:  # sizes default per layout; same range
            p = SHARED[name]
        judged[name] = draw(_raw(p), label=name)
    if draw(st.booleans(), label="axes given"):
        judged["axes"] = draw(_axes_raw(layout), label="axes")
    # the Axis Explorer's selected cell must lie inside the tensor the link describes (a
    # real tensor's shape is the model's: there the oracle leaves a usable cell unjudged)
    for a in LAYOUTS[layout].axes:
        cell = judged.get(f"cell_{a.lower()}")
        if page == "axes" and cell is not None and cell.usable and real in pretrained.SOURCES:
            judged[f"cell_{a.lower()}"] = Raw(cell.value, None)
        elif page == "axes" and cell is not None and cell.usable:
            size = judged.get(a)
            n = _last(size.value) if size and size.usable else str(LAYOUTS[layout].defaults[a])
            if int(float(_last(cell.value))) >= int(float(n)):
                judged[f"cell_{a.lower()}"] = Raw(cell.value, False)
    query: dict[str, str | list[str]] = {k: r.value for k, r in judged.items()}
    # unknown keys (another page's parameters count as unknown here)
    known = set(SHARED) | set(page_params) | RESERVED
    keys = st.text(string.ascii_letters + "_-é🙂", min_size=1, max_size=12)
    for k in draw(st.lists(keys.filter(lambda k: k not in known), max_size=2, unique=True)):
        query[k] = draw(TEXT, label="unknown value")
    return query, judged, layout


def _warnings(at) -> str:
    return "\n".join(w.value for w in at.warning)


@pytest.mark.parametrize("page", PAGES)
@FUZZ
@given(data=st.data())
def test_random_query_strings(page: str, data: st.DataObject) -> None:
    query, judged, _layout = data.draw(queries(page), label="query")
    at = app_test(page, {k: v for k, v in query.items()})  # type: ignore[misc]
    at.run()
    assert_clean(at)
    assert sidebar_drawn(at)
    warned = _warnings(at)
    for name, raw in judged.items():
        if raw.usable is None:  # not judged (see queries)
            continue
        # a warning quotes "`name=value`"; a value that ends in a backtick gets a longer
        # fence and a space (ui.safe.md_code): "`` name=x` ``"
        said = re.search(rf"`+ ?{re.escape(name)}=", warned) is not None
        if not raw.usable:
            assert said, f"{name}={raw.value!r} was not reported:\n{warned}"
        else:
            assert not said, f"{name}={raw.value!r} was refused:\n{warned}"
    unknown = [k for k in query if k not in judged]
    if unknown:
        assert "unknown" in warned.lower(), warned
        for k in unknown[:5]:
            assert k[:40] in warned, (k, warned)


def test_the_fuzz_leaves_long_training_out() -> None:
    """SHORT holds every training length, each from the shortest up to its default, in
    the order of its widget's options; a length it leaves out is a usable value all the
    same (the DyT sweep's 10 epochs)."""
    knobs = {k.name: k for k in training.KNOBS if k.label == "Epochs"}
    assert set(SHORT) == set(knobs) and "dy_epochs" in knobs
    for name, short in SHORT.items():
        choices = knobs[name].choices or ()
        assert short == choices[: len(short)] and short[-1] == knobs[name].default
        assert list(choices) == sorted(choices)  # the options run from short to long
    assert SHORT["dy_epochs"] == (1, 2)
    assert parse(knobs["dy_epochs"], "10") == 10
    # the widget fuzz offers the short options of the page's lengths (the learning-rate
    # experiment's: 1, 2, 3 of 1-4 epochs), all the options of the other widgets
    at = app_test("training")
    at.run()
    assert_clean(at)
    drawn = {knob_of(w.key)[1]: w for w in _all_widgets(at) if w.key}
    length, exp = drawn["tol_epochs"], drawn["exp"]
    assert len(length.options) == 4 and _options(length) == list(length.options)[:3]
    assert len(exp.options) == 9 and _options(exp) == list(exp.options)


def test_the_oracle_agrees_on_plain_cases() -> None:
    """The hand-written oracle and the app agree on values everyone knows the answer to."""
    at = app_test("home", {"B": "0", "seed": "7", "eps": "nan", "layout": "NCHW", "H": "9"})
    at.run()
    warned = _warnings(at)
    assert "`B=" not in warned  # B is not an axis of NCHW: not read
    assert "`eps=" in warned and "`seed=" not in warned and "`H=" not in warned
    assert keys.setting(at, "H") == 9  # no widget on the home page: the link's value
    # a real source's layout decides which sizes are read (the fuzz once drew this case)
    at = app_test("axes", {"data": "efficientnet", "layout": "BTC", "B": "-5", "N": "NaN"})
    at.run()
    warned = _warnings(at)
    assert "`B=" not in warned and "`N=" in warned


# ---- random widget values ----------------------------------------------------------


def _force(w: et.Widget, fill: Callable[[WidgetState], None]) -> None:
    """Send what a browser sends for an option widget: the formatted label(s) it shows.

    AppTest's set_value wants the Python value behind a label, which it cannot know
    for widgets with a format_func; the browser sends the label, so do that.
    """
    base = type(w)

    def state(self: et.Widget) -> WidgetState:
        ws = WidgetState()
        ws.id = self.id
        fill(ws)
        return ws

    w.__class__ = type(base.__name__, (base,), {"_widget_state": property(state)})


JUNK_TEXT = ["", " ", "NaN", "inf", "-1", "1e400", "🙂" * 50, "é" * 300, "<b>x</b>", "`x`", "\\"]


def _text(r: random.Random) -> str:
    """Text a student might type: junk from the list, or random printable unicode."""
    if r.random() < 0.5:
        return r.choice(JUNK_TEXT)
    return "".join(chr(r.choice([r.randint(32, 126), r.randint(0xA0, 0x2FFF)])) for _ in range(20))


def _options(w: et.Widget) -> list[str]:
    """The options of an option widget the fuzz picks from: a training length's short ones
    (SHORT; its options run in the order of its choices), every other widget's all."""
    short = SHORT.get(knob_of(w.key)[1], ()) if w.key else ()
    return list(getattr(w, "options", []))[: len(short) or None]


def _act(w: et.Widget, r: random.Random) -> str:
    """Give widget `w` a random value a browser could send; describe what was done.

    Choices come from `r` (seeded by hypothesis) rather than from hypothesis draws, so
    the drawn data does not depend on what the app drew (widgets, option counts).
    """
    v: object
    options = _options(w)
    if isinstance(w, et.Toggle | et.Checkbox):
        v = r.random() < 0.5
        w.set_value(v)
    elif isinstance(w, et.Radio | et.Selectbox):
        if not options:
            return "skip"
        label = v = r.choice(options)
        _force(w, lambda ws: setattr(ws, "string_value", label))
    elif isinstance(w, et.SelectSlider):
        ranged = isinstance(w.value, list | tuple)
        labels = sorted(r.choices(options, k=2 if ranged else 1), key=options.index)
        v = labels
        _force(w, lambda ws: ws.string_array_value.data.extend(labels))
    elif isinstance(w, et.ButtonGroup | et.Multiselect):
        single = isinstance(w, et.ButtonGroup) and w._is_single_select
        k = r.randint(0, 1 if single else len(w.options))
        chosen = v = r.sample(list(w.options), k)
        _force(w, lambda ws: ws.string_array_value.data.extend(chosen))
    elif isinstance(w, et.Slider):
        lo, hi, step = w.min, w.max, w.step
        if not isinstance(lo, int | float) or isinstance(w.value, list | tuple):
            return "skip"
        x = min(hi, lo + r.randint(0, max(0, round((hi - lo) / step))) * step)
        v = int(x) if isinstance(lo, int) and isinstance(step, int) else float(x)
        w.set_value(v)
    elif isinstance(w, et.NumberInput):
        lo = w.min if w.min is not None else -1000
        hi = w.max if w.max is not None else 1000
        if float(w.step).is_integer() and float(lo).is_integer():
            # mostly small, sometimes the maximum (sizes over the cap are refused quickly)
            lo, hi = int(lo), int(hi)
            v = r.choice([r.randint(lo, min(hi, lo + 16)), hi, r.randint(lo, hi)])
        else:
            v = r.uniform(float(lo), float(hi))
        w.set_value(v)
    elif isinstance(w, et.TextInput | et.TextArea):
        v = _text(r)
        w.set_value(v)
    elif isinstance(w, et.Button):
        v = "click"
        w.click()
    elif isinstance(w, et.FileUploader):
        # a browser only offers the types the uploader accepts
        exts = w.allowed_type or [".npy", ".pt", ".safetensors", ".csv", ".txt", ""]
        v = "upload" + r.choice(exts)
        w.upload(v, r.randbytes(r.randint(0, 512)))
    else:  # download buttons, colour pickers, ...: nothing a student changes here
        return "skip"
    return f"{w.type} {w.key or getattr(w, 'label', '')!r} = {v!r}"


def _all_widgets(at) -> list[et.Widget]:
    """Every enabled widget of the last run, main area and sidebar."""
    out: list[et.Widget] = []
    stack = [at._tree]
    while stack:
        node = stack.pop()
        if isinstance(node, et.Widget) and not node.disabled:
            out.append(node)
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack.extend(reversed(list(children.values())))
    return out


@pytest.mark.parametrize("page", PAGES)
@FUZZ
@given(seeds=st.lists(st.integers(0, 2**32), min_size=1, max_size=3))
def test_random_widget_values(page: str, seeds: list[int]) -> None:
    """Up to three random widget changes, each followed by a run (as a click would)."""
    at = app_test(page)
    at.run()
    assert_clean(at)
    for seed in seeds:
        r = random.Random(seed)
        widgets = [w for w in _all_widgets(at) if not isinstance(w, et.DownloadButton)]
        if not widgets:
            break
        what = _act(r.choice(widgets), r)
        if what == "skip":
            continue
        note(what)  # hypothesis prints the actions of a failing example
        at.run()
        assert_clean(at)
        assert sidebar_drawn(at)
