"""The tensor grid's data and its Python side: torch is the oracle for every number it
ships, normviz.group_ids for its groups; AppTest checks what a page mounts and that a
pick (also a crafted one) reaches the session as the cell it names, or nothing.

What the browser does with the data (highlight, numbers, keys, taps) is in
tests/test_tensorgrid_browser.py.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import assert_clean, run_app, texts
from test_axes_numbers import G, torch_module
from torch import nn

from normviz import LAYOUTS, METHODS, STANDARD_METHODS, contract, group_ids
from normviz.axes import AxesSetup, gridview
from normviz.data import generate
from ui import safe

SHAPES = {"BTC": (3, 5, 6), "NCHW": (2, 6, 3, 4)}


def _setup(method: str, layout: str, cell: tuple[int, ...]) -> AxesSetup:
    g = G if METHODS[method].grouped else None
    return AxesSetup(contract(method, layout, SHAPES[layout], g), cell=cell, groups=G)


def js_y(grid: gridview.Grid, i: int, k: int = 0) -> float:
    """y as grid.js computes it from the shipped numbers of grouping `k` (γ = 1, β = 0)."""
    gr = grid.groupings[k]
    g = gr.group[i]
    mean, var, x = gr.mean[g], gr.var[g], grid.values[i]
    return (x - (mean or 0.0)) / math.sqrt(var + grid.eps)


@pytest.mark.parametrize(
    ("method", "layout"), [(m, lay) for lay in SHAPES for m in STANDARD_METHODS]
)
def test_the_shipped_groups_and_numbers_are_torchs(method: str, layout: str) -> None:
    shape = SHAPES[layout]
    setup = _setup(method, layout, tuple(n - 1 for n in shape))
    grid = gridview.axes_grid(setup, {"partition": False})
    assert grid.size == shape and grid.selected == math.prod(shape) - 1
    ids = group_ids(method, layout, shape, G if METHODS[method].grouped else None).reshape(-1)
    (gr,) = grid.groupings
    local = np.asarray(gr.group)
    # two cells share a local group exactly when they share a group id
    assert (np.equal.outer(local, local) == np.equal.outer(ids, ids)).all()
    assert len(gr.var) == len(gr.mean) == len(set(ids.tolist()))  # one pair per group
    x = generate(setup.data, layout, shape, setup.seed)
    _, apply = torch_module(method, layout, shape)
    y = apply(x).reshape(-1)
    assert np.allclose(grid.values, x.reshape(-1).numpy())
    flat = x.reshape(-1).double()
    for gid in set(ids.tolist()):
        mine = flat[torch.as_tensor(ids == gid)]
        g = int(local[ids == gid][0])
        assert gr.m == mine.numel()
        if METHODS[method].centred:
            assert gr.mean[g] == pytest.approx(float(mine.mean()), rel=1e-5, abs=1e-6)
            want_var = float(mine.var(correction=0))
        else:
            assert gr.mean[g] is None
            want_var = float((mine**2).mean())
        assert gr.var[g] == pytest.approx(want_var, rel=1e-5, abs=1e-6)
    for i in range(grid.n_cells):
        assert js_y(grid, i) == pytest.approx(float(y[i]), rel=1e-4, abs=1e-5)


def test_a_large_tensor_ships_a_window_around_the_selected_cell() -> None:
    shape = (64, 32, 200)
    setup = AxesSetup(contract("layer", "BTC", shape), cell=(40, 3, 150))
    grid = gridview.axes_grid(setup, {"partition": True})
    assert grid.n_cells < math.prod(shape) and grid.note.startswith("Drawing ")
    assert grid.selected is not None and grid.cell(grid.selected) == (40, 3, 150)
    (gr,) = grid.groupings
    assert len(gr.var) == len(set(gr.group))  # only the drawn groups, once each
    body = json.dumps(grid.payload())
    assert len(body) < 1_000_000  # as every figure: at most 1 MB


def test_safe_cell_keeps_only_a_cell_of_the_tensor() -> None:
    shape = (4, 6, 8)
    assert safe.cell([1, 2, 3], shape) == (1, 2, 3)
    for bad in ([1, 2], [1, 2, 8], [-1, 0, 0], [True, 0, 0], [1.0, 0, 0], "1,2,3", None, {}):
        assert safe.cell(bad, shape) is None


# ---- AppTest: what the page mounts, and a pick ----------------------------------------------


def grid_data(at) -> dict:
    (el,) = [e for e in at.get("bidi_component") if e.proto.component_name == "normviz.tensorgrid"]
    return json.loads(el.proto.json)


def pick(monkeypatch: pytest.MonkeyPatch, at, key: str, value: object) -> None:
    """The next run of `at` carries a pick for the grid `key`, as the browser sends it
    (or as a modified client might)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
    from streamlit.runtime.state.session_state import STREAMLIT_INTERNAL_KEY_PREFIX
    from streamlit.testing.v1.element_tree import ElementTree

    (el,) = [e for e in at.get("bidi_component") if e.proto.id.endswith("-" + key)]
    wid = f"{STREAMLIT_INTERNAL_KEY_PREFIX}_{el.proto.id}__events"
    real = ElementTree.get_widget_states

    def states(self: ElementTree) -> WidgetStates:
        out = WidgetStates()
        out.widgets.extend(real(self).widgets)
        out.widgets.append(
            WidgetState(id=wid, json_trigger_value=json.dumps([{"event": "pick", "value": value}]))
        )
        return out

    monkeypatch.setattr(ElementTree, "get_widget_states", states)


