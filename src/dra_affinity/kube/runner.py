"""``dra-affinity scheduler``: the scheduler core as a secondary scheduler on a cluster.

Threads and who touches what:

* one reflector per watched kind (:mod:`.informer`) puts changes on one queue that
  keeps the latest change per object (:mod:`.fifo`);
* the leader elector (:mod:`.leader`) renews the Lease;
* the HTTP server answers ``/metrics``, ``/healthz``, ``/readyz``;
* the events thread writes Events (:mod:`.events`, aggregated into series);
* the loop thread (:meth:`SchedulerProcess.loop`) applies changes (turning them
  into the cluster events that move unschedulable pods), and once this replica
  leads and every informer has synced, rebuilds the locks from allocated claims
  (``Scheduler.start``) and runs scheduling cycles (PreFilter to Reserve) for pods
  from the queue, one at a time;
* binding workers (:mod:`.binder`, ``--max-in-flight-bindings``) run each reserved
  pod's binding cycle (PreBind, Bind, then commit or Unreserve) while the loop
  schedules the next pod against the assumed state; a failed binding is undone,
  requeued with backoff, and moves the pods its devices and node resources could
  help.

The view's caches, the scheduling queue (:mod:`.queue`) and the scheduler core are
touched only under one reentrant lock (``core_lock``): the loop holds it for a
scheduling cycle, a worker only while it changes them, never while a request is
on the wire; the metrics endpoint reads the core's state under it too.

Requests to the API server go through a client-side token bucket
(``--kube-api-qps``/``--kube-api-burst``, :mod:`.ratelimit`): one for the
scheduler's client (informers, claims, bindings, pod status), one for Events, as
kube-scheduler has; leader election is never held back by either.

Nothing here keeps state that the cluster does not: locks are rebuilt from
allocated claims on every start, so ``kill -9`` at any point loses nothing (a
claim written but whose pod was never bound is allocated and reserved; it is
accounted on restart, and the pod's next attempt uses that allocation).
"""

from __future__ import annotations

import json
import logging
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import Counter, Gauge, GCCollector, Histogram

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.keys import key_of
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.podclaims import claim_key
from dra_affinity.api.resource import ResourceClaim, ResourceSlice
from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.observe.metrics import SchedulerMetrics
from dra_affinity.observe.profiles import ThreadProfiles
from dra_affinity.observe.threads import ThreadCpuCollector
from dra_affinity.scheduler.binding import Binding
from dra_affinity.scheduler.gctune import tuned_gc
from dra_affinity.scheduler.scheduler import Attempt, Scheduler
from dra_affinity.structured.model import Result
from dra_affinity.structured.snapshot import Snapshot

from .api import Api
from .binder import DEFAULT_MAX_IN_FLIGHT, Binder
from .events import EventRecorder
from .fifo import ChangeFIFO
from .informer import Reflector
from .leader import LeaderElector
from .projection import pod_transform
from .queue import DEFAULT_UNSCHEDULABLE_TIMEOUT, ClusterEvent, SchedulingQueue, plugins_of
from .ratelimit import KUBE_API_BURST, KUBE_API_QPS, RateLimitedApi, TokenBucket
from .view import AFFINITY_POOLS_TAINT, WATCHED_KINDS, KubeView

log = logging.getLogger("dra_affinity.kube")

# Every pod that holds node resources (the kube-scheduler's pod informer watches the
# same): this scheduler's pending pods come from it, and so do the requests of pods
# already bound to each node, whoever bound them, for NodeResourcesFit.
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                   30.0, 60.0)


# Events' ``action`` by reason (what the scheduler was doing), as kube-scheduler sets it.
_ACTIONS = {"Scheduled": "Binding", "FailedScheduling": "Scheduling"}
# How often unschedulable pods are checked against the 5-minute limit (kube-scheduler: 30 s).
FLUSH_EVERY = 30.0
# How long shutdown waits for bindings in flight (each ends within its requests' timeouts).
BINDING_DRAIN_SECONDS = 30.0


@dataclass(frozen=True)
class _InFlight:
    """A binding handed to a worker, with what the attempt's metrics need."""

    binding: Binding
    waited: float | None  # since the pod was first queued, at the attempt's start
    t0: float  # perf_counter at the attempt's start


