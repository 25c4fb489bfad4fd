"""The training lab's costs: batched vs one-model-at-a-time training, and each experiment.

Prints, on this machine, with torch on one thread as in the app:

- the default learning-rate grid (normalizations × learning rates × seeds) trained
  as one wide model and as separate torch.nn models with torch.optim.SGD, and the
  speedup (target: at least 5×); the same for the DyT experiment's grid (pre-norm
  residual MLPs, Adam);
- each experiment's cold time at its defaults (target: under 10 s), calling the
  section's run directly, in wall and CPU seconds;
- the page from the cache: a first AppTest run of /training?exp=<slug> and a rerun
  of the same session (target: the rerun ≤ 0.1 s);
- Weight Standardization's own cost (`exp=ws`): milliseconds per training step at
  batch 1 of its GroupNorm runs with and without WS (the standardization of the filters
  in every forward pass), and the share of the experiment each batch size takes;
- the BatchNorm lab's trained sections that live outside the training lab (Batch
  Renormalization, `/batchnorm?sim=renorm`): cold time, first page run, cached rerun
  (target: the rerun ≤ 0.1 s);
- /residual's runs, per placement (Peri-LN and DeepNorm beside pre/post/none): the
  init sweep and the training run at their defaults and at their knobs' maxima, and
  the page's rerun from the cache (target ≤ 0.1 s).

    python -m benchmarks.training [--no-app] [--no-residual] [--only lr,batch]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

from normviz.sections import no_progress
from normviz.training import SECTIONS, dyt_lr, lr
from normviz.training.common import Setup
from normviz.training.data import digits
from normviz.training.train import Grid, train, train_loop
from normviz.training.wide import Variant

COLD_TARGET = 10.0
RERUN_TARGET = 0.1


def default_lr_grid() -> Grid:
    """The learning-rate experiment's grid at its defaults."""
    knobs = lr.SECTION.defaults()
    setup = Setup()
    variants = tuple(
        Variant(n, r, s)
        for n in knobs["tol_norms"]
        for r in lr.LRS
        for s in setup.seeds(knobs["runs"])
    )
    return Grid(
        lr.NETS[knobs["tol_net"]], variants, batch=32, samples=setup.samples(knobs["tol_epochs"])
    )


def default_dyt_grid() -> Grid:
    """The DyT experiment's grid at its defaults (norms × learning rates × seeds, Adam)."""
    knobs, setup = dyt_lr.SECTION.defaults(), Setup()
    variants = tuple(
        Variant(n, r, s)
        for n in dyt_lr.RES_NORMS
        for r in dyt_lr.LRS
        for s in setup.seeds(knobs["runs"])
    )
    samples = setup.samples(knobs["dy_epochs"])
    return Grid(dyt_lr.NET, variants, batch=32, samples=samples, optimizer="adam")


def best(fn, repeat: int, clock=time.perf_counter) -> float:
    """The fastest of `repeat` runs of fn() (the machine is shared: noise only slows)."""
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times)


def speedup(repeat: int, name: str = "lr", grid: Grid | None = None) -> None:
    grid = grid or default_lr_grid()
    train(Grid(grid.net, grid.variants[:2], samples=64))  # warm up (imports, allocator)
    wide = best(lambda: train(grid), repeat)
    loop = best(lambda: train_loop(grid), repeat)
    print(
        f"default {name} grid: {len(grid.variants)} networks × {grid.steps} steps: "
        f"batched {wide:.2f} s, one at a time {loop:.2f} s, "
        f"speedup {loop / wide:.1f}× (target ≥ 5×; best of {repeat})"
    )


def cold_times(only: set[str]) -> None:
    for s in SECTIONS:
        if only and s.slug not in only:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        s.run(Setup(), s.defaults(), no_progress)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        flag = "ok" if dt < COLD_TARGET else "MISS"
        print(
            f"{s.slug:>11}: cold {dt:5.2f} s ({cpu:5.2f} CPU-s)  "
            f"[{flag}, target < {COLD_TARGET:g} s]"
        )


def page_times(only: set[str]) -> None:
    from benchmarks.common import app_test

    for s in SECTIONS:
        if only and s.slug not in only:
            continue
        at = app_test("training", {"exp": s.slug})
        t0 = time.perf_counter()
        at.run()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        at.run()
        again = time.perf_counter() - t0
        assert not at.exception, [e.value for e in at.exception]
        flag = "ok" if again <= RERUN_TARGET else "MISS"
        print(
            f"{s.slug:>11}: page first run {first:5.2f} s, rerun from cache {again:5.2f} s "
            f"[{flag}, target ≤ {RERUN_TARGET:g} s]"
        )