def test_axes_mounts_the_grid_with_the_groups_and_a_pick_selects_the_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = run_app("axes", {"method": "layer"})
    assert_clean(at)
    data = grid_data(at)
    assert data["shape"] == [4, 6, 8] and data["pick"] == "one" and data["selected"] == 0
    assert data["m"] == 8 and len(data["var"]) == 4 * 6
    pick(monkeypatch, at, "axes_flat_view", {"cell": [1, 3, 5]})
    at.run()
    assert_clean(at)
    assert [n.value for n in at.number_input if n.key.startswith("axes:cell_")] == [1, 3, 5]
    assert grid_data(at)["selected"] == (1 * 6 + 3) * 8 + 5
    assert "B=1, T=3, C=5" in " ".join(m.value for m in at.markdown)


CRAFTED = [
    None,
    "1,3,5",
    {"cell": [1, 3]},
    {"cell": [1, 3, 99]},
    {"cell": [True, 3, 5]},
    {"cell": ["1", "3", "5"]},
    {"cell": [1.5, 3, 5]},
    {"cells": [1, 2]},
    [{"cell": [1, 3, 5]}],
    {"cell": [10**30, 0, 0]},
]


@pytest.mark.parametrize("value", CRAFTED, ids=range(len(CRAFTED)))
def test_a_crafted_pick_on_axes_changes_nothing(monkeypatch: pytest.MonkeyPatch, value) -> None:
    at = run_app("axes")
    pick(monkeypatch, at, "axes_flat_view", value)
    at.run()
    assert_clean(at)
    assert [n.value for n in at.number_input if n.key.startswith("axes:cell_")] == [0, 0, 0]


