"""Packing benchmark: how many devices each scoring policy locks, against a lower bound.

KEP-5981 names fragmentation ("poisoning") as its main risk: a device locked to
one affinity value strands its free slots against every other value. Alpha
places first-fit; the planned Beta scoring prefers compatibly-locked devices.
This module measures the difference on one generated workload, replaying the
*same* event stream through the scheduler once per policy (``firstfit`` and
``affinity``), and compares both with what perfect packing would need.

Event stream (:func:`events`)
    A ramp that is :func:`dra_affinity.sim.workload.stream` verbatim (Zipf
    values; after each arrival a random running pod departs with probability
    ``churn``) until the demand reaches ``fill`` of all slots; then a steady
    state that holds the demand there: while demand is at the target, a random
    running pod departs before each arrival (and ``churn`` still applies after
    it). The ramp alone only grows, so it never shows the fragmentation that
    turnover at a constant occupancy causes. The stream is recorded once as if
    every pod were placed, so both policies see exactly the same events; a
    departure of a pod a policy failed to place is a no-op for that policy.

Measures (per policy)
    ``devicesUsed``: peak number of locked devices, sampled after every event.
    ``unschedulable``: arrivals the scheduler could not place.
    ``strandedSlots``: at the end of the run, free slots on locked devices in
    excess of the rounding slack that perfect packing of the same running pods
    would leave: ``sum_v [free_v - (ceil(n_v / S) * S - n_v)]`` where ``free_v``
    is the free slots on devices locked to value v, ``n_v`` the policy's running
    pods of value v and S the slots per device. Perfect packing scores 0; every
    extra device a value holds adds S. ``strandedSlotsPeak`` is the peak over the
    run, ``freeLockedSlots`` the raw free slots on locked devices at the end.
    ``ratio``: ``devicesUsed / lowerBound``.

Lower bound (:func:`lower_bound_timeline`)
    After each event, ``sum_v ceil(d_v / S)`` with ``d_v`` the demand (running
    pods of value v had every pod been placed): the devices a perfect packer
    that may repack at every moment would lock. ``lowerBound`` is its peak. No
    policy that only chooses where a pod lands (and never moves running pods)
    can follow it exactly: departures leave values spread over more devices than
    they need. ``reference.bestFitModel`` (a model of an idealised placement-only
    policy, no scheduler) and ``reference.clairvoyantModel`` (the same, told every
    pod's departure time) are greedy rules. ``reference.offline``
    (:mod:`dra_affinity.bench.packing.offline`) is a schedule searched with the
    whole stream known that still never moves a pod: what placement alone can
    reach. A policy's distance to it is the online gap; its distance to the bound
    is the price of never moving pods.
"""

from __future__ import annotations

import bisect
import math
import multiprocessing as mp
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dra_affinity.bench.packing.offline import DEFAULT_ITERATIONS as DEFAULT_OFFLINE_ITERATIONS
from dra_affinity.bench.packing.offline import METHOD as OFFLINE_METHOD
from dra_affinity.bench.packing.offline import OfflineSchedule, offline_schedule
from dra_affinity.bench.throughput import build_cluster
from dra_affinity.features import Features
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.workload import (
    DRIVER,
    SLOTS,
    Arrival,
    Departure,
    WorkloadSpec,
    node_name,
    pod_objects,
    stream,
    zipf_weights,
)
from dra_affinity.structured.model import Result
from dra_affinity.structured.state import AffinityKeys, AffinityStatus

Event = Arrival | Departure

POLICIES = ("firstfit", "affinity")

#: The default workload: small enough that both policies run in well under a minute, large
#: enough (200 devices, 32 Zipf values, 75 % occupancy) that first-fit fragments.
DEFAULT_SPEC = WorkloadSpec(nodes=50, devices_per_node=4, slots=8, values=32, zipf=1.1,
                            churn=0.2, fill=0.75, seed=1, max_pods=3000)

#: Points kept in the JSON timeline (the plots use every event).
TIMELINE_POINTS = 200


