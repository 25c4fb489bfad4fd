"""Practice exercises: every kind's truth checked against group_ids, identify and torch.nn,
over many seeds (so many random shapes and methods, GroupNorm and custom axes included)."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from signals import assert_valid
from test_core import torch_reference
from torch import nn

import normviz
from normviz import METHODS, practice
from normviz.choose import guide
from normviz.practice import cells, common, compute, count, naming, scenarios, show, traineval
from normviz.practice.common import AnswerError, grade, parse_answer, pick
from normviz.sources import cite

ROOT_PAGES = Path(__file__).resolve().parent.parent / "pages"
SEEDS = st.integers(0, 2**31 - 1)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _x(case: common.Case, seed: int = 0) -> torch.Tensor:
    return torch.randn(
        case.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


def _y(case: common.Case, x: torch.Tensor) -> torch.Tensor:
    """The layer's output: torch.nn for a named method, normviz for custom axes."""
    if case.method == "custom":
        return normviz.normalize(x, "custom", case.layout, **case.norm_kwargs()).output
    return torch_reference(case.method, case.layout, x, case.groups, 1e-5, None, None)


def _key(ex: practice.Exercise) -> str:
    return ";".join(ex.truth) if ex.form == "numbers" else ",".join(ex.truth)


# ---- 1: same statistics -----------------------------------------------------------------


@FAST
@given(SEEDS)
def test_cells_truth_is_the_marked_cells_group(seed: int) -> None:
    ex = cells.make(seed)
    case = ex.case
    ids = normviz.group_ids(case.method, case.layout, case.shape, case.groups, case.axes)
    want = np.flatnonzero(ids.reshape(-1) == ids[ex.marked])
    assert [int(t) for t in ex.truth] == want.tolist()
    assert 2 <= len(want) < ids.size  # a group to find, and cells outside it
    # torch: nudging a cell of the group moves the marked cell's output, others do not
    x = _x(case, seed % 97)
    y0 = _y(case, x).reshape(-1)[int(np.ravel_multi_index(ex.marked, case.shape))]
    marked = int(np.ravel_multi_index(ex.marked, case.shape))
    for j in range(ids.size):
        if j == marked:
            continue
        x2 = x.clone().reshape(-1)
        x2[j] += 3.0
        y1 = _y(case, x2.reshape(case.shape)).reshape(-1)[marked]
        assert (abs(float(y1 - y0)) > 1e-9) == (j in set(want.tolist())), (case, j)


@FAST
@given(SEEDS, st.data())
def test_cells_grading_names_missed_and_extra(seed: int, data) -> None:
    ex = cells.make(seed)
    marked = int(np.ravel_multi_index(ex.marked, ex.case.shape))
    group = {int(t) for t in ex.truth}
    assert grade(ex, ",".join(ex.truth)).correct
    assert grade(ex, ",".join(str(i) for i in group - {marked})).correct  # marked is free
    picked = set(data.draw(st.sets(st.integers(0, ex.n_cells - 1))))
    v = grade(ex, ",".join(map(str, picked)))
    assert set(v.missed) == group - picked - {marked}
    assert set(v.extra) == picked - group
    assert v.correct == (not v.missed and not v.extra)
    if not v.correct:
        assert f"{len(v.missed)} missed" in v.headline or not v.missed
        assert f"{len(v.extra)} extra" in v.headline or not v.extra


# ---- 2: name the method ------------------------------------------------------------------


