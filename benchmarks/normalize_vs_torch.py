"""normalize() (statistics included) against the torch.nn call a user would write.

Prints, per layout and method, the best-of-N time of each on a float32 tensor of
2^24 elements and their ratio (budget: 1.3). For (B, T, C) the torch side
includes the transposes that channel-first modules need. Run:

    python -m benchmarks.normalize_vs_torch [--repeat 7] [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import torch

import normviz
from normviz import STANDARD_METHODS
from normviz.axes.code import torch_code

SHAPES = {"BTC": (64, 256, 1024), "NCHW": (16, 64, 128, 128)}  # 2^24 elements each
GROUPS = 8


def torch_call(
    method: str, layout: str, shape: tuple[int, ...]
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The module call a user would write, from the registry's torch reference."""
    con = normviz.contract(method, layout, shape, groups=GROUPS if method == "group" else None)
    code = torch_code(con)
    scope: dict[str, object] = {}
    exec(compile(code.replace("y = ", "def call(x):\n    return "), "<bench>", "exec"), scope)
    return scope["call"]  # type: ignore[return-value]


def best(f: Callable[[], object], repeat: int) -> float:
    f()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, best of {args.repeat}")
    print(f"{'layout':7} {'method':9} {'torch ms':>9} {'normviz ms':>11} {'ratio':>6}")
    worst = 0.0
    for layout, shape in SHAPES.items():
        x = torch.randn(shape)
        for method in STANDARD_METHODS:
            g = GROUPS if method == "group" else None
            call = torch_call(method, layout, shape)
            ours = partial(normviz.normalize, x, method, layout, groups=g)
            with torch.no_grad():
                t_torch = best(partial(call, x), args.repeat)
                t_ours = best(ours, args.repeat)
            ratio = t_ours / t_torch
            worst = max(worst, ratio)
            print(f"{layout:7} {method:9} {t_torch * 1e3:9.1f} {t_ours * 1e3:11.1f} {ratio:6.2f}")
    print(f"worst ratio {worst:.2f} (budget 1.30)")


if __name__ == "__main__":
    main()
