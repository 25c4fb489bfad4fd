"""URL parameters: every value parsed or refused with a reason, never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normviz import NormConfigError
from ui import params as ns


def test_defaults_from_an_empty_query_are_quiet() -> None:
    s, warnings = ns.settings_from_query({})
    assert warnings == []
    assert s == ns.Settings()
    assert s.shape == (4, 6, 8)


def test_a_full_link_round_trips() -> None:
    q = {
        "layout": "NCHW",
        "N": "2",
        "C": "6",
        "H": "3",
        "W": "5",
        "method": "group",
        "groups": "3",
        "eps": "0.001",
        "seed": "7",
        "data": "normal",
    }
    s, warnings = ns.settings_from_query(q)
    assert warnings == []
    assert s.shape == (2, 6, 3, 5) and s.groups == 3 and s.eps == 1e-3 and s.seed == 7
    assert s.norm_kwargs() == {"eps": 1e-3, "groups": 3}


def test_custom_axes_and_centred() -> None:
    s, warnings = ns.settings_from_query(
        {
            "layout": "BTC",
            "B": "2",
            "T": "3",
            "C": "4",
            "method": "custom",
            "axes": "T,B",
            "centred": "0",
            "eps": "1e-05",
            "seed": "0",
            "data": "channels",
        }
    )
    assert warnings == []
    assert s.axes == ("B", "T") and s.centred is False
    assert s.norm_kwargs() == {"eps": 1e-5, "axes": ("B", "T"), "centred": False}


def test_a_long_run_of_whole_numbers_is_named_by_its_ends() -> None:
    layer = next(k for k in ns.PAGE_PARAMS["batchnorm"] if k.name == "bn_layer")
    with pytest.raises(ValueError, match=r"^expected a whole number from 1 to 49$"):
        ns.parse(layer, "99")
    eps = ns.SHARED["eps"]
    with pytest.raises(ValueError, match=r"^expected one of 0.0, 1e-12, "):
        ns.parse(eps, "2e-5")


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ({"B": "abc"}, "`B=abc` is not valid (expected a whole number)"),
        ({"B": "2.5"}, "`B=2.5`"),
        ({"B": "0"}, "expected a value from 1 to 1024"),
        ({"T": "nan"}, "`T=nan`"),
        ({"C": "inf"}, "`C=inf`"),
        ({"eps": "2e-5"}, "`eps=2e-5` is not valid (expected one of"),
        ({"method": "Batch"}, "`method=Batch`"),
        ({"layout": ""}, "`layout=`"),
        ({"seed": "-1"}, "`seed=-1`"),
        ({"axes": "B,,X", "method": "custom"}, "`axes=B,,X`"),
        ({"centred": "maybe", "method": "custom"}, "`centred=maybe`"),
        ({"B": "9" * 500}, "value too long"),
        ({"zzz": "1"}, "Ignored unknown parameter(s): `zzz`"),
    ],
)
def test_bad_values_fall_back_with_a_named_warning(query, needle: str) -> None:
    s, warnings = ns.settings_from_query(query)
    assert any(needle in w for w in warnings), warnings
    assert isinstance(s, ns.Settings)


@pytest.mark.parametrize(
    "query",
    [{"B": "3"}, {"method": "group"}, {"layout": "NCHW", "N": "2"}, {"present": "1"}, {}],
)
def test_a_partial_link_takes_the_defaults_quietly(query) -> None:
    """A link that sets a few values means "the defaults for the rest": no warning."""
    s, warnings = ns.settings_from_query(query)
    assert not warnings, warnings
    assert s.layout == query.get("layout", "BTC")
    values, warnings = ns.read(query, ns.SHARED.values())
    assert not warnings and values["eps"] == 1e-5


def test_page_params_are_not_unknown() -> None:
    _, warnings = ns.settings_from_query({"batch_size": "4"}, page_names=["batch_size"])
    assert not any("unknown" in w for w in warnings)


def test_element_cap(monkeypatch) -> None:
    monkeypatch.setenv("NORMVIZ_MAX_ELEMENTS", "1000")
    s = ns.Settings(sizes={"B": 10, "T": 10, "C": 11})
    with pytest.raises(NormConfigError, match="1,100 elements, over the app's cap of 1,000"):
        s.check()
    monkeypatch.setenv("NORMVIZ_MAX_ELEMENTS", "oops")
    assert ns.max_elements() == 2**22


def test_check_names_the_contract_problem() -> None:
    s = ns.Settings(method="group", groups=3)
    with pytest.raises(NormConfigError, match="C=8, groups=3"):
        s.check()
    ns.Settings(method="group", groups=4).check()


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*ns.SHARED, "junk", "batch_size", ""]),
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(
                ["1", "0", "nan", "-inf", "1e999", "BTC", "NCHW", "custom", "B,T", "😀"]
            ),
        ),
        max_size=8,
    )
)
def test_any_query_gives_settings(query) -> None:
    s, warnings = ns.settings_from_query(query)
    assert s.layout in ("BTC", "NCHW")
    assert all(1 <= v <= ns.SIZE_LIMITS[a] for a, v in s.sizes.items())
    assert s.eps in ns.EPS_CHOICES
    assert all(isinstance(w, str) for w in warnings)


# ---- page parameters ------------------------------------------------------------------


def test_page_parameter_names_are_unique_on_their_page_and_apart_from_the_shared_ones() -> None:
    # A page knob's widget and session key is page-scoped (ui.state.key), so two pages may
    # each have a knob of one name (test_two_pages_may_each_have_a_knob_of_one_name); one
    # query string holds a page's knobs and the shared settings, so those stay apart.
    # One name may start another (`shift`, `shift_max`): tests match a warning by the
    # whole "`name=" it quotes.
    for page, params in ns.PAGE_PARAMS.items():
        names = [p.name for p in params]
        assert len(names) == len(set(names)), page
        assert not set(names) & {*ns.SHARED, "presenter"}, page
        assert all(n.isidentifier() for n in names), names  # no ui.state.SEP in a name
    for page in ("distributions", "residual", "choose", "axes"):
        for p in ns.PAGE_PARAMS[page]:
            assert p.name == p.name.lower() and len(p.name) <= 12, p.name


def test_page_parameter_choices_are_the_widgets_options() -> None:
    from normviz import residual as rs
    from normviz.choose import guide, zoo

    params = {p.name: p for p in (*ns.PAGE_PARAMS["choose"], *ns.PAGE_PARAMS["residual"])}
    params |= {p.name: p for p in ns.PAGE_PARAMS["axes"]}
    assert params["arch"].choices == tuple(guide.ARCHITECTURES)
    assert params["constraints"].choices == tuple(guide.CONSTRAINTS)
    assert guide.Situation("cnn", params["per_device"].hi).check() is None  # accepted
    assert params["model"].choices == tuple(zoo.MODELS)  # the zoo, then MiniLM
    for prefix in ("", "tr_"):
        assert params[f"{prefix}norm"].choices == rs.NORMS
        assert params[f"{prefix}block"].choices == tuple(rs.BLOCKS)
    for a, limit in ns.SIZE_LIMITS.items():  # a cell index runs to the largest size − 1
        assert (params[f"cell_{a.lower()}"].lo, params[f"cell_{a.lower()}"].hi) == (0, limit - 1)
    for p in (p for params in ns.PAGE_PARAMS.values() for p in params):
        assert ns.parse(p, ns.fmt(p.default)) == p.default, p.name  # its parser takes it


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("", ()),
        ("  ", ()),
        ("shift", ("shift",)),
        ("cost, online", ("online", "cost")),  # in the widget's order
        ("same,same", ("same",)),
    ],
)
def test_a_multi_choice_parameter_reads_comma_lists(raw: str, value: tuple) -> None:
    (p,) = (p for p in ns.PAGE_PARAMS["choose"] if p.name == "constraints")
    assert ns.parse(p, raw) == value
    assert ns.parse(p, ns.fmt(value)) == value


@pytest.mark.parametrize("raw", ["online,,same", "teleport", "online,Same", ",", "[]"])
def test_a_multi_choice_parameter_refuses_what_is_not_a_choice(raw: str) -> None:
    (p,) = (p for p in ns.PAGE_PARAMS["choose"] if p.name == "constraints")
    with pytest.raises(ValueError, match="expected a comma list of online, same"):
        ns.parse(p, raw)
    values, warnings = ns.read({"constraints": raw}, [p])
    assert values == {"constraints": ()}
    (warning,) = warnings
    assert warning.startswith(f"`constraints={raw}` is not valid (expected a comma list of")
    assert warning.endswith("using the default (none).")  # an empty default, said so


def test_the_architecture_doc_lists_every_url_key_with_its_default() -> None:
    """docs/architecture.md's URL tables: one row per key, under its page, with the
    default the code has (the contract the code cites must be the code's)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    tables = re.split(r"\n\*\*/([\w-]+)\*\*\n", doc.split("## URL contract", 1)[1])
    by_page = {"": tables[0], **dict(zip(tables[1::2], tables[2::2], strict=True))}
    assert set(by_page) == {"", *ns.PAGE_PARAMS}
    for page, knobs in [("", ns.SHARED.values()), *ns.PAGE_PARAMS.items()]:
        rows = re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", by_page[page], flags=re.M)
        assert [name for name, _ in rows] == [k.name for k in knobs], page
        for (name, default), k in zip(rows, knobs, strict=True):
            if "`" in default:  # a literal default (else words: "three short sentences")
                assert default.strip() == f"`{ns.fmt(k.default)}`", name


# ---- the one declaration: a field added to Settings reaches the URL, sidebar, cache key


def _wobbly(monkeypatch) -> type:  # type: ignore[no-untyped-def]
    """ui.params.Settings with one throwaway field, declared as any shared setting is
    (and nothing else changed): `wobble`, a whole number from 0 to 9, default 3."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Wobbly(ns.Settings):
        wobble: int = ns.setting(ns.Param("wobble", 3, lo=0, hi=9, label="Wobble"))

    monkeypatch.setattr(ns, "Settings", Wobbly)
    return Wobbly


def test_a_declared_field_is_read_from_the_url_and_keys_the_cache(monkeypatch) -> None:
    wobbly = _wobbly(monkeypatch)
    assert "wobble" not in ns.SHARED and ns.shared_knobs()["wobble"].default == 3
    s, warnings = ns.settings_from_query({"wobble": "5", "seed": "2"})
    assert (s.wobble, s.seed, warnings) == (5, 2, [])
    s, warnings = ns.settings_from_query({"wobble": "12"})
    assert s.wobble == 3
    (warning,) = warnings
    assert warning == (
        "`wobble=12` is not valid (expected a value from 0 to 9): using the default 3."
    )
    assert ("wobble", 4) in wobbly(wobble=4).key()
    assert wobbly(wobble=4).key() != wobbly(wobble=5).key()
    assert wobbly(wobble=4, eps=1e-3).key() == wobbly(wobble=4).key()  # eps: cache=False


def test_a_declared_field_is_in_the_sidebar_the_url_and_the_cache_key(monkeypatch) -> None:
    from conftest import run_app, url_value

    from ui import state

    _wobbly(monkeypatch)
    at = run_app("distributions", {"wobble": "5", "seed": "1"})
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    (knob,) = [w for w in at.sidebar.slider if w.key == "wobble"]
    assert (knob.label, knob.value, knob.min, knob.max) == ("Wobble", 5, 0, 9)
    assert url_value(at, "wobble") == "5"
    assert ("wobble", 5) in at.session_state[state._INPUT].key()
    knob.set_value(7).run()
    assert not at.exception
    assert url_value(at, "wobble") == "7" and url_value(at, "seed") == "1"
    assert at.session_state[state._INPUT].wobble == 7
    assert ("wobble", 7) in at.session_state[state._INPUT].key()
    at.switch_page("../pages/residual.py").run()  # a page without the sidebar's settings
    assert not at.exception and url_value(at, "wobble") == "7"


def test_a_name_may_start_another_one() -> None:
    """`shift` and `shift_max` side by side: each warns by its whole name, and a test
    looking for "`shift=" does not see the other's warning."""
    knobs = [ns.Param("shift", 0.5, lo=-10, hi=10), ns.Param("shift_max", 1.0, lo=0, hi=5)]
    values, warnings = ns.read({"shift": "2", "shift_max": "9"}, knobs)
    assert values == {"shift": 2.0, "shift_max": 1.0}
    (warning,) = warnings
    assert "`shift_max=9`" in warning and "`shift=" not in warning


# ---- page-scoped keys: two pages may each have a knob of one name ----------------------


def _twin(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """/choose's decision guide with one throwaway knob registered as any page knob is (a
    section's knob and its page's URL parameter): `gamma`, /distributions' γ slider's
    name (0.1–5, default 2) with other choices: 2, 4 or 8, default 8."""
    from dataclasses import replace

    from normviz import choose

    twin = ns.Param("gamma", 8, choices=(2, 4, 8), label="Twin")
    guide = replace(choose.GUIDE, knobs=(*choose.GUIDE.knobs, twin))
    sections = tuple(guide if s is choose.GUIDE else s for s in choose.SECTIONS)
    monkeypatch.setattr(choose, "SECTIONS", sections)
    monkeypatch.setitem(ns.PAGE_PARAMS, "choose", (*ns.PAGE_PARAMS["choose"], twin))


def test_two_pages_may_each_have_a_knob_of_one_name(monkeypatch) -> None:
    import keys
    from conftest import assert_clean, run_app, url_value

    _twin(monkeypatch)
    # each page reads the name from a link by its own knob
    at = run_app("choose", {"gamma": "4"})
    assert_clean(at)
    assert not at.warning and at.select_slider(key=keys.key("choose", "gamma")).value == 4
    at = run_app("choose", {"gamma": "3.5"})
    assert at.warning[0].value.startswith("`gamma=3.5` is not valid")  # here; not there:
    at = run_app("distributions", {"gamma": "3.5"})
    assert not at.warning and at.slider(key=keys.key("distributions", "gamma")).value == 3.5
    # one session: each page's widget keeps its own value, and writes it to its URL
    at.switch_page("../pages/choose.py").run()
    assert_clean(at)
    twin = at.select_slider(key=keys.key("choose", "gamma"))
    assert (twin.value, twin.options) == (8, ["2", "4", "8"])
    twin.set_value(2).run()
    assert_clean(at)
    assert url_value(at, "gamma") == "2" and keys.knob(at, "choose", "gamma") == 2
    at.switch_page("../pages/distributions.py").run()
    assert_clean(at)
    assert at.slider(key=keys.key("distributions", "gamma")).value == 3.5
    assert url_value(at, "gamma") == "3.5"
    at.switch_page("../pages/choose.py").run()
    assert at.select_slider(key=keys.key("choose", "gamma")).value == 2
