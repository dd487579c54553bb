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
        [--without-affinity] [--values V] [--cache-sim]

With ``--parts decisions`` run with and ``--without-affinity``, the two decision counts
give the overhead ratio (baseline / with) as instructions, as the bench gives it as time.

Each part runs inside ``functools.reduce``, and Callgrind collects only while that C
function runs (``--toggle-collect=functools_reduce``), so the counts hold nothing else.
Valgrind starts with its instrumentation off (``--instr-atstart=no``): the imports and
whatever runs before the part's first collected call run about five times faster that
way. The child turns it on just before that call (``callgrind_control``); the counts are
unchanged, and a cache simulation starts there with empty caches.
Needs ``valgrind`` on the PATH; a run at the defaults takes a few minutes.
``DRA_AFFINITY_BENCH_SCALE=F`` shrinks the nodes and the attempts to F of theirs.

``--cache-sim`` also simulates the caches (Callgrind's ``--cache-sim``; this machine's
per-core L1 and L2, :func:`machine_caches`) and reports, per attempt, the misses and an estimate
of cycles: instructions, plus 10 per first-level miss, plus 100 per last-level miss
(the weights of Callgrind's own cycle estimate). Instruction counts alone miss what
memory costs: a path that reads data no recent cycle read pays for it in misses. The
estimate is given with and without the cyclic collector (``gc_collect_main`` and all it
calls): a collection runs when allocations cross a threshold, wherever that falls, so
over a short run whether one lands inside the decisions is luck, not their cost.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dra_affinity.bench.scale import BENCH_SCALE_ENV, bench_scale, scaled
from dra_affinity.sim.workload import WorkloadSpec

#: The workload's distinct subnets unless ``--values`` says otherwise.
WORKLOAD_VALUES = WorkloadSpec().values

PARTS = ("harness", "decisions", "setup")

#: Simulated caches for ``--cache-sim`` (size, associativity, line size) where the machine
#: does not say (:func:`machine_caches`): L1 (instructions, data) and the per-core L2 as
#: the last level, as on the machine of the figures in ``benchmarks/README.md``.
CACHES = {"I1": (32768, 8, 64), "D1": (32768, 8, 64), "LL": (524288, 8, 64)}
#: Where Linux describes the first CPU's caches.
SYSFS_CACHES = "/sys/devices/system/cpu/cpu0/cache"
#: The events of a cache simulation, in Callgrind's names.
EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
#: Where the cyclic collector runs (its inclusive cost is everything it does).
COLLECTOR = "gc_collect_main"


def machine_caches(root: str = SYSFS_CACHES) -> dict[str, tuple[int, int, int]]:
    """This machine's L1 instruction and data caches and its L2 (the last level simulated:
    Callgrind simulates two levels, and a miss in the per-core L2 is what a decision that
    reads data no recent decision read pays for), from sysfs; :data:`CACHES` for any it
    does not describe."""
    names = {("1", "Instruction"): "I1", ("1", "Data"): "D1", ("2", "Unified"): "LL"}
    found: dict[str, tuple[int, int, int]] = {}
    for index in sorted(glob.glob(os.path.join(root, "index*"))):
        try:
            name = names.get((_sysfs(index, "level"), _sysfs(index, "type")))
            size = _sysfs(index, "size")
            if name is None or not size.endswith("K"):
                continue
            found[name] = (int(size[:-1]) * 1024, int(_sysfs(index, "ways_of_associativity")),
                           int(_sysfs(index, "coherency_line_size")))
        except (OSError, ValueError):
            continue
    return {k: found.get(k, v) for k, v in CACHES.items()}


def _sysfs(index: str, name: str) -> str:
    """One attribute of a cache's sysfs directory."""
    with open(os.path.join(index, name), encoding="ascii") as f:
        return f.read().strip()


def _collected(part: str, nodes: int, pods: int, affinity: bool,
               out_file: str = "/dev/null", values: int | None = None) -> tuple[int, int]:
    """Instructions Callgrind collected while ``part`` ran, and the attempts made (the
    fill may end before ``pods``). With an ``out_file``, the caches are simulated and
    Callgrind's profile is written there."""
    sim = [] if out_file == "/dev/null" else ["--cache-sim=yes"] + [
        f"--{name}={size},{assoc},{line}" for name, (size, assoc, line) in machine_caches().items()]
    cmd = ["valgrind", "--tool=callgrind", *sim, "--instr-atstart=no", "--collect-atstart=no",
           "--toggle-collect=functools_reduce", f"--callgrind-out-file={out_file}",
           sys.executable, __file__, "--child", part, "--nodes", str(nodes), "--pods", str(pods),
           "--instrument-on-demand"]
    if not affinity:
        cmd.append("--without-affinity")
    if values is not None:
        cmd += ["--values", str(values)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # set and dict orders as in every run
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    m = re.search(r"Collected : (\d+)", out.stderr)
    lines = out.stdout.split()
    if out.returncode != 0 or m is None or not lines or not lines[-1].isdigit():
        raise SystemExit(f"callgrind_split: the {part} run failed:\n{out.stderr[-2000:]}")
    return int(m.group(1)), int(lines[-1])


def _events(profile: str) -> tuple[dict[str, int], dict[str, int]]:
    """The simulation's totals and the collector's inclusive events, from
    ``callgrind_annotate``."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", f"--show={','.join(EVENTS)}",
                          "--threshold=100", profile], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"callgrind_split: callgrind_annotate failed:\n{out.stderr[-2000:]}")
    return _parse_annotate(out.stdout)


_ROW = re.compile(r"^\s*((?:(?:[\d,]+|\.)\s+(?:\(\s*[\d.]+%\)\s+)?){" + str(len(EVENTS))
                  + r"})(\S.*)$")
_CELL = re.compile(r"([\d,]+|\.)(?:\s+\(\s*[\d.]+%\))?")


def _parse_annotate(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """(totals, the collector's inclusive events) from ``callgrind_annotate`` output
    with the columns :data:`EVENTS`. Rows of the collector's function (its own file and
    code inlined from headers) are added up."""
    totals: dict[str, int] | None = None
    collector = dict.fromkeys(EVENTS, 0)
    for line in text.splitlines():
        m = _ROW.match(line)
        if m is None:
            continue
        cells = _CELL.findall(m.group(1))
        values = dict(zip(EVENTS, (0 if c == "." else int(c.replace(",", "")) for c in cells),
                          strict=True))
        where = m.group(2)
        if where.startswith("PROGRAM TOTALS"):
            totals = values
        elif where.split(" [")[0].rsplit(":", 1)[-1] == COLLECTOR:
            for k, v in values.items():
                collector[k] += v
    if totals is None:
        raise SystemExit("callgrind_split: no totals in callgrind_annotate's output")
    return totals, collector


def cycle_estimate(ev: dict[str, int]) -> int:
    """Instructions, plus 10 per first-level miss, plus 100 per last-level miss."""
    return (ev["Ir"] + 10 * (ev["I1mr"] + ev["D1mr"] + ev["D1mw"])
            + 100 * (ev["ILmr"] + ev["DLmr"] + ev["DLmw"]))


def _simulated(part: str, nodes: int, pods: int, affinity: bool,
               values: int | None = None) -> tuple[dict[str, Any], int]:
    """Per-attempt misses and cycle estimates of ``part`` under the cache simulation."""
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "callgrind.out")
        _, attempts = _collected(part, nodes, pods, affinity, profile, values)
        totals, gc = _events(profile)
    rest = {k: totals[k] - gc[k] for k in EVENTS}

    def per(x: int) -> int:
        return round(x / attempts)

    return {
        "instructions": per(totals["Ir"]),
        "firstLevelMisses": per(totals["I1mr"] + totals["D1mr"] + totals["D1mw"]),
        "lastLevelMisses": per(totals["ILmr"] + totals["DLmr"] + totals["DLmw"]),
        "cycleEstimate": per(cycle_estimate(totals)),
        "cycleEstimateWithoutCollector": per(cycle_estimate(rest)),
        "collectorShare": round(cycle_estimate(gc) / cycle_estimate(totals), 3)
        if cycle_estimate(totals) else 0.0,
    }, attempts


def instrument_from_here(control: str = "callgrind_control", timeout: float = 120.0) -> None:
    """Turn on the instrumentation of the Callgrind run this process is in.

    ``callgrind_control`` sends the command through Valgrind's gdbserver, which Valgrind
    polls for between blocks of guest code. This process keeps running such code
    (polling ``callgrind_control``) while it waits, so the command is seen without
    interrupting a process blocked in a system call (which would need ptrace).
    ``callgrind_control`` exits 0 even when it fails; only its ``OK.`` says it worked.
    """
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([control, "--instr=on", str(os.getpid())], stdout=out,
                                stderr=subprocess.STDOUT)
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise SystemExit(f"callgrind_split: {control} did not answer in {timeout:g} s")
        out.seek(0)
        said = out.read()
    if proc.returncode != 0 or "OK." not in said:
        raise SystemExit(f"callgrind_split: could not turn the instrumentation on:\n{said}")


def _child(part: str, nodes: int, pods: int, affinity: bool, values: int | None = None,
           on_first_collect: Callable[[], None] | None = None) -> None:
    """The bench's fill, with ``part`` run inside functools.reduce (collected);
    ``on_first_collect`` runs once, just before the first collected call."""
    from dra_affinity.bench.throughput import CountingRecorder, build_cluster
    from dra_affinity.features import Features
    from dra_affinity.scheduler.fastpath import FastPaths
    from dra_affinity.scheduler.gctune import tuned_gc
    from dra_affinity.scheduler.scheduler import Scheduler
    from dra_affinity.sim.workload import Arrival, WorkloadSpec, pod_objects, stream
    from dra_affinity.structured.model import Result

    first = on_first_collect

    def run(collect: bool, f: Callable[..., Any], *args: Any) -> Any:
        nonlocal first
        if not collect:
            return f(*args)
        if first is not None:
            hook, first = first, None
            hook()
        return functools.reduce(lambda _a, _b: f(*args), (0,), None)

    def arrive(name: str, value: int) -> None:
        claim, pod = pod_objects(name, value)
        cluster.apply(claim, owned=True)
        cluster.apply(pod, owned=True)

    def leave(name: str) -> None:
        cluster.delete("Pod", f"default/{name}")
        cluster.delete("ResourceClaim", f"default/{name}-nic")

    spec = WorkloadSpec(nodes=nodes, devices_per_node=8, seed=1, affinity=affinity)
    if values is not None:
        spec = replace(spec, values=values)
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
    ap.add_argument("--values", type=int, default=None,
                    help="distinct subnets in the workload (default: the bench's, 64)")
    ap.add_argument("--cache-sim", action="store_true",
                    help="also simulate the caches and estimate cycles (slower)")
    ap.add_argument("--child", choices=PARTS, help=argparse.SUPPRESS)
    ap.add_argument("--instrument-on-demand", action="store_true", help=argparse.SUPPRESS)
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
    if args.values is not None and args.values < 1:
        ap.error("--values must be at least 1")
    if args.child:
        _child(args.child, args.nodes, args.pods, not args.without_affinity, args.values,
               instrument_from_here if args.instrument_on_demand else None)
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
    if args.cache_sim and shutil.which("callgrind_annotate") is None:
        print("callgrind_split: callgrind_annotate (part of valgrind) is not installed",
              file=sys.stderr)
        return 2
    simulated = {p: _simulated(p, args.nodes, args.pods, affinity, args.values) for p in parts} \
        if args.cache_sim else {}
    counts = {p: (s["instructions"] * n, n) for p, (s, n) in simulated.items()} \
        if args.cache_sim else {p: _collected(p, args.nodes, args.pods, affinity, values=args.values)
                                for p in parts}
    attempts = min(n for _, n in counts.values())  # the same fill in every part
    per_attempt = {p: round(c / attempts) for p, (c, _) in counts.items()}
    out: dict[str, Any] = {"nodes": args.nodes, "values": args.values or WORKLOAD_VALUES,
                           "attempts": attempts, "affinity": affinity,
                           "instructionsPerAttempt": per_attempt}
    if "harness" in per_attempt and "decisions" in per_attempt:
        out["harnessOverDecisions"] = round(per_attempt["harness"] / per_attempt["decisions"], 3)
    if simulated:
        out["cacheSimulation"] = {
            "caches": {k: {"bytes": b, "ways": w, "lineBytes": ln}
                       for k, (b, w, ln) in machine_caches().items()},
            "perAttempt": {p: s for p, (s, _) in simulated.items()}}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
