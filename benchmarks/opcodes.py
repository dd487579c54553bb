"""Deterministic cost of sharing affinity: Python bytecodes executed per scheduling attempt.

Wall-clock ratios on a shared machine move by ±10-20 % run to run; bytecode counts do
not. This runs the bench workload with and without sharingAffinity, counts the
opcodes executed inside ``Scheduler.schedule`` per function, and prints the totals per
attempt and the functions whose counts differ most. It says where the extra work is,
not what it costs in time (memory traffic is invisible here).

    python benchmarks/opcodes.py [--nodes 200] [--pods 3000] [--top 25]

The counts are the same on every run. Two things would otherwise move them: string
hashing (set and dict iteration orders follow ``PYTHONHASHSEED``, random by default),
so the script re-executes itself with ``PYTHONHASHSEED=0``; and the Filter-duration
histogram, whose bucket search depends on the measured time, so the scheduler's clock
is replaced by one that advances a fixed 100 microseconds per reading while counting.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import sys
from types import FrameType
from typing import Any

from dra_affinity.bench.throughput import run_fill
from dra_affinity.scheduler import scheduler as scheduler_module
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.workload import WorkloadSpec

HASH_SEED = "0"


class _FixedStepClock:
    """Stands in for the ``time`` module inside the scheduler: every reading is 100 us
    after the previous one, so the duration histogram takes the same path every run."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def perf_counter(self) -> float:
        return next(self._ticks) * 1e-4


def count(spec: WorkloadSpec) -> tuple[int, collections.Counter[str]]:
    counts: collections.Counter[str] = collections.Counter()

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        elif event == "opcode":
            co = frame.f_code
            counts[f"{co.co_filename.rsplit('/', 1)[-1]}:{co.co_firstlineno}:{co.co_name}"] += 1
        return tracer

    original = Scheduler.schedule

    def traced(self: Scheduler, *a: Any, **k: Any) -> Any:
        sys.settrace(tracer)
        try:
            return original(self, *a, **k)
        finally:
            sys.settrace(None)

    real_time = scheduler_module.time
    Scheduler.schedule = traced  # type: ignore[method-assign]
    scheduler_module.time = _FixedStepClock()  # type: ignore[assignment]
    try:
        r = run_fill(spec)
    finally:
        Scheduler.schedule = original  # type: ignore[method-assign]
        scheduler_module.time = real_time
    return int(r["attempts"]), counts


def main() -> None:
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        # Hash randomisation is fixed at interpreter start-up: start again with a fixed seed.
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *sys.argv])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    base = WorkloadSpec(nodes=args.nodes, devices_per_node=8, slots=4, seed=args.seed,
                        max_pods=args.pods)
    na, a = count(WorkloadSpec(**{**base.__dict__, "affinity": True}))
    nb, b = count(WorkloadSpec(**{**base.__dict__, "affinity": False}))
    ta, tb = sum(a.values()) / na, sum(b.values()) / nb
    rows = sorted(((a[k] / na - b[k] / nb, k) for k in set(a) | set(b)), key=lambda r: (-abs(r[0]), r[1]))
    print(json.dumps({
        "attempts": {"withAffinity": na, "withoutAffinity": nb},
        "opcodesPerAttempt": {"withAffinity": round(ta, 1), "withoutAffinity": round(tb, 1)},
        "ratio": round(tb / ta, 3),
        "largestDifferences": [{"function": k, "opcodesPerAttempt": round(d, 1)}
                               for d, k in rows[: args.top]],
    }, indent=2))


if __name__ == "__main__":
    main()
