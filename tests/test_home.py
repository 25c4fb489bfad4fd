"""The home page: formula, contract table from the registry, links; and the app shell."""

from __future__ import annotations

import pytest
from conftest import assert_clean, assert_no_exception, open_app, run_app, screenshot, texts

from normviz import METHODS, STANDARD_METHODS


def test_home_shows_formula_and_table() -> None:
    at = run_app()
    assert_clean(at)
    assert any("\\gamma" in latex.value for latex in at.latex)
    table = at.table[0].value
    assert list(table.index) == [METHODS[k].label for k in STANDARD_METHODS]
    assert table.loc["BatchNorm", "BTC pools"] == "B, T"
    assert table.loc["GroupNorm", "NCHW pools"] == "C/G, H, W"
    assert table.loc["RMSNorm", "subtracts μ"] == "no"


def test_plain_visit_has_no_warnings() -> None:
    at = run_app()
    assert not at.warning


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ({"B": "abc"}, "B"),
        ({"method": "nope"}, "method"),
        ({"layout": "NHWC"}, "layout"),
        ({"eps": "-1"}, "eps"),
        ({"C": "999999999"}, "C"),
        ({"seed": "1e400"}, "seed"),
        ({"data": "<script>"}, "data"),
        ({"method": "custom", "axes": "Q,Z"}, "axes"),
    ],
)
def test_bad_url_values_fall_back_with_a_warning(query: dict[str, str], param: str) -> None:
    at = run_app(query=query)
    assert_clean(at)
    warned = "\n".join(w.value for w in at.warning)
    assert f"`{param}=" in warned, warned


def test_url_is_read_and_written_back() -> None:
    at = run_app(
        "axes",
        query={
            "layout": "NCHW",
            "N": "2",
            "C": "6",
            "H": "3",
            "W": "5",
            "method": "group",
            "groups": "3",
        },
    )
    assert_clean(at)
    assert at.session_state["layout"] == "NCHW"
    assert at.session_state["H"] == 3
    assert at.query_params["method"] == ["group"] or at.query_params["method"] == "group"
    at.sidebar.number_input(key="W").set_value(7).run()
    assert str(at.query_params["W"]).strip("[]'") == "7"


@pytest.mark.browser
def test_home_in_browser(page, server) -> None:
    open_app(page, server)
    assert_no_exception(page)
    assert page.get_by_text("The axis contract").count() >= 1
    screenshot(page, "home")
    assert "one formula" in texts(run_app())


def _qp(at, key: str) -> str:
    v = at.query_params[key]
    return v[-1] if isinstance(v, list) else v


def test_settings_survive_a_page_switch_and_stay_in_the_url() -> None:
    """Also through pages whose sidebar hides them (/residual shows no tensor settings)."""
    at = run_app("axes")
    at.sidebar.number_input(key="B").set_value(3).run()
    at.sidebar.selectbox(key="method").set_value("layer").run()
    at.switch_page("../pages/residual.py").run()
    assert_clean(at)
    assert not at.sidebar.number_input and not at.sidebar.selectbox
    assert at.session_state["B"] == 3 and at.session_state["method"] == "layer"
    assert _qp(at, "B") == "3" and _qp(at, "method") == "layer"
    at.switch_page("../pages/distributions.py").run()
    assert_clean(at)
    assert at.session_state["B"] == 3 and at.session_state["method"] == "layer"
    assert at.sidebar.number_input(key="B").value == 3
    assert _qp(at, "B") == "3" and _qp(at, "method") == "layer"


def test_layout_switch_and_custom_axes_in_the_sidebar() -> None:
    at = run_app(
        "axes",
        query={
            "layout": "NCHW",
            "method": "custom",
            "axes": "C,H",
            "N": "2",
            "C": "6",
            "H": "3",
            "W": "3",
            "centred": "0",
            "eps": "1e-05",
            "seed": "0",
            "data": "channels",
        },
    )
    assert_clean(at)
    assert not at.warning
    pills = at.sidebar.button_group[0]
    assert list(pills.value) == ["C", "H"]
    assert _qp(at, "axes") == "C,H" and _qp(at, "centred") == "0"
    pills.set_value(["N", "H", "W"]).run()
    assert _qp(at, "axes") == "N,H,W"
    at.sidebar.radio(key="layout").set_value("BTC").run()
    assert_clean(at)
    assert _qp(at, "layout") == "BTC" and "H" not in at.query_params


def test_presenter_toggle_is_there() -> None:
    at = run_app()
    labels = [t.label for t in at.sidebar.toggle]
    assert any("Presenter" in label for label in labels)


def test_a_page_run_on_its_own_is_rerouted_through_app_py() -> None:
    """AppTest runs page files without app.py; route.entry sends them through it."""
    at = run_app("axes", query={"B": "3"})
    assert_clean(at)
    assert at.sidebar.number_input(key="B").value == 3


def test_method_specific_settings_survive_switching_methods() -> None:
    """groups/axes/centred widgets come and go with the method; their values stay."""
    at = run_app("distributions", query={"method": "group", "groups": "4"})
    at.sidebar.selectbox(key="method").set_value("layer").run()
    at.sidebar.number_input(key="B").set_value(2).run()
    at.sidebar.number_input(key="B").set_value(3).run()
    assert_clean(at)
    at.sidebar.selectbox(key="method").set_value("group").run()
    assert at.sidebar.number_input(key="groups").value == 4
    at.sidebar.selectbox(key="method").set_value("custom").run()
    at.sidebar.selectbox(key="method").set_value("batch").run()
    at.sidebar.number_input(key="B").set_value(4).run()
    assert_clean(at)


