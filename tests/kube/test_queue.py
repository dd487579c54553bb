"""The scheduling queue: activeQ order, backoffQ, and the requeue-on-event rules of the
unschedulable pods (kube-scheduler's queueing hints), with an injected clock."""

from __future__ import annotations

import pytest

from dra_affinity.kube.queue import (
    DYNAMIC_RESOURCES,
    HINTS,
    WILDCARD,
    ClusterEvent,
    SchedulingQueue,
    plugins_of,
)
from dra_affinity.structured import reasons


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def parked(q: SchedulingQueue, key: str, codes: tuple[str, ...], claims: tuple[str, ...] = ()
           ) -> None:
    """Add the pod, try it, and fail it with these reason codes."""
    q.add(key, claims=claims)
    assert q.pop() == key
    q.failed(key, plugins_of(codes))


def test_priority_then_arrival() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    for key, prio in (("a", 0), ("b", 10), ("c", 0), ("d", 10)):
        q.add(key, prio)
        clock.t += 1
    assert [q.pop() for _ in range(5)] == ["b", "d", "a", "c", None]


def test_a_requeued_pod_goes_behind_those_already_waiting() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    q.add("a")
    clock.t += 1
    q.add("b")
    assert q.pop() == "a"
    q.failed("a")  # an error: backoffQ
    clock.t += 1.5
    assert q.pop() == "b"  # "a" is back in activeQ, but after "b" (queued earlier)
    assert q.pop() == "a"


def test_errors_back_off_doubling_to_the_cap() -> None:
    clock = Clock()
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0, clock=clock)
    q.add("a")
    delays = []
    for _ in range(6):
        assert q.pop() == "a"
        delays.append(q.failed("a"))  # rejected by no plugin: backoffQ
        assert q.where("a") == "backoff"
        assert q.pop() is None
        assert q.next_ready_in() == delays[-1]
        clock.t += delays[-1]
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert q.attempts("a") == 6


def test_unschedulable_pods_are_not_retried_on_a_timer() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "a", (reasons.INSUFFICIENT_CAPACITY,))
    assert q.where("a") == "unschedulable"
    assert q.next_ready_in() is None
    clock.t += 299
    assert q.pop() is None and q.flush() == 0


def test_the_periodic_flush_moves_pods_unschedulable_for_five_minutes() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "a", (reasons.INSUFFICIENT_CAPACITY,))
    clock.t += 100
    parked(q, "b", (reasons.INSUFFICIENT_CAPACITY,))
    clock.t += 200
    assert q.flush() == 1
    assert q.pop() == "a" and q.pop() is None
    clock.t += 100
    assert q.flush() == 1 and q.pop() == "b"


# Every rejecting plugin against every event: moved exactly when its hints list it.
CODE_OF_PLUGIN = {
    DYNAMIC_RESOURCES: reasons.AFFINITY_LOCK_MISMATCH,
    "NodeUnschedulable": reasons.NODE_UNSCHEDULABLE,
    "TaintToleration": reasons.TAINT_NOT_TOLERATED,
    "NodeAffinity": reasons.NODE_AFFINITY_MISMATCH,
    "NodeResourcesFit": reasons.INSUFFICIENT_NODE_RESOURCES,
    "Nodes": reasons.NO_NODES,
    "PodSpec": reasons.INVALID_POD_SPEC,
    "NodePorts": reasons.HOST_PORT_CONFLICT,
    "PodTopologySpread": reasons.TOPOLOGY_SPREAD_SKEW,
    "InterPodAffinity": reasons.EXISTING_POD_ANTI_AFFINITY,
}


@pytest.mark.parametrize("plugin", sorted(HINTS))
@pytest.mark.parametrize("event", list(ClusterEvent))
def test_an_event_moves_exactly_the_pods_its_hints_allow(plugin: str, event: ClusterEvent) -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "ns/a", (CODE_OF_PLUGIN[plugin],), claims=("ns/c",))
    clock.t += 5  # past the backoff: a moved pod goes straight to activeQ
    moved = q.on_event(event, claim="ns/c" if event is ClusterEvent.CLAIM_CHANGE else None)
    expected = event in HINTS[plugin]
    assert moved == int(expected)
    assert q.where("ns/a") == ("active" if expected else "unschedulable")
    assert (q.pop() == "ns/a") is expected


def test_every_reason_code_has_a_plugin_or_is_transient() -> None:
    codes = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
    for code in codes:
        assert WILDCARD not in plugins_of([code]), code
    assert plugins_of([reasons.BIND_FAILED, reasons.RESERVE_CONFLICT]) == frozenset()
    assert plugins_of([reasons.NODE_SELECTOR_MISMATCH]) == {"NodeAffinity", DYNAMIC_RESOURCES}


def test_a_rejection_the_table_does_not_know_is_moved_by_any_event() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "a", ("SomeFuturePluginSaidNo",))
    assert q.where("a") == "unschedulable"
    clock.t += 5
    assert q.on_event(ClusterEvent.NODE_LABEL) == 1 and q.pop() == "a"


