"""The size factor that scales a benchmark down, read from the environment.

Documentation and CI run the documented large benchmark commands (``dra-affinity
bench``, ``benchmarks/soak.py``) at a fraction of their size; each command says on
stderr what it shrank."""

from __future__ import annotations

import os

#: Environment variable that scales a bench down (nodes, attempts, scaling cells, arrivals).
BENCH_SCALE_ENV = "DRA_AFFINITY_BENCH_SCALE"


def bench_scale() -> float | None:
    """The factor from :data:`BENCH_SCALE_ENV`, or None when it is unset or empty.

    Raises ValueError, with a message naming the variable, unless it is a number
    greater than 0 and at most 1."""
    raw = os.environ.get(BENCH_SCALE_ENV, "").strip()
    if not raw:
        return None
    try:
        scale = float(raw)
    except ValueError:
        scale = -1.0
    if not 0.0 < scale <= 1.0:
        raise ValueError(f"environment variable {BENCH_SCALE_ENV}={raw!r}: "
                         "must be a number greater than 0 and at most 1")
    return scale


def scaled(n: int, scale: float | None) -> int:
    """``n`` shrunk by ``scale`` (at least 1), or ``n`` when there is no factor."""
    return n if scale is None else max(1, round(n * scale))