def ws_costs(repeat: int) -> None:
    """Weight Standardization's price per step, and where the experiment's time goes."""
    from normviz.training import ws

    setup = Setup()
    seeds = setup.seeds(ws.SECTION.defaults()["runs"])
    per_step = {}
    for flag in (False, True):
        grid = Grid(
            ws.NET,
            tuple(Variant("group", ws.LR, s, ws=flag) for s in seeds),
            batch=1,
            samples=300,
            optimizer="adam",
        )
        train(grid)  # warm up
        run = lambda grid=grid: train(grid)  # noqa: E731
        per_step[flag] = best(run, repeat, time.process_time) / grid.steps  # CPU: load-proof
    print(
        f"         ws: GroupNorm at batch 1, {len(seeds)} seeds: "
        f"{1e3 * per_step[False]:.2f} CPU-ms a step, with WS {1e3 * per_step[True]:.2f} "
        f"(×{per_step[True] / per_step[False]:.2f})"
    )
    samples = setup.samples(ws.SECTION.defaults()["ws_epochs"])
    steps = {b: samples // b for b in ws.SIZES}
    share = ", ".join(f"batch {b} {v / sum(steps.values()):.0%}" for b, v in steps.items())
    print(f"         ws: {sum(steps.values())} steps at the defaults ({share}, equal samples)")


LAB_TRAINED = ("renorm",)  # BatchNorm-lab sections that train networks on the digits


def lab_times(only: set[str], app: bool) -> None:
    from normviz import batchnorm as bn

    for s in bn.SECTIONS:
        if s.slug not in LAB_TRAINED or (only and s.slug not in only):
            continue
        t0 = time.perf_counter()
        s.run(bn.LabSetup(), s.defaults(), no_progress)
        print(f"{s.slug:>11}: cold {time.perf_counter() - t0:5.2f} s  (BatchNorm lab)")
        if not app:
            continue
        from benchmarks.common import app_test

        at = app_test("batchnorm", {"sim": s.slug})
        t0 = time.perf_counter()
        at.run()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        at.run()
        again = time.perf_counter() - t0
        assert not at.exception, [e.value for e in at.exception]
        flag = "ok" if again <= RERUN_TARGET else "MISS"
        print(
            f"{s.slug:>11}: page first run {first:5.2f} s, rerun from cache {again:5.2f} s "
            f"[{flag}, target ≤ {RERUN_TARGET:g} s]"
        )


def residual_costs(app: bool) -> None:
    """Seconds per placement of /residual's init sweep and training run, then the page."""
    from normviz import residual as rs
    from normviz.residual import depth, model, training

    setup = rs.Setup()
    init, train = depth.SECTION.defaults(), training.SECTION.defaults()
    largest = {
        "init": {
            **init,
            "depth": 64,
            "n_seeds": 4,
            "width": max(model.WIDTHS),
            "block": "mixer",
        },
        "training": {
            **train,
            "tr_depth": 16,
            "tr_width": max(training.TRAIN_WIDTHS),
            "tr_block": "mixer",
            "tr_steps": 100,
        },
    }
    for name, knobs in (("defaults", (init, train)), ("largest", tuple(largest.values()))):
        cfg_i = model.stack_config(setup, knobs[0])
        cfg_t = model.stack_config(setup, knobs[1], "tr_")
        seeds = tuple(range(int(knobs[0]["n_seeds"])))
        lr, steps = float(knobs[1]["lr"]), int(knobs[1]["tr_steps"])
        total = {"init": 0.0, "training": 0.0}
        for p in rs.PLACEMENTS:
            t0 = time.perf_counter()
            rs.init_profile(cfg_i, seeds, placements=(p,))
            t1 = time.perf_counter()
            rs.train_stack(cfg_t, p, lr, steps)
            t2 = time.perf_counter()
            total["init"] += t1 - t0
            total["training"] += t2 - t1
            print(
                f"residual {name:>8} {rs.PLACEMENT_LABELS[p]:>16}: init sweep {t1 - t0:5.2f} s "
                f"({len(seeds)} seeds, L = {cfg_i.depth}), training {t2 - t1:5.2f} s "
                f"(L = {cfg_t.depth}, {steps} steps)"
            )
        print(
            f"residual {name:>8} {'all':>16}: init sweep {total['init']:5.2f} s, "
            f"training {total['training']:5.2f} s"
        )
    if app:
        from benchmarks.common import app_test

        at = app_test("residual", {})
        t0 = time.perf_counter()
        at.run()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        at.run()
        again = time.perf_counter() - t0
        assert not at.exception, [e.value for e in at.exception]
        flag = "ok" if again <= 0.1 else "MISS"
        print(f"residual page: first run {first:5.2f} s, rerun {again:5.2f} s [{flag}, ≤ 0.1 s]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-app", action="store_true", help="skip the AppTest page times")
    ap.add_argument("--no-loop", action="store_true", help="skip the batched-vs-loop speedup")
    ap.add_argument("--no-residual", action="store_true", help="skip /residual's runs")
    ap.add_argument("--only", default="", help="comma list of experiment slugs")
    ap.add_argument("--repeat", type=int, default=2, help="best of this many runs")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    torch.set_num_threads(1)
    digits()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, {os.cpu_count()} cores")
    if not args.no_loop:
        speedup(args.repeat)
        if not only or "dyt" in only:
            speedup(args.repeat, "dyt", default_dyt_grid())
    cold_times(only)
    if not only or "ws" in only:
        ws_costs(args.repeat)
    if not args.no_app:
        page_times(only)
    lab_times(only, not args.no_app)
    if not args.no_residual:
        residual_costs(not args.no_app)


if __name__ == "__main__":
    main()