def test_a_pod_rejected_by_two_plugins_moves_on_either_ones_event() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "a", (reasons.TAINT_NOT_TOLERATED, reasons.INSUFFICIENT_CAPACITY))
    assert q.on_event(ClusterEvent.NODE_LABEL) == 0
    assert q.on_event(ClusterEvent.NODE_TAINT) == 1


def test_claim_change_moves_only_the_pods_using_the_claim() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "ns/a", (reasons.CLAIM_IN_USE,), claims=("ns/shared",))
    parked(q, "ns/b", (reasons.CLAIM_IN_USE,), claims=("ns/other",))
    clock.t += 5
    assert q.on_event(ClusterEvent.CLAIM_CHANGE, claim="ns/shared", namespace="ns") == 1
    assert q.where("ns/a") == "active" and q.where("ns/b") == "unschedulable"


def test_a_moved_pod_still_backing_off_waits_in_backoffq() -> None:
    clock = Clock()
    q = SchedulingQueue(initial_backoff=1.0, clock=clock)
    q.add("a")
    for _ in range(3):
        assert q.pop() == "a"
        q.failed("a", plugins_of([reasons.INSUFFICIENT_CAPACITY]))
        clock.t += 10  # past any backoff so far: the event sends it to activeQ
        assert q.on_event(ClusterEvent.CLAIM_RELEASE) == 1 and q.where("a") == "active"
    assert q.pop() == "a"
    q.failed("a", plugins_of([reasons.INSUFFICIENT_CAPACITY]))  # 4th attempt: 8 s
    clock.t += 1
    assert q.on_event(ClusterEvent.CLAIM_RELEASE) == 1
    assert q.where("a") == "backoff" and q.pop() is None
    assert q.next_ready_in() == pytest.approx(7.0)
    clock.t += 7
    assert q.pop() == "a"


def test_an_event_during_the_attempt_sends_a_failure_to_backoffq() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    q.add("a")
    assert q.pop() == "a"
    q.on_event(ClusterEvent.CLAIM_RELEASE)  # while "a" is being tried
    q.failed("a", plugins_of([reasons.INSUFFICIENT_CAPACITY]))
    assert q.where("a") == "backoff"
    # The next failure, with no event meanwhile, parks it.
    clock.t += 2
    assert q.pop() == "a"
    q.failed("a", plugins_of([reasons.INSUFFICIENT_CAPACITY]))
    assert q.where("a") == "unschedulable"


def test_gated_pods_wait_for_a_claim_in_their_namespace_without_backoff() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    q.add("ns/a")
    assert q.pop() == "ns/a"
    q.gate("ns/a")
    assert q.where("ns/a") == "gated" and q.attempts("ns/a") == 0
    assert q.pop() is None and q.flush() == 0
    assert q.on_event(ClusterEvent.CLAIM_CHANGE, claim="other/c", namespace="other") == 0
    assert q.on_event(ClusterEvent.SLICE_CHANGE) == 0
    assert q.on_event(ClusterEvent.CLAIM_CHANGE, claim="ns/a-nic", namespace="ns") == 1
    assert q.pop() == "ns/a"  # at once: a gated pod was never tried


def test_relevant_pod_updates_move_parked_pods_others_do_not() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "a", (reasons.INSUFFICIENT_CAPACITY,))
    clock.t += 5
    q.update("a", relevant=False)  # our own status write
    assert q.where("a") == "unschedulable"
    q.update("a", relevant=True)
    assert q.where("a") == "active"


def test_priority_changes_reorder_activeq() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add("a", 0)
    q.add("b", 0)
    q.update("b", 5, relevant=False)
    assert q.pop() == "b"


def test_deleted_pods_leave_every_part_and_the_claim_index() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "ns/a", (reasons.INSUFFICIENT_CAPACITY,), claims=("ns/c",))
    q.add("ns/b", claims=("ns/c",))
    q.add("ns/g")
    assert q.pop() == "ns/b"
    assert q.pop() == "ns/g"
    q.gate("ns/g")
    assert q.lengths() == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 1,
                           "inFlight": 1}
    for key in ("ns/a", "ns/b", "ns/g"):
        q.delete(key)
    assert len(q) == 0 and q._users == {}
    assert q.lengths() == dict.fromkeys(("active", "backoff", "unschedulable", "gated",
                                         "inFlight"), 0)
    assert q.on_event(ClusterEvent.CLAIM_CHANGE, claim="ns/c", namespace="ns") == 0
    assert q.pop() is None and q.next_ready_in() is None


def test_waited_counts_from_first_queued() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    q.add("a")
    clock.t += 2.5
    q.pop()
    q.failed("a")
    assert q.waited("a") == 2.5
    q.done("a")
    assert q.waited("a") is None and "a" not in q


def test_backoff_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="backoff"):
        SchedulingQueue(initial_backoff=5.0, max_backoff=1.0)
    with pytest.raises(ValueError, match="backoff"):
        SchedulingQueue(initial_backoff=-1.0)
