"""The app's limits and shared choice lists: the element cap and the ε scale."""

from __future__ import annotations

import os

# ε choices on a log scale (0 shows what ε is for).
EPS_CHOICES: tuple[float, ...] = (0.0, 1e-12, 1e-10, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
# the largest size the sidebar offers for each axis name
SIZE_LIMITS: dict[str, int] = {"B": 1024, "T": 4096, "C": 4096, "N": 256, "H": 512, "W": 512}


def max_elements() -> int:
    """The element cap (env NORMVIZ_MAX_ELEMENTS, default 2^22 ≈ 4.2 million)."""
    try:
        return max(1, int(os.environ.get("NORMVIZ_MAX_ELEMENTS", 2**22)))
    except ValueError:
        return 2**22
