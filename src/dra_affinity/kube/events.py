"""Events to the API server, aggregated as client-go's event recorder does.

kube-scheduler records ``events.k8s.io/v1`` Events through client-go's
``tools/events`` broadcaster: the first occurrence of an event is created; the
second of the same event starts a *series* (``series.count: 2``, written at once);
later ones only count, in memory, and the count is written when the series is
refreshed (every 30 minutes) or ends (6 minutes without a new occurrence). A pod
retried for hours thus costs a handful of writes, not one per attempt.

Here the series key is the object, type, reason and action: one Event per pod and
reason. An occurrence whose message differs from the series' is written at once
(patching ``note`` with the series), so the Event always tells the latest message;
client-go keys on the message too and would create a new Event instead (see
docs/decisions.md, "Events").

:meth:`EventRecorder.record` only decides and queues (the scheduling loop calls it);
one writer thread (:meth:`EventRecorder.run`) does the requests. Both the cache of
series and the queue of writes are bounded: the oldest series is forgotten past
``max_series``; a write that finds the queue full is dropped and counted in
``dropped`` (events are diagnostics: never a reason to block scheduling).
"""

from __future__ import annotations

import collections
import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .api import MERGE_PATCH, RESOURCES, Api, ApiError
from .leader import fenced

__all__ = ["FINISH_AFTER", "REFRESH_EVERY", "EventRecorder"]

log = logging.getLogger("dra_affinity.kube.events")

# client-go tools/events: a series ends after 6 minutes without an occurrence, and
# running series are written every 30 minutes.
FINISH_AFTER = 6 * 60.0
REFRESH_EVERY = 30 * 60.0
MAX_NOTE = 1024  # the API's limit on note


@dataclass
class _Series:
    namespace: str
    name: str
    note: str
    count: int  # occurrences so far
    written: int  # the count the server has
    last_seen: float  # wall clock, for lastObservedTime
    last_seen_mono: float


