"""Residual stacks: the statistics against a direct torch computation, and the training run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from held_gate import run_behind_held
from signals import assert_within_budget

from normviz import residual as rs
from normviz.choose.engine import audit
from normviz.choose.findings import FINAL, PLACEMENT_HELP, POST, PRE, SANDWICH
from normviz.residual import depth, training, warmup
from normviz.residual import placement as placement_section

SMALL = rs.StackConfig(depth=5, width=8, tokens=3, samples=4)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: a second OpenMP thread only spins (badly so on a busy machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _direct(
    model: rs.ResidualStack, cfg: rs.StackConfig, x: torch.Tensor, y: torch.Tensor, skip: bool
) -> tuple[list[float], list[float]]:
    """The stack's forward written out with torch.nn.functional, and autograd.grad per block.

    Returns (RMS of the stream, gradient norm) at every block input and after the last block.
    """
    d = cfg.width

    def norm(z: torch.Tensor, mod: torch.nn.Module) -> torch.Tensor:
        if cfg.norm == "layer":
            return F.layer_norm(z, (d,), mod.weight, mod.bias, mod.eps)
        return F.rms_norm(z, (d,), mod.weight, mod.eps)

    def mlp(z: torch.Tensor, br: torch.nn.Module) -> torch.Tensor:
        return F.linear(F.relu(F.linear(z, br.fc1.weight, br.fc1.bias)), br.fc2.weight, br.fc2.bias)

    def branch(z: torch.Tensor, sub: rs.Sublayer) -> torch.Tensor:
        if isinstance(sub.branch, rs.TokenMLP):
            return mlp(z.transpose(1, 2), sub.branch).transpose(1, 2)
        return mlp(z, sub.branch)

    h = x.clone().requires_grad_(True)
    stream = []
    for block in model.blocks:
        stream.append(h)
        for sub in block:
            if model.placement == "pre":  # x + F(Norm(x))
                f = branch(norm(h, sub.norm), sub)
                h = h + (f.detach() if skip else f)
            elif model.placement == "post":  # Norm(x + F(x))
                f = branch(h, sub)
                h = norm(h + (f.detach() if skip else f), sub.norm)
            elif model.placement == "peri":  # x + Norm_out(F(Norm_in(x)))
                f = norm(branch(norm(h, sub.norm), sub), sub.norm_out)
                h = h + (f.detach() if skip else f)
            elif model.placement == "deepnorm":  # LN(α·x + F(x)), α = (2N)^(1/4)
                f = branch(h, sub)  # 2N: the paper's N layers hold 2N sublayers
                two_n = sum(len(b) for b in model.blocks)
                h = norm(two_n**0.25 * h + (f.detach() if skip else f), sub.norm)
            else:
                f = branch(h, sub)
                h = h + (f.detach() if skip else f)
    stream.append(h)
    if model.placement in ("pre", "peri"):
        h = norm(h, model.final_norm)
    out = F.linear(h, model.head.weight, model.head.bias)
    loss = ((out - y) ** 2).mean()
    grads = torch.autograd.grad(loss, stream)
    rms = [float(torch.sqrt((t.detach() ** 2).mean())) for t in stream]
    return rms, [float(torch.linalg.vector_norm(g)) for g in grads]


@pytest.mark.parametrize("placement", rs.PLACEMENTS)
@pytest.mark.parametrize("norm", rs.NORMS)
@pytest.mark.parametrize("block", list(rs.BLOCKS))
def test_statistics_match_a_direct_torch_computation(placement: str, norm: str, block: str) -> None:
    cfg = rs.StackConfig(depth=5, width=8, tokens=3, samples=4, norm=norm, block=block)
    act, grad, skip = rs.stack_statistics(cfg, placement, seed=3)
    model = rs.build_stack(cfg, placement, seed=3)
    x, y = rs.make_task(cfg, seed=3)
    rms_d, grad_d = _direct(model, cfg, x, y, skip=False)
    _, skip_d = _direct(model, cfg, x, y, skip=True)
    assert act.shape == grad.shape == skip.shape == (cfg.depth + 1,)
    np.testing.assert_allclose(act, rms_d, rtol=1e-5)
    np.testing.assert_allclose(grad, grad_d, rtol=1e-4)
    np.testing.assert_allclose(skip, skip_d, rtol=1e-4)


def test_the_stack_uses_torch_norm_layers() -> None:
    for norm, cls in (("layer", torch.nn.LayerNorm), ("rms", torch.nn.RMSNorm)):
        cfg = rs.StackConfig(depth=2, width=8, norm=norm)
        pre = rs.build_stack(cfg, "pre", 0)
        assert isinstance(pre.blocks[0][0].norm, cls)
        assert isinstance(pre.final_norm, cls)
        post = rs.build_stack(cfg, "post", 0)
        assert isinstance(post.blocks[1][0].norm, cls)
        assert isinstance(post.final_norm, torch.nn.Identity)
        none = rs.build_stack(cfg, "none", 0)
        assert not any(isinstance(m, cls) for m in none.modules())


def test_same_seed_same_branch_weights_for_every_placement() -> None:
    plain = [p for p in rs.PLACEMENTS if p != "deepnorm"]
    models = {p: rs.build_stack(SMALL, p, 7) for p in rs.PLACEMENTS}
    w = {p: m.blocks[2][0].branch.fc1.weight for p, m in models.items()}
    assert all(torch.equal(w["pre"], w[p]) for p in plain)
    other = rs.build_stack(SMALL, "pre", 8).blocks[2][0].branch.fc1.weight
    assert not torch.equal(w["pre"], other)


@pytest.mark.parametrize("n", [1, 2, 6, 24, 96])
def test_deepnorm_constants_follow_the_paper(n: int) -> None:
    """Wang et al. 2022, N-layer encoder-only: α = (2N)^(1/4), β = (8N)^(−1/4)."""
    assert rs.deepnorm_alpha(n) == pytest.approx(math.pow(2 * n, 0.25), rel=1e-12)
    assert rs.deepnorm_beta(n) == pytest.approx(1 / math.pow(8 * n, 0.25), rel=1e-12)
    cfg = rs.StackConfig(depth=n, width=8, tokens=3, samples=4, block="mixer")
    pre, deep = rs.build_stack(cfg, "pre", 5), rs.build_stack(cfg, "deepnorm", 5)
    for bp, bd in zip(pre.blocks, deep.blocks, strict=True):
        for sp, sd in zip(bp, bd, strict=True):
            assert sd.alpha == pytest.approx(math.pow(2 * n, 0.25))
            for name in ("fc1", "fc2"):  # β scales every branch weight, biases stay 0
                wp, wd = getattr(sp.branch, name), getattr(sd.branch, name)
                torch.testing.assert_close(wd.weight, wp.weight * math.pow(8 * n, -0.25))
                assert torch.count_nonzero(wd.bias) == 0
    assert isinstance(deep.final_norm, torch.nn.Identity)


@pytest.mark.parametrize("n", [6, 12, 18])
@pytest.mark.parametrize("block", ["mlp", "mixer"])
def test_deepnorm_words_name_the_papers_constants_for_n(n: int, block: str) -> None:
    """Wang et al. 2022, encoder-only: α = (2N)^(1/4), β = (8N)^(−1/4), N the paper's layers
    of two sublayers (attention, feed-forward): L = N mixer blocks, or L = 2N MLP blocks.
    The stack is built with those constants, and the page's words name the same numbers."""
    alpha, beta = math.pow(2 * n, 0.25), math.pow(8 * n, -0.25)
    L = n if block == "mixer" else 2 * n
    assert rs.model.deepnorm_layers(L, block) == n
    cfg = rs.StackConfig(depth=L, width=8, tokens=3, samples=4, block=block)
    pre, deep = rs.build_stack(cfg, "pre", 5), rs.build_stack(cfg, "deepnorm", 5)
    subs = [
        (sp, sd)
        for bp, bd in zip(pre.blocks, deep.blocks, strict=True)
        for sp, sd in zip(bp, bd, strict=True)
    ]
    assert len(subs) == 2 * n  # the paper's 2N sublayers
    for sp, sd in subs:
        assert sd.alpha == pytest.approx(alpha, rel=1e-12)
        torch.testing.assert_close(sd.branch.fc1.weight, sp.branch.fc1.weight * beta)
    prof = rs.init_profile(cfg, seeds=(0,), placements=("deepnorm",))
    (note, _) = prof.notes()
    noun = "MLP" if block == "mlp" else "mixer"
    assert f"α = (2N)^(1/4) = {alpha:.3g}" in note and f"β = (8N)^(−1/4) = {beta:.3g}" in note
    assert f"(encoder-only constants, N = {n} for {L} {noun} blocks)" in note
    words = placement_section.deepnorm_words(L, block)
    assert words == f"at L = {L} {noun} blocks: N = {n}, α = {alpha:.3g}, β = {beta:.3g}"


