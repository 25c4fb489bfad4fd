"""Every Python snippet the app shows runs as shown (issue 24 item 11).

A snippet may name its inputs in a comment of its own ("# x: (B, T, C) = (4, 6, 8)",
"# model: the nn.Module you train"); each is executed in a fresh namespace holding
only those inputs, and what it builds is checked against torch. The first test keeps
the list complete: every place in normviz/ and ui/ that shows code must be collected here.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import torch

from normviz import LAYOUTS, METHODS, STANDARD_METHODS, contract, normalize
from normviz import axes as axes_page
from normviz.axes import code as axes_code
from normviz.choose import model_audit, zoo
from normviz.sections import no_progress

ROOT = Path(__file__).resolve().parent.parent
# the modules that hand a snippet to the page (an Extra of kind "code"); each is collected
# by a test below (axes/reshape.py's once that section is on the branch)
SNIPPET_SITES = {"normviz/axes/code.py", "normviz/choose/model_audit.py", "normviz/axes/reshape.py"}
INPUT = re.compile(r"^# (\w+): (.*)$", re.M)
SHAPE = re.compile(r"= \(([\d, ]+)\)")  # "(B, T, C) = (4, 6, 8)" -> "4, 6, 8"


def _sources() -> list[Path]:
    return [*ROOT.glob("normviz/**/*.py"), *ROOT.glob("ui/*.py"), *ROOT.glob("pages/*.py")]


def test_every_place_that_shows_code_is_collected() -> None:
    sites = {
        f.relative_to(ROOT).as_posix()
        for f in _sources()
        if re.search(r"""Extra\(\s*["']code["']""", f.read_text(encoding="utf-8"))
    }
    assert sites == {p for p in SNIPPET_SITES if (ROOT / p).exists()}
    for f in _sources():
        body = f.read_text(encoding="utf-8")
        assert "```" not in body, f"{f}: a fenced snippet that no test runs"
        for call in re.findall(r"st\.code\(([^\n]*)\)", body):
            # ui/runner.py draws the Extras collected here; other st.code calls show a
            # link or a key, which are not Python
            assert f.name == "runner.py" or "language=None" in call, (f, call)


def _axes_snippets() -> list[tuple[str, str]]:
    out = []
    for layout, lay in LAYOUTS.items():
        shape = tuple(lay.defaults[a] for a in lay.axes)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        cons = [
            contract(m, layout, shape, 2 if METHODS[m].grouped else None)
            for m in STANDARD_METHODS
        ]
        pooled = ",".join(lay.axes[1:])
        cons += [contract("custom", layout, shape, axes=pooled, centred=c) for c in (True, False)]
        for con in cons:
            extras = axes_code.extras(axes_code.verify(x, con))
            (snippet,) = [e.body for e in extras if e.kind == "code"]
            tail = "" if con.centred else " uncentred"
            out.append((f"axes {layout} {con.method}{tail}", snippet))
    return out


AXES = _axes_snippets()


def _inputs(snippet: str) -> dict[str, str]:
    return dict(INPUT.findall(snippet))


def _shape(declared: str) -> tuple[int, ...]:
    return tuple(int(v) for v in SHAPE.search(declared).group(1).split(","))  # type: ignore[union-attr]


@pytest.mark.parametrize(("label", "snippet"), AXES, ids=[a for a, _ in AXES])
def test_axes_snippets_run_and_agree_with_normalize(label: str, snippet: str) -> None:
    inputs = _inputs(snippet)
    assert set(inputs) == {"x"}, inputs
    shape = _shape(inputs["x"])
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    scope: dict[str, object] = {"x": x}  # a fresh namespace: the declared input only
    with torch.no_grad():
        exec(compile(snippet, label, "exec"), scope)
    y = scope["y"]
    assert isinstance(y, torch.Tensor) and y.shape == x.shape
    _, layout, method, *rest = label.split()
    axes = ",".join(LAYOUTS[layout].axes[1:]) if method == "custom" else None
    groups = 2 if METHODS[method].grouped else None
    want = normalize(x, method, layout, groups=groups, axes=axes, centred=not rest).output
    torch.testing.assert_close(y, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("key", list(zoo.ZOO))
def test_the_model_audit_snippets_run_as_shown(key: str) -> None:
    """Every code block of the model audit, the optimizer recipe among them, runs in a
    fresh namespace holding only what it declares (the recipe: `model`)."""
    res = model_audit.INSPECT.run(None, {"model": key}, no_progress)
    snippets = [e.body for e in model_audit.INSPECT.extras(res) if e.kind == "code"]
    recipes = 0
    for i, snippet in enumerate(snippets):
        inputs = _inputs(snippet)
        assert set(inputs) <= {"model"}, inputs
        torch.manual_seed(0)
        model = zoo.ZOO[key].build()
        scope: dict[str, object] = {"model": model} if inputs else {}  # no torch: it imports it
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(snippet, f"model audit {key} #{i}", "exec"), scope)
        if "optimizer" not in scope:
            continue
        recipes += 1  # the recipe: its two groups are the sizes its comments state
        opt = scope["optimizer"]
        assert isinstance(opt, torch.optim.AdamW)
        sizes = [int(n) for n in re.findall(r"# (\d+) tensors", snippet)]
        assert [len(g["params"]) for g in opt.param_groups] == sizes
        assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
        assert sum(sizes) == len(list(model.parameters()))
    assert recipes == 1


def test_the_groupnorm_reshape_snippets_run_as_shown() -> None:
    """/axes' GroupNorm-as-a-reshape code, for both layouts and several G: run in a fresh
    namespace with its declared x, it matches nn.GroupNorm (the oracle) and normalize()."""
    if not (ROOT / "normviz/axes/reshape.py").exists():
        assert "reshape" not in {s.slug for s in axes_page.SECTIONS}
        return  # the section is not on this branch: nothing shows this code
    from normviz.axes import reshape

    ran = 0
    for layout, shape in (("NCHW", (4, 6, 4, 4)), ("BTC", (4, 6, 8))):
        for groups in (1, 2, shape[LAYOUTS[layout].channel_axis]):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(groups))
            snippet = reshape.check(x, layout, groups).code
            inputs = _inputs(snippet)
            assert set(inputs) == {"x"} and _shape(inputs["x"]) == shape, inputs
            scope: dict[str, object] = {"x": x}
            with torch.no_grad():
                exec(compile(snippet, f"reshape {layout} G={groups}", "exec"), scope)
                C = shape[LAYOUTS[layout].channel_axis]
                gn = torch.nn.GroupNorm(groups, C, affine=False)
                want = gn(x.transpose(1, 2)).transpose(1, 2) if layout == "BTC" else gn(x)
            torch.testing.assert_close(scope["y"], want, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(scope["y_torch"], want)
            ran += 1
    assert ran == 6


# ---- code inside sentences: the train-or-eval exercise's three statements ------------------


@pytest.mark.parametrize("seed", range(80))
def test_the_train_eval_code_runs_as_its_answer_says(seed: int) -> None:
    """The exercise's statements, run in order with the usual imports: they run when the
    answer says the call runs (and for every "which statistics" question), and torch
    refuses them when it says no. A BTC input reaches a channel-first module transposed."""
    from normviz.practice import traineval

    ex = traineval.make(seed)
    if not ex.prompt.startswith("`norm = "):
        return  # the running-mean question shows no code
    statements = re.findall(r"`([^`]+)`", ex.prompt)
    shape = tuple(int(v) for v in ex.prompt.split("= (")[-1].split(")")[0].split(","))
    scope: dict[str, object] = {"x": 3 + 2 * torch.randn(shape)}
    code = "import torch\nfrom torch import nn\n" + "\n".join(statements)
    runs = ex.truth != ("no",)
    try:
        with torch.no_grad():
            exec(compile(code, f"train-eval {seed}", "exec"), scope)
    except ValueError:
        assert not runs, (ex.prompt, ex.truth)
        return
    assert runs, (ex.prompt, ex.truth)
    if "y" in scope:
        assert scope["y"].shape == shape  # type: ignore[attr-defined]


def test_the_defaults_table_constructors_build_what_it_describes() -> None:
    """/choose's "built as" column is code too: each call builds the module the row reads."""
    from torch import nn

    from normviz.text import default_module, torch_defaults_table

    table = torch_defaults_table()
    for key in STANDARD_METHODS:
        call = table.loc[METHODS[key].label, "built as"]
        built = eval(call, {"__builtins__": {}, "nn": nn})  # our own table text, not user text
        assert repr(built) == repr(default_module(key)), call