def _micro_time(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder:
    """``events.k8s.io/v1`` Events with client-go's series aggregation, written by one thread."""

    def __init__(self, api: Api, *, component: str, instance: str,
                 max_series: int = 4096, max_pending: int = 1024,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time,
                 on_drop: Callable[[], None] | None = None,
                 may_write: Callable[[], bool] | None = None) -> None:
        self.api = api
        # Whether this replica may write now (the leader's fence, as every write of the
        # scheduler); None: always. A write refused by it is not sent, not retried.
        self.may_write = may_write
        self.component = component
        self.instance = instance
        self.max_series = max_series
        self.max_pending = max_pending
        self.clock = clock
        self.wall_clock = wall_clock
        self.on_drop = on_drop
        self.dropped = 0
        self._series: collections.OrderedDict[tuple[Any, ...], _Series] = collections.OrderedDict()
        # (series key, "create" or "patch", namespace, name, body)
        self._pending: collections.deque[tuple[tuple[Any, ...], str, str, str, dict[str, Any]]] = \
            collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._last_tick = clock()

    # ------------------------------------------------------------------ recording
    def record(self, regarding: Mapping[str, Any], type_: str, reason: str, action: str,
               note: str) -> None:
        """One occurrence: create, start or update a series, or just count it."""
        note = note[:MAX_NOTE]
        key = (tuple(sorted(regarding.items())), type_, reason, action)
        now, wall = self.clock(), self.wall_clock()
        with self._lock:
            s = self._series.get(key)
            if s is None:
                ns = str(regarding.get("namespace") or "default")
                name = f"{regarding.get('name', 'object')}.{time.time_ns():x}"
                s = _Series(ns, name, note, 1, 1, wall, now)
                self._series[key] = s
                self._queue(key, s, "create", self._event(key, s, {"note": note}))
                while len(self._series) > self.max_series:
                    self._series.popitem(last=False)
                return
            self._series.move_to_end(key)
            s.count += 1
            s.last_seen, s.last_seen_mono = wall, now
            if s.count == 2 or note != s.note:
                s.note = note
                self._queue(key, s, "patch", self._series_patch(s))

    def _event(self, key: tuple[Any, ...], s: _Series, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A new Event of a series (``fields``: note, and series when it has one)."""
        regarding, type_, reason, action = key
        return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "eventTime": _micro_time(self.wall_clock()), "type": type_, "reason": reason,
                "action": action, "regarding": dict(regarding),
                "reportingController": self.component, "reportingInstance": self.instance,
                **fields}

    def _series_patch(self, s: _Series) -> dict[str, Any]:
        s.written = s.count
        return {"note": s.note,
                "series": {"count": s.count, "lastObservedTime": _micro_time(s.last_seen)}}

    def _queue(self, key: tuple[Any, ...], s: _Series, op: str, body: dict[str, Any]) -> None:
        if len(self._pending) >= self.max_pending:
            self.dropped += 1
            if self.on_drop is not None:
                self.on_drop()
            return
        self._pending.append((key, op, s.namespace, s.name, body))
        self._wake.notify()

    # ------------------------------------------------------------------ series upkeep
    def tick(self) -> None:
        """Write the counts of series that ended (and forget them) or are due a refresh;
        forget single events older than a series' life."""
        now = self.clock()
        with self._lock:
            refresh = now - self._last_tick >= REFRESH_EVERY
            if refresh:
                self._last_tick = now
            for key, s in list(self._series.items()):
                ended = now - s.last_seen_mono >= FINISH_AFTER
                if s.count > s.written and (ended or refresh):
                    self._queue(key, s, "patch", self._series_patch(s))
                if ended:
                    del self._series[key]

    # ------------------------------------------------------------------ writing
    def send_pending(self) -> int:
        """Write what is queued, now, in this thread; returns how many requests."""
        n = 0
        while True:
            with self._lock:
                if not self._pending:
                    return n
                key, op, ns, name, body = self._pending.popleft()
            self._write(key, op, ns, name, body)
            n += 1

    def run(self, stop: threading.Event, tick_every: float = 30.0) -> None:
        """The writer thread: writes as they come, series upkeep every ``tick_every`` s."""
        next_tick = self.clock() + tick_every
        while not stop.is_set():
            with self._lock:
                if not self._pending:
                    self._wake.wait(min(1.0, max(0.0, next_tick - self.clock())))
            self.send_pending()
            if self.clock() >= next_tick:
                self.tick()
                next_tick = self.clock() + tick_every
        self.send_pending()

    def _write(self, key: tuple[Any, ...], op: str, ns: str, name: str,
               body: dict[str, Any]) -> None:
        res = RESOURCES["Event"]
        method, path = ("POST", res.collection(ns)) if op == "create" else \
            ("PATCH", res.item(name, ns))
        if not fenced(self.may_write, method, path):
            log.info("event %s/%s not recorded: this replica no longer leads", ns, name)
            return
        try:
            if op == "create":
                self.api.request(method, path, body=body)
                return
            try:
                self.api.request(method, path, body=body, content_type=MERGE_PATCH)
            except ApiError as e:
                if not e.not_found:
                    raise
                # The Event expired (the API server keeps them an hour) or was deleted: a
                # new one carries the series on, as client-go does.
                self._recreate(key, body)
        except ApiError as e:
            log.info("event %s/%s not recorded: %s", ns, name, e)

    def _recreate(self, key: tuple[Any, ...], patch: dict[str, Any]) -> None:
        with self._lock:
            s = self._series.get(key)
            if s is None:
                return
            s.name = f"{dict(key[0]).get('name', 'object')}.{time.time_ns():x}"
            body = self._event(key, s, patch)
        path = RESOURCES["Event"].collection(s.namespace)
        if not fenced(self.may_write, "POST", path):
            log.info("event %s/%s not recorded: this replica no longer leads", s.namespace, s.name)
            return
        self.api.request("POST", path, body=body)

    def __len__(self) -> int:
        """Series (and single events) remembered."""
        return len(self._series)