@FAST
@given(SEEDS)
def test_naming_truth_agrees_with_identify_and_group_ids(seed: int) -> None:
    ex = naming.make(seed)
    case = ex.case
    assert len(ex.truth) == 1
    answer = ex.truth[0]
    if case.method != "custom":
        assert answer == case.method
    else:
        expected = {m for m in _identified(case) if METHODS[m].centred == case.centred}
        if not case.centred and "layer" in _identified(case):
            expected.add("rms")  # identify names the centred one of the two
        if expected:
            assert {answer} == expected
        else:  # no named layer: only GroupNorm (any G) could draw it, else "none of these"
            assert answer in ("none", "group")
    if answer != "none" and METHODS[answer].kind == "elementwise":
        _assert_pools_nothing(case)
    elif answer != "none":
        m = METHODS[answer]
        C = case.shape[normviz.LAYOUTS[case.layout].channel_axis]
        gs = [g for g in range(2, C) if C % g == 0] if m.grouped else [None]
        ids = case.ids()
        assert any(
            naming.same_partition(normviz.group_ids(answer, case.layout, case.shape, g), ids)
            for g in gs
        )
    assert grade(ex, answer).correct
    for other, _ in ex.options:
        assert grade(ex, other).correct == (other == answer)


def _assert_pools_nothing(case: common.Case) -> None:
    """An elementwise case's pattern is every cell its own group, and torch's run of the
    registry's module agrees: nudging one cell moves its own output and no other."""
    ids = case.ids().reshape(-1)
    assert sorted(ids.tolist()) == list(range(ids.size))
    m = METHODS[case.method]
    x = _x(case, 3)
    with torch.no_grad():
        y0 = m.apply(x, case.layout).reshape(-1)
        for j in range(ids.size):
            x2 = x.clone().reshape(-1)
            x2[j] += 3.0
            moved = (m.apply(x2.reshape(case.shape), case.layout).reshape(-1) - y0).abs() > 1e-12
            assert moved.nonzero().flatten().tolist() == [j], (case, j)


def _identified(case: common.Case) -> set[str]:
    """identify() on the custom axes, with or without each size-1 axis (they pool nothing)."""
    sizes = dict(zip(normviz.LAYOUTS[case.layout].axes, case.shape, strict=True))
    real = {a for a in case.axes if sizes[a] > 1}
    ones = [a for a, n in sizes.items() if n == 1]
    out = set()
    for k in range(len(ones) + 1):
        for extra in itertools.combinations(ones, k):
            if real | set(extra):
                out.add(normviz.identify(case.layout, sorted(real | set(extra))))
    return out - {None}


def test_naming_covers_every_answer() -> None:
    seen = {naming.make(s).truth[0] for s in range(120)}
    assert seen == {*normviz.methods.listed("practice"), "none"}
    assert "dyt" in seen  # the registry's flag puts DyT's "no statistics" on the list


@pytest.mark.parametrize("seed", range(300))
def test_naming_dyt_is_the_pattern_where_nothing_is_pooled(seed: int) -> None:
    """Over many seeds: the exercise's DyT cases are answered DyT and only DyT, every cell
    its own group (torch agrees, above); every other case has groups of 2 or more, so the
    all-singletons answer never fits another exercise."""
    ex = naming.make(seed)
    if ex.case.method == "dyt":
        assert ex.truth == ("dyt",)
        assert ex.case.group_size == 1 and "pools nothing" in ex.explanation[0]
        assert f"each of the {ex.n_cells} cells is a group of its own" in ex.explanation[0]
        assert "The layer subtracts no mean." in ex.prompt
        assert ex.n_cells <= naming.MAX_ELEMENTWISE_CELLS
        _assert_pools_nothing(ex.case)
    else:
        assert ex.case.group_size >= 2 and "dyt" not in ex.truth


def test_grading_a_dyt_answer() -> None:
    ex = next(e for e in map(naming.make, range(40)) if e.truth == ("dyt",))
    assert ("dyt", "DyT") in ex.options
    v = grade(ex, "dyt")
    assert v.correct and v.headline == "Correct."
    for wrong in ("layer", "rms", "none"):
        v = grade(ex, wrong)
        assert not v.correct and v.headline == "Not quite: the answer is **DyT**."
    assert practice.describe(ex, "dyt") == "DyT"
    rows = practice.tally(ex, {"dyt": 4, "layer": 2})
    assert [(r.label, r.count, r.correct) for r in rows] == [
        ("DyT", 4, True),
        ("LayerNorm", 2, False),
    ]
    # a DyT answer to a LayerNorm pattern is wrong
    ln = next(e for e in map(naming.make, range(40)) if e.truth == ("layer",))
    assert not grade(ln, "dyt").correct