# ====================================================================== event stream
@dataclass(frozen=True)
class EventStream:
    """A recorded event stream and where its steady state starts."""

    events: list[Event]
    arrivals: int
    target: int  # demand (pods) the steady state holds
    steady_from: int | None  # index of the first steady-state event; None if never reached


def default_arrivals(spec: WorkloadSpec) -> int:
    """Arrivals when ``spec.max_pods`` is unset: three times the steady-state population,
    so the ramp is followed by roughly two turnovers of the running pods."""
    return 3 * max(1, int(spec.fill * spec.total_slots))


def events(spec: WorkloadSpec, arrivals: int | None = None) -> EventStream:
    """Record the event stream described in the module docstring.

    ``arrivals`` defaults to ``spec.max_pods`` (the cap on scheduling attempts),
    else :func:`default_arrivals`. Deterministic in ``spec.seed``.
    """
    total = arrivals if arrivals is not None else (
        spec.max_pods if spec.max_pods is not None else default_arrivals(spec))
    target = max(1, int(spec.fill * spec.total_slots))
    out: list[Event] = []
    running: list[str] = []
    pos: dict[str, int] = {}

    def add(name: str) -> None:
        pos[name] = len(running)
        running.append(name)

    def drop(name: str) -> None:
        i = pos.pop(name)
        last = running.pop()
        if last != name:
            running[i] = last
            pos[last] = i

    # Ramp: the workload's own stream, every arrival reported as placed.
    n = 0
    gen = stream(spec)
    ev = next(gen)
    while True:
        if isinstance(ev, Arrival):
            if n >= total or len(running) >= target:
                break
            out.append(ev)
            add(ev.pod)
            n += 1
            ev = gen.send(True)
        else:
            out.append(ev)
            drop(ev.pod)
            ev = gen.send(None)
    gen.close()
    if n >= total:
        return EventStream(out, n, target, None)

    # Steady state: hold the demand at the target with the same value distribution.
    steady_from = len(out)
    rng = random.Random(spec.seed * 1_000_003 + 17)
    cum: list[float] = []
    acc = 0.0
    for w in zipf_weights(spec.values, spec.zipf):
        acc += w
        cum.append(acc)

    def depart() -> None:
        name = running[rng.randrange(len(running))]
        drop(name)
        out.append(Departure(name))

    while n < total:
        if len(running) >= target:
            depart()
        value = min(bisect.bisect_left(cum, rng.random()), spec.values - 1)
        name = f"pod-{n:07d}"
        n += 1
        out.append(Arrival(name, value))
        add(name)
        if rng.random() < spec.churn:
            depart()
    return EventStream(out, n, target, steady_from)


def lower_bound_timeline(evs: Iterable[Event], slots: int) -> list[int]:
    """Devices perfect packing needs after each event: ``sum_v ceil(demand_v / slots)``.

    Demand counts every arrival as running until its departure (the policy-free
    view: what the workload asks for, not what a policy managed to place).
    """
    count: Counter[int] = Counter()
    value_of: dict[str, int] = {}
    need = 0
    out: list[int] = []
    for ev in evs:
        if isinstance(ev, Arrival):
            v = ev.value
            value_of[ev.pod] = v
        else:
            v = value_of.pop(ev.pod)
        need -= math.ceil(count[v] / slots)
        count[v] += 1 if isinstance(ev, Arrival) else -1
        need += math.ceil(count[v] / slots)
        out.append(need)
    return out


# ====================================================================== one policy
@dataclass
class PolicyRun:
    """What one policy did on the stream (plain data: crosses process boundaries)."""

    scoring: str
    devices_used: int  # peak locked devices
    unschedulable: int
    stranded_end: int
    stranded_peak: int
    free_locked_end: int
    devices_at_end: int
    cpu_seconds: float  # this process's CPU time: robust to other load on the machine
    locked: list[int] = field(default_factory=list)  # locked devices after each event
    # Final per-device view: lock value (None = clean) and slots in use, [node][device].
    lock_map: list[list[tuple[int | None, int]]] = field(default_factory=list)
    # Final scheduler state, for invariant checks: device -> keys of each share, and locks.
    shares: dict[str, list[AffinityKeys | None]] = field(default_factory=dict)
    locks: dict[str, AffinityKeys | None] = field(default_factory=dict)


