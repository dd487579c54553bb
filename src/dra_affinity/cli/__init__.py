"""``dra-affinity``: a thin command-line shell over the library.

One module per group of commands; importing them registers each command on
:data:`main`, the click group (the console script's entry point).
"""

from __future__ import annotations

from dra_affinity.bench.scale import BENCH_SCALE_ENV

from . import authoring, bench, cluster, scenarios
from ._base import EXIT_EXPECTATION, EXIT_INPUT, EXIT_OK, main

__all__ = ["BENCH_SCALE_ENV", "EXIT_EXPECTATION", "EXIT_INPUT", "EXIT_OK", "authoring", "bench",
           "cluster", "main", "scenarios"]