@pytest.mark.parametrize(
    ("method", "layout", "shape", "groups"),
    [
        ("batch", "BTC", (3, 2, 4), None),
        ("layer", "NCHW", (2, 4, 1, 3), None),
        ("instance", "BTC", (2, 3, 2), None),
        ("group", "NCHW", (2, 4, 2, 2), 2),
        ("rms", "BTC", (2, 3, 4), None),
    ],
)
def test_dependence_ids_are_group_ids_for_methods_with_statistics(
    method: str, layout: str, shape: tuple[int, ...], groups: int | None
) -> None:
    """The Jacobian reading that gives DyT's groups gives every other method's group_ids."""
    ids = common.dependence_ids(method, layout, shape, groups)
    assert naming.same_partition(ids, normviz.group_ids(method, layout, shape, groups))


@pytest.mark.parametrize("kind", ["cells", "count", "compute", "choose"])
def test_the_kinds_that_need_a_statistic_draw_no_elementwise_method(kind: str) -> None:
    """DyT is on the practice list, but it has no group to pick, no statistic to count and
    no μ to compute: those kinds (and the scenario questions' method options) skip it."""
    assert "dyt" in normviz.methods.listed("practice")
    assert set(common.STATISTICS) == {
        k for k in normviz.methods.listed("practice") if METHODS[k].kind == "statistics"
    }
    for seed in range(60):
        ex = practice.exercise(kind, seed)
        assert ex.case is None or METHODS[ex.case.method].kind == "statistics"
        assert "dyt" not in dict(ex.options)


@FAST
@given(SEEDS)
def test_naming_grid_says_every_cells_group_in_words(seed: int) -> None:
    """The text alternative carries the whole pattern: the group of every cell, row by
    row, the same numbers the cells show; two cells share a number exactly when they
    share a statistic (group_ids)."""
    ex = naming.make(seed)
    words = practice.grid_alt(ex)
    assert "coloured and numbered by its statistic group" in words[1]
    rows = [w.split(": ", 1)[1].split(", ") for w in words if w.startswith("row ")]
    numbers = [int(n) for row in rows for n in row]
    assert [str(n) for n in numbers] == list(practice.make_grid_figure(ex).data[0].text)
    ids = ex.case.ids().reshape(-1)
    assert len(numbers) == ids.size
    for i, j in itertools.combinations(range(ids.size), 2):
        assert (numbers[i] == numbers[j]) == (ids[i] == ids[j])


def test_cells_grid_names_marked_picked_missed_and_extra_cells() -> None:
    ex = cells.make(4)
    names = common.cell_names(ex.case)
    picked = (0, 1)
    verdict = grade(ex, "0,1")
    words = " ".join(practice.grid_alt(ex, picked, verdict))
    assert (
        f"The marked cell (black square outline): {common.cell_name(ex.case.layout, ex.marked)}"
        in words
    )
    assert f"Picked (sky blue, outlined), 2: {names[0]}; {names[1]}." in words
    for what, idx in (("Missed", verdict.missed), ("Extra", verdict.extra)):
        if idx:
            assert f"{what}: " in words and all(names[i] in words for i in idx)
    assert verdict.missed or verdict.extra  # the test grades a wrong answer


