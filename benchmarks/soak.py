"""Soak: scheduling attempts at steady occupancy, with the process's memory sampled.

A long-running scheduler must not hold anything that grows with pods ever scheduled:
its memory follows the pods alive. This fills a generated cluster (the throughput
bench's workload: one-slot pods over Zipf-distributed subnets, sharingAffinity
published) to an occupancy, then holds it there: before each arrival a random running
pod leaves (pod and claim deleted), so arrivals and departures balance. Every
``--sample-every`` attempts it records the resident set size (RSS, from
/proc/self/statm: current, not peak) and fits a line through the samples of the steady
phase after a warm-up (the first fifth). Pass criterion: the fitted growth over the
steady phase is at most ``--max-growth-mb``; the output says PASS or FAIL.

At the end it reports the sizes of the structures that could grow (the store's
objects, the scheduler's per-claim records and caches, the allocated state's change
log) next to the live pods, so a slope names its source.

    python benchmarks/soak.py --attempts 1000000 --output out/soak.json
    python benchmarks/soak.py --attempts 20000          # a short run (the slow test's)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from bisect import bisect_left
from contextlib import ExitStack
from itertools import accumulate
from pathlib import Path
from typing import Any

from dra_affinity.bench.scale import BENCH_SCALE_ENV, bench_scale, scaled
from dra_affinity.bench.throughput import CountingRecorder, build_cluster, process_cpu_seconds
from dra_affinity.features import Features
from dra_affinity.scheduler.gctune import tuned_gc
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.workload import WorkloadSpec, pod_objects, zipf_weights
from dra_affinity.structured.model import Result

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """Current resident set size of this process in MB (Linux; 0.0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def fit_slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of (x, y) points; 0.0 for fewer than two distinct x."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def soak(nodes: int = 500, devices_per_node: int = 8, slots: int = 4, occupancy: float = 0.7,
         attempts: int = 1_000_000, sample_every: int | None = None, seed: int = 1,
         max_growth_mb: float = 16.0, progress: bool = False,
         trace: Path | None = None) -> dict[str, Any]:
    """Run the soak in this process; returns the report (see the module docstring).

    ``trace``, if given, gets one line per sample as it is taken (``attempts rssMB``), so a
    long run can be followed, and read if it is stopped before its report."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    spec = WorkloadSpec(nodes=nodes, devices_per_node=devices_per_node, slots=slots, seed=seed)
    every = sample_every or max(1, attempts // 100)
    cpu0 = process_cpu_seconds()
    cluster = build_cluster(spec)
    recorder = CountingRecorder()
    sched = Scheduler(cluster, Features(), recorder=recorder)
    sched.start()
    # The same GC tuning as the throughput bench (a long-running scheduler's).
    gc_tuning = ExitStack()
    gc_tuning.enter_context(tuned_gc())
    rng = random.Random(seed)
    cum = list(accumulate(zipf_weights(spec.values, spec.zipf)))
    target = math.floor(occupancy * spec.total_slots)
    running: list[str] = []
    n = tried = placed = unschedulable = departures = 0
    fill_attempts: int | None = None
    samples: list[tuple[int, float]] = []
    sched_s = 0.0

    def depart() -> None:
        j = rng.randrange(len(running))
        running[j], running[-1] = running[-1], running[j]
        name = running.pop()
        cluster.delete("Pod", f"default/{name}")
        cluster.delete("ResourceClaim", f"default/{name}-nic")

    while tried < attempts:
        if len(running) >= target:
            if fill_attempts is None:
                fill_attempts = tried
            depart()
            departures += 1
        value = min(bisect_left(cum, rng.random()), len(cum) - 1)
        name = f"pod-{n:07d}"
        n += 1
        claim, pod = pod_objects(name, value)
        cluster.apply(claim, owned=True)
        cluster.apply(pod, owned=True)
        t0 = time.process_time()
        a = sched.schedule(f"default/{name}")
        sched_s += time.process_time() - t0
        tried += 1
        if a.result is Result.SCHEDULED:
            placed += 1
            running.append(name)
        else:
            unschedulable += 1
            cluster.delete("Pod", f"default/{name}")
            cluster.delete("ResourceClaim", f"default/{name}-nic")
        if tried % every == 0 or tried == attempts:
            samples.append((tried, round(rss_mb(), 2)))
            if trace is not None:
                with trace.open("a") as f:
                    f.write(f"{tried} {samples[-1][1]}\n")
            if progress:
                print(f"\rsoak: {tried:,}/{attempts:,} attempts, RSS {samples[-1][1]:.1f} MB",
                      end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    gc_tuning.close()
    steady = [p for p in samples if fill_attempts is not None and p[0] > fill_attempts]
    warm = steady[len(steady) // 5:]  # the first fifth of the steady phase settles caches
    slope = fit_slope(warm)  # MB per attempt
    span = warm[-1][0] - warm[0][0] if len(warm) > 1 else 0
    growth = slope * span
    verdict = "PASS" if len(warm) >= 2 and growth <= max_growth_mb else "FAIL"
    state = sched.state
    return {
        "workload": {"nodes": nodes, "devicesPerNode": devices_per_node, "slots": slots,
                     "occupancy": occupancy, "seed": seed, "targetPods": target,
                     "attempts": attempts, "sampleEvery": every},
        "fillAttempts": fill_attempts,
        "scheduled": placed,
        "unschedulable": unschedulable,
        "departures": departures,
        "livePods": len(running),
        "rssSamplesMB": samples,
        "steadySamples": len(warm),
        "slopeMBPer100kAttempts": round(slope * 100_000, 4),
        "fittedGrowthMB": round(growth, 3),
        "maxGrowthMB": max_growth_mb,
        "verdict": verdict,
        "criterion": (f"flat RSS: the line fitted through the steady-phase samples (after the "
                      f"first fifth) grows by at most {max_growth_mb:g} MB over the "
                      f"{span:,} attempts it spans"),
        "structures": {
            "storedPods": cluster.count("Pod"),
            "storedClaims": cluster.count("ResourceClaim"),
            "schedulerRecordedClaims": len(sched.cache.recorded),
            "schedulerExtractionOutcomes": len(sched.outcomes),
            "allocatedStateChangeLog": len(state.changes),
            "allocatedStateDevices": len(state.usage),
            "events": len(recorder.events),
        },
        "schedulingSeconds": round(sched_s, 3),
        "cpuSeconds": round(process_cpu_seconds() - cpu0, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--devices-per-node", type=int, default=8)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--occupancy", type=float, default=0.7)
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--sample-every", type=int, default=None,
                    help="attempts between RSS samples (default: attempts / 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-growth-mb", type=float, default=16.0)
    ap.add_argument("--output", type=Path, default=None, help="also write the JSON report here")
    ap.add_argument("--trace", type=Path, default=None,
                    help="append each sample to this file as it is taken ('attempts rssMB')")
    args = ap.parse_args(argv)
    try:
        scale = bench_scale()
    except ValueError as e:
        ap.error(str(e))
    if scale is not None:
        # As for `dra-affinity bench`: documentation and CI run the documented long command
        # at a fraction of its size: fewer nodes, fewer attempts, samples closer together.
        attempts = scaled(args.attempts, scale)
        every = None if args.sample_every is None else scaled(args.sample_every, scale)
        nodes = scaled(args.nodes, scale)
        print(f"note: {BENCH_SCALE_ENV}={scale:g}: --nodes {args.nodes} -> {nodes}, "
              f"--attempts {args.attempts} -> {attempts}"
              + (f", --sample-every {args.sample_every} -> {every}" if every is not None else ""),
              file=sys.stderr)
        args.nodes, args.attempts, args.sample_every = nodes, attempts, every
    for name in ("nodes", "devices_per_node", "slots", "attempts"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.sample_every is not None and args.sample_every < 1:
        ap.error("--sample-every must be at least 1")
    if not 0.0 < args.occupancy < 1.0:
        ap.error("--occupancy must be between 0 and 1 (exclusive)")
    for path in (args.trace, args.output):
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if path is args.trace:
                    path.write_text("")  # a fresh trace per run
            except OSError as e:
                ap.error(f"{path}: cannot be written: {e.strerror or e}")
    report = soak(args.nodes, args.devices_per_node, args.slots, args.occupancy, args.attempts,
                  args.sample_every, args.seed, args.max_growth_mb, progress=sys.stderr.isatty(),
                  trace=args.trace)
    text = json.dumps(report, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n")
    print(text)
    print(f"{report['verdict']}: {report['criterion']}; fitted growth "
          f"{report['fittedGrowthMB']} MB ({report['slopeMBPer100kAttempts']} MB per 100k attempts)",
          file=sys.stderr)
    return 0 if report["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
