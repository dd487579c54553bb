"""Offline reference: a placement-only schedule found with hindsight, by local search.

The lower bound (``sum_v ceil(demand_v / slots)`` at every moment) assumes running pods
can be repacked at will. A placement-only policy cannot do that, so the bound alone does
not say how far a policy is from what is *achievable* without migration. This module
answers that with a schedule found offline, knowing the whole event stream: every pod is
given one device for its whole life (pods never move), a device holds at most ``slots``
pods at a time, and all pods on a device at one time share one lock value (a device
changes value only after it has drained). Its peak of locked devices is an upper bound
on the optimum of placement-only packing; the lower bound is a lower one.

Model. Devices of one value are *lanes*: a lane holds pods of one value, at most
``slots`` at a time. The locked devices at a moment are the lanes with a running pod.
Lanes of different values can share a physical device when their busy periods do not
overlap, and interval colouring of the busy periods needs exactly as many devices as the
peak number of lanes busy at once, so the search only places pods on lanes and the
devices are assigned at the end (:func:`_devices`). Locked devices only grow on an
arrival, so time is counted in arrivals: ``total[k]`` is the number of busy lanes just
after the k-th arrival, and its maximum is the peak.

Search. It starts from a clairvoyant greedy (each pod joins the lane of its value that
its departure extends least, fullest first; else an idle lane) and then lowers the peak
one device at a time. With ``target = peak - 1`` the cost is the squared excess of busy
lanes over ``target - 2`` at every moment (weighted) plus the lanes' total busy time.
Each step destroys and repairs: it picks a moment ``k`` above the target and a value
holding more lanes there than its demand needs, takes off their lanes all pods of that
value that arrived in a random window around ``k``, and puts them back in arrival order,
each on the lane of its value with room over its whole life where it adds the least
cost (now and then the runner-up, for diversity). The step is kept when the total cost
does not rise, else undone. When no moment is above the target, the peak has dropped and
the target moves down. It stops at the iteration limit, or when it meets the lower
bound. Single-pod moves were tried first and stall: a pod runs for about 900 arrivals on
the default workload, and another lane with room over all of that is rare.

Everything is seeded (``random.Random(seed)``) and the arithmetic is integer, so the
same stream, seed and limit give the same schedule, byte for byte.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dra_affinity.sim.workload import Arrival, Departure

Event = Arrival | Departure

#: Steps of the default search (about 20 s of CPU on the default workload).
DEFAULT_ITERATIONS = 4_000

METHOD = ("local search (destroy and repair) over pod-to-lane assignments, "
          "from a clairvoyant greedy start")

#: Weight of the squared excess (lanes busy above ``target - _MARGIN`` at a moment) against
#: one lane-moment of busy time. The margin makes the moments just below the target cost
#: something too, so a repair does not fill them up to the next peak.
_EXCESS_WEIGHT = 64
_MARGIN = 2

#: A repair window reaches up to this many arrivals before the chosen moment ...
_WINDOW = 2000
#: ... and up to this many after it.
_AFTER = 500
#: Probability that a repaired pod takes the runner-up lane instead of the cheapest.
_NOISE = 0.1


@dataclass(frozen=True)
class OfflineSchedule:
    """A placement-only schedule for every pod of a stream, and how it was found."""

    devices_used: int  # peak locked devices over the stream
    initial_devices: int  # the greedy start's peak, before the search
    assignment: dict[str, int]  # pod -> device index (node * devices_per_node + nic)
    locked: list[int] = field(default_factory=list)  # locked devices after each event
    iterations: int = 0  # search steps taken
    iteration_limit: int = 0
    accepted: int = 0  # steps kept
    stopped: str = ""  # "limit" or "lowerBound"
    seed: int = 0


@dataclass
class _Pods:
    """Pods as arrival-time intervals: pod i runs from arrival ``start[i]`` (inclusive) to
    ``end[i]`` (exclusive), with lock value ``value[i]``."""

    names: list[str]
    value: list[int]
    start: list[int]
    end: list[int]
    arrive_event: list[int]
    depart_event: list[int]  # len(events) for pods still running at the end


def _pods(evs: Sequence[Event]) -> _Pods:
    index: dict[str, int] = {}
    p = _Pods([], [], [], [], [], [])
    arrivals = 0
    for t, ev in enumerate(evs):
        if isinstance(ev, Arrival):
            index[ev.pod] = len(p.names)
            p.names.append(ev.pod)
            p.value.append(ev.value)
            p.start.append(arrivals)
            p.end.append(-1)
            p.arrive_event.append(t)
            p.depart_event.append(len(evs))
            arrivals += 1
        else:
            i = index[ev.pod]
            p.end[i] = arrivals
            p.depart_event[i] = t
    p.end = [arrivals if e < 0 else e for e in p.end]
    return p


class _Search:
    """Lane occupancy and the moves; see the module docstring."""

    def __init__(self, pods: _Pods, slots: int, rng: random.Random) -> None:
        self.p = pods
        self.slots = slots
        self.rng = rng
        self.horizon = max(pods.end, default=0)
        self.cnt = np.zeros((16, self.horizon), dtype=np.int16)
        self.lane_value: list[int] = []
        self.lanes_of: dict[int, list[int]] = {}
        self.lane_pods: list[set[int]] = []
        self.lane_of = [-1] * len(pods.names)
        self._greedy()
        self.total = (self.cnt[: len(self.lane_value)] > 0).sum(axis=0, dtype=np.int32)
        self.demand = np.zeros((max(pods.value, default=0) + 1, self.horizon), dtype=np.int32)
        for i, v in enumerate(pods.value):
            self.demand[v, pods.start[i]:pods.end[i]] += 1
        need = -(-self.demand // slots)
        self.bound = need.sum(axis=0, dtype=np.int32)
        self.need = need

    # ------------------------------------------------------------------ lanes
    def _new_lane(self, value: int) -> int:
        lane = len(self.lane_value)
        if lane == self.cnt.shape[0]:
            grown = np.zeros((2 * lane, self.horizon), dtype=np.int16)
            grown[:lane] = self.cnt
            self.cnt = grown
        self.lane_value.append(value)
        self.lanes_of.setdefault(value, []).append(lane)
        self.lane_pods.append(set())
        return lane

    def _put(self, i: int, lane: int) -> None:
        self.cnt[lane, self.p.start[i]:self.p.end[i]] += 1
        self.lane_pods[lane].add(i)
        self.lane_of[i] = lane

    def _greedy(self) -> None:
        """Clairvoyant start: in arrival order, each pod joins the lane of its value with
        room whose busy period its departure extends least (fullest first, then lowest
        lane), else the lowest idle lane of its value, else a new lane."""
        p = self.p
        latest: list[int] = []
        for i in sorted(range(len(p.names)), key=lambda j: p.start[j]):
            k, v, e = p.start[i], p.value[i], p.end[i]
            best, best_key, idle = -1, (0, 0, 0), -1
            for lane in self.lanes_of.get(v, ()):
                c = int(self.cnt[lane, k])
                if c == 0:
                    if idle < 0:
                        idle = lane
                    continue
                if c >= self.slots:
                    continue
                key = (max(0, e - latest[lane]), -c, lane)
                if best < 0 or key < best_key:
                    best, best_key = lane, key
            if best < 0:
                best = idle if idle >= 0 else self._new_lane(v)
                if best >= len(latest):
                    latest.append(0)
                latest[best] = 0
            self._put(i, best)
            latest[best] = max(latest[best], e)

    # ------------------------------------------------------------------ moves
    def _cost(self, seg: np.ndarray, target: int) -> int:
        x = np.maximum(seg - (target - _MARGIN), 0)
        return int((x * x).sum()) * _EXCESS_WEIGHT + int(seg.sum())

    def _take(self, i: int) -> None:
        a = self.lane_of[i]
        s, e = self.p.start[i], self.p.end[i]
        self.cnt[a, s:e] -= 1
        self.total[s:e] -= self.cnt[a, s:e] == 0
        self.lane_pods[a].discard(i)

    def _give(self, i: int, b: int) -> None:
        s, e = self.p.start[i], self.p.end[i]
        self.total[s:e] += self.cnt[b, s:e] == 0
        self.cnt[b, s:e] += 1
        self.lane_pods[b].add(i)
        self.lane_of[i] = b

    def total_cost(self, target: int) -> int:
        return self._cost(self.total, target)

    def _insert(self, i: int, target: int, noise: float) -> bool:
        """Put pod ``i`` on the lane of its value with room over its whole life where it
        costs least (fullest at its arrival on ties; with probability ``noise`` the
        runner-up). False when no lane has room."""
        s, e = self.p.start[i], self.p.end[i]
        lanes = self.lanes_of[self.p.value[i]]
        sub = self.cnt[lanes, s:e]
        room = sub.max(axis=1) < self.slots
        if not room.any():
            return False
        base = self.total[s:e].astype(np.int64) - (target - _MARGIN)
        lo = np.maximum(base, 0)
        hi = np.maximum(base + 1, 0)
        # Cost of one more busy lane at each moment (integers, exact in float64).
        marginal = ((hi * hi - lo * lo) * _EXCESS_WEIGHT + 1).astype(np.float64)
        cost = ((sub == 0) @ marginal).astype(np.int64)
        key = cost * (self.slots + 1) - sub[:, 0]
        key = np.where(room, key, np.iinfo(np.int64).max)
        order = np.argsort(key, kind="stable")
        pick = 0
        if noise and len(order) > 1 and room[order[1]] and self.rng.random() < noise:
            pick = 1
        self._give(i, lanes[int(order[pick])])
        return True

    def step(self, target: int, hot: np.ndarray) -> bool:
        """Destroy and repair at a moment above ``target``: the pods of one wasteful value
        that arrived in a window before it leave their lanes and are put back in arrival
        order, each where it costs least. Kept when the cost does not rise."""
        rng = self.rng
        k = int(hot[rng.randrange(len(hot))])
        nlanes = len(self.lane_value)
        busy = np.flatnonzero(self.cnt[:nlanes, k] > 0)
        values = np.asarray(self.lane_value)[busy]
        per_value = np.bincount(values, minlength=self.need.shape[0])
        wasteful = np.flatnonzero(per_value > self.need[:, k])
        if len(wasteful) == 0:
            return False
        v = int(wasteful[rng.randrange(len(wasteful))])
        lo = k - rng.randrange(_WINDOW)
        hi = k + rng.randrange(_AFTER)
        pods = sorted((i for lane in self.lanes_of[v] for i in self.lane_pods[lane]
                       if lo <= self.p.start[i] <= hi), key=lambda i: (self.p.start[i], i))
        if not pods:
            return False
        before = self.total_cost(target)
        old = [(i, self.lane_of[i]) for i in pods]
        for i in pods:
            self._take(i)
        placed = []
        ok = True
        for i in pods:
            if not self._insert(i, target, _NOISE):
                ok = False
                break
            placed.append(i)
        if ok:
            delta = self.total_cost(target) - before
            if delta <= 0:
                return True
        for i in placed:
            self._take(i)
        for i, a in old:
            self._give(i, a)
        return False


def _devices(pods: _Pods, lane_of: Sequence[int]) -> dict[str, int]:
    """Physical devices for the lanes' busy periods (interval colouring in event time):
    each busy period takes the lowest device free since before it starts, so the device
    count equals the peak number of busy lanes."""
    by_lane: dict[int, list[int]] = {}
    for i, lane in enumerate(lane_of):
        by_lane.setdefault(lane, []).append(i)
    periods: list[tuple[int, int, list[int]]] = []  # (first arrival, last departure, pods)
    for lane in sorted(by_lane):
        members = sorted(by_lane[lane], key=lambda i: pods.arrive_event[i])
        cur: list[int] = []
        end = -1
        for i in members:
            if cur and pods.arrive_event[i] > end:
                periods.append((pods.arrive_event[cur[0]], end, cur))
                cur = []
            cur.append(i)
            end = max(end, pods.depart_event[i])
        if cur:
            periods.append((pods.arrive_event[cur[0]], end, cur))
    periods.sort(key=lambda x: x[0])
    free: list[int] = []
    busy: list[tuple[int, int]] = []  # (end event, device)
    used = 0
    out: dict[str, int] = {}
    for start, end, members in periods:
        while busy and busy[0][0] < start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            dev = heapq.heappop(free)
        else:
            dev, used = used, used + 1
        heapq.heappush(busy, (end, dev))
        for i in members:
            out[pods.names[i]] = dev
    return out


def locked_timeline(evs: Sequence[Event], assignment: dict[str, int]) -> list[int]:
    """Locked devices after each event when every pod runs on ``assignment[pod]``."""
    used: dict[int, int] = {}
    out: list[int] = []
    for ev in evs:
        dev = assignment[ev.pod]
        n = used.get(dev, 0) + (1 if isinstance(ev, Arrival) else -1)
        if n:
            used[dev] = n
        else:
            del used[dev]
        out.append(len(used))
    return out


def offline_schedule(evs: Sequence[Event], slots: int, *, seed: int,
                     iterations: int = DEFAULT_ITERATIONS) -> OfflineSchedule:
    """Search a placement-only schedule for ``evs`` (see the module docstring).

    ``iterations`` caps the search steps (0: the greedy start alone). The result is a
    function of (``evs``, ``slots``, ``seed``, ``iterations``) only.
    """
    if slots < 1:
        raise ValueError(f"slots must be positive, got {slots}")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    pods = _pods(evs)
    if not pods.names:
        return OfflineSchedule(0, 0, {}, [0] * len(evs), 0, iterations, 0, "lowerBound", seed)
    s = _Search(pods, slots, random.Random(seed))
    floor = int(s.bound.max())
    initial = peak = int(s.total.max())
    target = peak - 1
    accepted = taken = 0
    stopped = "limit"
    hot = np.flatnonzero(s.total > target)
    while taken < iterations:
        if peak <= floor:
            stopped = "lowerBound"
            break
        taken += 1
        if s.step(target, hot):
            accepted += 1
            hot = np.flatnonzero(s.total > target)
            if len(hot) == 0:
                peak = int(s.total.max())
                target = peak - 1
                hot = np.flatnonzero(s.total > target)
    assignment = _devices(pods, s.lane_of)
    locked = locked_timeline(evs, assignment)
    return OfflineSchedule(max(locked), initial, assignment, locked, taken, iterations,
                           accepted, stopped, seed)
