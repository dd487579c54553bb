"""Where the whole fill's CPU goes, as machine instructions: the harness against the
decisions, counted by Valgrind, which does not move with the load on the machine.

The bench times the decisions (PreFilter to Bind) and reports the whole command's CPU
against them (``wholeRunCpuRatio``); on a shared machine both move by several per cent
from run to run. This runs the bench's fill under Callgrind once per part and counts
only that part's instructions, per attempt:

- ``harness``: what the bench does around a decision (making each pod and its claim and
  creating them through admission and the store, and the departures);
- ``decisions``: ``Scheduler.schedule``, the bench's timed region;
- ``setup``: building the cluster and starting the scheduler (once; shown per attempt).

    python benchmarks/callgrind_split.py [--nodes 200] [--pods 2000] [--parts harness,decisions]
        [--without-affinity]

With ``--parts decisions`` run with and ``--without-affinity``, the two decision counts
give the overhead ratio (baseline / with) as instructions, as the bench gives it as time.

Each part runs inside ``functools.reduce``, and Callgrind collects only while that C
function runs (``--toggle-collect=functools_reduce``), so the counts hold nothing else.
Needs ``valgrind`` on the PATH; a run at the defaults takes a few minutes.
``DRA_AFFINITY_BENCH_SCALE=F`` shrinks the nodes and the attempts to F of theirs.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from dra_affinity.bench.scale import BENCH_SCALE_ENV, bench_scale, scaled

PARTS = ("harness", "decisions", "setup")


def _collected(part: str, nodes: int, pods: int, affinity: bool) -> tuple[int, int]:
    """Instructions Callgrind collected while ``part`` ran, and the attempts made (the
    fill may end before ``pods``)."""
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           "--toggle-collect=functools_reduce", "--callgrind-out-file=/dev/null",
           sys.executable, __file__, "--child", part, "--nodes", str(nodes), "--pods", str(pods)]
    if not affinity:
        cmd.append("--without-affinity")
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # set and dict orders as in every run
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    m = re.search(r"Collected : (\d+)", out.stderr)
    lines = out.stdout.split()
    if out.returncode != 0 or m is None or not lines or not lines[-1].isdigit():
        raise SystemExit(f"callgrind_split: the {part} run failed:\n{out.stderr[-2000:]}")
    return int(m.group(1)), int(lines[-1])


def _child(part: str, nodes: int, pods: int, affinity: bool) -> None:
    """The bench's fill, with ``part`` run inside functools.reduce (collected)."""
    from dra_affinity.bench.throughput import CountingRecorder, build_cluster
    from dra_affinity.features import Features
    from dra_affinity.scheduler.fastpath import FastPaths
    from dra_affinity.scheduler.gctune import tuned_gc
    from dra_affinity.scheduler.scheduler import Scheduler
    from dra_affinity.sim.workload import Arrival, WorkloadSpec, pod_objects, stream
    from dra_affinity.structured.model import Result

    def run(collect: bool, f: Callable[..., Any], *args: Any) -> Any:
        return functools.reduce(lambda _a, _b: f(*args), (0,), None) if collect else f(*args)

    def arrive(name: str, value: int) -> None:
        claim, pod = pod_objects(name, value)
        cluster.apply(claim, owned=True)
        cluster.apply(pod, owned=True)

    def leave(name: str) -> None:
        cluster.delete("Pod", f"default/{name}")
        cluster.delete("ResourceClaim", f"default/{name}-nic")

    spec = WorkloadSpec(nodes=nodes, devices_per_node=8, seed=1, affinity=affinity)
    with tuned_gc():
        def setup() -> tuple[Any, Any]:
            cluster = build_cluster(spec)
            sched = Scheduler(cluster, Features(), fast_paths=FastPaths.all(),
                              recorder=CountingRecorder())
            sched.start()
            return cluster, sched

        cluster, sched = run(part == "setup", setup)
        harness, decisions = part == "harness", part == "decisions"
        target = math.ceil(spec.fill * spec.total_slots)
        gen = stream(spec)
        ev = next(gen)
        attempts = used = 0
        while attempts < pods and used < target:
            if isinstance(ev, Arrival):
                run(harness, arrive, ev.pod, ev.value)
                a = run(decisions, sched.schedule, f"default/{ev.pod}")
                ok = a.result is Result.SCHEDULED
                attempts += 1
                used += ok
                ev = gen.send(ok)
            else:
                run(harness, leave, ev.pod)
                used -= 1
                ev = gen.send(None)
    print(attempts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=2000, help="attempts (the fill may end first)")
    ap.add_argument("--parts", default="harness,decisions,setup",
                    help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--without-affinity", action="store_true",
                    help="the baseline variant: slices without sharingAffinity")
    ap.add_argument("--child", choices=PARTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        scale = None if args.child else bench_scale()
    except ValueError as e:
        ap.error(str(e))
    if scale is not None:
        # As for `dra-affinity bench` and the soak: documentation and CI run the documented
        # command at a fraction of its size.
        nodes, pods = scaled(args.nodes, scale), scaled(args.pods, scale)
        print(f"note: {BENCH_SCALE_ENV}={scale:g}: --nodes {args.nodes} -> {nodes}, "
              f"--pods {args.pods} -> {pods}", file=sys.stderr)
        args.nodes, args.pods = nodes, pods
    if args.nodes < 1 or args.pods < 1:
        ap.error("--nodes and --pods must be at least 1")
    if args.child:
        _child(args.child, args.nodes, args.pods, not args.without_affinity)
        return 0
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if shutil.which("valgrind") is None:
        print("callgrind_split: valgrind is not installed (it counts the instructions)",
              file=sys.stderr)
        return 2
    affinity = not args.without_affinity
    counts = {p: _collected(p, args.nodes, args.pods, affinity) for p in parts}
    attempts = min(n for _, n in counts.values())  # the same fill in every part
    per_attempt = {p: round(c / attempts) for p, (c, _) in counts.items()}
    out: dict[str, Any] = {"nodes": args.nodes, "attempts": attempts, "affinity": affinity,
                           "instructionsPerAttempt": per_attempt}
    if "harness" in per_attempt and "decisions" in per_attempt:
        out["harnessOverDecisions"] = round(per_attempt["harness"] / per_attempt["decisions"], 3)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