@pytest.mark.parametrize("seed", range(40))
def test_cells_one_count_and_one_rule_for_the_marked_cell(seed: int) -> None:
    """Issue 24 item 20 / issue 26 item 6: feedback, answer and tally count the same cells,
    the marked cell's group without the marked cell, which is given (picking it is said)."""
    ex = cells.make(seed)
    marked = int(np.ravel_multi_index(ex.marked, ex.case.shape))
    ids = ex.case.ids()  # group_ids, checked against torch by the tests above
    others = [i for i in np.flatnonzero(ids.reshape(-1) == ids[ex.marked]) if i != marked]
    n = len(others)
    plain = grade(ex, ",".join(map(str, others)))
    with_marked = grade(ex, ",".join(map(str, [*others, marked])))
    assert plain.correct and with_marked.correct
    counts = {
        "answer": re.search(r"the (\d+) other cells?", ex.answer_text),
        "feedback": re.search(r"Correct: (?:all )?(?:the )?(\d+) other cells?", plain.headline),
        "explanation": re.search(r"the (\d+) others to pick", ex.explanation[0]),
    }
    assert {k: int(m.group(1)) for k, m in counts.items() if m} == dict.fromkeys(counts, n)
    assert f"({n + 1} with the marked cell, which is given)" in ex.answer_text
    assert plain.note == "" and with_marked.note == common.GIVEN_NOTE
    assert with_marked.note in with_marked.message and plain.message == plain.headline
    # the tally: both right answers land in one "right" row, a miss in a row that says so
    missing = ",".join(map(str, others[1:]))
    answers = {",".join(map(str, others)): 2, ",".join(map(str, [*others, marked])): 3}
    rows = practice.tally(ex, {**answers, missing: 1})
    right = [r for r in rows if r.correct]
    assert len(right) == 1 and right[0].count == 5
    wrong = [r for r in rows if not r.correct]
    assert [(r.label, r.count) for r in wrong] == [("1 missed", 1)]


# ---- 3: count ------------------------------------------------------------------------------


@FAST
@given(SEEDS)
def test_count_truth_matches_the_statistics_torch_computes(seed: int) -> None:
    ex = count.make(seed)
    case = ex.case
    n_stats, m = (int(t) for t in ex.truth)
    con = case.contract()
    assert (n_stats, m) == (con.n_stats, con.group_size)
    assert n_stats * m == math.prod(case.shape)
    # random data: every statistic differs, so the distinct variances count them
    x = _x(case, seed % 89)
    var = normviz.normalize(x, case.method, case.layout, **case.norm_kwargs()).var
    assert len(torch.unique(var.expand(case.shape))) == n_stats
    assert torch.allclose(
        normviz.normalize(x, case.method, case.layout, **case.norm_kwargs()).output,
        _y(case, x),
        atol=1e-8,
    )
    assert grade(ex, f"{n_stats};{m}").correct
    assert not grade(ex, f"{n_stats + 1};{m}").correct
    assert not grade(ex, f"{n_stats};{m + 1}").correct


# ---- 4: compute y --------------------------------------------------------------------------


def _torch_y(case: common.Case, x: torch.Tensor, gamma: float, beta: float) -> torch.Tensor:
    C = case.shape[normviz.LAYOUTS[case.layout].channel_axis]
    w = torch.full((C,), gamma, dtype=torch.float64)
    if case.method == "rms":  # torch's RMSNorm has no β
        return torch_reference("rms", case.layout, x, None, 1e-5, w, None)
    b = torch.full((C,), beta, dtype=torch.float64)
    return torch_reference(case.method, case.layout, x, case.groups, 1e-5, w, b)


@FAST
@given(SEEDS)
def test_compute_truth_matches_torch_and_tolerance_grades(seed: int) -> None:
    ex = compute.make(seed)
    case = ex.case
    x = torch.tensor(ex.values, dtype=torch.float64).reshape(case.shape)
    gamma = float(ex.prompt.split("γ = ")[1].split(" ")[0])
    if case.method == "rms":  # nn.RMSNorm has no bias: the exercise gives it none
        assert "β = " not in ex.prompt and "β" not in ex.explanation[-1]
        beta = 0.0
    else:
        beta = float(ex.prompt.split("β = ")[1].split(" ")[0])
    y = float(_torch_y(case, x, gamma, beta)[ex.marked])
    assert abs(float(ex.truth[0]) - y) < 1e-9
    tol = ex.tolerance[0]
    assert grade(ex, str(round(y, 2))).correct  # two decimals by hand
    assert grade(ex, str(y + 0.9 * tol)).correct
    assert not grade(ex, str(y + 1.5 * tol)).correct
    assert ex.explanation[-1].endswith(f"= {show.fmt(y)}.")


