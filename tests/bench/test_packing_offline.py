"""The offline reference of the packing benchmark.

Every schedule is checked by :func:`replay`, written here independently of the search:
it replays the event stream against the pod -> device assignment and fails on any broken
rule (a device over its slots, two lock values on one device at once, a pod without a
device). The checker itself is mutation-checked. Small streams are compared with a brute
force optimum over every assignment.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Sequence

import pytest

from dra_affinity.bench.packing import (
    evaluate,
    events,
    lower_bound_timeline,
    packing_report,
)
from dra_affinity.bench.packing.offline import offline_schedule
from dra_affinity.sim.workload import Arrival, Departure, WorkloadSpec

Event = Arrival | Departure

TINY = WorkloadSpec(nodes=10, devices_per_node=4, slots=4, values=8, zipf=1.1, churn=0.2,
                    fill=0.6, seed=1, max_pods=300)


def replay(evs: Sequence[Event], assignment: dict[str, int], slots: int,
           devices: int | None = None) -> list[int]:
    """Locked devices after each event; AssertionError naming the event on any violation."""
    used: dict[int, int] = {}
    lock: dict[int, int] = {}
    value_of: dict[str, int] = {}
    out: list[int] = []
    for t, ev in enumerate(evs):
        assert ev.pod in assignment, f"event {t}: pod {ev.pod} has no device"
        dev = assignment[ev.pod]
        assert dev >= 0 and (devices is None or dev < devices), \
            f"event {t}: pod {ev.pod} on device {dev}, outside the cluster"
        if isinstance(ev, Arrival):
            assert ev.pod not in value_of, f"event {t}: pod {ev.pod} arrives twice"
            assert used.get(dev, 0) < slots, \
                f"event {t}: device {dev} full ({slots} slots) when {ev.pod} arrives"
            assert lock.get(dev, ev.value) == ev.value, \
                f"event {t}: device {dev} locked to {lock.get(dev)}, {ev.pod} has {ev.value}"
            value_of[ev.pod] = ev.value
            lock[dev] = ev.value
            used[dev] = used.get(dev, 0) + 1
        else:
            assert ev.pod in value_of, f"event {t}: {ev.pod} departs without running"
            del value_of[ev.pod]
            used[dev] -= 1
            if used[dev] == 0:
                del used[dev], lock[dev]
        out.append(len(used))
    return out


def brute_force_optimum(evs: Sequence[Event], slots: int, devices: int) -> int:
    """Lowest peak over every assignment of pods to ``devices`` devices."""
    pods = [e.pod for e in evs if isinstance(e, Arrival)]
    best = None
    for combo in itertools.product(range(devices), repeat=len(pods)):
        try:
            peak = max(replay(evs, dict(zip(pods, combo, strict=True)), slots))
        except AssertionError:
            continue
        best = peak if best is None else min(best, peak)
    assert best is not None
    return best


def random_stream(rng: random.Random, pods: int, values: int) -> list[Event]:
    evs: list[Event] = []
    running: list[str] = []
    i = 0
    while i < pods:
        if running and rng.random() < 0.4:
            evs.append(Departure(running.pop(rng.randrange(len(running)))))
        else:
            evs.append(Arrival(f"p{i}", rng.randrange(values)))
            running.append(f"p{i}")
            i += 1
    return evs


# ---------------------------------------------------------------- the checker
def test_checker_rejects_each_broken_rule() -> None:
    a, b, c = Arrival("a", 0), Arrival("b", 0), Arrival("c", 1)
    assert replay([a, b, c], {"a": 0, "b": 0, "c": 1}, 2) == [1, 1, 2]
    with pytest.raises(AssertionError, match="full"):
        replay([a, b, Arrival("d", 0)], {"a": 0, "b": 0, "d": 0}, 2)
    with pytest.raises(AssertionError, match="locked to 0"):
        replay([a, c], {"a": 0, "c": 0}, 2)
    with pytest.raises(AssertionError, match="no device"):
        replay([a, b], {"a": 0}, 2)
    with pytest.raises(AssertionError, match="outside the cluster"):
        replay([a], {"a": 3}, 2, devices=2)
    with pytest.raises(AssertionError, match="without running"):
        replay([Departure("a")], {"a": 0}, 2)
    # A device changes value once drained, and not before.
    assert replay([a, Departure("a"), c], {"a": 0, "c": 0}, 2) == [1, 0, 1]


def test_checker_catches_mutations_of_a_real_schedule() -> None:
    es = events(TINY)
    sched = offline_schedule(es.events, TINY.slots, seed=1, iterations=30)
    assert max(replay(es.events, sched.assignment, TINY.slots)) == sched.devices_used
    # Move a pod onto a device that runs another value when it arrives.
    running: dict[int, int] = {}  # device -> value
    count: dict[int, int] = {}
    mutated = full = None
    for ev in es.events:
        dev = sched.assignment[ev.pod]
        if isinstance(ev, Arrival):
            if mutated is None:
                other = next((d for d, v in sorted(running.items()) if v != ev.value), None)
                if other is not None:
                    mutated = {**sched.assignment, ev.pod: other}
            if full is None:
                at_cap = next((d for d, n in sorted(count.items())
                               if n == TINY.slots and running[d] == ev.value), None)
                if at_cap is not None and at_cap != dev:
                    full = {**sched.assignment, ev.pod: at_cap}
            running[dev] = ev.value
            count[dev] = count.get(dev, 0) + 1
        else:
            count[dev] -= 1
            if count[dev] == 0:
                del count[dev], running[dev]
    assert mutated is not None and full is not None
    with pytest.raises(AssertionError, match="locked to"):
        replay(es.events, mutated, TINY.slots)
    with pytest.raises(AssertionError, match="full"):
        replay(es.events, full, TINY.slots)
    dropped = dict(sched.assignment)
    dropped.pop(next(iter(dropped)))
    with pytest.raises(AssertionError, match="no device"):
        replay(es.events, dropped, TINY.slots)


# ---------------------------------------------------------------- the search
def test_hand_made_case_reaches_the_known_optimum() -> None:
    # Two slots. p0..p2 are value 0; p0 leaves; p3 and p4 are value 1. The greedy start
    # puts p0 and p1 together, so after p0 leaves both devices stay locked to value 0 and
    # value 1 needs a third. The optimum (2) keeps p0 alone: its device drains for p3, p4.
    evs: list[Event] = [Arrival("p0", 0), Arrival("p1", 0), Arrival("p2", 0),
                        Departure("p0"), Arrival("p3", 1), Arrival("p4", 1)]
    assert brute_force_optimum(evs, 2, 3) == 2
    start = offline_schedule(evs, 2, seed=1, iterations=0)
    assert start.devices_used == 3 and start.stopped == "limit"
    found = offline_schedule(evs, 2, seed=1, iterations=100)
    assert found.devices_used == 2 and found.initial_devices == 3
    assert found.stopped == "lowerBound" and found.iterations < 100
    assert max(replay(evs, found.assignment, 2)) == 2
    assert found.assignment["p1"] == found.assignment["p2"] != found.assignment["p0"]


@pytest.mark.parametrize("case", range(12))
def test_small_streams_against_brute_force(case: int) -> None:
    rng = random.Random(case)
    evs = random_stream(rng, pods=rng.randint(4, 7), values=2)
    slots = 2
    sched = offline_schedule(evs, slots, seed=case, iterations=200)
    locked = replay(evs, sched.assignment, slots)
    assert locked == sched.locked and max(locked) == sched.devices_used
    assert sched.devices_used <= sched.initial_devices
    best = brute_force_optimum(evs, slots, sched.devices_used)
    assert sched.devices_used >= best >= max(lower_bound_timeline(evs, slots))
    # On streams this small the search finds the optimum.
    assert sched.devices_used == best


def test_schedule_is_valid_deterministic_and_above_the_bound() -> None:
    es = events(TINY)
    bound = max(lower_bound_timeline(es.events, TINY.slots))
    a = offline_schedule(es.events, TINY.slots, seed=3, iterations=150)
    b = offline_schedule(es.events, TINY.slots, seed=3, iterations=150)
    assert a == b  # same stream, seed and limit: the same schedule
    locked = replay(es.events, a.assignment, TINY.slots,
                    devices=TINY.nodes * TINY.devices_per_node)
    assert locked == a.locked
    assert bound <= a.devices_used <= a.initial_devices
    assert a.iterations <= a.iteration_limit == 150
    assert set(a.assignment) == {e.pod for e in es.events if isinstance(e, Arrival)}


def test_bad_arguments_are_refused() -> None:
    evs: list[Event] = [Arrival("a", 0)]
    with pytest.raises(ValueError, match="iterations"):
        offline_schedule(evs, 2, seed=1, iterations=-1)
    with pytest.raises(ValueError, match="slots"):
        offline_schedule(evs, 0, seed=1)
    with pytest.raises(ValueError, match="offline_iterations"):
        packing_report(seed=1, spec=TINY, parallel=False, offline_iterations=-5)
    empty = offline_schedule([], 2, seed=1)
    assert empty.devices_used == 0 and empty.assignment == {}


# ---------------------------------------------------------------- the report
def test_report_has_the_offline_reference_and_both_gaps() -> None:
    out, runs, off = evaluate(TINY, parallel=False, offline_iterations=40)
    ref = out["reference"]["offline"]
    bound = out["lowerBound"]
    assert ref["devicesUsed"] == off.devices_used >= bound
    assert ref["ratio"] == round(off.devices_used / bound, 4) >= 1.0
    assert ref["devicesAboveBound"] == off.devices_used - bound
    assert ref["iterationLimit"] == ref["iterations"] == 40
    assert ref["seed"] == TINY.seed and ref["method"] and ref["fitsCluster"] is True
    assert ref["stoppedBy"] == off.stopped == "limit"  # TINY does not reach its bound in 40
    for name, p in out["policies"].items():
        assert p["devicesAboveOffline"] == runs[name].devices_used - off.devices_used
        assert p["ratioToOffline"] == round(runs[name].devices_used / off.devices_used, 4)
    assert out["timeline"]["offline"] == [off.locked[i] for i in out["timeline"]["event"]]
    again, _, _ = evaluate(TINY, parallel=False, offline_iterations=40)
    assert json.dumps(again) == json.dumps(out)  # byte for byte
