"""The scheduling queue: pods ready now, and pods backing off after a failed attempt.

A much smaller version of kube-scheduler's: one active heap ordered by priority
(higher first) then arrival, and a backoff map. A pod that failed waits
``initial * 2**(failures-1)`` seconds (capped at ``maximum``) before it is tried
again; an update of the pod itself (the resourceclaim controller recording its
claims, say) makes it ready at once. The clock is injected so tests need no sleeps.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["SchedulingQueue"]


@dataclass
class _Info:
    key: str
    priority: int
    first_seen: float
    failures: int = 0
    ready_at: float = 0.0
    seq: int = 0


@dataclass
class SchedulingQueue:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _pods: dict[str, _Info] = field(default_factory=dict)
    _heap: list[tuple[float, int, int, str]] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def add(self, key: str, priority: int = 0, *, updated: bool = False) -> None:
        """A pending pod (new, or updated: then it skips what is left of its backoff)."""
        info = self._pods.get(key)
        if info is None:
            info = _Info(key, priority, self.clock())
            self._pods[key] = info
            self._push(info, self.clock())
            return
        if updated or info.priority != priority:
            info.priority = priority
            self._push(info, min(info.ready_at, self.clock()) if updated else info.ready_at)

    def remove(self, key: str) -> None:
        self._pods.pop(key, None)  # heap entries of removed pods are skipped on pop

    def _push(self, info: _Info, ready_at: float) -> None:
        info.ready_at = ready_at
        info.seq = next(self._counter)
        heapq.heappush(self._heap, (ready_at, -info.priority, info.seq, info.key))

    def pop(self) -> str | None:
        """The next ready pod (it stays known until removed or failed), or None."""
        now = self.clock()
        while self._heap:
            ready_at, _prio, seq, key = self._heap[0]
            info = self._pods.get(key)
            if info is None or info.seq != seq:
                heapq.heappop(self._heap)  # stale entry
                continue
            if ready_at > now:
                return None
            heapq.heappop(self._heap)
            info.seq = -1  # in flight: not in the heap
            return key
        return None

    def next_ready_in(self) -> float | None:
        """Seconds until the earliest pod is ready (0 if one is), None when empty."""
        while self._heap:
            ready_at, _p, seq, key = self._heap[0]
            info = self._pods.get(key)
            if info is None or info.seq != seq:
                heapq.heappop(self._heap)
                continue
            return max(0.0, float(ready_at - self.clock()))
        return None

    def failed(self, key: str) -> float:
        """The attempt failed: back off; returns the delay."""
        info = self._pods.get(key)
        if info is None:
            return 0.0
        info.failures += 1
        delay = float(min(self.initial_backoff * 2.0 ** (info.failures - 1), self.max_backoff))
        self._push(info, self.clock() + delay)
        return delay

    def done(self, key: str) -> None:
        """The pod is bound: forget it."""
        self._pods.pop(key, None)

    def waited(self, key: str) -> float | None:
        """Seconds since the pod was first queued (None if it is not queued)."""
        info = self._pods.get(key)
        return None if info is None else self.clock() - info.first_seen

    def failures(self, key: str) -> int:
        info = self._pods.get(key)
        return info.failures if info is not None else 0