def test_the_deepnorm_card_names_its_variant_and_the_default_constants() -> None:
    card = next(c for c in placement_section.CARDS if c.title == "DeepNorm")
    assert "the paper's encoder-only constants" in card.caption
    assert "N = L for mixer blocks, L/2 for MLP blocks (" in card.caption
    L = int(depth.SECTION.defaults()["depth"])  # the init sweep's default: MLP blocks
    n = L / 2
    assert (
        f"(at L = {L} MLP blocks: N = {n:g}, α = {math.pow(2 * n, 0.25):.3g}, "
        f"β = {math.pow(8 * n, -0.25):.3g})." in card.caption
    )


@pytest.mark.parametrize("placement", rs.PLACEMENTS)
def test_one_block_matches_its_formula_and_backpropagates(placement: str) -> None:
    """A single sublayer against its update rule written out in torch, values and gradients."""
    d, n = 8, 6
    sub = rs.Sublayer(rs.FeatureMLP(d), "layer", d, placement, n_layers=n)
    with torch.no_grad():  # γ, β away from 1, 0 so that a swapped norm would show
        for m in sub.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    x = torch.randn(4, 3, d, generator=torch.Generator().manual_seed(0), requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)

    def ln(z: torch.Tensor, m: torch.nn.Module) -> torch.Tensor:
        return F.layer_norm(z, (d,), m.weight, m.bias, 1e-5)

    def f(z: torch.Tensor) -> torch.Tensor:
        b = sub.branch
        return F.linear(F.relu(F.linear(z, b.fc1.weight, b.fc1.bias)), b.fc2.weight, b.fc2.bias)

    want = {
        "pre": lambda z: z + f(ln(z, sub.norm)),
        "post": lambda z: ln(z + f(z), sub.norm),
        "peri": lambda z: z + ln(f(ln(z, sub.norm)), sub.norm_out),
        "deepnorm": lambda z: ln(math.pow(2 * n, 0.25) * z + f(z), sub.norm),
        "none": lambda z: z + f(z),
    }[placement](x2)
    got = sub(x)
    torch.testing.assert_close(got, want)
    w = torch.randn_like(got)
    (got * w).sum().backward()
    (want * w).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in sub.parameters())