def test_compute_rmsnorm_has_no_beta_seed_7() -> None:
    """Issue 24 item 2: seed 7 graded "β = −1" → −2.604; nn.RMSNorm itself gives −1.604."""
    ex = compute.make(7)
    case = ex.case
    assert case.method == "rms"
    x = torch.tensor(ex.values, dtype=torch.float64).reshape(case.shape)
    gamma = float(ex.prompt.split("γ = ")[1].split(" ")[0])
    mod = nn.RMSNorm(case.shape[1:], eps=1e-5).double()
    assert [n for n, _ in mod.named_parameters()] == ["weight"]
    with torch.no_grad():
        mod.weight.fill_(gamma)
        y = float(mod(x)[ex.marked])
    assert float(ex.truth[0]) == pytest.approx(y, abs=1e-12)
    assert grade(ex, f"{y:.2f}").correct
    assert "+ β" not in compute.INTRO.split("RMSNorm:")[1]


# ---- 5: train or eval ------------------------------------------------------------------------


def _module(ctor: str) -> nn.Module:
    """The module the exercise's code line builds (our own template, so eval is safe)."""
    return eval(ctor, {"nn": nn, "False": False})


@pytest.mark.parametrize("seed", range(120))
def test_train_eval_truths_match_torch(seed: int) -> None:
    ex = traineval.make(seed)
    which = pick(traineval.QUESTIONS, traineval.SLUG, seed)
    if which == "running":
        _check_running(ex)
        return
    ctor = ex.prompt.split("`norm = ")[1].split("`")[0]
    mod = _module(ctor).double()
    training = "norm.train()" in ex.prompt
    mod.train(training)
    shape = tuple(int(v) for v in ex.prompt.split("= (")[-1].split(")")[0].split(","))
    x = torch.randn(shape, dtype=torch.float64) * 3 + 5
    channel_first = "BatchNorm1d" in ctor or "InstanceNorm1d" in ctor or "GroupNorm" in ctor
    xt = x.transpose(1, 2) if channel_first and len(shape) == 3 else x
    if which == "one":
        try:
            with torch.no_grad():
                mod(xt)
            runs = True
        except ValueError:
            runs = False
        assert ex.truth == ("yes" if runs else "no",), ctor
        return
    if hasattr(mod, "running_mean") and mod.running_mean is not None:
        mod.running_mean.fill_(100.0)  # far from the input's statistics
        mod.running_var.fill_(9.0)
    with torch.no_grad():
        out = mod(xt)
    from_running = bool((out.mean().abs() > 10).item())
    assert ex.truth == ("running" if from_running else "input",), ctor


def _check_running(ex: practice.Exercise) -> None:
    means = [float(r[1]) for r in ex.table[1:]]
    if "Keras" in ex.prompt:
        m = float(ex.prompt.split("momentum = ")[1].split(":")[0])
        bn = nn.BatchNorm1d(1, momentum=1 - m)  # Keras's m weights the old value
    elif "momentum=None" in ex.prompt:
        bn = nn.BatchNorm1d(1, momentum=None)
    else:
        bn = nn.BatchNorm1d(1, momentum=float(ex.prompt.split("momentum = ")[1].split(":")[0]))
    bn = bn.double().train()
    for mu in means:  # a batch of two values whose mean is mu
        bn(torch.tensor([[mu - 1.0], [mu + 1.0]], dtype=torch.float64))
    assert abs(float(bn.running_mean[0]) - float(ex.truth[0])) < 1e-9
    assert grade(ex, f"{float(ex.truth[0]):.2f}").correct