def _slack(n: int, slots: int) -> int:
    """Free slots perfect packing leaves for ``n`` pods of one value."""
    return math.ceil(n / slots) * slots - n


def _used(consumed: Any) -> int:
    return int(consumed.get(SLOTS, 0))


def run_policy(spec: WorkloadSpec, evs: Sequence[Event], scoring: str) -> PolicyRun:
    """Replay ``evs`` through a fresh cluster and scheduler with ``scoring``."""
    t0 = time.process_time()
    cluster = build_cluster(spec)
    sched = Scheduler(cluster, Features(), scoring=scoring)
    sched.start()
    state = sched.state
    slots = spec.slots
    placed: dict[str, int] = {}  # running pod -> value
    per_value: Counter[int] = Counter()
    slack = 0  # sum over values of _slack(per_value[v])
    unschedulable = 0
    locked_series: list[int] = []
    stranded_peak = 0
    stranded = free_locked = 0

    def remove(pod: str) -> None:
        cluster.delete("Pod", f"default/{pod}")
        cluster.delete("ResourceClaim", f"default/{pod}-nic")

    for ev in evs:
        if isinstance(ev, Arrival):
            claim, pod = pod_objects(ev.pod, ev.value)
            cluster.apply(claim, owned=True)
            cluster.apply(pod, owned=True)
            attempt = sched.schedule(f"default/{ev.pod}")
            if attempt.result is Result.SCHEDULED:
                placed[ev.pod] = ev.value
                v, delta = ev.value, 1
            else:
                unschedulable += 1
                remove(ev.pod)
                v, delta = ev.value, 0
        else:
            if ev.pod not in placed:
                v, delta = -1, 0  # this policy never placed it
            else:
                v, delta = placed.pop(ev.pod), -1
                remove(ev.pod)
        if delta:
            slack -= _slack(per_value[v], slots)
            per_value[v] += delta
            slack += _slack(per_value[v], slots)
        # Measured from the scheduler's own state after every event.
        locked = 0
        free_locked = 0
        for dev, st in state.affinity_states.items():
            if st.status is AffinityStatus.LOCKED:
                locked += 1
                free_locked += slots - _used(state.consumed(dev))
        stranded = free_locked - slack
        stranded_peak = max(stranded_peak, stranded)
        locked_series.append(locked)

    lock_map: list[list[tuple[int | None, int]]] = []
    for i in range(spec.nodes):
        row: list[tuple[int | None, int]] = []
        for d in range(spec.devices_per_node):
            dev = f"{DRIVER}/{node_name(i)}/nic{d}"
            st = state.affinity(dev)
            value = None
            if st.status is AffinityStatus.LOCKED:
                value = int(st.lock_dict()["subnet"].removeprefix("subnet-"))
            row.append((value, _used(state.consumed(dev))))
        lock_map.append(row)
    shares = {dev: [s.keys for s in state.shares(dev)] for dev in state.devices()}
    locks = {dev: st.locked_affinity for dev, st in state.affinity_states.items()}
    sched.stop()
    return PolicyRun(
        scoring=scoring,
        devices_used=max(locked_series, default=0),
        unschedulable=unschedulable,
        stranded_end=stranded,
        stranded_peak=stranded_peak,
        free_locked_end=free_locked,
        devices_at_end=locked_series[-1] if locked_series else 0,
        cpu_seconds=time.process_time() - t0,
        locked=locked_series,
        lock_map=lock_map,
        shares=shares,
        locks=locks,
    )


def best_fit_model(spec: WorkloadSpec, evs: Sequence[Event]) -> tuple[int, int]:
    """(peak locked devices, unschedulable) of an idealised placement-only policy.

    A plain model, not the scheduler: each pod goes to the *fullest* device
    locked to its value with a free slot (over the whole cluster), else to the
    first clean device. It never moves running pods, so what it leaves between
    itself and the lower bound is the cost of departures, not of scoring.
    """
    return _placement_model(spec, evs, lambda m, i, departs: -m.used[i])


