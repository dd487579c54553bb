"""The scheduling queue: priority, arrival order, backoff, updates skip backoff."""

from __future__ import annotations

from dra_affinity.kube.queue import SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_priority_then_arrival() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add("a", 0)
    q.add("b", 10)
    q.add("c", 0)
    assert [q.pop(), q.pop(), q.pop(), q.pop()] == ["b", "a", "c", None]


def test_backoff_doubles_up_to_the_cap() -> None:
    clock = Clock()
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=3.0, clock=clock)
    q.add("a")
    delays = []
    for _ in range(4):
        assert q.pop() == "a"
        delays.append(q.failed("a"))
        assert q.pop() is None
        assert q.next_ready_in() == delays[-1]
        clock.t += delays[-1]
    assert delays == [1.0, 2.0, 3.0, 3.0]
    assert q.failures("a") == 4


def test_update_skips_the_rest_of_the_backoff() -> None:
    clock = Clock()
    q = SchedulingQueue(initial_backoff=5.0, clock=clock)
    q.add("a")
    q.pop()
    q.failed("a")
    q.add("a", updated=False)
    assert q.pop() is None
    q.add("a", updated=True)
    assert q.pop() == "a"


def test_removed_pods_are_never_returned() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add("a")
    q.add("b")
    q.remove("a")
    assert "a" not in q and len(q) == 1
    assert q.pop() == "b"
    assert q.pop() is None
    assert q.next_ready_in() is None or q.next_ready_in() == 0.0


def test_waited_counts_from_first_queued() -> None:
    clock = Clock()
    q = SchedulingQueue(initial_backoff=1.0, clock=clock)
    q.add("a")
    clock.t += 2.5
    q.pop()
    q.failed("a")
    assert q.waited("a") == 2.5
    q.done("a")
    assert q.waited("a") is None and "a" not in q