def test_train_eval_covers_every_question_and_answer() -> None:
    answers = {
        (pick(traineval.QUESTIONS, traineval.SLUG, s), traineval.make(s).truth) for s in range(240)
    }
    kinds = {a for a, _ in answers}
    assert kinds == set(traineval.QUESTIONS)
    assert {t for q, t in answers if q == "one"} == {("yes",), ("no",)}
    assert {t for q, t in answers if q == "stats"} == {("input",), ("running",)}
    conventions = {
        ("Keras" in traineval.make(s).prompt, "None" in traineval.make(s).prompt)
        for s in range(240)
        if pick(traineval.QUESTIONS, traineval.SLUG, s) == "running"
    }
    assert len(conventions) == 3


def test_running_stats_oracle_matches_torch_in_both_conventions() -> None:
    means = [2.0, -1.0, 4.0]
    for conv, m, torch_m in (
        ("pytorch", 0.1, 0.1),
        ("keras", 0.9, 0.1),
        ("cumulative", None, None),
    ):
        bn = nn.BatchNorm1d(1, momentum=torch_m).double().train()
        for mu in means:
            bn(torch.tensor([[mu - 1.0], [mu + 1.0]], dtype=torch.float64))
        assert traineval.running_means(means, conv, m)[-1] == pytest.approx(
            float(bn.running_mean[0])
        )


# ---- 6: choose -----------------------------------------------------------------------------


def test_scenarios_agree_with_the_guide_and_the_registry() -> None:
    q = {q.key: q for q in scenarios.QUESTIONS}
    rec = guide.recommend(guide.Situation("detection", 2))
    assert q["detection"].answer == rec.method
    assert q["transformer"].answer == guide.recommend(guide.Situation("transformer", 1)).method
    assert q["style"].answer == guide.recommend(guide.Situation("style", 8)).method
    assert q["cnn"].answer == guide.recommend(guide.Situation("cnn", 256)).method
    assert [k for k, m in METHODS.items() if m.batch_dependent] == [q["depends"].answer]
    for question in scenarios.QUESTIONS:
        assert question.answer in dict(question.options)
        assert (ROOT_PAGES / f"{question.link[0]}.py").exists(), question.link


def test_detection_scenario_says_what_mask_rcnn_did() -> None:
    """Issue 24 item 3: published Mask R-CNN froze BatchNorm (as the guide says)."""
    why = {q.key: q for q in scenarios.QUESTIONS}["detection"].why
    guide_text = " ".join(guide.recommend(guide.Situation("detection", 2)).reasons)
    assert "frozen" in guide_text and cite("he2017") in guide_text
    for sentence in re.split(r"(?<!al)\. ", why):
        if "Mask R-CNN" in sentence:
            assert "froze" in sentence and cite("he2017") in sentence, sentence


