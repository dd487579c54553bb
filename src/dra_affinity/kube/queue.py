"""The scheduling queue, as kube-scheduler's: active, backoff and unschedulable pods.

* **activeQ**: pods to try now, highest ``spec.priority`` first, then the earliest
  (re)queued.
* **backoffQ**: pods that failed and wait ``initial * 2**(attempts-1)`` seconds
  (capped at ``maximum``) from their last failure; they move to activeQ when it ends.
* **unschedulable pods**: pods that the filters rejected. Retrying them on a timer
  would only repeat the same verdict, so they stay until a :class:`ClusterEvent` that
  could change it happens: the event's hint for the plugins that rejected the pod
  (:data:`HINTS`) says whether it can help; if so the pod moves to backoffQ (still
  backing off) or activeQ. A pod left there for ``unschedulable_timeout`` (5 minutes,
  kube-scheduler's ``podMaxInUnschedulablePodsDuration``) moves anyway, on
  :meth:`flush` (the safety net for events nothing reports).
* **gated pods**: PreEnqueue said not yet (a claim from a template does not exist);
  no attempt, no backoff; the claim appearing or a pod update lets them in.

A failure that no plugin caused (an error, a conflict at Reserve, a failed binding)
goes to backoffQ: the same attempt may well work a moment later. So does a failure
when an event that could have helped arrived while the pod was being tried (it was
tried against the state before the event). The clock is injected: the tests need no
sleeps. Not thread-safe: one thread (the scheduling loop) owns it.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dra_affinity.structured import reasons

__all__ = [
    "DEFAULT_UNSCHEDULABLE_TIMEOUT",
    "DYNAMIC_RESOURCES",
    "HINTS",
    "ClusterEvent",
    "SchedulingQueue",
    "plugins_of",
]

# kube-scheduler's podMaxInUnschedulablePodsDuration.
DEFAULT_UNSCHEDULABLE_TIMEOUT = 300.0


class ClusterEvent(enum.Enum):
    """What changed in the cluster, at the grain the plugins' hints need."""

    NODE_ADD = "Node/Add"
    NODE_LABEL = "Node/UpdateNodeLabel"
    NODE_TAINT = "Node/UpdateNodeTaint"
    NODE_ALLOCATABLE = "Node/UpdateNodeAllocatable"
    NODE_SCHEDULABLE = "Node/UpdateNodeSchedulable"
    # A pod bound to a node went away or finished: its node resources are free.
    ASSIGNED_POD_DELETE = "AssignedPod/Delete"
    # A pod bound to a node appeared there or its labels changed (affinity, spread).
    ASSIGNED_POD_ADD = "AssignedPod/Add|UpdatePodLabel"
    SLICE_CHANGE = "ResourceSlice/Add|Update"
    CLASS_CHANGE = "DeviceClass/Add|Update"
    # Devices or capacity freed: a claim deallocated, deleted while allocated, or a share
    # this scheduler had assumed rolled back (Unreserve after a failed binding).
    CLAIM_RELEASE = "ResourceClaim/Release"
    # A claim created or changed: only the pods that use it can care (see ``claim``).
    CLAIM_CHANGE = "ResourceClaim/Add|Update"


# Plugins, by kube-scheduler's names, and the events that may make a pod one of them
# rejected schedulable. WILDCARD stands for a rejection this table does not know (a
# reason code added later): every event moves such a pod, as upstream treats a plugin
# without hints.
DYNAMIC_RESOURCES = "DynamicResources"
WILDCARD = "*"
HINTS: dict[str, frozenset[ClusterEvent]] = {
    DYNAMIC_RESOURCES: frozenset({ClusterEvent.SLICE_CHANGE, ClusterEvent.CLASS_CHANGE,
                                  ClusterEvent.CLAIM_RELEASE, ClusterEvent.CLAIM_CHANGE}),
    "NodeUnschedulable": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_SCHEDULABLE}),
    "TaintToleration": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_TAINT}),
    "NodeAffinity": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL}),
    "NodeResourcesFit": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_ALLOCATABLE,
                                   ClusterEvent.ASSIGNED_POD_DELETE}),
    "NodePorts": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.ASSIGNED_POD_DELETE}),
    "PodTopologySpread": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL,
                                    ClusterEvent.ASSIGNED_POD_ADD,
                                    ClusterEvent.ASSIGNED_POD_DELETE}),
    "InterPodAffinity": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL,
                                   ClusterEvent.ASSIGNED_POD_ADD,
                                   ClusterEvent.ASSIGNED_POD_DELETE}),
    # No node at all: a node (with its slices) has to appear.
    "Nodes": frozenset({ClusterEvent.NODE_ADD, ClusterEvent.SLICE_CHANGE}),
    # The pod's own spec is malformed or asks what is not evaluated: only its update
    # (always a move) can help.
    "PodSpec": frozenset(),
}

