"""Throughput benchmark: fill a generated cluster from empty to ``fill`` of its slots.

Only scheduling decisions are timed (PreFilter through Bind in the scheduler);
creating the pods and claims through the API server is not. Each variant runs
in its own process so its peak memory (max RSS) is its own. The two variants
of one comparison run in lockstep: their processes take turns, a chunk of
attempts at a time, so load from elsewhere on the machine, which comes and goes
over seconds, falls on both alike instead of on whichever ran at the time.
"""

from __future__ import annotations

import gc
import math
import multiprocessing as mp
import resource
import sys
import time
import tracemalloc
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.progress import PhaseReport
from dra_affinity.scheduler.gctune import tuned_gc
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import (
    Arrival,
    WorkloadSpec,
    device_class,
    pod_objects,
    slices,
    stream,
)
from dra_affinity.structured.model import Result

#: Build progress is reported about this many times per cluster (cheap, and smooth enough).
BUILD_REPORTS = 100


class CountingRecorder(Recorder):
    """Counts events by reason instead of keeping them: a benchmark schedules ~10^5 to
    10^6 pods, and a recorder that keeps every event grows with pods ever scheduled."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def event(self, obj: str, type_: str, reason: str, message: str) -> None:
        self.counts[reason] += 1


def process_cpu_seconds() -> float:
    """User plus system CPU of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def tree_cpu_seconds() -> float:
    """User plus system CPU of this process and of its children that have finished."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def build_cluster(spec: WorkloadSpec, progress: PhaseReport | None = None) -> Cluster:
    cluster = Cluster()
    assert cluster.apply(device_class()).applied
    every = max(1, spec.nodes // BUILD_REPORTS)
    for i in range(spec.nodes):
        for s in slices(spec, i):
            res = cluster.apply(s, owned=True)
            assert res.applied, res.errors
        if progress is not None and ((i + 1) % every == 0 or i + 1 == spec.nodes):
            progress("build", i + 1, spec.nodes)
    return cluster


def _percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    k = min(len(v) - 1, max(0, round(p / 100 * (len(v) - 1))))
    return v[k]


LOCKSTEP_CHUNK = 500  # attempts per turn: long enough to amortise a cold cache, short against noise


def gc_collections() -> list[int]:
    """Collections of each generation of the cyclic garbage collector so far."""
    return [g["collections"] for g in gc.get_stats()]


def run_fill(spec: WorkloadSpec, pause: Callable[[], None] | None = None,
             chunk: int = LOCKSTEP_CHUNK, progress: PhaseReport | None = None, *,
             tune_gc: bool = False) -> dict[str, Any]:
    """Run one variant in this process; returns its figures.

    ``pause``, if given, is called once the cluster is built and then after every
    ``chunk`` attempts, outside the timed region (lockstep runs hand the turn over).
    ``progress``, if given, hears ``("build", nodes built, nodes)`` while the cluster is
    built and ``("fill", slots used, target)`` every ``chunk`` attempts, also untimed.

    ``tune_gc``: tune the garbage collector as ``dra-affinity scheduler --tune-gc`` does
    (:mod:`dra_affinity.scheduler.gctune`), from the cluster's build on, and freeze what
    start-up built. The setting is the process's: the bench's own variant processes
    ask for it (``dra-affinity bench --tune-gc``, the default); other callers keep
    theirs. With the default thresholds, building the cluster and the scheduler's
    cache walks the growing heap again and again (about a third of the start-up's CPU
    at 5,000 nodes)."""
    gc.collect()
    cpu0 = process_cpu_seconds()
    with tuned_gc() if tune_gc else nullcontext():
        before = gc_collections()
        out = _fill(spec, cpu0, pause, chunk, progress, tune_gc)
        out["gcCollections"] = [n - b for n, b in zip(gc_collections(), before, strict=True)]
    return out


def _fill(spec: WorkloadSpec, cpu0: float, pause: Callable[[], None] | None, chunk: int,
          progress: PhaseReport | None, freeze: bool) -> dict[str, Any]:
    t_build = time.perf_counter()
    cluster = build_cluster(spec, progress)
    sched = Scheduler(cluster, Features(), recorder=CountingRecorder())
    sched.start()
    if freeze:
        # What start-up built lives for the whole run: out of the collector's walks.
        gc.freeze()
    build_s = time.perf_counter() - t_build
    total = spec.total_slots
    target = math.ceil(spec.fill * total)
    used = 0
    sched_time = 0.0
    filter_times = array("d")  # 8 bytes per attempt, not a float object's 32
    decile_time = [0.0] * 10
    decile_pods = [0] * 10
    attempts = placed = unschedulable = deletions = 0
    # Placements on the node of the placement before: how often a decision finds the
    # node's data still warm in the caches from the last one.
    same_node = 0
    last_node: str | None = None
    gen = stream(spec)
    ev = next(gen)
    slots_of: dict[str, int] = {}
    if pause is not None:
        pause()
    while used < target and (spec.max_pods is None or attempts < spec.max_pods):
        if isinstance(ev, Arrival):
            claim, pod = pod_objects(ev.pod, ev.value)
            cluster.apply(claim, owned=True)
            cluster.apply(pod, owned=True)
            key = f"default/{ev.pod}"
            # CPU time of this process: the decision cost, robust to other load on the machine.
            t0 = time.process_time()
            a = sched.schedule(key)
            dt = time.process_time() - t0
            attempts += 1
            sched_time += dt
            filter_times.append(sched.last_filter_seconds)
            d = min(9, int(10 * used / total))
            decile_time[d] += dt
            decile_pods[d] += 1
            ok = a.result is Result.SCHEDULED
            if ok:
                placed += 1
                used += 1
                slots_of[ev.pod] = 1
                same_node += a.node == last_node
                last_node = a.node
            else:
                unschedulable += 1
                cluster.delete("Pod", key)
                cluster.delete("ResourceClaim", f"default/{ev.pod}-nic")
            ev = gen.send(ok)
            if attempts % chunk == 0:
                if progress is not None:
                    progress("fill", min(used, target), target)
                if pause is not None:
                    pause()
        else:
            # The pod leaves and its claim with it (as the resourceclaim controller deletes a
            # generated claim): nothing of a departed pod stays in the cluster.
            cluster.delete("Pod", f"default/{ev.pod}")
            cluster.delete("ResourceClaim", f"default/{ev.pod}-nic")
            used -= slots_of.pop(ev.pod, 0)
            deletions += 1
            ev = gen.send(None)
        if unschedulable > 1000 and unschedulable > placed:
            break  # the workload cannot fill further (should not happen at the default fill)
    if progress is not None:
        progress("fill", target, target)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    metrics = sched.metrics.values()
    cpu = process_cpu_seconds() - cpu0
    return {
        "podsPerSecond": round(attempts / sched_time, 1) if sched_time else 0.0,
        "filterP50Ms": round(1000 * _percentile(filter_times, 50), 4),
        "filterP99Ms": round(1000 * _percentile(filter_times, 99), 4),
        "peakMemoryMB": round(rss_kb / 1024, 1),
        "fillDeciles": [
            {"fill": round((i + 1) / 10, 1),
             "podsPerSecond": round(decile_pods[i] / decile_time[i], 1) if decile_time[i] else None,
             "pods": decile_pods[i]}
            for i in range(10) if decile_pods[i]
        ],
        "attempts": attempts,
        "scheduled": placed,
        "unschedulable": unschedulable,
        "deletions": deletions,
        "finalFill": round(used / total, 4),
        "schedulingSeconds": round(sched_time, 3),
        "setupSeconds": round(build_s, 3),
        # Everything this variant did (build, creating pods and claims through admission,
        # the store, scheduling), as CPU time: against schedulingSeconds, the harness's cost.
        "processCpuSeconds": round(cpu, 3),
        "sameNodeAsPrevious": round(same_node / placed, 3) if placed else 0.0,
        "lockedDevices": metrics["sharing_affinity_locked_devices"],
        "extractorEvaluations": metrics["sharing_affinity_extractor_evaluations_total"],
    }


def _child(spec: WorkloadSpec, q: Any, tune_gc: bool) -> None:
    try:
        q.put(("ok", run_fill(spec, tune_gc=tune_gc)))
    except BaseException as e:  # report, never hang the parent
        q.put(("error", f"{type(e).__name__}: {e}"))


def run_isolated(spec: WorkloadSpec, *, tune_gc: bool = False) -> dict[str, Any]:
    """One variant in a fresh process (own peak RSS); ``tune_gc`` as :func:`run_fill`."""
    ctx: Any = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(spec, q, tune_gc))
    p.start()
    status, payload = q.get()
    p.join()
    if status != "ok":
        raise RuntimeError(payload)
    assert isinstance(payload, dict)
    return payload


def _lockstep_child(spec: WorkloadSpec, conn: Any, chunk: int, report: bool = False,
                    tune_gc: bool = False) -> None:
    def pause() -> None:
        conn.send(("pause", None))
        conn.recv()

    def progress(phase: str, done: int, total: int) -> None:
        conn.send(("progress", (phase, done, total)))

    try:
        extra: dict[str, Any] = {"progress": progress} if report else {}
        conn.send(("ok", run_fill(spec, pause, chunk, tune_gc=tune_gc, **extra)))
    except BaseException as e:  # report, never hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def variant_label(spec: WorkloadSpec) -> str:
    """How progress names a variant."""
    return "with sharingAffinity" if spec.affinity else "baseline"


def run_lockstep(specs: list[WorkloadSpec], chunk: int = LOCKSTEP_CHUNK,
                 progress: PhaseReport | None = None, *, tune_gc: bool = False) -> list[dict[str, Any]]:
    """Run the variants in their own processes (own peak RSS), taking turns: one runs
    ``chunk`` attempts while the others wait, so all see the same machine conditions.
    Clusters are built concurrently (untimed); then turns go round until all finish.
    ``progress`` hears each variant's build and fill phases, named
    ``"<variant>: build"`` and ``"<variant>: fill"``. ``tune_gc`` as :func:`run_fill`."""
    ctx: Any = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    conns, procs = [], []
    for spec in specs:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_lockstep_child,
                        args=(spec, child, chunk, progress is not None, tune_gc))
        p.start()
        child.close()
        conns.append(parent)
        procs.append(p)
    results: list[dict[str, Any] | None] = [None] * len(specs)

    def receive(i: int) -> bool:
        """The next message of variant ``i``; True once it is done."""
        while True:
            try:
                status, payload = conns[i].recv()
            except EOFError:
                raise RuntimeError(f"benchmark process {i} exited without a result") from None
            if status != "progress":
                break
            if progress is not None:
                phase, done, total = payload
                progress(f"{variant_label(specs[i])}: {phase}", done, total)
        if status == "error":
            raise RuntimeError(payload)
        if status == "ok":
            results[i] = payload
            return True
        return False

    try:
        active = [i for i in range(len(specs)) if not receive(i)]  # set-up done
        while active:
            for i in list(active):
                conns[i].send("go")
                if receive(i):
                    active.remove(i)
    finally:
        for p in procs:
            if p.is_alive() and any(r is None for r in results):
                p.terminate()
            p.join()
    return [r for r in results if r is not None]


def lock_state_bytes(devices: int = 1000, keys: int = 2) -> int:
    """Bytes held by AffinityStates for ``devices`` locked devices (tracemalloc)."""
    from dra_affinity.structured.state import AffinityState, AffinityStatus

    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    states = {f"networking.example.com/node-{i:05d}/nic0":
              AffinityState(AffinityStatus.LOCKED,
                            tuple((f"k{j}", f"value-{i:05d}-{j}") for j in range(keys)))
              for i in range(devices)}
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(s.size_diff for s in after.compare_to(before, "filename"))
    del states
    return size


def bench(spec: WorkloadSpec, *, scaling: bool = False, isolated: bool = True,
          scaling_nodes: tuple[int, ...] = (500, 1000, 2000, 5000),
          scaling_devices: tuple[int, ...] = (4, 8, 32), scaling_pods: int = 5000,
          progress: PhaseReport | None = None, tune_gc: bool = False) -> dict[str, Any]:
    """The throughput comparison (and optionally the scaling table) as JSON-ready data.

    ``progress`` (see :mod:`dra_affinity.progress`) hears the build and fill phase of
    each lockstep variant and one ``"scaling"`` step per finished cell. ``tune_gc`` as
    :func:`run_fill`, in every process that schedules (this one too when not
    ``isolated``)."""
    cpu0 = tree_cpu_seconds()
    variants = [replace(spec, affinity=True), replace(spec, affinity=False)]
    if isolated:
        with_aff, without = run_lockstep(variants, progress=progress, tune_gc=tune_gc)
    else:
        with_aff, without = (run_fill(v, tune_gc=tune_gc) for v in variants)
    out: dict[str, Any] = {
        "workload": {**spec.as_dict(), "totalSlots": spec.total_slots,
                     "mode": f"lockstep, {LOCKSTEP_CHUNK} attempts per turn" if isolated
                     else "sequential, one process"},
        "withAffinity": with_aff,
        "withoutAffinity": without,
        "overheadRatio": round(with_aff["podsPerSecond"] / without["podsPerSecond"], 3)
        if without["podsPerSecond"] else None,
        "lockStateBytesPer1000Devices": lock_state_bytes(),
    }
    timed = with_aff["schedulingSeconds"] + without["schedulingSeconds"]
    if scaling:
        rows: list[dict[str, Any]] = []
        cells = len(scaling_nodes) * len(scaling_devices)
        for n in scaling_nodes:
            for d in scaling_devices:
                if progress is not None:
                    progress("scaling cells", len(rows), cells)
                s = replace(spec, nodes=n, devices_per_node=d, max_pods=scaling_pods, affinity=True)
                r = run_isolated(s, tune_gc=tune_gc) if isolated else run_fill(s, tune_gc=tune_gc)
                timed += r["schedulingSeconds"]
                rows.append({"nodes": n, "devicesPerNode": d, "podsPerSecond": r["podsPerSecond"],
                             "filterP50Ms": r["filterP50Ms"], "filterP99Ms": r["filterP99Ms"],
                             "pods": r["attempts"]})
        if progress is not None:
            progress("scaling cells", cells, cells)
        out["scaling"] = rows
    # The whole run's CPU (this process and the variants' processes, from the first build
    # to the report; --scaling cells included) against the timed scheduling in it.
    whole = tree_cpu_seconds() - cpu0
    out["wholeRunCpuSeconds"] = round(whole, 3)
    out["timedSchedulingSeconds"] = round(timed, 3)
    out["wholeRunCpuRatio"] = round(whole / timed, 3) if timed else None
    return out