def test_gamma_beta_that_the_scenario_says_recover_the_input() -> None:
    """Issue 24 item 4: the γ the text names gives x back through nn.BatchNorm1d exactly."""
    why = {q.key: q for q in scenarios.QUESTIONS}["gamma"].why
    named = re.search(r"\(γ = (.+?), β = μ recovers", why).group(1)
    eps = 1e-5
    x = 0.01 * torch.randn(64, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mu, var = x.mean(0), x.var(0, unbiased=False)  # var ≈ 1e-4: ε is not negligible
    gammas = {"σ": var.sqrt(), "√(σ² + ε)": (var + eps).sqrt()}
    bn = nn.BatchNorm1d(3, eps=eps).double()
    outs = {}
    for k, g in gammas.items():
        with torch.no_grad():
            bn.weight.copy_(g)
            bn.bias.copy_(mu)
            outs[k] = float((bn.train()(x) - x).abs().max())
    assert outs["√(σ² + ε)"] < 1e-12 < 1e-6 < outs["σ"]  # γ = σ leaves a leftover
    assert outs[named] < 1e-12, named


def test_train_eval_intro_names_every_module_whose_modes_differ() -> None:
    """Issue 24 item 5: InstanceNorm with track_running_stats=True differs too (measured)."""
    from normviz.choose import defaults

    data = defaults.batches()
    differ = [lab for lab, build in defaults.CONFIGS if defaults.train_eval_gap(build, data) > 1e-6]
    assert "nn.InstanceNorm2d(C, track_running_stats=True)" in differ
    for label in differ:
        name = re.sub(r"[123]d$", "", label.split("(")[0].removeprefix("nn."))
        assert name in traineval.INTRO, label
        if "track_running_stats=True" in label:
            assert f"{name} built with track_running_stats=True differs" in traineval.INTRO


@pytest.mark.parametrize("seed", range(30))
def test_choose_grades_its_answer(seed: int) -> None:
    ex = scenarios.make(seed)
    for key, _ in ex.options:
        assert grade(ex, key).correct == (key in ex.truth)


# ---- every kind ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(practice.MAKERS))
def test_next_varies_the_exercise(kind: str) -> None:
    exs = [practice.exercise(kind, s) for s in range(40)]
    for a, b in itertools.pairwise(exs):
        assert a.prompt != b.prompt or a.case != b.case
    if kind in ("cells", "name", "count", "compute"):
        for a, b in itertools.pairwise(exs):
            assert a.case.method != b.case.method  # consecutive seeds change the method
        assert len({e.case.shape for e in exs}) > 10 and len({e.case.layout for e in exs}) == 2


@pytest.mark.parametrize("pool", [("a", "b", "c"), tuple("abcdef")])
def test_pick_never_repeats_and_uses_the_whole_pool(pool) -> None:
    got = [pick(pool, "t", s) for s in range(300)]
    assert all(a != b for a, b in itertools.pairwise(got))
    assert set(got) == set(pool)


@pytest.mark.parametrize("kind", list(practice.MAKERS))
def test_every_kind_is_deterministic_and_grades_its_truth(kind: str) -> None:
    for seed in range(25):
        ex = practice.exercise(kind, seed)
        assert ex == practice.exercise(kind, seed)
        assert grade(ex, _key(ex)).correct
        assert all(n.strip() for n in practice.notes(ex))
        if ex.case is not None:
            fig = practice.make_grid_figure(ex)
            assert len(fig.data[0].customdata) == ex.n_cells
            assert len(fig.to_json()) < 200_000
            if seed < 3 and ex.form == "cells":  # graded, a wrong pick too: every branch
                picked = (0, ex.n_cells - 1)
                verdict = grade(ex, ",".join(str(i) for i in picked))
                for presenter in (False, True):
                    assert_valid(practice.make_grid_figure(ex, picked, verdict, presenter))


@FAST
@given(st.sampled_from(list(practice.MAKERS)), st.integers(0, 50), st.text(max_size=300))
def test_hostile_answers_are_refused_or_canonical(kind: str, seed: int, raw: str) -> None:
    ex = practice.exercise(kind, seed)
    try:
        key = parse_answer(ex, raw)
    except AnswerError as e:
        assert raw.strip()[:20] not in str(e) or not raw.strip() or len(raw.strip()) < 3
        return
    assert parse_answer(ex, key) == key
    grade(ex, key)


def test_long_answers_are_refused() -> None:
    ex = practice.exercise("cells", 0)
    with pytest.raises(AnswerError):
        parse_answer(ex, "1," * 2000)


def test_tally_groups_and_labels_answers() -> None:
    ex = practice.exercise("choose", 3)
    right = ex.truth[0]
    wrong = next(k for k, _ in ex.options if k != right)
    rows = practice.tally(ex, {right: 3, wrong: 5, "<b>bogus</b>": 9})
    assert [(r.count, r.correct) for r in rows] == [(5, False), (3, True)]
    ex = practice.exercise("cells", 0)
    rows = practice.tally(ex, {",".join(ex.truth): 2, "": 1, "999999": 4})
    assert sum(r.count for r in rows) == 3 and rows[0].label == "all right"
    for revealed in (False, True):
        assert_valid(practice.make_tally_figure(rows, revealed, presenter=revealed))