def clairvoyant_model(spec: WorkloadSpec, evs: Sequence[Event]) -> tuple[int, int]:
    """(peak locked devices, unschedulable) of a placement-only policy that knows the future.

    A plain model, not the scheduler, and not something a scheduler could run: it is
    told when every pod will depart. Each pod goes to the device locked to its value
    with a free slot whose release it delays least (the device's latest departure
    already at or after this pod's, else the smallest extension), fullest first on
    ties; else to the first clean device. It still never moves running pods. Where it
    lands between the lower bound and the best-fit model says how much of the gap is
    information about lifetimes rather than scoring.
    """
    return _placement_model(
        spec, evs, lambda m, i, departs: (max(0, departs - m.latest[i]), -m.used[i]))


@dataclass
class _Devices:
    lock: list[int | None]
    used: list[int]
    latest: list[int]  # latest departure among each device's running pods


def _placement_model(spec: WorkloadSpec, evs: Sequence[Event],
                     rank: Callable[[_Devices, int, int], Any]) -> tuple[int, int]:
    """Replay ``evs`` on a model cluster: each pod goes to the compatibly-locked device
    with a free slot that ``rank(devices, i, departure)`` puts lowest (first on ties),
    else the first clean device. Returns (peak locked devices, unschedulable)."""
    never = len(evs)  # departure "time" of pods still running at the end
    departs: dict[str, int] = {}
    for t, ev in enumerate(evs):
        if not isinstance(ev, Arrival):
            departs[ev.pod] = t
    n_dev = spec.nodes * spec.devices_per_node
    m = _Devices([None] * n_dev, [0] * n_dev, [0] * n_dev)
    where: dict[str, int] = {}
    locked = peak = unschedulable = 0
    for ev in evs:
        if isinstance(ev, Arrival):
            d = departs.get(ev.pod, never)
            best, best_key = -1, None
            for i in range(n_dev):
                if m.lock[i] == ev.value and m.used[i] < spec.slots:
                    key = rank(m, i, d)
                    if best < 0 or key < best_key:
                        best, best_key = i, key
            if best < 0:
                best = next((i for i in range(n_dev) if m.lock[i] is None), -1)
            if best < 0:
                unschedulable += 1
            else:
                if m.lock[best] is None:
                    locked += 1
                    m.lock[best] = ev.value
                    m.latest[best] = 0
                m.used[best] += 1
                m.latest[best] = max(m.latest[best], d)
                where[ev.pod] = best
        elif ev.pod in where:
            i = where.pop(ev.pod)
            m.used[i] -= 1
            if m.used[i] == 0:
                m.lock[i] = None
                locked -= 1
        peak = max(peak, locked)
    return peak, unschedulable


# ====================================================================== report
def _run_all(spec: WorkloadSpec, evs: list[Event], parallel: bool, offline_iterations: int
             ) -> tuple[dict[str, PolicyRun], OfflineSchedule]:
    """Both policies and the offline search; in parallel, the search (the longest) goes
    first so the two policies share the other worker."""
    if parallel and sys.platform.startswith("linux"):
        with ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("fork")) as pool:
            off = pool.submit(offline_schedule, evs, spec.slots, seed=spec.seed,
                              iterations=offline_iterations)
            futures = {p: pool.submit(run_policy, spec, evs, p) for p in POLICIES}
            return {p: f.result() for p, f in futures.items()}, off.result()
    runs = {p: run_policy(spec, evs, p) for p in POLICIES}
    return runs, offline_schedule(evs, spec.slots, seed=spec.seed, iterations=offline_iterations)


def _sample(series: Sequence[int], idx: Sequence[int]) -> list[int]:
    return [series[i] for i in idx]


def packing_report(seed: int, plots: str | None = None, spec: WorkloadSpec | None = None,
                   *, parallel: bool = True,
                   offline_iterations: int = DEFAULT_OFFLINE_ITERATIONS) -> dict[str, Any]:
    """Run both policies on one recorded stream; figures as JSON-ready data.

    ``seed`` overrides ``spec.seed`` (the CLI passes only a seed). ``parallel``
    runs the two policies in two forked processes (they share nothing), which
    halves the wall time of the default workload on a multi-core machine.
    ``offline_iterations`` caps the offline reference's search (the effort knob: the
    default takes about 20 s of CPU on the default workload; 0 keeps its greedy start).
    With ``plots`` set, writes the PNGs listed under ``plots`` in the result into that
    folder.
    """
    if offline_iterations < 0:
        raise ValueError(f"offline_iterations must be >= 0, got {offline_iterations}")
    out, _runs, _off = evaluate(replace(spec or DEFAULT_SPEC, seed=seed), plots,
                                parallel=parallel, offline_iterations=offline_iterations)
    return out


