"""Once per server process: import what the first optimizer step needs, off the request path.

torch's first optimizer.step() imports torch._dynamo (seconds on a small machine);
doing it in a background thread at start-up keeps that out of a student's first click.
"""

from __future__ import annotations

import importlib
import threading


def _import() -> None:
    importlib.import_module("torch._dynamo")


threading.Thread(target=_import, name="normviz-warmup", daemon=True).start()
