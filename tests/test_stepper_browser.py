"""The step-through player (ui.stepper) in Chromium: play, pause and step, all in the browser.

A real server logs app.py's runs (ui.route.RUN_LOG). On /batchnorm's running statistics
the player's buttons and keys change the drawn frame and the numbers shown, which are
torch's (nn.BatchNorm1d fed the same batches k times); none of it runs app.py, and the
batch the student stops at reaches the URL (bn_step). axe-core finds no critical or
serious violation inside the player.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import app_runs, assert_no_exception, wait_done
from torch import nn

from normviz import worked
from normviz.batchnorm import lab, stream

pytestmark = pytest.mark.browser

SLOW = 300_000  # ms: a first visit on a busy two-core machine imports torch and computes
STEPS = 40
SETUP = lab.LabSetup(layout="BTC", sample_shape=(6, 8), batch_size=8, steps=STEPS)  # the link's
LINK = f"batchnorm?sim=running&steps={STEPS}&bn_step=5"


def torch_after(k: int, channel: int = 0) -> dict[str, float]:
    """nn.BatchNorm1d (momentum 0.1) after the lab's first k batches: the player's numbers."""
    ds = stream.make_dataset(SETUP)
    idx = stream.batch_indices(lab.TRAIN_SAMPLES, SETUP.batch_size, SETUP.steps, SETUP.seed)
    bn = nn.BatchNorm1d(SETUP.C, eps=SETUP.eps, momentum=SETUP.momentum).double()
    with torch.no_grad():
        for i in range(k):
            batch = ds.train[idx[i]].double()  # (b, T, C)
            bn(batch.transpose(1, 2))
    last = ds.train[idx[k - 1]].double()[..., channel]
    return {
        "batch mean": float(last.mean()),
        "batch variance (biased)": float(last.var(unbiased=False)),
        "running mean": float(bn.running_mean[channel]),
        "running variance": float(bn.running_var[channel]),
    }


def _frame(player) -> int:
    return int(player.get_attribute("data-frame"))


def _numbers(player) -> dict[str, float]:
    names = player.locator("dt").all_inner_texts()
    values = player.locator("dd").all_inner_texts()
    return {n: float(v) for n, v in zip(names, values, strict=True)}


def _check_numbers(player, k: int) -> None:
    shown, want = _numbers(player), torch_after(k)
    assert shown.keys() == want.keys()
    for name, v in want.items():  # shown with 4 significant digits
        assert shown[name] == pytest.approx(v, rel=1e-3, abs=1e-4), (k, name)


def _url_step(p) -> str | None:
    return p.evaluate("() => new URLSearchParams(location.search).get('bn_step')")


def test_the_player_steps_and_plays_in_the_browser(browser, counted) -> None:
    url, log = counted
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(SLOW)
    try:
        before = app_runs(log)
        p.goto(f"{url}/{LINK}")
        wait_done(p, SLOW)
        assert_no_exception(p)
        assert "app batchnorm" in log.read_text().splitlines()[before:]  # the hook counts
        player = p.locator(".nv-player")
        player.wait_for()
        assert _frame(player) == 5  # the link's batch
        _check_numbers(player, 5)
        runs = app_runs(log)
        path = player.locator("path.nv-line").first
        drawn = path.get_attribute("d")
        # buttons
        player.get_by_role("button", name="Next step (right arrow)").click()
        assert _frame(player) == 6
        _check_numbers(player, 6)
        assert path.get_attribute("d") != drawn  # the running line grew by one batch
        assert player.locator("[role=status]").inner_text().startswith("Batch 6 of 40: batch mean")
        p.wait_for_function("() => new URLSearchParams(location.search).get('bn_step') === '6'")
        wait_done(p, SLOW)
        # keys: → twice, ← once (held keys reach the server once, after a short stillness)
        player.focus()
        for key in ("ArrowRight", "ArrowRight", "ArrowLeft"):
            player.press(key)
        assert _frame(player) == 7
        _check_numbers(player, 7)
        p.wait_for_function("() => new URLSearchParams(location.search).get('bn_step') === '7'")
        wait_done(p, SLOW)
        # Space plays: the frame advances with no server run; Space again pauses
        player.press(" ")
        p.wait_for_timeout(1200)
        assert player.get_attribute("data-playing") == "1"
        assert _url_step(p) == "7"  # nothing reached the server while it plays
        player.press(" ")
        paused = _frame(player)
        assert player.get_attribute("data-playing") == "0" and paused > 7
        _check_numbers(player, paused)
        p.wait_for_function(
            "k => new URLSearchParams(location.search).get('bn_step') === String(k)", arg=paused
        )
        wait_done(p, SLOW)
        p.locator("svg text", has_text=f"after batch {paused} of {STEPS}").first.wait_for()
        # the Play button plays to the end by itself, then stops there
        player.get_by_role("button", name="Play (space)").click()
        p.wait_for_function(
            f"() => new URLSearchParams(location.search).get('bn_step') === '{STEPS}'"
        )
        wait_done(p, SLOW)
        assert _frame(player) == STEPS
        _check_numbers(player, STEPS)
        assert_no_exception(p)
        assert app_runs(log) == runs, log.read_text().splitlines()[runs:]  # fragments only
    finally:
        ctx.close()


PLAYERS = [(LINK, "bn_step_player"), ("worked-example", "wk_play_batch")]


@pytest.mark.parametrize(("path", "key"), PLAYERS, ids=["batchnorm", "worked"])
def test_axe_finds_no_serious_violation_in_the_player(browser, counted, path, key) -> None:
    Axe = pytest.importorskip("axe_playwright_python.sync_playwright").Axe  # requirements-dev

    url, _ = counted
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(SLOW)
    try:
        p.goto(f"{url}/{path}")
        wait_done(p, SLOW)
        p.locator(f".st-key-{key} .nv-player").wait_for()
        assert p.locator(f".st-key-{key} .nv-player").count() == 1  # what axe checks
        results = Axe().run(
            p,
            context={"include": [[f".st-key-{key}"]]},
            options={"resultTypes": ["violations"]},
        )
        found = [
            f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}"
            for v in results.response["violations"]
            if v["impact"] in ("critical", "serious")
        ]
        assert not found, found
    finally:
        ctx.close()


def test_the_worked_example_plays_mu_var_x_hat_and_y(browser, counted) -> None:
    """BatchNorm on the source matrix: step to column 2's y; the cells are torch's output."""
    url, log = counted
    x = torch.tensor(worked.SOURCE_MATRIX, dtype=torch.float64)
    with torch.no_grad():
        y = nn.BatchNorm1d(3, affine=False, dtype=x.dtype).train()(x)
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(SLOW)
    try:
        p.goto(f"{url}/worked-example")
        wait_done(p, SLOW)
        runs = app_runs(log)
        player = p.locator(".st-key-wk_play_batch .nv-player")
        player.wait_for()
        assert _frame(player) == 1
        assert player.locator("dd").nth(1).inner_text() == "2"  # μ of column 1: (1 + 3) / 2
        player.evaluate("el => { el.dataset.probe = 'kept'; }")  # gone if it is redrawn
        player.focus()
        for _ in range(7):  # column 2's y: frame 8
            player.press("ArrowRight")
        assert _frame(player) == 8
        # the stop reaches the server, whose fragment rerun sends the same frames: the
        # player stays the same element (one rebuilt would drop a play started meanwhile);
        # the player notes the stop each server run sends it (data-server-start)
        p.locator(".st-key-wk_play_batch .nv-player[data-server-start='8']").wait_for()
        wait_done(p, SLOW)
        assert player.get_attribute("data-probe") == "kept"
        assert _frame(player) == 8
        cells = player.locator("td").all_inner_texts()
        shown = np.array([float(v) for v in cells]).reshape(2, 3)
        np.testing.assert_allclose(shown[:, :2], y[:, :2].numpy(), atol=1e-3)  # done: y
        np.testing.assert_allclose(shown[:, 2], x[:, 2].numpy())  # column 3: still x
        assert player.locator("td.nv-mark").count() == 2  # column 2 outlined
        text = player.locator("[role=status]").inner_text()
        want = worked.method_frames(worked.method_steps(x.numpy(), "batch"), x.numpy()).text(8)
        assert text == want
        player.get_by_role("button", name="Play (space)").click()
        p.locator(".st-key-wk_play_batch .nv-player[data-frame='12'][data-playing='0']").wait_for()
        wait_done(p, SLOW)
        assert_no_exception(p)
        assert app_runs(log) == runs, log.read_text().splitlines()[runs:]  # the fragment alone
    finally:
        ctx.close()