def evaluate(spec: WorkloadSpec, plots: str | None = None, *, parallel: bool = True,
             offline_iterations: int = DEFAULT_OFFLINE_ITERATIONS
             ) -> tuple[dict[str, Any], dict[str, PolicyRun], OfflineSchedule]:
    """:func:`packing_report` for exactly ``spec``, also returning each policy's run
    (final scheduler state included) and the offline schedule, so tests can check
    invariants on them."""
    es = events(spec)
    bound_series = lower_bound_timeline(es.events, spec.slots)
    bound = max(bound_series, default=0)
    runs, off = _run_all(spec, es.events, parallel, offline_iterations)
    bf_peak, bf_unsched = best_fit_model(spec, es.events)
    cv_peak, cv_unsched = clairvoyant_model(spec, es.events)

    def ratio(devices: int) -> float:
        return round(devices / bound, 4) if bound else 0.0

    policies = {
        name: {
            "devicesUsed": r.devices_used,
            "unschedulable": r.unschedulable,
            "strandedSlots": r.stranded_end,
            "ratio": ratio(r.devices_used),
            "strandedSlotsPeak": r.stranded_peak,
            "freeLockedSlots": r.free_locked_end,
            "devicesAtEnd": r.devices_at_end,
            "devicesAboveOffline": r.devices_used - off.devices_used,
            "ratioToOffline": (round(r.devices_used / off.devices_used, 4)
                               if off.devices_used else 0.0),
        }
        for name, r in runs.items()
    }
    n = len(es.events)
    step = max(1, math.ceil(n / TIMELINE_POINTS))
    idx = [*range(0, n, step), *([n - 1] if n and (n - 1) % step else [])]
    out: dict[str, Any] = {
        "lowerBound": bound,
        "policies": policies,
        "workload": {
            "nodes": spec.nodes, "devicesPerNode": spec.devices_per_node, "slots": spec.slots,
            "values": spec.values, "zipf": spec.zipf, "churn": spec.churn, "fill": spec.fill,
            "seed": spec.seed, "arrivals": es.arrivals, "events": n,
            "targetPods": es.target, "steadyStateFromEvent": es.steady_from,
            "totalDevices": spec.nodes * spec.devices_per_node, "totalSlots": spec.total_slots,
        },
        "lowerBoundAtEnd": bound_series[-1] if bound_series else 0,
        "reference": {"bestFitModel": {"devicesUsed": bf_peak, "ratio": ratio(bf_peak),
                                       "unschedulable": bf_unsched},
                      "clairvoyantModel": {"devicesUsed": cv_peak, "ratio": ratio(cv_peak),
                                           "unschedulable": cv_unsched},
                      "offline": {
                          "devicesUsed": off.devices_used,
                          "ratio": ratio(off.devices_used),
                          "devicesAboveBound": off.devices_used - bound,
                          "fitsCluster": off.devices_used <= spec.nodes * spec.devices_per_node,
                          "method": OFFLINE_METHOD,
                          "seed": off.seed,
                          "iterations": off.iterations,
                          "iterationLimit": off.iteration_limit,
                          "acceptedSteps": off.accepted,
                          "stoppedBy": off.stopped,
                          "startDevices": off.initial_devices,
                      }},
        "timeline": {
            "event": idx,
            "lowerBound": _sample(bound_series, idx),
            **{name: _sample(r.locked, idx) for name, r in runs.items()},
            "offline": _sample(off.locked, idx),
        },
    }
    if plots is not None:
        from dra_affinity.bench.packing.plots import write_plots

        out["plots"] = write_plots(Path(plots), spec, es, bound_series, runs, off)
    return out, runs, off
