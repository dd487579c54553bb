"""No structure in the scheduler grows with the number of pods ever scheduled.

A long-running scheduler sees pods come and go; what it keeps must be bounded by what
is alive (devices, live claims) or by a fixed cap. Each test schedules and deletes
many more pods than any bound allows, with small caps patched in, and checks every
structure against the live count or its cap. Without the bounds these fail: the change
log, the recorder and the memos each gain an entry per pod.
"""

from __future__ import annotations

import pytest

from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.scheduler import scheduler as scheduler_module
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import WorkloadSpec, device_class, pod_objects, slices
from dra_affinity.structured import state as state_module
from dra_affinity.structured.model import Result

NODES, DEVICES, SLOTS = 4, 2, 2
LIVE = 6  # pods alive at a time (of 16 slots)
ROUNDS = 400  # pods scheduled and deleted over the run


def _cluster(affinity: bool) -> Cluster:
    spec = WorkloadSpec(nodes=NODES, devices_per_node=DEVICES, slots=SLOTS, affinity=affinity)
    cluster = Cluster()
    assert cluster.apply(device_class()).applied
    for i in range(NODES):
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    return cluster


def _churn(cluster: Cluster, sched: Scheduler, values: int = 3) -> int:
    """Schedule ROUNDS pods, keeping at most LIVE alive (oldest deleted first)."""
    alive: list[str] = []
    scheduled = 0
    for n in range(ROUNDS):
        name = f"p{n}"
        claim, pod = pod_objects(name, n % values)
        assert cluster.apply(claim).applied
        assert cluster.apply(pod).applied
        a = sched.schedule(f"default/{name}")
        assert a.result is Result.SCHEDULED, a.message
        scheduled += 1
        alive.append(name)
        if len(alive) > LIVE:
            old = alive.pop(0)
            cluster.delete("Pod", f"default/{old}")
            cluster.delete("ResourceClaim", f"default/{old}-nic")
    return scheduled


@pytest.mark.parametrize("affinity", [True, False])
@pytest.mark.parametrize("fast", [True, False])
def test_scheduler_state_is_bounded_by_live_objects(monkeypatch: pytest.MonkeyPatch,
                                                    affinity: bool, fast: bool) -> None:
    monkeypatch.setattr(state_module, "CHANGES_KEPT", 16)
    monkeypatch.setattr(scheduler_module, "RECENT_EVENTS", 8)
    cluster = _cluster(affinity)
    sched = Scheduler(cluster, Features(), fast_paths=FastPaths() if fast else FastPaths(free_index=False, node_index=False))
    sched.start()
    assert _churn(cluster, sched) == ROUNDS
    devices = NODES * DEVICES
    st = sched.state
    # The change log keeps only its latest entries, and readers still see every change.
    assert len(st.changes) < 2 * 16
    assert st.change_seq > ROUNDS  # every add and remove was logged
    # Allocations and locks: per device, and only for devices in use.
    assert len(st.usage) <= devices
    assert sum(len(u.shares) for u in st.usage.values()) == LIVE
    assert len(st.affinity_states) <= devices
    for per_device in (st.device_version, st.lock_version, st.release_version):
        assert len(per_device) <= devices
    # What the cache holds per claim: the live claims only.
    assert len(sched.cache.recorded) == LIVE
    # The scheduler's own recorder keeps recent events only, and says how many it let go.
    assert len(sched.recorder.events) < 2 * 8
    assert sched.recorder.dropped + len(sched.recorder.events) == ROUNDS
    # Memos: by content (few distinct configs here), never one entry per claim.
    assert len(sched.outcomes) <= 3
    if sched.extraction_cache is not None:
        assert len(sched.extraction_cache.results) <= 3


def test_free_index_stays_exact_when_the_change_log_drops_entries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A reader that falls behind the kept log starts over from the state: its view must
    # equal a freshly built index's.
    monkeypatch.setattr(state_module, "CHANGES_KEPT", 2)
    cluster = _cluster(True)
    sched = Scheduler(cluster, Features(), fast_paths=FastPaths.all())
    sched.start()
    index = sched.indexed.free_index()
    _churn(cluster, sched)
    for n in range(LIVE):  # many changes while the index does not look
        cluster.delete("Pod", f"default/p{ROUNDS - 1 - n}")
    assert index.state.changes_since(index.seen) is None
    index.catch_up()
    fresh = type(index)(sched.snapshot(), sched.state, True)
    assert index.node_cats == fresh.node_cats
    assert index.by_category == {k: v for k, v in fresh.by_category.items()}


def test_changes_since_says_when_entries_were_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "CHANGES_KEPT", 3)
    st = state_module.AllocatedState()
    mark = st.change_seq
    for i in range(7):
        st.set_affinity(f"d/p/x{i}", state_module.CLEAN)
    assert st.change_seq == mark + 7
    assert st.changes_since(mark) is None  # the first three were dropped
    assert st.changes_since(st.change_seq - 1) == ["d/p/x6"]
    assert st.changes_since(st.change_seq) == []


def test_recorder_limit_keeps_the_latest_records_in_order() -> None:
    r = Recorder(limit=3)
    for i in range(10):
        r.event(f"Pod p{i}", "Normal", "Scheduled", str(i))
        r.warn(f"w{i}")
    assert [e.message for e in r.events][-3:] == ["7", "8", "9"]
    assert len(r.events) < 6 and len(r.logs) < 6
    assert r.dropped == 20 - len(r.events) - len(r.logs)
    unbounded = Recorder()
    for i in range(100):
        unbounded.event("Pod p", "Normal", "Scheduled", str(i))
    assert len(unbounded.events) == 100 and unbounded.dropped == 0
    with pytest.raises(ValueError, match="at least 1"):
        Recorder(limit=0)