def test_what_the_page_teaches_holds_at_depth_64() -> None:
    cfg = rs.StackConfig(depth=64, width=16, tokens=2, samples=4)
    prof = rs.init_profile(cfg, seeds=(0, 1))
    assert prof.act_rms.shape == (len(rs.PLACEMENTS), 2, 65)
    pre, post, none = (prof.placements.index(p) for p in ("pre", "post", "none"))
    # pre-norm: the skip paths alone carry the output's gradient to every block unchanged
    sk = prof.skip_grad_norm[pre]
    np.testing.assert_allclose(sk, sk[:, -1:].repeat(65, axis=1), rtol=1e-5)
    assert prof.ratio("pre", "skip_grad_norm") == pytest.approx(1.0, rel=1e-5)
    # post-norm: every block renormalizes the stream to RMS ~1 ...
    np.testing.assert_allclose(prof.act_rms[post][:, 1:], 1.0, atol=1e-3)
    # ... and shrinks what comes back along the skip path, almost every block
    assert np.mean(np.diff(prof.skip_grad_norm[post], axis=1) > 0) > 0.9
    assert prof.ratio("post", "skip_grad_norm") < 1e-3
    # pre-norm: the stream's scale grows with depth; no norm: it explodes
    assert prof.act_rms[pre][:, -1].min() > 3 * prof.act_rms[pre][:, 1].max()
    assert np.median(prof.act_rms[none][:, -1]) > 1e6
    assert len(prof.notes()) >= len(rs.PLACEMENTS)


