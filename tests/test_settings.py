"""URL parameters: every value parsed or refused with a reason, never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from normviz import NormConfigError
from normviz import settings as ns


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
        ({"B": "3"}, "The link does not set `layout`"),
    ],
)
def test_bad_values_fall_back_with_a_named_warning(query, needle: str) -> None:
    s, warnings = ns.settings_from_query(query)
    assert any(needle in w for w in warnings), warnings
    assert isinstance(s, ns.Settings)


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