_NODE_PLUGIN = {
    reasons.NODE_UNSCHEDULABLE: "NodeUnschedulable",
    reasons.TAINT_NOT_TOLERATED: "TaintToleration",
    reasons.NODE_AFFINITY_MISMATCH: "NodeAffinity",
    reasons.INSUFFICIENT_NODE_RESOURCES: "NodeResourcesFit",
    reasons.NO_NODES: "Nodes",
    reasons.HOST_PORT_CONFLICT: "NodePorts",
    reasons.TOPOLOGY_SPREAD_MISSING_LABEL: "PodTopologySpread",
    reasons.TOPOLOGY_SPREAD_SKEW: "PodTopologySpread",
    reasons.POD_AFFINITY_MISMATCH: "InterPodAffinity",
    reasons.POD_ANTI_AFFINITY_MISMATCH: "InterPodAffinity",
    reasons.EXISTING_POD_ANTI_AFFINITY: "InterPodAffinity",
    reasons.INVALID_POD_SPEC: "PodSpec",
    # A placement constraint this scheduler does not evaluate: only the pod's update helps.
    reasons.UNSUPPORTED_PLACEMENT: "PodSpec",
}
# Reason codes of the DynamicResources plugin (everything about claims, classes, slices,
# devices and their locks). A pod's node selector mismatch is NodeAffinity's; a device's
# node selector (a slice's) is ours: the code is shared, so it counts as both.
_DRA_CODES = frozenset({
    reasons.AFFINITY_LOCK_MISMATCH, reasons.AFFINITY_NO_KEYS, reasons.AFFINITY_UNRECONSTRUCTABLE,
    reasons.AFFINITY_SELF_INCONSISTENT, reasons.AFFINITY_VALUE_TOO_LONG,
    reasons.AFFINITY_CEL_ERROR, reasons.AFFINITY_COST_EXCEEDED, reasons.AFFINITY_INVALID_POOL,
    reasons.AFFINITY_POOL_INCOMPLETE, reasons.AFFINITY_FEATURE_DISABLED,
    reasons.AFFINITY_NEVER_SET_LOCK, reasons.INSUFFICIENT_CAPACITY, reasons.DEVICE_ALLOCATED,
    reasons.SELECTOR_MISMATCH, reasons.SELECTOR_ERROR, reasons.CONSTRAINT_MISMATCH,
    reasons.DEVICE_CLASS_NOT_FOUND, reasons.CLAIM_NOT_FOUND, reasons.CLAIM_IN_USE,
    reasons.CLAIM_ALLOCATED_ELSEWHERE, reasons.INVALID_CAPACITY_REQUEST, reasons.POOL_INVALID,
    reasons.POOL_INCOMPLETE, reasons.NO_DEVICES, reasons.SEARCH_LIMIT,
})
# Failures that are not a verdict on the cluster: retried after the backoff.
_TRANSIENT_CODES = frozenset({reasons.RESERVE_CONFLICT, reasons.BIND_FAILED,
                              reasons.POD_NOT_FOUND})


def plugins_of(codes: Iterable[str]) -> frozenset[str]:
    """The plugins that rejected a pod, from its reasons' codes. Empty: no plugin did
    (an error or a transient conflict), so the pod backs off and is retried."""
    out: set[str] = set()
    for code in codes:
        if code in _TRANSIENT_CODES:
            continue
        if code == reasons.NODE_SELECTOR_MISMATCH:
            out.update(("NodeAffinity", DYNAMIC_RESOURCES))
        elif code in _NODE_PLUGIN:
            out.add(_NODE_PLUGIN[code])
        elif code in _DRA_CODES:
            out.add(DYNAMIC_RESOURCES)
        else:
            out.add(WILDCARD)
    return frozenset(out)


ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, IN_FLIGHT = (
    "active", "backoff", "unschedulable", "gated", "inFlight")


@dataclass
class _Pod:
    key: str
    priority: int
    claims: frozenset[str]
    first_seen: float
    timestamp: float  # when (re)queued: activeQ's order after priority
    where: str = ""  # not placed yet (or deleted)
    attempts: int = 0
    backoff_until: float = 0.0
    parked_at: float = 0.0  # when it became unschedulable (or gated)
    rejected_by: frozenset[str] = frozenset()
    # Events received while in flight that could have helped it (then a failure backs off).
    missed_event: bool = False
    seq: int = 0  # of its live heap entry; older entries are stale