class KubeRecorder(Recorder):
    """Events go to the API server (:class:`.events.EventRecorder`, aggregated into series);
    scheduler warnings go to the log. Nothing accumulates in memory."""

    def __init__(self, view: KubeView, sink: EventRecorder | None = None) -> None:
        super().__init__()
        self.view = view
        self.sink = sink

    def event(self, obj: str, type_: str, reason: str, message: str) -> None:
        if self.sink is None:
            return
        kind, _, ref = obj.partition(" ")
        ns, _, name = ref.rpartition("/")
        regarding: dict[str, Any] = {"kind": kind, "name": name}
        if kind == "Pod":
            regarding.update(apiVersion=Pod.type_meta()[0], namespace=ns or "default")
            p = self.view.pod(ref)
            if p is not None and p.metadata.uid:
                regarding["uid"] = p.metadata.uid
        elif kind == "ResourceSlice":
            regarding["apiVersion"] = ResourceSlice.type_meta()[0]
        self.sink.record(regarding, type_, reason, _ACTIONS.get(reason, reason), message)

    def warn(self, message: str, **kv: str) -> None:
        log.warning(message, extra={"fields": kv})


@dataclass(frozen=True)
class Options:
    scheduler_name: str = "dra-affinity"
    identity: str = "dra-affinity"
    leader_elect: bool = True
    lease_namespace: str = "kube-system"
    lease_name: str = "dra-affinity-scheduler"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    metrics_port: int = 10359
    metrics_address: str = "0.0.0.0"
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    unschedulable_timeout: float = DEFAULT_UNSCHEDULABLE_TIMEOUT
    scoring: str = "firstfit"
    tolerated_taints: tuple[str, ...] = (AFFINITY_POOLS_TAINT,)
    # Client-side limit of each client (0: none); see docs/decisions.md for the defaults.
    kube_api_qps: float = KUBE_API_QPS
    kube_api_burst: int = KUBE_API_BURST
    # Binding cycles run on this many worker threads, at most one each (0: on the loop).
    max_in_flight_bindings: int = DEFAULT_MAX_IN_FLIGHT
    #: Tune the cyclic garbage collector once the informers have synced (gctune): it is
    #: process-wide, so only the process's entry point (``dra-affinity scheduler``) asks.
    tune_gc: bool = False
    #: Write CPU profiles of the loop, the binding workers, the reflectors and the Event
    #: sink into this folder (:mod:`dra_affinity.observe.profiles`); None: off.
    profile_dir: str | None = None


def connections(options: Options) -> int:
    """Requests one replica may have on the wire at once, so connections to keep alive:
    a watch per informer, the bindings in flight (or the loop's own), the loop's status
    writes, Events, and the Lease."""
    return len(WATCHED_KINDS) + max(options.max_in_flight_bindings, 1) + 3


