"""ui.warmup leaves its imports out of the garbage collector's full passes (gc.freeze).

A full collection holds the GIL while it walks every tracked object, so every session
of the process waits for it; the imports are most of those objects (ui/warmup.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

PROBE = """
import gc, json
import ui.warmup
print(json.dumps({"frozen": gc.get_freeze_count(), "walked": len(gc.get_objects())}))
"""


def test_a_full_collection_after_the_warmup_walks_few_objects() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    n = json.loads(out.stdout.strip().splitlines()[-1])
    assert n["frozen"] > 100_000  # torch, pandas, plotly, streamlit, the topics
    assert n["walked"] < n["frozen"] / 10  # what a full pass still walks