@dataclass
class SchedulingQueue:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    unschedulable_timeout: float = DEFAULT_UNSCHEDULABLE_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    _pods: dict[str, _Pod] = field(default_factory=dict)
    _active: list[tuple[int, float, int, str]] = field(default_factory=list)
    _backoff: list[tuple[float, int, str]] = field(default_factory=list)
    _unschedulable: dict[str, _Pod] = field(default_factory=dict)
    _gated: dict[str, _Pod] = field(default_factory=dict)
    _in_flight: dict[str, _Pod] = field(default_factory=dict)
    _users: dict[str, set[str]] = field(default_factory=dict)  # claim -> pods using it
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _count: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, IN_FLIGHT), 0))

    def __post_init__(self) -> None:
        if not 0 <= self.initial_backoff <= self.max_backoff:
            raise ValueError(f"backoff: need 0 <= initial ({self.initial_backoff}) <= "
                             f"maximum ({self.max_backoff})")

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def where(self, key: str) -> str | None:
        """Which part of the queue holds the pod (``active``, ``backoff``,
        ``unschedulable``, ``gated``, ``inFlight``), or None."""
        p = self._pods.get(key)
        return p.where if p is not None else None

    def lengths(self) -> dict[str, int]:
        """Pods in each part of the queue."""
        return dict(self._count)

    # ------------------------------------------------------------------ pod events
    def add(self, key: str, priority: int = 0, claims: Iterable[str] | None = None) -> None:
        """A pending pod appeared (or is seen again): into activeQ if it is new."""
        if key in self._pods:
            self.update(key, priority, claims, relevant=False)
            return
        now = self.clock()
        p = _Pod(key, priority, frozenset(), now, now)
        self._pods[key] = p
        self._set_claims(p, claims or ())
        self._to_active(p)

    def update(self, key: str, priority: int = 0, claims: Iterable[str] | None = None, *,
               relevant: bool) -> None:
        """The pod changed. A ``relevant`` change (its spec, labels or claims, not our own
        status writes) lets a parked pod try again: gated ones at once, rejected ones
        after what is left of their backoff. ``claims``: the claims it uses now (None:
        unchanged)."""
        p = self._pods.get(key)
        if p is None:
            self.add(key, priority, claims)
            return
        if claims is not None:
            self._set_claims(p, claims)
        reprioritized = p.priority != priority
        p.priority = priority
        if p.where == IN_FLIGHT:
            p.missed_event = p.missed_event or relevant
        elif p.where in (UNSCHEDULABLE, GATED) and relevant:
            self._move(p)
        elif p.where == ACTIVE and reprioritized:
            self._to_active(p, keep_timestamp=True)

    def delete(self, key: str) -> None:
        """The pod is gone, bound elsewhere, or no longer ours: forget it everywhere."""
        p = self._pods.pop(key, None)
        if p is None:
            return  # heap entries of removed pods are skipped when met
        self._place(p, "")
        self._set_claims(p, ())

    # ------------------------------------------------------------------ scheduling
    def pop(self) -> str | None:
        """The next pod to try (it is in flight until :meth:`done`, :meth:`failed` or
        :meth:`gate`), or None when none is ready."""
        self._flush_backoff(self.clock())
        while self._active:
            _prio, _ts, seq, key = heapq.heappop(self._active)
            p = self._pods.get(key)
            if p is None or p.seq != seq or p.where != ACTIVE:
                continue  # stale
            self._place(p, IN_FLIGHT)
            p.attempts += 1
            p.missed_event = False
            return key
        return None

    def next_ready_in(self) -> float | None:
        """Seconds until a pod is ready (0: one is), None when none waits in activeQ or
        backoffQ (unschedulable pods wait for events or :meth:`flush`)."""
        now = self.clock()
        self._flush_backoff(now)
        while self._active:
            _prio, _ts, seq, key = self._active[0]
            p = self._pods.get(key)
            if p is None or p.seq != seq or p.where != ACTIVE:
                heapq.heappop(self._active)
                continue
            return 0.0
        while self._backoff:
            until, seq, key = self._backoff[0]
            p = self._pods.get(key)
            if p is None or p.seq != seq or p.where != BACKOFF:
                heapq.heappop(self._backoff)
                continue
            return max(0.0, until - now)
        return None

    def done(self, key: str) -> None:
        """Scheduled (and bound): forget the pod."""
        self.delete(key)

    def failed(self, key: str, rejected_by: Iterable[str] = ()) -> float:
        """The attempt failed. Rejected by plugins: unschedulable until an event for one of
        them (or backoffQ if one arrived during the attempt); rejected by none (an error,
        a conflict): backoffQ. Returns the backoff in seconds."""
        p = self._pods.get(key)
        if p is None:
            return 0.0
        now = self.clock()
        delay = self.backoff_of(p.attempts)
        p.timestamp = now
        p.backoff_until = now + delay
        p.rejected_by = frozenset(rejected_by)
        if not p.rejected_by or p.missed_event:
            self._to_backoff(p)
        else:
            p.parked_at = now
            self._place(p, UNSCHEDULABLE)
        p.missed_event = False
        return delay

    def gate(self, key: str) -> None:
        """PreEnqueue refused the pod (a claim missing): parked, no attempt counted, until
        its claim appears (:meth:`on_event` with ``CLAIM_CHANGE``) or it is updated."""
        p = self._pods.get(key)
        if p is None:
            return
        if p.where == IN_FLIGHT:
            p.attempts -= 1
        p.parked_at = self.clock()
        self._place(p, GATED)

    def backoff_of(self, attempts: int) -> float:
        """The backoff after ``attempts`` attempts: initial, doubled per attempt, capped."""
        delay = self.initial_backoff
        for _ in range(max(attempts, 1) - 1):
            delay *= 2
            if delay >= self.max_backoff:
                return self.max_backoff
        return delay

    # ------------------------------------------------------------------ cluster events
    def on_event(self, event: ClusterEvent, claim: str | None = None,
                 namespace: str | None = None) -> int:
        """A cluster event: move the parked pods it could help; returns how many moved.
        A ``CLAIM_CHANGE`` names its ``claim`` (only the pods using it care) and its
        ``namespace`` (gated pods there may be waiting for it to exist)."""
        moved = 0
        if event is ClusterEvent.CLAIM_CHANGE:
            for key in list(self._users.get(claim or "", ())):
                p = self._pods[key]
                if p.where == IN_FLIGHT:
                    p.missed_event = True
                elif p.where == UNSCHEDULABLE and self._helps(p, event):
                    self._move(p)
                    moved += 1
            if namespace is not None:
                prefix = f"{namespace}/"
                for p in [p for k, p in self._gated.items() if k.startswith(prefix)]:
                    self._move(p)
                    moved += 1
            return moved
        for p in [p for p in self._unschedulable.values() if self._helps(p, event)]:
            self._move(p)
            moved += 1
        for p in self._in_flight.values():
            p.missed_event = True  # it was tried against the state before this event
        return moved

    @staticmethod
    def _helps(p: _Pod, event: ClusterEvent) -> bool:
        return WILDCARD in p.rejected_by or any(event in HINTS.get(plugin, ())
                                                for plugin in p.rejected_by)

    def flush(self) -> int:
        """Move pods unschedulable for longer than ``unschedulable_timeout`` (kube-scheduler
        checks every 30 s); returns how many moved."""
        limit = self.clock() - self.unschedulable_timeout
        stale = [p for p in self._unschedulable.values() if p.parked_at <= limit]
        for p in stale:
            self._move(p)
        return len(stale)

    # ------------------------------------------------------------------ internals
    def _move(self, p: _Pod) -> None:
        """Out of the parked pods: gated ones to activeQ, rejected ones to backoffQ while
        their backoff lasts, else activeQ."""
        if p.where != GATED and p.backoff_until > self.clock():
            self._to_backoff(p)
        else:
            self._to_active(p)

    def _place(self, p: _Pod, where: str) -> None:
        """Move the pod to another part of the queue (heaps: the caller pushes)."""
        parts = {UNSCHEDULABLE: self._unschedulable, GATED: self._gated,
                 IN_FLIGHT: self._in_flight}
        old = parts.get(p.where)
        if old is not None:
            del old[p.key]
        if p.where:
            self._count[p.where] -= 1
        p.where = where
        if where:
            self._count[where] += 1
        new = parts.get(where)
        if new is not None:
            new[p.key] = p

    def _set_claims(self, p: _Pod, claims: Iterable[str]) -> None:
        new = frozenset(claims)
        if new == p.claims:
            return
        for c in p.claims - new:
            users = self._users.get(c)
            if users is not None:
                users.discard(p.key)
                if not users:
                    del self._users[c]
        for c in new - p.claims:
            self._users.setdefault(c, set()).add(p.key)
        p.claims = new

    def _to_active(self, p: _Pod, *, keep_timestamp: bool = False) -> None:
        if not keep_timestamp:
            p.timestamp = self.clock()
        self._place(p, ACTIVE)
        p.seq = next(self._counter)
        heapq.heappush(self._active, (-p.priority, p.timestamp, p.seq, p.key))

    def _to_backoff(self, p: _Pod) -> None:
        self._place(p, BACKOFF)
        p.seq = next(self._counter)
        heapq.heappush(self._backoff, (p.backoff_until, p.seq, p.key))

    def _flush_backoff(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            _until, seq, key = heapq.heappop(self._backoff)
            p = self._pods.get(key)
            if p is not None and p.seq == seq and p.where == BACKOFF:
                self._to_active(p)

    # ------------------------------------------------------------------ for metrics and logs
    def waited(self, key: str) -> float | None:
        """Seconds since the pod was first queued (None if it is not queued)."""
        p = self._pods.get(key)
        return None if p is None else self.clock() - p.first_seen

    def attempts(self, key: str) -> int:
        p = self._pods.get(key)
        return p.attempts if p is not None else 0