def worked_oracle(x: torch.Tensor) -> dict[str, tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """Per method of the worked example: each cell's group (its column, its row), and torch's
    μ, σ² per group and y for the matrix `x` (N, C) (γ = 1, β = 0, training mode)."""
    n, c = x.shape
    rows, cols = np.indices((n, c))
    bn = nn.BatchNorm1d(c, affine=False, track_running_stats=False, dtype=x.dtype)
    ln = nn.LayerNorm(c, elementwise_affine=False, dtype=x.dtype)
    with torch.no_grad():
        return {
            "BatchNorm": (cols.reshape(-1), x.mean(0), x.var(0, correction=0), bn(x)),
            "LayerNorm": (rows.reshape(-1), x.mean(1), x.var(1, correction=0), ln(x)),
        }


@pytest.mark.parametrize("preset", ["source", "wide"])
def test_the_worked_example_ships_batchnorms_columns_and_layernorms_rows(preset: str) -> None:
    from normviz import worked

    at = run_app("worked-example")
    at.selectbox(key="wk_preset").set_value(preset).run()
    assert_clean(at)
    data = grid_data(at)
    x = torch.tensor(worked.PRESETS[preset].matrix, dtype=torch.float64)
    assert data["shape"] == list(x.shape) and data["values"] == x.reshape(-1).tolist()
    shipped = [data, *data["more"]]
    oracle = worked_oracle(x)
    assert [g["name"] for g in shipped] == list(oracle)
    for g in shipped:
        own, mean, var, y = oracle[g["name"]]
        local = np.asarray(g["group"])
        # two cells share a group exactly when they share a column (BatchNorm) or a row
        assert (np.equal.outer(local, local) == np.equal.outer(own, own)).all()
        assert g["m"] == (x.shape[0] if g["name"] == "BatchNorm" else x.shape[1])
        for i in range(x.numel()):  # the group's μ, σ² and y as grid.js computes it
            mu, sq = g["mean"][g["group"][i]], g["var"][g["group"][i]]
            assert mu == pytest.approx(float(mean[own[i]]), abs=1e-9)
            assert sq == pytest.approx(float(var[own[i]]), abs=1e-9)
            js = (data["values"][i] - mu) / math.sqrt(sq + data["eps"])
            assert js == pytest.approx(float(y.reshape(-1)[i]), abs=1e-6)


@pytest.mark.parametrize("value", [*CRAFTED, {"cell": [2, 0]}, {"cell": [0, 3]}], ids=range(12))
def test_a_crafted_pick_on_the_worked_example_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, value
) -> None:
    at = run_app("worked-example")
    before = texts(at)
    pick(monkeypatch, at, "wk_grid", value)  # the source matrix is 2 × 3
    at.run()
    assert_clean(at)
    at.run()  # the pick stays in the session: the next run too
    assert_clean(at)
    assert grid_data(at)["selected"] == 0 and texts(at) == before


def test_every_layout_has_its_axis_names_in_the_payload() -> None:
    for layout, shape in SHAPES.items():
        grid = gridview.axes_grid(_setup("batch", layout, (0,) * len(shape)), {})
        assert grid.payload()["axes"] == list(LAYOUTS[layout].axes)


def test_practice_mounts_the_grid_and_a_pick_fills_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from normviz import practice

    at = run_app("practice", {"kind": "cells"})
    assert_clean(at)
    data = grid_data(at)
    assert data["pick"] == "many" and not data["var"] and not data["group"]  # no answer shipped
    names = practice.cell_names(practice.exercise("cells", 0).case)
    pick(monkeypatch, at, "pr_grid_cells-0", {"cells": [4, 1]})
    at.run()
    assert_clean(at)
    assert at.multiselect(key="pr_cells_cells-0").value == [names[1], names[4]]
    assert grid_data(at)["picked"] == [1, 4]


CRAFTED_PICKS = [None, {"cells": "1"}, {"cells": [True, -1, 10**9, 1.5, "2"]}, {"cell": [0]}, 7]


@pytest.mark.parametrize("value", CRAFTED_PICKS, ids=range(len(CRAFTED_PICKS)))
def test_a_crafted_pick_on_practice_picks_no_cell(monkeypatch: pytest.MonkeyPatch, value) -> None:
    at = run_app("practice", {"kind": "cells"})
    pick(monkeypatch, at, "pr_grid_cells-0", value)
    at.run()
    assert_clean(at)
    assert at.multiselect(key="pr_cells_cells-0").value == []
