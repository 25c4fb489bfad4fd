"""The registry is the single source: one throwaway entry reaches every page.

The test adds one `Method` entry ("scaled", an elementwise y = γ·x with γ = 2 at
initialization, its factory a class defined here) to the registry's own source, imports
normviz and ui afresh around it, and then checks that every page renders in AppTest, at
the defaults and with the new method chosen in the sidebar; that the method is on the
page lists its flags name and on no other; and that its factory agrees with its formula.
Every other test iterates the registry the same way (`STANDARD_METHODS`, `listed()`).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
import streamlit as st
import torch
from conftest import assert_clean, run_app
from keys import setting
from torch import nn

import normviz.methods
from benchmarks.common import page_ids

METHODS_FILE = Path(normviz.methods.__file__)
MARKER = "        # (a new method: one more entry here)\n"
FLAGS = frozenset({"guide", "outliers", "training-residual"})


class Scaled(nn.Module):
    """The throwaway method's factory: y = γ·x, γ per channel (2 at initialization)."""

    def __init__(self, num_features: int, channel_dim: int = -1) -> None:
        super().__init__()
        self.channel_dim = channel_dim
        self.weight = nn.Parameter(torch.full((num_features,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = [1] * x.dim()
        shape[self.channel_dim] = -1
        return x * self.weight.reshape(shape)


ENTRY = """        Method(
            key="scaled",
            label="Scaled identity",
            summary="multiplies every value by its channel's γ; pools nothing",
            kind="elementwise",
            torch={
                "BTC": Torch(Scaled, lambda C, **_: (C,), name="Scaled", takes_eps=False),
                "NCHW": Torch(
                    Scaled, lambda C, **_: (C,), {"channel_dim": 1}, name="Scaled", takes_eps=False
                ),
            },
            colour="#F0E442",
            symbol="star",
            lists=frozenset({"guide", "outliers", "training-residual"}),
        ),
"""


class _PatchedRegistry(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves normviz.methods from its own source with ENTRY added at the marker."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != "normviz.methods":
            return None
        return importlib.util.spec_from_file_location(name, METHODS_FILE, loader=self)

    def create_module(self, spec) -> None:  # type: ignore[no-untyped-def]
        return None

    def exec_module(self, module: ModuleType) -> None:
        src = METHODS_FILE.read_text()
        assert src.count(MARKER) == 1, "the registry lost its entry marker"
        module.__dict__["Scaled"] = Scaled  # the factory class lives in this test
        exec(
            compile(src.replace(MARKER, ENTRY + MARKER), str(METHODS_FILE), "exec"), module.__dict__
        )


def _ours(name: str) -> bool:
    return name.split(".")[0] in ("normviz", "ui", "app")


@contextmanager
def registry_with_entry() -> Iterator[None]:
    """normviz and ui imported afresh with the throwaway entry; the originals restored after."""
    saved = {n: m for n, m in sys.modules.items() if _ours(n)}
    for n in saved:
        del sys.modules[n]
    finder = _PatchedRegistry()
    sys.meta_path.insert(0, finder)
    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        importlib.import_module("normviz")
        yield
    finally:
        sys.meta_path.remove(finder)
        for n in [n for n in sys.modules if _ours(n)]:
            del sys.modules[n]
        sys.modules.update(saved)
        st.cache_data.clear()
        st.cache_resource.clear()


@pytest.fixture(scope="module")
def patched() -> Iterator[None]:
    with registry_with_entry():
        yield


def test_the_entry_is_on_the_lists_its_flags_name_and_no_other(patched) -> None:
    from normviz import style
    from normviz.choose import compare
    from normviz.distributions import feature_dims
    from normviz.methods import LISTS, METHODS, STANDARD_METHODS, listed
    from normviz.practice import compute, scenarios
    from normviz.residual import model as residual
    from normviz.training import models as training
    from ui.params import Settings

    assert "scaled" in METHODS and "scaled" not in STANDARD_METHODS
    for name in LISTS:
        assert ("scaled" in listed(name)) == (name in FLAGS), name
    # the pages' own lists, read where the pages read them
    assert "Scaled identity" in compare.comparison_table().index
    assert "scaled" in feature_dims.AFTER
    assert "scaled" not in training.NORMS and "scaled" not in residual.NORMS
    assert "scaled" in training.RES_NORMS  # the DyT experiment's residual MLP
    assert "scaled" not in compute.POOL and "scaled" not in dict(scenarios.ALL)
    assert style.METHOD_COLOURS["scaled"] == "#F0E442" and style.METHOD_SYMBOLS["scaled"] == "star"
    assert Settings(method="scaled").method == "scaled"  # the sidebar offers it


def test_the_entry_has_no_contract_and_says_so(patched) -> None:
    from normviz import NormConfigError, contract  # the fresh import's classes

    with pytest.raises(NormConfigError, match="Scaled identity has no axis contract"):
        contract("scaled", "BTC", (2, 3, 4))
    with pytest.raises(NormConfigError, match="unknown method 'nope'"):
        contract("nope", "BTC", (2, 3, 4))


@pytest.mark.parametrize("layout", ["BTC", "NCHW"])
def test_the_entry_matches_its_factory_and_formula(patched, layout: str) -> None:
    from normviz.methods import METHODS

    m = METHODS["scaled"]
    x = torch.randn(
        (2, 3, 4) if layout == "BTC" else (2, 4, 3, 3), generator=torch.Generator().manual_seed(0)
    )
    mod = m.build(layout, tuple(x.shape))
    assert isinstance(mod, Scaled) and m.param_shapes(layout, tuple(x.shape)) == {"weight": (4,)}
    torch.testing.assert_close(m.apply(x, layout), 2 * x)  # y = γ·x, γ = 2
    assert m.torch_text(layout, tuple(x.shape)) == (
        "Scaled(4)" if layout == "BTC" else "Scaled(4, channel_dim=1)"
    )


def test_the_residual_mlp_trains_the_entry_batched_as_its_reference(patched) -> None:
    """The DyT experiment's wide model runs a norm it has no functional form for through the
    registry's module (vmap over the models), and trains it as each model alone."""
    import numpy as np

    from normviz.training.models import Net
    from normviz.training.train import Grid, train, train_loop
    from normviz.training.wide import Variant

    net = Net("resmlp", width=8, depth=1)
    grid = Grid(
        net, tuple(Variant("scaled", 0.01, s) for s in (0, 1)), 16, 16 * 4, optimizer="adam"
    )
    out, wide, _ = train(grid)
    ref, _ = train_loop(grid)
    np.testing.assert_allclose(out.val_loss, ref.val_loss, rtol=1e-4, atol=1e-5)
    assert not np.allclose(wide.slices[0].params[0]["weight"].detach().numpy(), 2.0)  # γ learned


@pytest.mark.parametrize("page", page_ids())
def test_every_page_renders_with_the_entry(patched, page: str) -> None:
    from ui.pages import controls

    assert_clean(run_app(page, timeout=180))
    at = run_app(page, {"method": "scaled"}, timeout=180)
    assert_clean(at)
    if "method" in controls("" if page == "home" else page):  # the sidebar took the link's value
        assert setting(at, "method") == "scaled"
