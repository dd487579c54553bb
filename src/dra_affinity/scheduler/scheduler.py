"""The scheduler: one attempt is PreFilter, Filter, Score, Reserve, PreBind, Bind.

Phases follow the kube-scheduler's DynamicResources plugin, each in its own
module with one job, reading the per-cycle state PreFilter wrote:

* :mod:`.cycle`: PreFilter (claims and classes resolved; missing ones are
  UnschedulableAndUnresolvable) and the cycle's extraction memo, so extractors
  run once per request and extractor set;
* :mod:`.filter`: Filter (the pure per-node allocator, node by node) and Score;
  :mod:`.fastpath` finds the same node with less work;
* :mod:`.reserve`: Reserve re-checks Filter's keys against the live cache and
  records tentative shares and locks atomically; Unreserve removes only this
  pod's; PreBind writes the claims, Bind the pod;
* :mod:`.reconstruct`: AffinityStates rebuilt from bound claims on start, and
  re-derived when a pool's extractors change.

The cluster is reached only through :class:`~dra_affinity.scheduler.view.ClusterView`.
Errors are split as in the plugin: an :class:`~dra_affinity.structured.model.Abort`
ends the attempt (an authoring error: Error, or UnschedulableAndUnresolvable);
a node that does not fit only adds reasons (Unschedulable when none fits).
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.meta import TypedObject
from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.observe.metrics import (
    COMPATIBLE_REUSE,
    EVALUATIONS,
    LOCK_CONFLICT,
    NO_KEYS,
    SchedulerMetrics,
)
from dra_affinity.structured import reasons
from dra_affinity.structured.affinity import AffinityStatus
from dra_affinity.structured.allocator import Counters
from dra_affinity.structured.extraction import ExtractionResult
from dra_affinity.structured.model import Abort, NodeResult, Reason, Result
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState, Share

from .cache import SchedulerCache
from .cycle import Attempt, CycleState, claim_name, prefilter
from .fastpath import FastPaths
from .fastpath.contentkey import ContentCache
from .fastpath.filter import IndexedFilter
from .filter import FIRSTFIT, SCORING, filter_node, full_scan
from .nodefit import NodeUsage
from .reconstruct import Reconstructor
from .reserve import (
    allocation_rows,
    claim_statuses,
    refresh_claims,
    reserve,
    result_tuples,
    unreserve,
)
from .view import ClusterView, WriteConflict

__all__ = ["RECENT_EVENTS", "Attempt", "Scheduler"]

# Events and warnings kept by a scheduler's own recorder (one not passed in).
RECENT_EVENTS = 1024


class Scheduler:
    """A DRA scheduler with sharing affinity over a :class:`ClusterView`."""

    def __init__(
        self,
        view: ClusterView,
        features: Features | None = None,
        *,
        metrics: SchedulerMetrics | None = None,
        recorder: Recorder | None = None,
        scoring: str = FIRSTFIT,
        fast_paths: FastPaths | None = None,
    ) -> None:
        if scoring not in SCORING:
            raise ValueError(f"unknown scoring {scoring!r} (one of {', '.join(SCORING)})")
        self.view = view
        self.features = features or Features()
        self.metrics = metrics or SchedulerMetrics()
        # Without a recorder of the caller's, keep only recent events: a scheduler that
        # runs for long must not grow with every pod it ever scheduled.
        self.recorder = recorder if recorder is not None else Recorder(limit=RECENT_EVENTS)
        self.scoring = scoring
        self.fast_paths = fast_paths or FastPaths()
        self.cache = SchedulerCache(view, self.features)
        self.indexed = IndexedFilter(self.cache, self.fast_paths)
        self.reconstructor = Reconstructor(self.cache, self.metrics, self.recorder)
        # Extraction outcomes by content, for this scheduler's life (a fast path).
        self.extraction_cache = ContentCache() if self.fast_paths.extraction_cache else None
        # Every extraction outcome by claim identity, for this scheduler's life (a bound on
        # what a hostile claim costs: its budget once, not once per retry; not a switch).
        self.outcomes: dict[Hashable, ExtractionResult] = {}
        self.last_filter_seconds = 0.0
        self._started = False
        view.subscribe(self)

    @property
    def state(self) -> AllocatedState:
        return self.cache.state

    def snapshot(self) -> Snapshot:
        return self.cache.snapshot()

    # ================================================================== lifecycle
    def start(self) -> None:
        """Rebuild AffinityStates from bound claims and slices before the first cycle,
        and what the pods bound to each node request."""
        self.reconstructor.rebuild()
        # Build the snapshot and the fast paths' indexes now, not in the first cycle.
        self.indexed.warm()
        self.cache.usage = NodeUsage()
        for pod in self.view.pods():
            self.cache.usage.update(f"{pod.namespace}/{pod.name}", pod)
        self._started = True
        self._refresh_gauges()

    def stop(self) -> None:
        self.view.unsubscribe(self)

    # ================================================================== informer hooks
    def on_change(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None:
        if kind == "Pod":
            obj = new if new is not None else old
            if self._started and isinstance(obj, Pod):  # before start(), start() reads them all
                self.cache.usage.update(f"{obj.namespace}/{obj.name}", new if isinstance(new, Pod) else None)
            return
        if kind in ("ResourceSlice", "Node", "DeviceClass"):
            self.cache.invalidate(classes=kind == "DeviceClass")
            if kind == "ResourceSlice" and self._started:
                self.reconstructor.reconcile_pools()
                self._refresh_gauges()
            return
        if kind == "ResourceClaim" and self._started:
            self.reconstructor.sync_claim(old, new)
            self._refresh_gauges()

    # ================================================================== entry points
    def schedule(self, pod_key: str, *, fail_bind: bool = False, fail_prepare: bool = False) -> Attempt:
        """One scheduling attempt: PreFilter, Filter, Score, Reserve, PreBind, Bind."""
        return self.schedule_concurrently([pod_key], fail_bind={pod_key} if fail_bind else set(),
                                          fail_prepare={pod_key} if fail_prepare else set())[0]

    def schedule_concurrently(self, pod_keys: Sequence[str], *, fail_bind: set[str] | None = None,
                              fail_prepare: set[str] | None = None) -> list[Attempt]:
        """All pods Filter on one snapshot of the cache, then Reserve and Bind in order."""
        if not self._started:
            self.start()
        fail_bind = fail_bind or set()
        fail_prepare = fail_prepare or set()
        cycles: list[CycleState | Attempt] = []
        for key in pod_keys:
            pod = self.view.pod(key)
            if pod is None:
                msg = f"pod {key} does not exist (deleted or never created)"
                cycles.append(Attempt(key, Result.UNRESOLVABLE, reasons=[
                    Reason(reasons.POD_NOT_FOUND, msg)], message=msg))
                continue
            if pod.spec.node_name:
                cycles.append(self._already_bound(pod, key))
                continue
            try:
                cyc = prefilter(self.view, self.features, pod, self.extraction_cache, self.outcomes)
                self._filter(cyc, self.state)
                cycles.append(cyc)
            except Abort as a:
                cycles.append(self._aborted(key, a))
        out: list[Attempt] = []
        for item in cycles:
            if isinstance(item, Attempt):
                out.append(item)
                continue
            out.append(self._finish(item, item.key in fail_bind, item.key in fail_prepare))
        self._refresh_gauges()
        return out

    # ================================================================== Filter and Score
    def _filter(self, cyc: CycleState, state: AllocatedState) -> None:
        snap = self.snapshot()
        t0 = time.perf_counter()
        try:
            if not snap.nodes:
                cyc.node_reasons.append(Reason(reasons.NO_NODES, "no nodes in the cluster"))
            cyc.filtered_on = (snap, state, state.version)
            if self.indexed.applies(cyc, state):
                if self.indexed.find(cyc, snap, state, self.scoring):
                    return
                # Nothing fits: a full pass gives every node's reasons (rare, off the hot path).
                cyc.counters = Counters()
            full_scan(self.cache, cyc, snap, state, self.scoring)
        finally:
            self.last_filter_seconds = time.perf_counter() - t0
            self.metrics.filter_seconds.observe(self.last_filter_seconds)
            pending = self.metrics.pending
            if cyc.memo.evaluations:
                pending[EVALUATIONS] += cyc.memo.evaluations
                cyc.memo.evaluations = 0
            if cyc.counters.lock_conflicts:
                pending[LOCK_CONFLICT] += cyc.counters.lock_conflicts
            if cyc.counters.no_keys:
                pending[NO_KEYS] += cyc.counters.no_keys
            cyc.counters = Counters()

    # ================================================================== Reserve .. Bind
    def _finish(self, cyc: CycleState, fail_bind: bool, fail_prepare: bool) -> Attempt:
        if cyc.chosen is None:
            msg = _summary(len(self.snapshot().nodes), cyc.node_reasons)
            return self._failed(cyc.key, [*cyc.node_reasons], msg)
        node = cyc.chosen.node
        conflict = refresh_claims(self.view, cyc) or reserve(self.state, self.snapshot(), cyc)
        if conflict is not None:
            return self._failed(cyc.key, [conflict], f"Reserve failed on node {node}: {conflict.message}")
        if fail_bind:
            unreserve(self.state, cyc)
            reason = Reason(reasons.BIND_FAILED, f"binding pod {cyc.key} to node {node} failed; "
                            "tentative allocations and locks rolled back", node)
            return self._failed(cyc.key, [reason], reason.message)
        try:
            rows = self._bind(cyc, node)
        except WriteConflict as e:
            unreserve(self.state, cyc)
            reason = Reason(reasons.BIND_FAILED, f"binding pod {cyc.key} to node {node} failed: {e}; "
                            "tentative allocations and locks rolled back", node)
            return self._failed(cyc.key, [reason], reason.message)
        self.recorder.event(f"Pod {cyc.key}", "Normal", "Scheduled",
                            f"Successfully assigned {cyc.key} to {node}")
        if fail_prepare:
            self.recorder.event(f"Pod {cyc.key}", "Warning", "FailedPrepareDynamicResources",
                                f"NodePrepareResources failed on node {node}; the allocation and "
                                "affinity locks stay until the claims are deallocated")
        return Attempt(cyc.key, Result.SCHEDULED, node, rows, [], f"assigned to {node}")

    def _bind(self, cyc: CycleState, node: str) -> list[dict[str, Any]]:
        """PreBind (claim statuses) and Bind (the pod); the cache is updated first, so
        the cluster's change notifications find it already in sync."""
        assert cyc.chosen is not None
        written = claim_statuses(cyc, self.snapshot(), self.view.classes(), node)
        for c in written:
            self.cache.recorded[f"{c.namespace}/{c.name}"] = result_tuples(c)
        for s in cyc.chosen.shares:
            self.state.commit(s.device.id, s.claim)
            if s.reused_lock:
                self.metrics.pending[COMPATIBLE_REUSE] += 1
        out: list[dict[str, Any]] = []
        for c in written:
            self.view.write_claim_status(c)
            out.extend(allocation_rows(c))
        self.view.bind_pod(cyc.pod, node)
        return out

    def _failed(self, key: str, why: list[Reason], msg: str) -> Attempt:
        self.recorder.event(f"Pod {key}", "Warning", "FailedScheduling", msg)
        return Attempt(key, Result.UNSCHEDULABLE, None, [], why, msg)

    def _already_bound(self, pod: Pod, key: str) -> Attempt:
        rows: list[dict[str, Any]] = []
        for prc in pod.spec.resource_claims:
            c = self.view.claim(f"{pod.namespace}/{claim_name(pod, prc)}")
            if c is not None and c.status.allocation is not None:
                rows.extend(allocation_rows(c))
        return Attempt(key, Result.SCHEDULED, pod.spec.node_name, rows, [],
                       f"pod {key} is already bound to {pod.spec.node_name}")

    def _aborted(self, key: str, a: Abort) -> Attempt:
        kind = {Result.ERROR: "error", Result.UNRESOLVABLE: "unresolvable"}.get(a.result, "unschedulable")
        msg = f"{a.reason.message}"
        self.recorder.event(f"Pod {key}", "Warning", "FailedScheduling",
                            f"{'running Filter plugin DynamicResources: ' if kind == 'error' else ''}{msg}")
        return Attempt(key, a.result, None, [], [a.reason], msg)

    # ================================================================== diagnostics
    def prefilter(self, pod: Pod) -> CycleState:
        """PreFilter alone (diagnostics and preemption); raises :class:`Abort`."""
        return prefilter(self.view, self.features, pod, self.extraction_cache, self.outcomes)

    def fits_on(self, state: AllocatedState, pod_key: str, node: str) -> NodeResult:
        """Filter for one pod on one node against a what-if state (nothing is changed)."""
        pod = self.view.pod(pod_key)
        if pod is None:
            raise KeyError(pod_key)
        return filter_node(self.cache, self.prefilter(pod), node, self.snapshot(), state, self.scoring)

    # ================================================================== preemption hooks (KEP-5690)
    def _pod_shares(self, pod_key: str) -> list[tuple[str, Share]]:
        """Shares held only on behalf of this pod (claims no other pod reserves)."""
        pod = self.view.pod(pod_key)
        if pod is None:
            return []
        out: list[tuple[str, Share]] = []
        for prc in pod.spec.resource_claims:
            c = self.view.claim(f"{pod.namespace}/{claim_name(pod, prc)}")
            if c is None or c.status.allocation is None:
                continue
            others = [r for r in c.status.reserved_for
                      if not (r.resource == "pods" and r.name == pod.name)]
            if others:
                continue  # the claim stays allocated for its other consumers
            ckey = f"{c.namespace}/{c.name}"
            for did, _req, _sid in self.cache.recorded.get(ckey, []):
                for sh in self.state.shares(did):
                    if sh.claim == ckey:
                        out.append((did, sh))
        return out

    def remove_pod(self, state: AllocatedState, pod_key: str) -> None:
        """RemovePod: take a pod's allocations out of a what-if state, capacity and locks
        together, so removing the last lock holder leaves the device Clean."""
        seen: set[tuple[str, str]] = set()
        for did, sh in self._pod_shares(pod_key):
            if (did, sh.claim) not in seen:
                seen.add((did, sh.claim))
                state.remove(did, sh.claim)

    def add_pod(self, state: AllocatedState, pod_key: str) -> None:
        """AddPod: put a pod's allocations (back) into a what-if state, folding their
        keys into the locks exactly as Reserve does."""
        for did, sh in self._pod_shares(pod_key):
            already = any(x.claim == sh.claim and x.request == sh.request and
                          x.share_id == sh.share_id for x in state.shares(did))
            if not already:
                state.add(did, sh, exclusive=not sh.consumed and sh.share_id is None)

    # ================================================================== observability
    def _refresh_gauges(self) -> None:
        """Gauges are computed when metrics are read, not on every cycle."""
        self.metrics.bind_state(self._gauge_values)

    def _gauge_values(self) -> tuple[int, int, dict[tuple[str, str], tuple[int, int]]]:
        per_pool: dict[tuple[str, str], tuple[int, int]] = {}
        locked = unrec = 0
        for did, st in self.state.affinity_states.items():
            driver, pool, _ = did.split("/", 2)
            lk, ur = per_pool.get((driver, pool), (0, 0))
            if st.status is AffinityStatus.LOCKED:
                locked += 1
                lk += 1
            elif st.status is AffinityStatus.UNRECONSTRUCTABLE:
                unrec += 1
                ur += 1
            per_pool[(driver, pool)] = (lk, ur)
        return locked, unrec, per_pool


def _summary(total: int, node_reasons: Sequence[Reason]) -> str:
    """kube-scheduler style: '0/2 nodes are available: 2 AffinityLockMismatch.' plus details."""
    by_node: dict[str, list[str]] = {}
    for r in node_reasons:
        by_node.setdefault(r.node or "", []).append(r.code)
    counts: dict[str, int] = {}
    for codes in by_node.values():
        for code in dict.fromkeys(codes):
            counts[code] = counts.get(code, 0) + 1
    parts = ", ".join(f"{n} {code}" for code, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
    head = f"0/{total} nodes are available" + (f": {parts}." if parts else ".")
    affinity = [r.message for r in node_reasons if r.code in reasons.AFFINITY_CODES]
    if affinity:
        head += " " + "; ".join(dict.fromkeys(affinity[:4]))
    return head