@pytest.mark.parametrize("block", ["mlp", "mixer"])
def test_init_verdicts_across_three_seeds(block: str) -> None:
    """The page's default sweep (24 blocks, width 32, its batch), seeds 0, 1, 2: what the
    words claim holds for each seed, and where a seed disagrees the words say "mixed"."""
    setup = rs.Setup()
    cfg = rs.StackConfig(
        depth=24, width=32, samples=setup.samples, tokens=setup.tokens, block=block
    )
    prof = rs.init_profile(cfg, seeds=(0, 1, 2))
    notes = dict(zip(prof.placements, prof.notes(), strict=False))
    for p in ("post", "deepnorm"):  # renormalized after every block: bounded in each seed
        assert (prof.growth(p) <= depth.BOUNDED).all() and prof.verdict(p).scale_word == "bounded"
        assert "RMS stays at 1 after 24 blocks" in notes[p]
    for p in ("pre", "peri", "none"):  # the stream grows in each seed
        assert (prof.growth(p) > depth.BOUNDED).all() and prof.verdict(p).scale_word == "grows"
        assert "RMS grows to" in notes[p]
    # DeepNorm evens out post-norm's gradients: block 0 within 2× of the top in each seed
    spread = prof.spread("deepnorm")
    assert (spread >= 1 / depth.SPREAD).all() and (spread <= depth.SPREAD).all()
    assert "(within 2× either way), in each of the 3 seeds" in notes["deepnorm"]
    # Peri-LN's stream grows like pre-norm's at init: each block adds a normalized correction
    ratio = prof.growth("peri") / prof.growth("pre")
    assert ((ratio > 0.8) & (ratio < 1.25)).all()
    for p in prof.placements:
        v = prof.verdict(p)
        assert ("mixed across the 3 seeds" in notes[p]) == (not v.agreed), p
        assert v.scale == tuple(
            "bounded" if g <= depth.BOUNDED else "grows" for g in prof.growth(p)
        )
    verdict = prof.notes()[len(prof.placements)]
    assert "bounded in every seed: post-norm, DeepNorm;" in verdict
    assert "growing in every seed: pre-norm, Peri-LN, no normalization." in verdict


def test_an_init_sweep_queues_behind_another() -> None:
    """The section's run takes depth.GATE: while another sweep holds it, this one says it
    is queued, then runs and gets the same profile as a sweep alone."""
    knobs = {**depth.SECTION.defaults(), "depth": 3, "width": 16, "n_seeds": 1}
    res, said = run_behind_held(
        depth.GATE, lambda progress: depth.SECTION.run(rs.Setup(), knobs, progress)
    )
    assert depth.GATE.slots == 1 and depth.GATE.waiting == 0
    assert any(s.startswith("Queued: 1 initialization sweep ") for s in said)
    assert any(s.startswith("Measuring") for s in said)  # ... and then it ran
    alone = rs.init_profile(rs.model.stack_config(rs.Setup(), knobs), (0,))
    np.testing.assert_array_equal(res.act_rms, alone.act_rms)


def test_init_profile_is_deterministic_and_reports_progress() -> None:
    seen: list[float] = []
    a = rs.init_profile(SMALL, seeds=(0, 1), progress=seen.append)
    b = rs.init_profile(SMALL, seeds=(0, 1))
    np.testing.assert_array_equal(a.grad_norm, b.grad_norm)
    assert seen[-1] == pytest.approx(1.0) and len(seen) == 2 * len(rs.PLACEMENTS)
    assert not np.array_equal(a.grad_norm[:, 0], a.grad_norm[:, 1])  # seeds differ


