"""The scheduler: one attempt is PreFilter, Filter, Score, Reserve, PreBind, Bind.

Phases follow the kube-scheduler's DynamicResources plugin, each in its own
module with one job, reading the per-cycle state PreFilter wrote:

* :mod:`.cycle`: PreFilter (claims and classes resolved; missing ones are
  UnschedulableAndUnresolvable) and the cycle's extraction memo, so extractors
  run once per request and extractor set;
* :mod:`.filter`: Filter (the pure per-node allocator, node by node) and Score;
  :mod:`.fastpath` finds the same node with less work;
* :mod:`.reserve`: Reserve re-checks Filter's keys against the live cache and
  records tentative shares and locks atomically;
* :mod:`.binding`: PreBind writes the claims, Bind the pod; only when both are
  stored are the shares committed (assume after the API call); Unreserve takes
  out exactly this cycle's shares and undoes on the server only what this
  cycle wrote;
* :mod:`.reconstruct`: AffinityStates rebuilt from bound claims on start, and
  re-derived when a pool's extractors change.

An attempt is two cycles, as in kube-scheduler: the scheduling cycle
(:meth:`Scheduler.scheduling_cycle`, PreFilter to Reserve) and the binding cycle
(:meth:`Scheduler.binding_cycle`, PreBind and Bind, then commit or Unreserve). A
caller may run binding cycles on other threads while the next pod is scheduled
against the assumed state: the Reserved shares, the claims in flight and the pod
assumed on its node (:meth:`~.nodefit.NodeUsage.assume`). The writes leave without
``lock`` held; every change of the cache is made under it. :meth:`schedule` runs
both cycles in line (the simulator, the tools).

The cluster is reached only through :class:`~dra_affinity.scheduler.view.ClusterView`.
Errors are split as in the plugin: an :class:`~dra_affinity.structured.model.Abort`
ends the attempt (an authoring error: Error, or UnschedulableAndUnresolvable);
a node that does not fit only adds reasons (Unschedulable when none fits); a
write that lost a race is Unschedulable, one the API server refused or did not
answer is an Error (both retried with backoff).
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.keys import key_of
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.podclaims import pod_claim_keys, reserved_for_others
from dra_affinity.api.resource import parse_device_id
from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.observe.metrics import (
    EVALUATIONS,
    LOCK_CONFLICT,
    NO_KEYS,
    STALE_VERDICTS,
    VERDICTS_COMPUTED,
    VERDICTS_REUSED,
    GaugeValues,
    SchedulerMetrics,
)
from dra_affinity.structured import reasons
from dra_affinity.structured.affinity import AffinityStatus
from dra_affinity.structured.allocator import Counters, with_share_ids
from dra_affinity.structured.extraction import ExtractionResult
from dra_affinity.structured.model import Abort, NodeResult, Reason, Result
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState, Share

from .binding import Binding, begin, bind, commit, prebind, unreserve
from .cache import SchedulerCache
from .cycle import Attempt, CycleState, prefilter
from .fastpath import FastPaths
from .fastpath.contentkey import ContentCache
from .fastpath.filter import IndexedFilter
from .fastpath.verdicts import VerdictCache
from .filter import FIRSTFIT, SCORING, filter_node, fit_error_message, full_scan, placement_conflict
from .nodefit import NodeUsage
from .reconstruct import Reconstructor
from .reserve import allocation_rows, claim_statuses, refresh_claims, reserve
from .view import ClusterView, WriteConflict, WriteError

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
        lock: AbstractContextManager[Any] | None = None,
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
        self.verdicts = VerdictCache(self.cache) if self.fast_paths.verdict_cache else None
        # The verdict cache's counters (reused, computed, stale) as last folded into the metrics.
        self._verdicts_counted = (0, 0, 0)
        self.reconstructor = Reconstructor(self.cache, self.metrics, self.recorder)
        # Extraction outcomes by content, for this scheduler's life (a fast path).
        self.extraction_cache = ContentCache() if self.fast_paths.extraction_cache else None
        # Every extraction outcome by claim identity, for this scheduler's life (a bound on
        # what a hostile claim costs: its budget once, not once per retry; not a switch).
        self.outcomes: dict[Hashable, ExtractionResult] = {}
        self.last_filter_seconds = 0.0
        # Claims whose state on the server an earlier failed write left unknown: they
        # are accounted as that write asked, until a read of the server settles them.
        self.unresolved: dict[str, None] = {}
        # Binding cycles begun and not ended, by pod: the pod counts on its node meanwhile.
        self.binding: dict[str, Binding] = {}
        # Held for every change of the cache by a binding cycle (a caller that runs them on
        # other threads passes the lock its scheduling cycles hold); none by default.
        self.lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
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
            self.cache.usage.update(key_of(pod), pod)
        self._started = True
        self._refresh_gauges()

    def stop(self) -> None:
        self.view.unsubscribe(self)
        if self.verdicts is not None:
            self.verdicts.close()

    # ================================================================== informer hooks
    def on_change(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None:
        if kind == "Pod":
            obj = new if new is not None else old
            if self._started and isinstance(obj, Pod):  # before start(), start() reads them all
                key = key_of(obj)
                if key in self.binding:
                    return  # assumed on its node until its binding cycle ends
                self.cache.usage.update(key, new if isinstance(new, Pod) else None)
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
    def schedule(self, pod_key: str) -> Attempt:
        """One scheduling attempt: PreFilter, Filter, Score, Reserve, PreBind, Bind."""
        return self.schedule_concurrently([pod_key])[0]

    def schedule_concurrently(self, pod_keys: Sequence[str]) -> list[Attempt]:
        """All pods Filter on one snapshot of the cache, then Reserve and Bind in order."""
        self._begin_cycle()
        cycles = [self._prefiltered(key) for key in pod_keys]
        out: list[Attempt] = []
        for item in cycles:
            if isinstance(item, CycleState):
                reserved = self._reserve(item)
                item = reserved if isinstance(reserved, Attempt) else self.binding_cycle(reserved)
            out.append(item)
        self._refresh_gauges()
        return out

    def scheduling_cycle(self, pod_key: str) -> Attempt | Binding:
        """The scheduling cycle alone, PreFilter to Reserve: the attempt when it ended
        there, else the :class:`Binding` that :meth:`binding_cycle` completes (on this
        thread or another). Until then the pod counts on its node and its claims are in
        flight, so the next cycle sees them."""
        self._begin_cycle()
        item = self._prefiltered(pod_key)
        out = self._reserve(item) if isinstance(item, CycleState) else item
        self._refresh_gauges()
        return out

    def binding_cycle(self, binding: Binding) -> Attempt:
        """PreBind and Bind, then commit (every write stored) or Unreserve. The writes
        are sent without :attr:`lock`; the cache changes under it."""
        step = "PreBind"
        try:
            prebind(self.view, binding)
            step = "Bind"
            bind(self.view, binding)
        except WriteError as e:
            with self.lock:
                attempt = self._unreserve(binding, step, e)
                self._end_binding(binding)
                return attempt
        cyc, node = binding.cycle, binding.node
        with self.lock:
            commit(self.cache, self.metrics, binding)
            self._end_binding(binding)
            self.recorder.event(f"Pod {cyc.key}", "Normal", "Scheduled",
                                f"Successfully assigned {cyc.key} to {node}")
        return Attempt(cyc.key, Result.SCHEDULED, node, binding.allocation_rows(), [],
                       f"assigned to {node}")

    def _begin_cycle(self) -> None:
        if not self._started:
            self.start()
        self.resolve()

    def _prefiltered(self, key: str) -> CycleState | Attempt:
        """PreFilter and Filter for one pod: its cycle state, or the attempt's end."""
        pod = self.view.pod(key)
        if pod is None:
            msg = f"pod {key} does not exist (deleted or never created)"
            return Attempt(key, Result.UNRESOLVABLE, reasons=[Reason(reasons.POD_NOT_FOUND, msg)],
                           message=msg)
        if pod.spec.node_name:
            return self._already_bound(pod, key)
        blocked = self._claims_unsettled(key, pod_claim_keys(pod))
        if blocked is not None:
            return blocked
        try:
            cyc = prefilter(self.view, self.features, pod, self.extraction_cache, self.outcomes)
            self._filter(cyc, self.state)
        except Abort as a:
            return self._aborted(key, a)
        return cyc

    def _claims_unsettled(self, key: str, claim_keys: Sequence[str]) -> Attempt | None:
        """The attempt's end when one of the pod's claims is not settled: an earlier write
        left it unknown, or another pod's binding cycle is writing it. Asked at PreFilter
        and again at Reserve (a pod earlier in the same batch may have unsettled it)."""
        unknown = [c for c in claim_keys if c in self.unresolved]
        if unknown:
            return self._error(key, Reason(
                reasons.BIND_FAILED, f"claim {unknown[0]}: the outcome of an earlier write is not "
                "known yet (the API server could not be read back); retrying"))
        busy = [c for c in claim_keys if self.cache.in_flight.get(c, key) != key]
        if busy:
            # Another pod's binding cycle is writing this claim: its outcome decides what
            # this pod finds (kube-scheduler: the claim is being allocated). Retried.
            msg = (f"claim {busy[0]} is being written for pod {self.cache.in_flight[busy[0]]} "
                   "(its binding is in flight); retrying")
            return self._failed(key, [Reason(reasons.RESERVE_CONFLICT, msg)], msg)
        return None

    def resolve(self) -> None:
        """Read back claims an earlier failed write left unknown, and account them as
        the server has them (those still unreachable stay unresolved)."""
        for key in list(self.unresolved):
            try:
                claim = self.view.read_claim(key)
            except WriteError:
                continue
            del self.unresolved[key]
            self.reconstructor.account(key, claim)

    # ================================================================== Filter and Score
    def _filter(self, cyc: CycleState, state: AllocatedState) -> None:
        snap = self.snapshot()
        t0 = time.perf_counter()
        try:
            if not snap.nodes:
                cyc.node_reasons.append(Reason(reasons.NO_NODES, "no nodes in the cluster"))
            cyc.filtered_on = (snap, state, state.version)
            cyc.usage_version = self.cache.usage.version
            found = indexed = False
            if self.indexed.applies(cyc, state):
                indexed = True
                found = self.indexed.find(cyc, snap, state, self.scoring)
                if not found:
                    # Nothing fits: a full pass gives every node's reasons (see _scan).
                    cyc.counters = Counters()
            if not found:
                self._scan(cyc, snap, state, after_indexes=indexed)
            if cyc.chosen is not None:
                cyc.chosen = with_share_ids(cyc.chosen, cyc.to_allocate, state)
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
            if self.verdicts is not None:
                self._count_verdicts(self.verdicts, pending)

    def _scan(self, cyc: CycleState, snap: Snapshot, state: AllocatedState, *,
              after_indexes: bool) -> None:
        """The full scan, through the kept verdicts when they apply. ``after_indexes``:
        the indexes found nothing, so this pass is for every node's reasons and changed
        nodes are filtered whole; a pod tried again reuses the rejections it (or a pod
        of its signature) met while the nodes are unchanged."""
        check = self.verdicts.for_cycle(cyc, snap, state, self.scoring, whole=after_indexes) \
            if self.verdicts is not None else None
        full_scan(self.cache, cyc, snap, state, self.scoring, check)
        if check is not None and not check.finish():
            # A kept verdict disagreed with a fresh one: scan again without them.
            cyc.chosen, cyc.scores, cyc.rejected = None, None, []
            cyc.counters = Counters()
            full_scan(self.cache, cyc, snap, state, self.scoring)

    # ================================================================== Reserve .. Bind
    def _reserve(self, cyc: CycleState) -> Attempt | Binding:
        """Reserve: the shares recorded as tentative, the claims in flight, the pod
        assumed on its node; the binding cycle to run."""
        if cyc.chosen is None:
            total = len(self.snapshot().nodes)
            if cyc.failure is not None and cyc.failure[0] == total:
                return self._failed(cyc.key, list(cyc.failure[1]), cyc.failure[2])
            why = cyc.reasons()
            return self._failed(cyc.key, why, fit_error_message(total, why))
        blocked = self._claims_unsettled(cyc.key, [f"{c.namespace}/{c.name}" for c in cyc.claims])
        if blocked is not None:
            return blocked
        node = cyc.chosen.node
        conflict = (refresh_claims(self.view, cyc) or placement_conflict(self.cache, cyc)
                    or reserve(self.state, self.snapshot(), cyc))
        if conflict is not None:
            return self._failed(cyc.key, [conflict], f"Reserve failed on node {node}: {conflict.message}")
        claims, changes = claim_statuses(cyc, self.snapshot(), self.view.classes(), node)
        binding = Binding(cyc, node, claims, changes)
        begin(self.cache, binding)
        self.binding[cyc.key] = binding
        self.cache.usage.assume(cyc.key, cyc.pod, node, cyc.placement)
        return binding

    def _end_binding(self, binding: Binding) -> None:
        """The binding cycle ended: the pod counts as the view has it (bound or not)."""
        if self.binding.pop(binding.key, None) is not None:
            self.cache.usage.update(binding.key, self.view.pod(binding.key))

    def _unreserve(self, binding: Binding, step: str, e: WriteError) -> Attempt:
        """A step of the binding cycle failed: Unreserve, and the attempt's outcome."""
        unknown = unreserve(self.view, self.cache, self.reconstructor, binding)
        self.unresolved.update(dict.fromkeys(unknown))
        what = (f"binding pod {binding.key} to node {binding.node} failed" if step == "Bind"
                else f"writing the claims of pod {binding.key} for node {binding.node} failed")
        if binding.maybe_bound:
            undone = "the pod may be bound; its claims are kept as written"
        elif unknown:
            # Their allocations and locks are accounted as written (fail closed):
            # only the rest of this attempt is undone.
            undone = (f"claims {', '.join(sorted(unknown))} are kept as written, with their "
                      "devices and locks, until the API server can be read back; the rest of "
                      "this attempt is rolled back")
        else:
            undone = "this attempt's allocations and locks rolled back"
        reason = Reason(reasons.BIND_FAILED, f"{what}: {e}; {undone}", binding.node)
        if isinstance(e, WriteConflict):
            return self._failed(binding.key, [reason], reason.message)
        return self._error(binding.key, reason)

    def _failed(self, key: str, why: list[Reason], msg: str) -> Attempt:
        self.recorder.event(f"Pod {key}", "Warning", "FailedScheduling", msg)
        return Attempt(key, Result.UNSCHEDULABLE, None, [], why, msg)

    def _error(self, key: str, reason: Reason) -> Attempt:
        """An error that is not the pod's (the API server's, say): retried with backoff."""
        self.recorder.event(f"Pod {key}", "Warning", "FailedScheduling", reason.message)
        return Attempt(key, Result.ERROR, None, [], [reason], reason.message)

    def _already_bound(self, pod: Pod, key: str) -> Attempt:
        rows: list[dict[str, Any]] = []
        for ckey in pod_claim_keys(pod):
            c = self.view.claim(ckey)
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
        for ckey in pod_claim_keys(pod):
            c = self.view.claim(ckey)
            if c is None or c.status.allocation is None:
                continue
            if reserved_for_others(c, pod):
                continue  # the claim stays allocated for its other consumers
            ckey = key_of(c)
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

    def _count_verdicts(self, verdicts: VerdictCache, pending: dict[str, int]) -> None:
        """The verdict cache's counters since the last cycle, into the pending tallies: read
        once a cycle, so the scan pays nothing per node for the metrics."""
        reused, computed, stale = self._verdicts_counted
        pending[VERDICTS_REUSED] += verdicts.reused - reused
        pending[VERDICTS_COMPUTED] += verdicts.computed - computed
        pending[STALE_VERDICTS] += verdicts.stale - stale
        self._verdicts_counted = (verdicts.reused, verdicts.computed, verdicts.stale)

    def _gauge_values(self) -> GaugeValues:
        per_pool: dict[tuple[str, str], tuple[int, int]] = {}
        locked = unrec = 0
        for did, st in self.state.affinity_states.items():
            driver, pool, _ = parse_device_id(did)
            lk, ur = per_pool.get((driver, pool), (0, 0))
            if st.status is AffinityStatus.LOCKED:
                locked += 1
                lk += 1
            elif st.status is AffinityStatus.UNRECONSTRUCTABLE:
                unrec += 1
                ur += 1
            per_pool[(driver, pool)] = (lk, ur)
        signatures = self.verdicts.signatures if self.verdicts is not None else 0
        return GaugeValues(locked, unrec, per_pool, signatures)