def test_the_headline_says_rmsnorm_changes_the_formula() -> None:
    """Only the four centred methods share the formula exactly; RMSNorm has no μ and no β."""
    from torch import nn

    from normviz import text

    note = text.formula_note()
    params = tuple(n for n, _ in nn.RMSNorm(4).named_parameters())
    assert params == ("weight",) and f"has one learned tensor, {params[0]}, its γ" in note
    assert "learns only:" not in note  # issue 24 item 21: it read as a bug
    assert note.startswith("BatchNorm, LayerNorm, InstanceNorm and GroupNorm compute exactly")
    assert "no β" in note and "affine=False" in note
    shown = texts(run_app())
    assert "RMSNorm also changes the formula" in shown
    assert "The only thing that differs" not in shown


def test_home_lists_every_source_once() -> None:
    from normviz.sources import SOURCES, cite, markdown_list

    wanted = {
        "ioffe2015": ("Ioffe & Szegedy", 2015, "1502.03167"),
        "ba2016": ("Ba et al.", 2016, "1607.06450"),
        "ulyanov2016": ("Ulyanov et al.", 2016, "1607.08022"),
        "wu2018": ("Wu & He", 2018, "1803.08494"),
        "zhang2019": ("Zhang & Sennrich", 2019, "1910.07467"),
        "santurkar2018": ("Santurkar et al.", 2018, "1805.11604"),
        "xiong2020": ("Xiong et al.", 2020, "2002.04745"),
        "wu2021": ("Wu & Johnson", 2021, "2105.07576"),
        "schneider2020": ("Schneider et al.", 2020, "2006.16971"),
        "hoffer2017": ("Hoffer et al.", 2017, "1705.08741"),  # ghost batches (training lab)
        "li2016": ("Li et al.", 2016, "1603.04779"),  # AdaBN (training lab)
    }
    for key, (authors, year, arxiv) in wanted.items():
        s = SOURCES[key]
        assert (s.authors, s.year, s.arxiv) == (authors, year, arxiv), key
        assert cite(key) == f"{authors} {year}"
    with pytest.raises(KeyError):
        cite("nobody1999")
    listed = markdown_list()
    shown = texts(run_app())
    assert "Sources" in shown
    for s in SOURCES.values():
        assert listed.count(f"*{s.title}*") == 1 and s.title in shown, s.key


def test_every_paper_the_app_cites_is_in_the_sources() -> None:
    """Issue 24 item 9: a citation written anywhere in the app's text ("Hoffer et al. 2017",
    "Wu & He (2018)") names a paper of normviz.sources, so Home's list holds it."""
    import re
    from pathlib import Path

    from normviz.sources import SOURCES

    root = Path(__file__).resolve().parent.parent
    files = [root / "app.py", root / "README.md", *root.glob("docs/*.md")]
    files += [*root.glob("normviz/**/*.py"), *root.glob("ui/*.py"), *root.glob("pages/*.py")]
    known = {(s.authors, s.year) for s in SOURCES.values()}
    pattern = re.compile(r"\b([A-Z][\w-]+(?: et al\.| & [A-Z][\w-]+)),? \(?(\d{4})\b")
    cited = {
        (m.group(1), int(m.group(2)), f.relative_to(root).as_posix())
        for f in files
        for m in pattern.finditer(f.read_text(encoding="utf-8"))
    }
    assert {(a, y) for a, y, _ in cited} >= {("Hoffer et al.", 2017), ("Li et al.", 2016)}
    missing = sorted(c for c in cited if c[:2] not in known)
    assert not missing, missing


def test_the_opening_says_which_layers_centre() -> None:
    """Issue 24 item 19: "re-centres … to mean 0 and variance 1" is false of RMSNorm; the
    sentence names the exception, and torch's modules agree with each part of it."""
    import torch
    from torch import nn

    from normviz import STANDARD_METHODS, text
    from normviz.methods import METHODS

    para = text.why_normalize()
    x = 3.0 + 2.0 * torch.randn(64, 16, generator=torch.Generator().manual_seed(0))
    built = {"layer": nn.LayerNorm(16), "rms": nn.RMSNorm(16), "batch": nn.BatchNorm1d(16)}
    for key, mod in built.items():
        with torch.no_grad():
            y = mod(x)
        dim = 0 if key == "batch" else 1  # the axis each one pools here
        mean, meansq = y.mean(dim), y.square().mean(dim)
        named = f"except {METHODS[key].label}, which only re-scales" in para
        assert named == (key == "rms"), key
        if named:  # uncentred: mean square 1, mean far from 0
            assert torch.allclose(meansq, torch.ones_like(meansq), atol=1e-3)
            assert (mean.abs() > 0.5).all()
            assert f"({METHODS[key].label}: γ only)" in para
            assert [n for n, _ in mod.named_parameters()] == ["weight"]
        else:
            assert torch.allclose(mean, torch.zeros_like(mean), atol=1e-5)
            assert torch.allclose(y.var(dim, unbiased=False), torch.ones_like(mean), atol=1e-3)
    assert {k for k in STANDARD_METHODS if not METHODS[k].centred} == {"rms"}
    assert "re-centres and re-scales activations to mean 0 and variance 1, then" not in para
    assert para in texts(run_app())