def test_overflow_is_detected_not_hidden() -> None:
    cfg = rs.StackConfig(depth=96, width=16, tokens=2, samples=2, block="mixer")
    prof = rs.init_profile(cfg, seeds=(0,), placements=("none",))
    at = prof.overflow_block("none")
    assert at is not None and 0 < at <= 96
    assert not np.isfinite(prof.act_rms[0, 0, at])
    assert "overflows float32" in prof.notes()[0]


def test_training_matches_a_direct_adam_loop() -> None:
    cfg = rs.StackConfig(depth=3, width=8, tokens=3, samples=4)
    losses, diverged = rs.train_stack(cfg, "pre", lr=1e-2, steps=5, seed=1)
    model = rs.build_stack(cfg, "pre", 1)
    x, y = rs.make_task(cfg, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    direct = []
    for _ in range(6):
        loss = F.mse_loss(model(x), y)
        direct.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert diverged is None
    np.testing.assert_allclose(losses, direct, rtol=1e-5)


def test_training_outcomes_depend_on_placement() -> None:
    cfg = rs.StackConfig(depth=8, width=16, samples=16)
    run = rs.train_all(cfg, lr=3e-2, steps=30)
    assert run.losses.shape == (len(rs.PLACEMENTS), 31)
    assert not run.diverged("pre")
    assert run.final("pre") < rs.STALL_FRACTION * run.losses[0, 0]
    assert run.outcome("pre").startswith("trained")
    assert run.diverged("none")
    at = run.diverged_at[run.placements.index("none")]
    assert np.isnan(run.losses[run.placements.index("none"), at:]).all()
    assert run.outcome("none").startswith("diverged")
    assert run.outcome("post").startswith("stalled")  # collapsed to predicting the mean
    assert run.trained("deepnorm") and run.trained("peri") and not run.trained("post")


PAGE_TRAIN = rs.StackConfig(depth=12, width=32, samples=rs.Setup().samples)  # the defaults


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_training_verdicts_hold_for_each_seed(seed: int) -> None:
    """At the page's default run (12 blocks, width 32, lr 0.01, 80 steps) DeepNorm trains
    where post-norm stalls, and Peri-LN and pre-norm both train: the words say so."""
    placements = ("pre", "post", "peri", "deepnorm")
    run = rs.train_all(PAGE_TRAIN, lr=1e-2, steps=80, seed=seed, placements=placements)
    assert run.trained("deepnorm") and not run.trained("post")
    assert run.final("deepnorm") < run.final("post") / training.CLOSE
    assert run.trained("pre") and run.trained("peri")
    deep, peri = training.verdicts(run)
    assert "kept post-norm trainable at L = 12" in deep
    assert "DeepNorm's final loss" in deep and "is lower than post-norm's" in deep
    assert peri.startswith("**Verdict, Peri-LN vs pre-norm**: both trained")
    r = run.final("peri") / run.final("pre")
    c = training.CLOSE
    word = "lower than" if r < 1 / c else "higher than" if r > c else "about the same as"
    assert f"is {word} pre-norm's" in peri


def test_training_verdict_words_follow_the_outcomes() -> None:
    """The same sentence builder on hand-made runs: each case gets its own words."""
    cfg = rs.StackConfig(depth=4)
    four = ("pre", "post", "peri", "deepnorm")

    def fake(ends: tuple[float, float, float, float]) -> rs.TrainRun:
        losses = np.stack([np.linspace(1.0, e, 11) for e in ends])
        return rs.TrainRun(cfg, 0.01, 10, four, losses, (None,) * 4)

    deep, peri = training.verdicts(fake((0.1, 0.9, 0.1, 0.1)))
    assert "kept post-norm trainable" in deep and "about the same as pre-norm's" in peri
    deep, peri = training.verdicts(fake((0.9, 0.1, 0.1, 0.9)))
    assert "did not train here (L = 4) although post-norm did" in deep
    assert "only Peri-LN trained" in peri and "lower than pre-norm's" in peri
    deep, _ = training.verdicts(fake((0.1, 0.9, 0.1, 0.9)))
    assert "neither trained" in deep and "about the same as post-norm's" in deep
    deep, _ = training.verdicts(fake((0.1, 0.1, 0.1, 0.1)))
    assert deep.startswith("**Verdict, DeepNorm vs post-norm**: Post-norm trained here too")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"depth": 0},
        {"depth": rs.MAX_DEPTH + 1},
        {"width": 1},
        {"norm": "batch"},
        {"block": "attention"},
        {"depth": 2.5},
        {"depth": True},
    ],
)
def test_bad_configs_raise_a_value_error_naming_the_setting(kwargs: dict) -> None:
    cfg = rs.StackConfig(**kwargs)
    name = next(iter(kwargs))
    with pytest.raises(rs.ResidualConfigError, match=name):
        cfg.check()
    assert issubclass(rs.ResidualConfigError, ValueError)