class SchedulerProcess:
    """Everything one scheduler replica runs; :meth:`run` until stopped."""

    def __init__(self, api: Api, options: Options, features: Features | None = None) -> None:
        self.options = options
        self.metrics = SchedulerMetrics()
        r = self.metrics.registry
        r.register(ThreadCpuCollector())
        self.requests = Counter(
            "dra_affinity_rest_client_requests", "Requests to the API server by client, method "
            "and status (0: not answered).", ["client", "method", "code"], registry=r)
        self.rate_limited = Histogram(
            "dra_affinity_rest_client_rate_limiter_duration_seconds",
            "Time requests waited for the client-side rate limiter, by client.", ["client"],
            buckets=LATENCY_BUCKETS, registry=r)
        self.dropped = Counter("dra_affinity_dropped", "Items a bounded queue dropped when full, "
                               "by queue.", ["queue"], registry=r)
        self.raw_api = api
        self.api = self._client(api, "scheduler")
        self.core_lock = threading.RLock()
        self.changes = ChangeFIFO()
        self._gc_tuning = ExitStack()
        # Leader election has a client of its own, never held back by the rate limits.
        self.elector = (LeaderElector(api, namespace=options.lease_namespace,
                                      name=options.lease_name, identity=options.identity,
                                      lease_duration=options.lease_duration,
                                      renew_deadline=options.renew_deadline,
                                      retry_period=options.retry_period)
                        if options.leader_elect else None)
        # Fencing: the view checks the elector just before every write it sends.
        self.view = KubeView(self.api, on_problem=self._object_problem,
                             tolerated_taints=options.tolerated_taints,
                             may_write=self.elector.may_write if self.elector else None,
                             lock=self.core_lock)
        self.view.pod_listeners.append(self._pod_changed)
        self.view.subscribe(self)
        self.events = EventRecorder(self._client(api, "events"), component=options.scheduler_name,
                                    instance=options.identity,
                                    on_drop=self.dropped.labels("events").inc,
                                    may_write=self._may_write)
        self.recorder = KubeRecorder(self.view, self.events)
        self.scheduler = Scheduler(self.view, features or Features(), metrics=self.metrics,
                                   recorder=self.recorder, scoring=options.scoring,
                                   lock=self.core_lock)
        self.profiles = ThreadProfiles(options.profile_dir) if options.profile_dir else None
        self.binder: Binder[_InFlight] = Binder(options.max_in_flight_bindings, self._bind,
                                                profiles=self.profiles)
        # Pools' cross-slice problems as reported: slice name -> message (see _pool_problems).
        self._reported_pool_problems: dict[str, str] = {}
        self._slices_changed = False
        self.scheduler.cache.on_snapshot.append(self._pool_problems)
        self.queue = SchedulingQueue(options.initial_backoff, options.max_backoff,
                                     options.unschedulable_timeout)
        self.stopping = threading.Event()
        self.started = threading.Event()  # locks rebuilt, scheduling
        self.exit_code = 0
        self._next_flush = time.monotonic() + FLUSH_EVERY
        self.reflectors = [
            Reflector(self.api, kind, self.changes,
                      field_selector=NON_TERMINAL_PODS if kind == "Pod" else None,
                      transform=pod_transform(options.scheduler_name) if kind == "Pod" else None,
                      profiles=self.profiles)
            for kind in WATCHED_KINDS]
        self.attempt_seconds = Histogram(
            "dra_affinity_scheduling_attempt_duration_seconds",
            "One scheduling attempt (PreFilter to Bind), by result.", ["result"],
            buckets=LATENCY_BUCKETS, registry=r)
        self.e2e_seconds = Histogram(
            "dra_affinity_pod_scheduling_duration_seconds",
            "From the pod first seen pending to bound, retries included.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.attempts = Counter("dra_affinity_schedule_attempts", "Scheduling attempts by result.",
                                ["result"], registry=r)
        self.pending = Gauge("dra_affinity_pending_pods",
                             "Pods in the scheduling queue, by part (active, backoff, "
                             "unschedulable, gated, inFlight).", ["queue"], registry=r)
        # Its series by part, looked up once (observed after every turn of the loop).
        self._pending_by_part: dict[str, Any] = {}
        self.moved = Counter("dra_affinity_queue_incoming_pods", "Pods moved back to be tried "
                             "by a cluster event (or the periodic flush), by event.", ["event"],
                             registry=r)
        self.informer_queue = Gauge("dra_affinity_informer_queue_length", "Informer changes "
                                    "waiting to be applied (at most one per object).",
                                    registry=r)
        self.leader = Gauge("dra_affinity_leader", "1 while this replica leads and schedules.",
                            registry=r)
        GCCollector(registry=r)  # python_gc_collections_total{generation}: what tune_gc defers
        self._server: ThreadingHTTPServer | None = None
        self._event_thread: threading.Thread | None = None

    def _client(self, api: Api, name: str) -> Api:
        """``api`` behind a token bucket of its own (none with ``kube_api_qps`` 0)."""
        bucket = TokenBucket(self.options.kube_api_qps, self.options.kube_api_burst)
        waited = self.rate_limited.labels(name)
        counters: dict[tuple[str, int], Any] = {}  # a series' lookup takes a lock: once each

        def observe(method: str, status: int, seconds: float) -> None:
            counter = counters.get((method, status))
            if counter is None:
                counter = counters[method, status] = self.requests.labels(name, method, str(status))
            counter.inc()
            if bucket.limited:
                waited.observe(seconds)

        return RateLimitedApi(api, bucket, observe=observe)

    def _may_write(self) -> bool:
        """The view's fence, read at each Event write: Events leave only while we may write."""
        fence = self.view.may_write
        return fence is None or fence()

    # ============================================= callbacks (under core_lock: the loop thread,
    # or a binding worker whose write the view assumes)
    def _object_problem(self, kind: str, key: str, message: str) -> None:
        """A slice whose sharing-affinity metadata cannot be read (the view logs it)."""
        if kind != "ResourceSlice":
            return
        self.recorder.event(f"ResourceSlice {key}", "Warning", "SharingAffinityInvalid", message)

    def _pool_problems(self, snap: Snapshot) -> None:
        """Problems no slice has alone (two metadata slices of a pool declaring one key,
        their combined cost): logged and a Warning event on the slice that causes each,
        when a snapshot is built, once per slice and message (again if it comes back)."""
        current: dict[str, str] = {}
        for pool in snap.pools.values():
            for name, message in pool.affinity_problems:
                current[name] = f"{current[name]}; {message}" if name in current else message
        for name, message in current.items():
            if self._reported_pool_problems.get(name) != message:
                log.warning("ResourceSlice %s: %s", name, message)
                self._object_problem("ResourceSlice", name, message)
        self._reported_pool_problems = current

    def _pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        if new is None:
            if old is not None:
                self.queue.delete(key_of(old))
                if old.spec.node_name:
                    self._event(ClusterEvent.ASSIGNED_POD_DELETE)
            return
        if new.spec.node_name and (old is None or not old.spec.node_name
                                   or old.metadata.labels != new.metadata.labels):
            self._event(ClusterEvent.ASSIGNED_POD_ADD)
        key = key_of(new)
        if new.spec.node_name or new.metadata.deletion_timestamp or \
                new.spec.scheduler_name != self.options.scheduler_name or new.spec.scheduling_gates:
            self.queue.delete(key)
            return
        claims = [claim_key(new, prc) for prc in new.spec.resource_claims]
        if old is None or key not in self.queue:
            self.queue.add(key, new.spec.priority or 0, claims)
        else:
            self.queue.update(key, new.spec.priority or 0, claims, relevant=_relevant(old, new))

    def on_change(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None:
        """The view's listener: what changed, as the events that may move unschedulable pods."""
        if old is new:
            return  # a resync (the scheduler's cache is told again; nothing changed)
        if kind == "ResourceClaim":
            obj = new if new is not None else old
            assert obj is not None
            if isinstance(old, ResourceClaim) and old.status.allocation is not None and (
                    not isinstance(new, ResourceClaim) or new.status.allocation is None):
                self._event(ClusterEvent.CLAIM_RELEASE)
            if new is not None:
                self._event(ClusterEvent.CLAIM_CHANGE, claim=key_of(obj),
                            namespace=obj.namespace)
        elif kind == "ResourceSlice":
            self._slices_changed = True
            self._event(ClusterEvent.SLICE_CHANGE)
        elif kind == "DeviceClass" and new is not None:
            self._event(ClusterEvent.CLASS_CHANGE)
        elif kind == "Node" and isinstance(new, Node):
            for event in _node_events(old if isinstance(old, Node) else None, new):
                self._event(event)

    def _event(self, event: ClusterEvent, **where: str) -> None:
        moved = self.queue.on_event(event, **where)
        if moved:
            self.moved.labels(event.value).inc(moved)

    # ================================================================== the loop
    def _drain(self, wait: float) -> None:
        try:
            ch = self.changes.get(timeout=wait) if wait > 0 else self.changes.get_nowait()
        except queue.Empty:
            return
        with self.core_lock:
            self.view.apply(ch)
            for _ in range(10_000):  # bounded: a flood of changes still lets pods through
                try:
                    ch = self.changes.get_nowait()
                except queue.Empty:
                    break
                self.view.apply(ch)

    def leading(self) -> bool:
        """This replica schedules: it leads and its renew deadline has not passed."""
        return self.elector is None or (self.elector.is_leader.is_set() and self.elector.may_write())

    def loop(self) -> None:
        while not self.stopping.is_set():
            if self.elector is not None and self.elector.lost.is_set():
                self.exit_code = 1
                self.stopping.set()
                break
            with self.core_lock:
                ready_in = self.queue.next_ready_in() if self.started.is_set() else None
            wait = 0.0 if ready_in == 0 else min(ready_in or 0.2, 0.2)
            self._drain(wait)
            if not self.leading():
                continue
            if not self.started.is_set():
                if not self.view.has_synced():
                    continue
                with self.core_lock:
                    self.scheduler.start()
                if self.options.tune_gc:
                    # The informers' caches live as long as the process (see gctune).
                    self._gc_tuning.enter_context(tuned_gc())
                self.started.set()
                self.leader.set(1)
                log.info("scheduling started", extra={"fields": {
                    "nodes": len(self.view.nodes()), "nodesTotal": self.view.node_count(),
                    "slices": len(self.view.slices()),
                    "claims": len(self.view.claims()), "pending": len(self.queue)}})
                continue
            self.check_pools()
            with self.core_lock:
                self._flush_unschedulable()
                key = self.queue.pop()
            if key is not None:
                self.schedule_one(key)
            self.observe_queue()
            if self.profiles is not None:
                self.profiles.tick()

    def check_pools(self) -> None:
        """After slices changed, the snapshot now, so that the pools' problems are told
        at once rather than at the next attempt (the next cycle would build it anyway)."""
        if not self._slices_changed:
            return
        self._slices_changed = False
        with self.core_lock:
            self.scheduler.snapshot()

    def observe_queue(self) -> None:
        with self.core_lock:
            lengths = self.queue.lengths()
        for part, n in lengths.items():
            child = self._pending_by_part.get(part)
            if child is None:
                child = self._pending_by_part[part] = self.pending.labels(part)
            child.set(n)
        self.informer_queue.set(len(self.changes))

    def _flush_unschedulable(self) -> None:
        """Every 30 s: pods unschedulable for 5 minutes are tried again (the safety net)."""
        now = time.monotonic()
        if now < self._next_flush:
            return
        self._next_flush = now + FLUSH_EVERY
        moved = self.queue.flush()
        if moved:
            self.moved.labels("UnschedulableTimeout").inc(moved)

    def schedule_one(self, key: str) -> None:
        """The scheduling cycle of one pod from the queue; its binding cycle is handed to
        a binding worker (which blocks here while the in-flight bound is reached)."""
        with self.core_lock:
            pod0 = self.view.pod(key)
            missing = self.view.missing_claims(pod0) if pod0 is not None and \
                not pod0.spec.node_name else []
            if missing:
                # PreEnqueue, as the DynamicResources plugin does: no attempt (and no condition
                # or event) until the claims exist; their creation or a pod update lets it in.
                self.queue.gate(key)
                log.debug("waiting for claims", extra={"fields": {"pod": key, "missing": missing}})
                return
            waited = self.queue.waited(key)
            t0 = time.perf_counter()
            outcome = self.scheduler.scheduling_cycle(key)
        if isinstance(outcome, Binding):
            self.binder.submit(_InFlight(outcome, waited, t0))
        else:
            self._finish(key, outcome, waited, t0)

    def _bind(self, item: _InFlight) -> None:
        """A binding worker: PreBind and Bind, then what the attempt's outcome asks. A
        failed binding gave back its devices and the node resources it had assumed: the
        parked pods those could help move, as kube-scheduler does when it forgets an
        assumed pod."""
        attempt = self.scheduler.binding_cycle(item.binding)
        if attempt.result is not Result.SCHEDULED:
            with self.core_lock:
                self._event(ClusterEvent.ASSIGNED_POD_DELETE)
                if item.binding.cycle.chosen is not None and item.binding.cycle.chosen.shares:
                    self._event(ClusterEvent.CLAIM_RELEASE)
        self._finish(item.binding.key, attempt, item.waited, item.t0)

    def _finish(self, key: str, attempt: Attempt, waited: float | None, t0: float) -> None:
        """The attempt ended (in its scheduling or its binding cycle): requeue or forget
        the pod, metrics, log, and the PodScheduled condition of a pod that failed."""
        dt = time.perf_counter() - t0
        result = attempt.result.value
        self.attempt_seconds.labels(result).observe(dt)
        self.attempts.labels(result).inc()
        fields: dict[str, Any] = {"pod": key, "result": result, "seconds": round(dt, 6)}
        failed: Pod | None = None
        with self.core_lock:
            pod = self.view.pod(key)
            if attempt.result is Result.SCHEDULED:
                self.queue.done(key)
            elif pod is None or pod.spec.node_name:
                self.queue.delete(key)
            else:
                fields["retryIn"] = self.queue.failed(key, plugins_of(r.code for r in attempt.reasons))
                fields["queue"] = self.queue.where(key)
                failed = pod
        if attempt.result is Result.SCHEDULED:
            if waited is not None:
                self.e2e_seconds.observe(waited + dt)
            fields["node"] = attempt.node
            fields["devices"] = [a["device"] for a in attempt.allocations]
            log.info("scheduled", extra={"fields": fields})
        elif failed is not None:
            fields["reasons"] = [r.code for r in attempt.reasons]
            fields["message"] = attempt.message
            log.info("unschedulable" if attempt.result is not Result.ERROR else "error",
                     extra={"fields": fields})
            self.view.set_unschedulable(
                failed, "SchedulerError" if attempt.result is Result.ERROR else "Unschedulable",
                attempt.message)
        if self._event_thread is None:  # no thread (tests driving the loop by hand): send now
            self.events.send_pending()

    # ================================================================== HTTP
    def serve_http(self) -> int:
        proc = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    with proc.core_lock:
                        body = proc.metrics.exposition().encode()
                    self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
                elif path in ("/healthz", "/livez"):
                    alive = proc._loop_thread is not None and proc._loop_thread.is_alive()
                    self._send(200 if alive else 500, b"ok" if alive else b"loop stopped")
                elif path == "/readyz":
                    ok = proc.view.has_synced()
                    self._send(200 if ok else 503, b"ok" if ok else b"informers not synced")
                else:
                    self._send(404, b"not found")

            def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((self.options.metrics_address, self.options.metrics_port),
                                           Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="http", daemon=True).start()
        return int(self._server.server_address[1])

    _loop_thread: threading.Thread | None = None

    # ================================================================== lifecycle
    def run(self, *, install_signals: bool = True) -> int:
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stopping.set())
        port = self.serve_http() if self.options.metrics_port >= 0 else None
        log.info("starting", extra={"fields": {"schedulerName": self.options.scheduler_name,
                                               "identity": self.options.identity,
                                               "metricsPort": port}})
        for r in self.reflectors:
            r.start()
        if self.elector is not None:
            self.elector.start()
        self.binder.start()
        def events() -> None:
            self.events.run(self.stopping)
        self._event_thread = threading.Thread(target=self._profiled(events), name="events",
                                              daemon=True)
        self._event_thread.start()
        self._loop_thread = threading.Thread(target=self._profiled(self.loop),
                                             name="scheduling-loop")
        self._loop_thread.start()
        while self._loop_thread.is_alive():
            self._loop_thread.join(0.2)
        self.shutdown()
        return self.exit_code

    def _profiled(self, target: Callable[[], None]) -> Callable[[], None]:
        return self.profiles.thread(target) if self.profiles else target

    def shutdown(self) -> None:
        self.stopping.set()
        # Bindings in flight finish (or fail, fenced, once the Lease is lost) before the
        # Lease is released: another replica must not schedule on top of them.
        if not self.binder.stop(BINDING_DRAIN_SECONDS):
            log.warning("bindings still in flight at shutdown",
                        extra={"fields": {"inFlight": self.binder.in_flight()}})
        if self._event_thread is not None:
            self._event_thread.join(5)
            self._event_thread = None
            self.events.send_pending()  # what is left, best effort
        if self.elector is not None:
            self.elector.stop()  # releases the Lease if held
        for r in self.reflectors:
            r.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._gc_tuning.close()
        log.info("stopped", extra={"fields": {"exitCode": self.exit_code}})