@pytest.mark.parametrize(("lr", "steps"), [(0.0, 5), (2.0, 5), ("x", 5), (1e-3, 0), (1e-3, 501)])
def test_bad_training_settings_raise(lr: object, steps: int) -> None:
    with pytest.raises(rs.ResidualConfigError):
        rs.train_stack(SMALL, "pre", lr, steps)  # type: ignore[arg-type]


def test_bad_placement_and_seed_count() -> None:
    with pytest.raises(rs.ResidualConfigError, match="placement"):
        rs.build_stack(SMALL, "middle", 0)
    with pytest.raises(rs.ResidualConfigError, match="seeds"):
        rs.init_profile(SMALL, seeds=tuple(range(rs.MAX_SEEDS + 1)))


# ---- figures ---------------------------------------------------------------------------


def _fake_profile(depth: int, seeds: int) -> rs.InitProfile:
    rng = np.random.default_rng(0)
    shape = (len(rs.PLACEMENTS), seeds, depth + 1)
    act = np.exp(rng.normal(size=shape) * 5)
    act[rs.PLACEMENTS.index("none"), :, depth // 2 :] = np.inf  # an overflow leaves a gap
    cfg = rs.StackConfig(depth=depth)
    return rs.InitProfile(
        cfg, rs.PLACEMENTS, tuple(range(seeds)), act, act * 0.5, np.exp(-rng.random(shape))
    )


def test_depth_figure_traces_titles_and_payload_at_the_largest_sizes() -> None:
    prof = _fake_profile(rs.MAX_DEPTH, rs.MAX_SEEDS)
    fig = depth.make_depth_figure(prof, presenter=True)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [t for _, t in depth.PANELS]
    lines = [t for t in fig.data if t.mode == "lines"]
    n = len(rs.PLACEMENTS)
    assert len(lines) == n * len(depth.PANELS)  # one median line per placement and panel
    assert len(fig.data) == 2 * n * len(depth.PANELS)  # plus a seed band each
    assert {t.name for t in lines} == set(rs.PLACEMENT_LABELS.values())
    assert fig.layout.yaxis.type == "log"
    none_line = next(t for t in lines if t.name == "no normalization")
    assert none_line.y[-1] is None  # inf is a gap, not a number
    assert_within_budget(fig)
    json.loads(fig.to_json())  # valid JSON (no NaN/inf literals)


def test_depth_figure_with_one_seed_has_no_band() -> None:
    fig = depth.make_depth_figure(_fake_profile(4, 1))
    assert len(fig.data) == len(rs.PLACEMENTS) * len(depth.PANELS)


def test_loss_figure_marks_divergence_and_stays_small() -> None:
    steps = rs.MAX_STEPS
    losses = np.full((3, steps + 1), np.nan)
    losses[0] = np.linspace(2, 0.01, steps + 1)
    losses[1] = np.linspace(2, 1, steps + 1)
    losses[2, :7] = np.geomspace(1, 1e4, 7)
    three = ("pre", "post", "none")
    run = rs.TrainRun(rs.StackConfig(depth=96), 0.1, steps, three, losses, (None, None, 7))
    fig = training.make_loss_figure(run)
    assert "learning rate 0.1" in fig.layout.title.text
    markers = [t for t in fig.data if t.mode == "markers+text"]
    assert len(markers) == 1 and markers[0].x == (7,)
    assert "diverged at step 7" in markers[0].text[0]
    assert_within_budget(fig)
    assert run.outcome("post").startswith("stalled")
    assert math.isclose(run.final("none"), 1e4)


# ---- why post-norm needs warm-up: gradients near the output ---------------------------


def test_block_gradients_match_backward() -> None:
    cfg = rs.StackConfig(depth=4, width=8, tokens=3, samples=4, block="mixer")
    for placement in ("pre", "post"):
        got = rs.block_gradients(cfg, placement, seed=2)
        model = rs.build_stack(cfg, placement, 2)
        x, y = rs.make_task(cfg, 2)
        F.mse_loss(model(x), y).backward()
        want = [
            float(torch.sqrt(sum(p.grad.square().sum() for p in block.parameters())))
            for block in model.blocks
        ]
        np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize(("width", "norm", "block"), [(32, "layer", "mlp"), (16, "rms", "mixer")])
def test_post_norm_output_gradients_do_not_shrink_with_depth(
    width: int, norm: str, block: str
) -> None:
    """Xiong et al. 2020 on the page's stacks (its batch, median of 4 seeds): from L = 6 to
    24 the last block's gradient keeps at least 0.8 of its size in post-norm and loses at
    least a quarter in pre-norm, and at L = 24 post-norm's is at least twice pre-norm's."""
    setup = rs.Setup()
    cfg = rs.StackConfig(
        width=width, norm=norm, block=block, samples=setup.samples, tokens=setup.tokens
    )
    res = rs.output_gradients(cfg, seeds=(0, 1, 2, 3))
    assert res.depths == (6, 12, 24)
    assert [a.shape for a in res.norms] == [(2, 4, 6), (2, 4, 12), (2, 4, 24)]
    assert res.change("post") >= 0.8
    assert res.change("pre") <= 0.75
    assert res.last("post", 24) >= 2 * res.last("pre", 24)
    text = "\n".join(warmup.notes(res))
    assert "Pre-norm: the last block's gradient norm" in text and "it shrinks" in text
    assert "Xiong et al. 2020" in text and "O(d·√(ln d / L))" in text
    assert "larger in post-norm than in pre-norm" in text


def test_output_gradient_figure() -> None:
    cfg = rs.StackConfig(width=8, tokens=2, samples=2)
    res = rs.output_gradients(cfg, seeds=(0, 1))
    fig = warmup.figure(res, presenter=True)
    assert [a.text for a in fig.layout.annotations] == [
        "L = 6 blocks",
        "L = 12 blocks",
        "L = 24 blocks",
    ]
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 2 * 3 and len(fig.data) == 2 * 2 * 3
    assert lines[-1].x[-1] == 24
    assert_within_budget(fig)
    with pytest.raises(rs.ResidualConfigError, match="seeds"):
        rs.output_gradients(cfg, seeds=tuple(range(5)))


# ---- the audit (/choose) reads the placements off the page's own stacks ----------------


class _Traceable(torch.nn.Module):
    """The stack's forward without its measuring flags, so torch.fx can trace it."""

    def __init__(self, stack: rs.ResidualStack) -> None:
        super().__init__()
        self.stack = stack

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for block in self.stack.blocks:
            for sub in block:
                h = sub.rule(sub, h, False)
        return self.stack.head(self.stack.final_norm(h))


@pytest.mark.parametrize(
    ("placement", "want"),
    [
        ("pre", {"norm": PRE, "final_norm": FINAL}),
        ("post", {"norm": POST}),
        ("peri", {"norm": PRE, "norm_out": SANDWICH, "final_norm": FINAL}),
        ("deepnorm", {"norm": POST}),  # a post-norm whose skip operand is α·x
    ],
)
def test_the_audit_names_each_placement(placement: str, want: dict[str, str]) -> None:
    cfg = rs.StackConfig(depth=3, width=8, tokens=3, samples=4, block="mixer")
    x, _ = rs.make_task(cfg, 0)
    report = audit(_Traceable(rs.build_stack(cfg, placement, 0)), x, placement)
    assert report.traced
    found = {name.split(".")[-1]: where for name, where in report.placements.items()}
    assert found == want, report.placements
    assert set(report.placements.values()) == set(want.values())
    assert all(where in PLACEMENT_HELP for where in report.placements.values())