def _node_events(old: Node | None, new: Node) -> list[ClusterEvent]:
    """What a Node change may have made possible."""
    if old is None:
        return [ClusterEvent.NODE_ADD]
    out = []
    if old.metadata.labels != new.metadata.labels:
        out.append(ClusterEvent.NODE_LABEL)
    if old.spec.taints != new.spec.taints:
        out.append(ClusterEvent.NODE_TAINT)
    if old.spec.unschedulable and not new.spec.unschedulable:
        out.append(ClusterEvent.NODE_SCHEDULABLE)
    if old.status.get("allocatable") != new.status.get("allocatable"):
        out.append(ClusterEvent.NODE_ALLOCATABLE)
    return out


def _relevant(old: Pod, new: Pod) -> bool:
    """An update that may change the outcome (not our own PodScheduled condition)."""
    return (old.spec != new.spec or old.metadata.labels != new.metadata.labels
            or old.status.get("resourceClaimStatuses") != new.status.get("resourceClaimStatuses"))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name,
            "msg": record.getMessage()}
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            out.update(fields)
        for k in ("lease", "identity"):
            if hasattr(record, k):
                out[k] = getattr(record, k)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


def setup_json_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    fmt = JsonFormatter()
    fmt.converter = time.gmtime
    handler.setFormatter(fmt)
    for name in ("dra_affinity",):
        lg = logging.getLogger(name)
        lg.handlers[:] = [handler]
        lg.setLevel(level)
        lg.propagate = False
