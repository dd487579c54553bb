"""The scheduler core: PreFilter, Filter, Score, Reserve, Unreserve, Bind.

Phases follow the scheduler framework's DynamicResources plugin, each with one
job and state passed explicitly:

* PreFilter resolves the pod's claims and classes (missing ones end the
  attempt as UnschedulableAndUnresolvable) and builds a per-cycle
  extraction memo, so extractors run once per request and extractor set.
* Filter runs the pure per-node allocator for each node in order.
* Score picks a node (first-fit: the first feasible node, the KEP's alpha).
* Reserve re-checks the keys Filter extracted against the live cache and
  records tentative shares and locks atomically (no second CEL pass).
* Bind writes the allocation; a failed bind runs Unreserve, which removes
  only this pod's tentative shares, so no ghost lock survives.

Affinity state is rebuilt from bound claims and slices on start (restart),
and reconciled when a pool's extractors change.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.resource import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceClass,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from dra_affinity.cel import SELECTOR_ENV, CELError, OutcomeKind
from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.observe.metrics import (
    COMPATIBLE_REUSE,
    EVALUATIONS,
    LOCK_CONFLICT,
    NO_KEYS,
    SchedulerMetrics,
)
from dra_affinity.scheduler.fastpath.freeindex import FreeIndex
from dra_affinity.scheduler.fastpath.nodeindex import NodeIndex, Verdicts
from dra_affinity.sim.cluster import Cluster, reserve_ref
from dra_affinity.structured import reasons as R
from dra_affinity.structured.allocator import (
    ClaimRequest,
    ClaimSpec,
    Counters,
    NodeAllocator,
    RequestSpec,
)
from dra_affinity.structured.extraction import ExtractionMemo, in_scope
from dra_affinity.structured.model import (
    Abort,
    DeviceInfo,
    NodeResult,
    PlannedShare,
    PoolID,
    PoolInfo,
    Reason,
    Result,
)
from dra_affinity.structured.nodes import node_selector_matches, selector_for_node
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import CLEAN as CLEAN_STATE
from dra_affinity.structured.state import (
    AffinityState,
    AffinityStatus,
    AllocatedState,
    Number,
    Share,
)

SELECTOR_COST_BUDGET = 1_000_000
# Experimental claim-side strategy (KEP "SharingStrategy"): no API field, an annotation.
SHARING_STRATEGY_ANNOTATION = "sharing.dra-affinity.io/strategy"
MAX_RESERVED_FOR = 256


@dataclass
class Attempt:
    """The outcome of one scheduling attempt, as the simulator reports it."""

    pod: str
    result: Result
    node: str | None = None
    allocations: list[dict[str, Any]] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    message: str = ""


@dataclass
class _Cycle:
    """State of one pod's scheduling cycle between Filter and Bind."""

    pod: Pod
    key: str
    claims: list[ResourceClaim]  # all claims of the pod, in pod order
    to_allocate: list[ClaimSpec]
    allocated: list[ResourceClaim]
    memo: ExtractionMemo
    counters: Counters = field(default_factory=Counters)
    chosen: NodeResult | None = None
    node_reasons: list[Reason] = field(default_factory=list)
    # free-index categories this cycle may use (None: any, extraction gave no keys)
    free_allowed: tuple[int, ...] | None = None


class Scheduler:
    """A DRA scheduler with sharing affinity over an in-memory cluster."""

    def __init__(
        self,
        cluster: Cluster,
        features: Features | None = None,
        *,
        metrics: SchedulerMetrics | None = None,
        recorder: Recorder | None = None,
        scoring: str = "firstfit",
        node_index: bool = False,
    ) -> None:
        self.cluster = cluster
        self.use_node_index = node_index
        self._node_index: NodeIndex | None = None
        self._free_index: FreeIndex | None = None
        # Successful extractions by (extractor set, config content), for this scheduler's life.
        self._extraction_cache: dict[tuple[object, ...], Any] = {}
        self.last_filter_seconds = 0.0
        self.features = features or Features()
        self.metrics = metrics or SchedulerMetrics()
        self.recorder = recorder or Recorder()
        self.scoring = scoring
        self.state = AllocatedState()
        self._snapshot: Snapshot | None = None
        self._snapshot_pools: dict[PoolID, PoolInfo] = {}
        self._selector_cache: dict[tuple[str, str], bool | CELError] = {}
        # claim key -> [(device id, request, share id)] this cache holds for it
        self._recorded: dict[str, list[tuple[str, str, str | None]]] = {}
        self._started = False
        cluster.listeners.append(self)

    # ================================================================== lifecycle
    def start(self) -> None:
        """Rebuild AffinityStates from bound claims and slices before the first cycle."""
        self.state = AllocatedState()
        self._recorded.clear()
        snap = self.snapshot()
        for claim in self.cluster.claims():
            if claim.status.allocation is not None:
                self._record_claim(claim, snap, reconstructing=True)
        self._started = True
        self._refresh_gauges()

    def stop(self) -> None:
        if self in self.cluster.listeners:
            self.cluster.listeners.remove(self)

    # ================================================================== informer hooks
    def on_change(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None:
        if kind in ("ResourceSlice", "Node", "DeviceClass"):
            if kind == "DeviceClass":
                self._selector_cache.clear()
            self._snapshot = None
            if kind == "ResourceSlice" and self._started:
                self._reconcile_pools()
            return
        if kind == "ResourceClaim" and self._started:
            self._sync_claim(old, new)

    def _sync_claim(self, old: TypedObject | None, new: TypedObject | None) -> None:
        key = _key(new if new is not None else old)
        if key is None:
            return
        claim = new if isinstance(new, ResourceClaim) else None
        want = _result_tuples(claim)
        have = self._recorded.get(key, [])
        if sorted(want, key=str) == sorted(have, key=str):
            return
        self._forget_claim(key)
        if claim is not None and claim.status.allocation is not None:
            self._record_claim(claim, self.snapshot(), reconstructing=True)
        self._refresh_gauges()

    def _forget_claim(self, key: str) -> None:
        for dev, _req, _sid in self._recorded.pop(key, []):
            self.state.remove(dev, key)

    # ================================================================== snapshot
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            nodes = list(self.cluster.node_order)
            labels = {n: self.cluster.node_labels(n) for n in nodes}
            self._snapshot = Snapshot.build(self.cluster.slices(), nodes, labels,
                                            preferred_keys=self.features.preferred_keys)
            self._selector_cache.clear()
            self._node_index = None
            self._free_index = None
        return self._snapshot

    def node_index(self) -> NodeIndex:
        snap = self.snapshot()
        if self._node_index is None:
            device_node: dict[str, str | None] = {}
            for n in snap.nodes:
                for d in snap.by_node.get(n, []):
                    device_node[d.id] = n if d.id not in device_node else None
            for did, local in snap.node_local.items():
                if not local:
                    device_node[did] = None
            self._node_index = NodeIndex(snap.nodes, device_node, self.state)
        return self._node_index

    # ================================================================== reconstruction
    def _request_class(self, claim: ResourceClaim, request: str) -> str | None:
        parent, _, sub = request.partition("/")
        for r in claim.spec.devices.requests:
            if r.name != parent:
                continue
            if sub:
                for s in r.first_available:
                    if s.name == sub:
                        return s.device_class_name
                return None
            return r.exactly.device_class_name if r.exactly is not None else None
        return None

    def _derive_keys(self, claim: ResourceClaim, request: str, info: DeviceInfo,
                     memo: ExtractionMemo) -> tuple[tuple[tuple[str, str], ...] | None, str]:
        """Re-run extraction for a bound share; None (with why) when it cannot be known."""
        pi = info.pool_info
        if pi.incomplete_reason:
            return None, f"pool incomplete at reconstruction: {pi.incomplete_reason}"
        if pi.affinity_invalid_reason:
            return None, f"pool invalid: {pi.affinity_invalid_reason}"
        class_name = self._request_class(claim, request)
        if class_name is None:
            return None, f"request {request} not found in claim"
        res = memo.evaluate(claim, request, class_name, pi)
        if res.kind is OutcomeKind.OK:
            return res.keys, ""
        return None, f"{res.kind.value}: {res.message}"

    def _record_claim(self, claim: ResourceClaim, snap: Snapshot, *, reconstructing: bool) -> None:
        """Account a bound claim's allocation (restart, or a claim allocated elsewhere)."""
        alloc = claim.status.allocation
        if alloc is None:
            return
        key = f"{claim.namespace}/{claim.name}"
        memo = ExtractionMemo({key: claim}, self.cluster.classes())
        recorded: list[tuple[str, str, str | None]] = []
        for r in alloc.devices.results:
            did = r.device_id
            info = snap.devices.get(did)
            gated = bool(info is not None and info.gated and self.features.sharing_affinity)
            keys = None
            why = ""
            if gated and info is not None:
                keys, why = self._derive_keys(claim, r.request, info, memo)
            multi = info.multi if info is not None else r.share_id is not None
            share = Share(key, r.request, r.share_id, tuple(sorted(r.consumed_capacity.items())),
                          keys, tentative=False, gated=gated)
            before = self.state.affinity(did)
            self.state.add(did, share, exclusive=not multi)
            after = self.state.affinity(did)
            if gated and after.status is AffinityStatus.UNRECONSTRUCTABLE and (
                    before.status is not AffinityStatus.UNRECONSTRUCTABLE):
                self.recorder.warn(
                    f"device {did} marked Unreconstructable: "
                    f"{after.reason if keys is not None else why} "
                    f"(claim {key}, request {r.request})", device=did)
            recorded.append((did, r.request, r.share_id))
        self.metrics.pending[EVALUATIONS] += memo.evaluations
        self._recorded[key] = recorded

    def _reconcile_pools(self) -> None:
        """Re-derive locks of in-use devices whose pool's extractors changed."""
        old = self._snapshot_pools
        snap = self.snapshot()
        new = snap.pools
        self._snapshot_pools = dict(new)
        changed = {pid for pid in set(old) | set(new) if _affinity_sig(old.get(pid)) != _affinity_sig(new.get(pid))}
        if not changed:
            return
        classes = self.cluster.classes()
        claims = {f"{c.namespace}/{c.name}": c for c in self.cluster.claims()}
        for did in sorted(self.state.devices()):
            info = snap.devices.get(did)
            pid = info.pool_info.id if info is not None else tuple(did.split("/")[:2])
            if pid not in changed:
                continue
            self._reconcile_device(did, info, claims, classes)
        self._refresh_gauges()

    def _reconcile_device(self, did: str, info: DeviceInfo | None,
                          claims: Mapping[str, ResourceClaim], classes: Mapping[str, DeviceClass]) -> None:
        shares = list(self.state.shares(did))
        current = self.state.affinity(did)
        gated = bool(info is not None and info.gated and self.features.sharing_affinity)
        rebuilt: list[Share] = []
        derived: AffinityState
        if not gated or info is None:
            rebuilt = [Share(s.claim, s.request, s.share_id, s.consumed, None, s.tentative, False)
                       for s in shares]
            derived = AffinityState()
        else:
            if info.pool_info.incomplete_reason or info.pool_info.affinity_invalid_reason:
                return  # devices are fail-closed meanwhile; re-derive once the pool is usable
            keysets: list[tuple[tuple[str, str], ...] | None] = []
            why = ""
            for s in shares:
                claim = claims.get(s.claim)
                k = None
                if claim is not None:
                    memo = ExtractionMemo({s.claim: claim}, classes)
                    k, w = self._derive_keys(claim, s.request, info, memo)
                    if k is None and not why:
                        why = f"claim {s.claim}: {w}"  # the first claim that cannot be derived
                    self.metrics.pending[EVALUATIONS] += memo.evaluations
                elif s.keys is not None:
                    k = s.keys  # tentative share of a cycle in flight: keep what Filter extracted
                keysets.append(k)
                rebuilt.append(Share(s.claim, s.request, s.share_id, s.consumed, k, s.tentative, True))
            if any(k is None for k in keysets):
                derived = AffinityState(AffinityStatus.UNRECONSTRUCTABLE, None,
                                        f"an active claim yields no affinity under the new extractors ({why})")
            elif len(set(keysets)) > 1:
                derived = AffinityState(AffinityStatus.UNRECONSTRUCTABLE, None,
                                        "active claims extract different affinity values")
            else:
                derived = AffinityState(AffinityStatus.LOCKED, keysets[0])
            if current.status is AffinityStatus.UNRECONSTRUCTABLE:
                derived = current  # sticky until the device drains
            elif (current.status is AffinityStatus.LOCKED and derived.status is AffinityStatus.LOCKED
                  and current.locked_affinity != derived.locked_affinity):
                derived = AffinityState(
                    AffinityStatus.UNRECONSTRUCTABLE, None,
                    f"sharingAffinity changed with active claims: claims now extract "
                    f"{dict(derived.locked_affinity or ())}, lock was {current.lock_dict()}")
        if derived.status is AffinityStatus.UNRECONSTRUCTABLE and current.status is not AffinityStatus.UNRECONSTRUCTABLE:
            self.recorder.warn(f"device {did} marked Unreconstructable: {derived.reason}", device=did)
        u = self.state.usage.get(did)
        if u is not None:
            u.shares = rebuilt
        self.state.set_affinity(did, derived)

    # ================================================================== PreFilter
    def _prefilter(self, pod: Pod) -> _Cycle:
        key = f"{pod.namespace}/{pod.name}"
        classes = self.cluster.classes()
        claims: list[ResourceClaim] = []
        for prc in pod.spec.resource_claims:
            name = prc.resource_claim_name or f"{pod.name}-{prc.name}"
            if prc.resource_claim_template_name and self.cluster.claim(f"{pod.namespace}/{name}") is None:
                self.cluster.ensure_template_claims(pod)
            claim = self.cluster.claim(f"{pod.namespace}/{name}")
            if claim is None:
                src = (f"template {prc.resource_claim_template_name}"
                       if prc.resource_claim_template_name else "resourceClaimName")
                raise Abort(Result.UNRESOLVABLE, Reason(
                    R.CLAIM_NOT_FOUND,
                    f"pod {key}: resource claim {pod.namespace}/{name} ({src}) does not exist"))
            claims.append(claim)
        to_allocate: list[ClaimSpec] = []
        allocated: list[ResourceClaim] = []
        for c in claims:
            ckey = f"{c.namespace}/{c.name}"
            if c.status.allocation is not None:
                others = [r for r in c.status.reserved_for if not (r.resource == "pods" and r.name == pod.name)]
                if len(others) >= MAX_RESERVED_FOR:
                    raise Abort(Result.UNSCHEDULABLE, Reason(
                        R.CLAIM_IN_USE, f"claim {ckey} is already reserved for {len(others)} consumers"))
                allocated.append(c)
                continue
            to_allocate.append(self._claim_spec(c, classes))
        memo = ExtractionMemo({f"{c.namespace}/{c.name}": c for c in claims}, classes,
                              shared=self._extraction_cache)
        return _Cycle(pod, key, claims, to_allocate, allocated, memo)

    def _claim_spec(self, c: ResourceClaim, classes: Mapping[str, DeviceClass]) -> ClaimSpec:
        ckey = f"{c.namespace}/{c.name}"

        def selectors(class_name: str, own: list[Any], req: str) -> tuple[str, ...]:
            cls = classes.get(class_name)
            if cls is None:
                raise Abort(Result.UNRESOLVABLE, Reason(
                    R.DEVICE_CLASS_NOT_FOUND,
                    f"claim {ckey} request {req}: DeviceClass {class_name!r} does not exist"))
            exprs = [s.cel.expression for s in cls.spec.selectors if s.cel is not None]
            exprs += [s.cel.expression for s in own if s.cel is not None]
            return tuple(exprs)

        reqs: list[ClaimRequest] = []
        for r in c.spec.devices.requests:
            alts: list[RequestSpec] = []
            if r.exactly is not None:
                e = r.exactly
                alts.append(RequestSpec(
                    r.name, r.name, e.device_class_name, selectors(e.device_class_name, e.selectors, r.name),
                    e.allocation_mode == "All", e.count or 1,
                    dict(e.capacity.requests) if e.capacity else {}))
            for s in r.first_available:
                full = f"{r.name}/{s.name}"
                alts.append(RequestSpec(
                    full, r.name, s.device_class_name, selectors(s.device_class_name, s.selectors, full),
                    s.allocation_mode == "All", s.count or 1,
                    dict(s.capacity.requests) if s.capacity else {}))
            reqs.append(ClaimRequest(r.name, tuple(alts)))
        cons = tuple((tuple(k.requests), k.match_attribute) for k in c.spec.devices.constraints
                     if k.match_attribute)
        never = (self.features.never_set_lock
                 and c.metadata.annotations.get(SHARING_STRATEGY_ANNOTATION) == "NeverSetLock")
        return ClaimSpec(ckey, c.metadata.uid or ckey, tuple(reqs), cons, never_set_lock=never)

    # ================================================================== Filter
    def _selector_fn(self, expr: str, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> bool:
        key = (expr, d.id)
        hit = self._selector_cache.get(key)
        if hit is None:
            try:
                prog = SELECTOR_ENV.compile(expr)
                val, _ = prog.evaluate({"device": d.activation}, SELECTOR_COST_BUDGET)
                if not isinstance(val, bool):
                    raise CELError(f"selector must return bool, got {type(val).__name__}")
                hit = val
            except CELError as e:
                hit = e
            self._selector_cache[key] = hit
        if isinstance(hit, CELError):
            raise Abort(Result.ERROR, Reason(
                R.SELECTOR_ERROR,
                f"claim {claim.key} request {alt.name}: selector {expr!r} on device {d.id}: {hit}",
                None, d.id))
        return hit

    def _filter_node(self, cyc: _Cycle, node: str, snap: Snapshot, state: AllocatedState,
                     devices: Sequence[DeviceInfo] | None = None) -> NodeResult:
        labels = snap.labels.get(node, {})
        for k, v in cyc.pod.spec.node_selector.items():
            if labels.get(k) != v:
                return NodeResult(node, False, [], [Reason(
                    R.NODE_SELECTOR_MISMATCH, f"node {node} does not match the pod's nodeSelector {k}={v}",
                    node)])
        for c in cyc.allocated:
            sel = c.status.allocation.node_selector if c.status.allocation else None
            if sel is not None and not node_selector_matches(sel, node, labels):
                return NodeResult(node, False, [], [Reason(
                    R.CLAIM_ALLOCATED_ELSEWHERE,
                    f"claim {c.namespace}/{c.name} is allocated to devices not available on node {node}",
                    node)])
        if not cyc.to_allocate:
            return NodeResult(node, True)
        alloc = NodeAllocator(
            node, snap.by_node.get(node, []) if devices is None else devices, state,
            affinity_enabled=self.features.sharing_affinity,
            extract=cyc.memo, selector_matches=self._selector_fn, counters=cyc.counters,
            plan_cache=snap.plan_cache,
            order=self._order_fn(cyc))
        return alloc.allocate(cyc.to_allocate)

    def _filter_node_safe(self, cyc: _Cycle, node: str, snap: Snapshot) -> dict[str, Any]:
        """Whole-node verdict for explain: never raises, never changes state or metrics."""
        try:
            res = self._filter_node(cyc, node, snap, self.state)
        except Abort as a:
            return {"fits": False, "result": a.result.value, "reasons": [a.reason.as_dict()]}
        return {"fits": res.ok, "reasons": [r.as_dict() for r in res.reasons]}

    def free_index(self) -> FreeIndex:
        snap = self.snapshot()
        if self._free_index is None or self._free_index.nodes is not snap.nodes:
            self._free_index = FreeIndex(snap, self.state, self.features.sharing_affinity)
        return self._free_index

    def _free_candidates(self, cyc: _Cycle, snap: Snapshot) -> Iterator[int] | None:
        """Candidate node positions for a one-device request with a positive capacity need."""
        claim = cyc.to_allocate[0]
        alt = claim.requests[0].alternatives[0]
        if not any(q.value > 0 for q in alt.capacity.values()):
            return None
        index = self.free_index()
        if not index.usable:
            return None
        keys: list[Any] | None = []
        if self.features.sharing_affinity:
            for pool in snap.extractor_pools():
                res = cyc.memo(claim, alt, pool)
                if res.kind is not OutcomeKind.OK:
                    keys = None  # let the allocator meet the outcome where a full scan would
                    break
                assert keys is not None
                keys.append(res.keys)
        cyc.free_allowed = allowed = index.allowed(keys)
        return index.candidates_in(allowed)

    def _order_fn(self, cyc: _Cycle) -> Any:
        """Device order within a node: first-fit, unless scoring or preferred keys reorder."""
        if self.scoring != "affinity" and not self.features.preferred_keys:
            return None

        def order(devs: Sequence[DeviceInfo], c: ClaimSpec, a: RequestSpec) -> list[DeviceInfo]:
            ranked = self._rank_devices(cyc, devs, c, a) if self.scoring == "affinity" else list(devs)
            if self.features.preferred_keys:
                # stable: preferred-key mismatches move behind everything else
                ranked.sort(key=lambda d: self._preferred_mismatch(cyc, d, c, a))
            return ranked

        return order

    def _preferred_mismatch(self, cyc: _Cycle, d: DeviceInfo, c: ClaimSpec, a: RequestSpec) -> int:
        pi = d.pool_info
        if not pi.preferred_extractors:
            return 0
        want = cyc.memo.preferred(c, a, pi)
        if want is None:
            return 0
        for s in self.state.shares(d.id):
            if s.preferred is not None and s.preferred != want:
                return 1
        return 0

    def _lock_candidates(self, cyc: _Cycle, snap: Snapshot) -> Iterator[int]:
        """Node positions with a device locked to this request's keys and room."""
        claim = cyc.to_allocate[0]
        alt = claim.requests[0].alternatives[0]
        keys = []
        for pool in snap.extractor_pools():
            res = cyc.memo(claim, alt, pool)
            if res.kind is OutcomeKind.OK:
                keys.append(res.keys)
        return self.free_index().locked_candidates(keys)

    def _rank_devices(self, cyc: _Cycle, devices: Sequence[DeviceInfo],
                      claim: ClaimSpec | None = None, alt: RequestSpec | None = None
                      ) -> list[DeviceInfo]:
        """Affinity-aware device preference within a node: a device already locked to the
        request's keys first, then clean (or ungated) devices, then the rest (other locks,
        unknown state: not viable now); first-fit order within each group."""
        if claim is None or alt is None:
            claim = cyc.to_allocate[0]
            alt = claim.requests[0].alternatives[0]

        def rank(d: DeviceInfo) -> int:
            if not (d.gated and self.features.sharing_affinity):
                return 1
            st = self.state.affinity(d.id)
            if st.status is AffinityStatus.CLEAN:
                return 1
            if st.status is AffinityStatus.LOCKED:
                res = cyc.memo(claim, alt, d.pool_info)
                if res.kind is OutcomeKind.OK and res.keys == st.locked_affinity:
                    return 0
            return 2

        return sorted(devices, key=lambda d: (rank(d), d.order))

    def _signature(self, cyc: _Cycle) -> str | None:
        """Content of what decides feasibility on a node; None when the index must not be used."""
        if cyc.allocated or not cyc.to_allocate:
            return None
        parts = [repr(sorted(cyc.pod.spec.node_selector.items()))]
        for c in cyc.claims:
            parts.append(c.spec.model_dump_json())
        return "\x00".join(parts)

    def _filter(self, cyc: _Cycle, state: AllocatedState) -> None:
        snap = self.snapshot()
        t0 = time.perf_counter()
        try:
            if not snap.nodes:
                cyc.node_reasons.append(Reason(R.NO_NODES, "no nodes in the cluster"))
            indexed = self.use_node_index and state is self.state and not cyc.allocated \
                and bool(cyc.to_allocate) and not self.features.preferred_keys
            if indexed:
                results: dict[str, NodeResult] = {}
                single = _single_device(cyc)
                free = self._free_candidates(cyc, snap) if single else None
                sig = self._signature(cyc) if free is None else None
                index = self.node_index()
                bad = index.verdicts(sig, len(snap.devices)) if single and sig is not None else None
                counters = (state.device_version, state.lock_version, state.release_version)

                def fits(node: str) -> bool:
                    if bad is None:
                        devs: Sequence[DeviceInfo] | None = None
                        if free is not None:
                            # Only devices the index says can take the request (room, and
                            # clean or locked to the request's keys); same first viable one.
                            devs = self.free_index().devices_in(
                                snap.by_node.get(node, ()), cyc.free_allowed)
                        res = self._filter_node(cyc, node, snap, state, devs)
                        results[node] = res
                        return res.ok
                    # One device decides: skip devices whose "not viable" verdict still
                    # holds; the first viable one is first-fit's choice.
                    kinds, vers = bad.kind, bad.version
                    node_devs: Sequence[DeviceInfo] = snap.by_node.get(node, ())
                    if self.scoring == "affinity":
                        node_devs = self._rank_devices(cyc, node_devs)
                    for d in node_devs:
                        o = d.order
                        if vers[o] == counters[kinds[o]].get(d.id, 0):
                            continue
                        res = self._filter_node(cyc, node, snap, state, [d])
                        if res.ok:
                            results[node] = res
                            return True
                        kind = _verdict_kind(res.codes)
                        kinds[o] = kind
                        vers[o] = counters[kind].get(d.id, 0)
                    return False

                if free is not None:
                    found = None
                    if self.scoring == "affinity":
                        # Consolidation first: the first node with a compatibly-locked device
                        # that takes the request; then first-fit over everything with room.
                        for pos in self._lock_candidates(cyc, snap):
                            node = snap.nodes[pos]
                            if fits(node) and results[node].shares and results[node].shares[0].reused_lock:
                                found = node
                                break
                        if found is None:
                            free = self._free_candidates(cyc, snap)
                    if found is None and free is not None:
                        for pos in free:
                            if fits(snap.nodes[pos]):
                                found = snap.nodes[pos]
                                break
                else:
                    assert sig is not None
                    found = index.find(sig, fits)
                if found is not None:
                    cyc.chosen = results[found]
                    return
                # Nothing fits: a full pass gives every node's reasons (rare, off the hot path).
                cyc.counters = Counters()
            best: NodeResult | None = None
            best_score = -1
            for node in snap.nodes:
                res = self._filter_node(cyc, node, snap, state)
                if res.ok:
                    if self.scoring != "affinity":
                        best = res
                        break  # first-fit: the first feasible node in order wins
                    score = _affinity_score(res)
                    if score > best_score:  # ties keep the earlier node (first-fit order)
                        best, best_score = res, score
                    continue
                cyc.node_reasons.extend(res.reasons)
            if best is not None:
                cyc.chosen = best
                cyc.node_reasons = []
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

    # ================================================================== Reserve / Unreserve
    def _reserve(self, cyc: _Cycle) -> Reason | None:
        """Atomically re-check and record this pod's shares as tentative."""
        assert cyc.chosen is not None
        snap = self.snapshot()
        shares = cyc.chosen.shares
        pending: dict[str, tuple[tuple[str, str], ...]] = {}
        extra: dict[str, dict[str, Number]] = {}
        affinity_states = self.state.affinity_states
        for s in shares:
            d = s.device
            if d.id not in snap.devices:
                return Reason(R.RESERVE_CONFLICT, f"device {d.id} disappeared before Reserve",
                              cyc.chosen.node, d.id)
            if s.exclusive:
                if self.state.is_allocated(d.id):
                    return Reason(R.RESERVE_CONFLICT, f"device {d.id} was allocated since Filter",
                                  cyc.chosen.node, d.id)
            else:
                if self.state.is_exclusively_allocated(d.id):
                    return Reason(R.RESERVE_CONFLICT, f"device {d.id} was allocated since Filter",
                                  cyc.chosen.node, d.id)
                used = dict(self.state.consumed(d.id))
                for n, a in extra.get(d.id, {}).items():
                    used[n] = used.get(n, 0) + a
                for n, q in s.consumed:
                    if used.get(n, 0) + q.num > d.capacity[n].value.num:
                        return Reason(R.RESERVE_CONFLICT,
                                      f"device {d.id}: capacity {n} was consumed since Filter",
                                      cyc.chosen.node, d.id)
                ex = extra.setdefault(d.id, {})
                for n, q in s.consumed:
                    ex[n] = ex.get(n, 0) + q.num
            if s.keys is not None:
                st = affinity_states.get(d.id, CLEAN_STATE)
                if st.status is AffinityStatus.UNRECONSTRUCTABLE:
                    return Reason(R.RESERVE_CONFLICT, f"device {d.id} became Unreconstructable since Filter",
                                  cyc.chosen.node, d.id)
                lock = st.locked_affinity if st.status is AffinityStatus.LOCKED else (
                    pending.get(d.id) if pending else None)
                if lock is not None and lock is not s.keys and lock != s.keys:
                    return Reason(R.RESERVE_CONFLICT,
                                  f"device {d.id} was locked to {dict(lock)} since Filter; "
                                  f"claim {s.claim} request {s.request} needs {dict(s.keys)}",
                                  cyc.chosen.node, d.id)
                pending.setdefault(d.id, s.keys)
        for s in shares:
            self.state.add(s.device.id, Share(s.claim, s.request, s.share_id, s.consumed, s.keys,
                                              tentative=True, gated=s.keys is not None,
                                              preferred=s.preferred),
                           exclusive=s.exclusive)
        return None

    def _refresh_claims(self, cyc: _Cycle) -> Reason | None:
        """Re-read the pod's claims before Reserve: a pod earlier in the same batch may
        have allocated (or reserved) a claim this pod shares. Allocating it again would
        double-count capacity and overwrite that pod's reservation."""
        assert cyc.chosen is not None
        planned = {c.key for c in cyc.to_allocate}
        fresh: list[ResourceClaim] = []
        for c in cyc.claims:
            key = f"{c.namespace}/{c.name}"
            now = self.cluster.claim(key)
            if now is None:
                return Reason(R.RESERVE_CONFLICT, f"claim {key} was deleted since Filter",
                              cyc.chosen.node)
            if key in planned and now.status.allocation is not None:
                return Reason(R.RESERVE_CONFLICT,
                              f"claim {key} was allocated by another pod since Filter; the next "
                              "attempt uses that allocation", cyc.chosen.node)
            fresh.append(now)
        cyc.claims = fresh
        return None

    def _unreserve(self, cyc: _Cycle) -> None:
        assert cyc.chosen is not None
        for s in cyc.chosen.shares:
            self.state.remove(s.device.id, s.claim, s.request, tentative_only=True)

    # ================================================================== Bind
    def _bind(self, cyc: _Cycle, node: str) -> list[dict[str, Any]]:
        assert cyc.chosen is not None
        snap = self.snapshot()
        classes = self.cluster.classes()
        by_claim: dict[str, list[PlannedShare]] = {}
        for s in cyc.chosen.shares:
            by_claim.setdefault(s.claim, []).append(s)
        written: list[ResourceClaim] = []
        out: list[dict[str, Any]] = []
        for c in cyc.claims:
            ckey = f"{c.namespace}/{c.name}"
            reserved = list(c.status.reserved_for)
            if not any(r.resource == "pods" and r.name == cyc.pod.name for r in reserved):
                reserved.append(reserve_ref(cyc.pod))
            status = c.status.model_copy(update={"reserved_for": reserved})
            if ckey in by_claim and c.status.allocation is None:
                shares = by_claim[ckey]
                # (Plain construction: pydantic's model_construct is ~80x slower for these.)
                results = [DeviceRequestAllocationResult(
                    request=s.request, driver=s.device.driver, pool=s.device.pool, device=s.device.name,
                    share_id=s.share_id, consumed_capacity=dict(s.consumed)) for s in shares]
                config = _allocation_config(c, shares, classes)
                local = all(snap.node_local.get(s.device.id, False) for s in shares)
                alloc = AllocationResult(
                    devices=DeviceAllocationResult(results=results, config=config),
                    node_selector=selector_for_node(node) if local and shares else None)
                status = status.model_copy(update={"allocation": alloc})
            new = c.model_copy(update={"status": status})
            written.append(new)
            if new.status.allocation is not None:
                out.extend(_allocation_rows(new))
        # Record first: the cluster's change notification must find the cache already in sync.
        for c in written:
            self._recorded[f"{c.namespace}/{c.name}"] = _result_tuples(c)
        for s in cyc.chosen.shares:
            self.state.commit(s.device.id, s.claim)
            if s.reused_lock:
                self.metrics.pending[COMPATIBLE_REUSE] += 1
        self.cluster.bind(cyc.pod, node, written)
        return out

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
        cycles: list[_Cycle | Attempt] = []
        for key in pod_keys:
            pod = self.cluster.pod(key)
            if pod is None:
                msg = f"pod {key} does not exist (deleted or never created)"
                cycles.append(Attempt(key, Result.UNRESOLVABLE, reasons=[
                    Reason(R.POD_NOT_FOUND, msg)], message=msg))
                continue
            if pod.spec.node_name:
                cycles.append(self._already_bound(pod, key))
                continue
            try:
                cyc = self._prefilter(pod)
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

    def _already_bound(self, pod: Pod, key: str) -> Attempt:
        rows: list[dict[str, Any]] = []
        for prc in pod.spec.resource_claims:
            name = prc.resource_claim_name or f"{pod.name}-{prc.name}"
            c = self.cluster.claim(f"{pod.namespace}/{name}")
            if c is not None and c.status.allocation is not None:
                rows.extend(_allocation_rows(c))
        return Attempt(key, Result.SCHEDULED, pod.spec.node_name, rows, [],
                       f"pod {key} is already bound to {pod.spec.node_name}")

    def _aborted(self, key: str, a: Abort) -> Attempt:
        kind = {Result.ERROR: "error", Result.UNRESOLVABLE: "unresolvable"}.get(a.result, "unschedulable")
        msg = f"{a.reason.message}"
        self.recorder.event(f"Pod {key}", "Warning", "FailedScheduling",
                            f"{'running Filter plugin DynamicResources: ' if kind == 'error' else ''}{msg}")
        return Attempt(key, a.result, None, [], [a.reason], msg)

    def _finish(self, cyc: _Cycle, fail_bind: bool, fail_prepare: bool) -> Attempt:
        if cyc.chosen is None:
            total = len(self.snapshot().nodes)
            msg = _summary(total, cyc.node_reasons)
            self.recorder.event(f"Pod {cyc.key}", "Warning", "FailedScheduling", msg)
            return Attempt(cyc.key, Result.UNSCHEDULABLE, None, [], cyc.node_reasons, msg)
        node = cyc.chosen.node
        conflict = self._refresh_claims(cyc) or self._reserve(cyc)
        if conflict is not None:
            msg = f"Reserve failed on node {node}: {conflict.message}"
            self.recorder.event(f"Pod {cyc.key}", "Warning", "FailedScheduling", msg)
            return Attempt(cyc.key, Result.UNSCHEDULABLE, None, [], [conflict], msg)
        if fail_bind:
            self._unreserve(cyc)
            reason = Reason(R.BIND_FAILED, f"binding pod {cyc.key} to node {node} failed; "
                            "tentative allocations and locks rolled back", node)
            self.recorder.event(f"Pod {cyc.key}", "Warning", "FailedScheduling", reason.message)
            return Attempt(cyc.key, Result.UNSCHEDULABLE, None, [], [reason], reason.message)
        rows = self._bind(cyc, node)
        self.recorder.event(f"Pod {cyc.key}", "Normal", "Scheduled",
                            f"Successfully assigned {cyc.key} to {node}")
        if fail_prepare:
            self.recorder.event(f"Pod {cyc.key}", "Warning", "FailedPrepareDynamicResources",
                                f"NodePrepareResources failed on node {node}; the allocation and "
                                "affinity locks stay until the claims are deallocated")
        return Attempt(cyc.key, Result.SCHEDULED, node, rows, [], f"assigned to {node}")

    # ================================================================== preemption hooks (KEP-5690)
    def _pod_shares(self, pod_key: str) -> list[tuple[str, Share]]:
        """Shares held only on behalf of this pod (claims no other pod reserves)."""
        pod = self.cluster.pod(pod_key)
        if pod is None:
            return []
        out: list[tuple[str, Share]] = []
        for prc in pod.spec.resource_claims:
            name = prc.resource_claim_name or f"{pod.name}-{prc.name}"
            c = self.cluster.claim(f"{pod.namespace}/{name}")
            if c is None or c.status.allocation is None:
                continue
            others = [r for r in c.status.reserved_for
                      if not (r.resource == "pods" and r.name == pod.name)]
            if others:
                continue  # the claim stays allocated for its other consumers
            ckey = f"{c.namespace}/{c.name}"
            for did, _req, _sid in self._recorded.get(ckey, []):
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

    def fits_on(self, state: AllocatedState, pod_key: str, node: str) -> NodeResult:
        """Filter for one pod on one node against a what-if state (nothing is changed)."""
        pod = self.cluster.pod(pod_key)
        if pod is None:
            raise KeyError(pod_key)
        cyc = self._prefilter(pod)
        return self._filter_node(cyc, node, self.snapshot(), state)

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

    def device_states(self) -> dict[str, AffinityState]:
        return dict(self.state.affinity_states)


# ====================================================================== helpers
def _affinity_score(res: NodeResult) -> int:
    """Node score for --scoring affinity: placements that join a compatible lock."""
    return sum(1 for s in res.shares if s.reused_lock)


def _verdict_kind(codes: Sequence[str]) -> int:
    if len(codes) == 1:
        if codes[0] in (R.AFFINITY_LOCK_MISMATCH, R.AFFINITY_UNRECONSTRUCTABLE):
            return Verdicts.LOCK
        if codes[0] == R.INSUFFICIENT_CAPACITY:
            return Verdicts.RELEASE
    return Verdicts.ANY


def _single_device(cyc: _Cycle) -> bool:
    """One claim, one request, one way to satisfy it, one device, no constraints:
    then a node fits exactly when one of its devices does."""
    if len(cyc.to_allocate) != 1 or cyc.allocated:
        return False
    c = cyc.to_allocate[0]
    if len(c.requests) != 1 or c.constraints:
        return False
    alts = c.requests[0].alternatives
    return len(alts) == 1 and not alts[0].all_devices and alts[0].count == 1


def _key(obj: TypedObject | None) -> str | None:
    if obj is None:
        return None
    return f"{obj.namespace}/{obj.name}"


def _result_tuples(claim: ResourceClaim | None) -> list[tuple[str, str, str | None]]:
    if claim is None or claim.status.allocation is None:
        return []
    return [(r.device_id, r.request, r.share_id) for r in claim.status.allocation.devices.results]


def _affinity_sig(p: PoolInfo | None) -> Any:
    if p is None:
        return None
    return (p.declares_sharing_affinity, p.extractor_set, bool(p.incomplete_reason),
            bool(p.affinity_invalid_reason), bool(p.invalid_reason))


def _allocation_config(c: ResourceClaim, shares: Sequence[PlannedShare],
                       classes: Mapping[str, DeviceClass]) -> list[DeviceAllocationConfiguration]:
    """FromClass then FromClaim configs, as the Kubernetes allocator records them."""
    out: list[DeviceAllocationConfiguration] = []
    req_class: dict[str, str] = {}
    for r in c.spec.devices.requests:
        if r.exactly is not None:
            req_class[r.name] = r.exactly.device_class_name
        for s in r.first_available:
            req_class[f"{r.name}/{s.name}"] = s.device_class_name
    used = sorted({s.request for s in shares})
    by_class: dict[str, list[str]] = {}
    for req in used:
        cls = req_class.get(req)
        if cls:
            by_class.setdefault(cls, []).append(req)
    for cls_name in sorted(by_class):
        dclass = classes.get(cls_name)
        if dclass is None:
            continue
        for cfg in dclass.spec.config:
            if cfg.opaque is not None:
                out.append(DeviceAllocationConfiguration(source="FromClass", requests=by_class[cls_name],
                                                         opaque=cfg.opaque))
    for ccfg in c.spec.devices.config:
        if ccfg.opaque is None:
            continue
        if ccfg.requests and not any(in_scope(ccfg.requests, r) for r in used):
            continue
        out.append(DeviceAllocationConfiguration(source="FromClaim", requests=list(ccfg.requests),
                                                 opaque=ccfg.opaque))
    return out


def _allocation_rows(c: ResourceClaim) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if c.status.allocation is None:
        return rows
    for r in c.status.allocation.devices.results:
        rows.append({
            "claim": f"{c.namespace}/{c.name}",
            "request": r.request,
            "device": r.device_id,
            "shareID": r.share_id,
            "consumedCapacity": {k: str(v) for k, v in sorted(r.consumed_capacity.items())},
        })
    return rows


def _summary(total: int, reasons: Sequence[Reason]) -> str:
    """kube-scheduler style: '0/2 nodes are available: 2 AffinityLockMismatch.' plus details."""
    by_node: dict[str, list[str]] = {}
    for r in reasons:
        by_node.setdefault(r.node or "", []).append(r.code)
    counts: dict[str, int] = {}
    for codes in by_node.values():
        for code in dict.fromkeys(codes):
            counts[code] = counts.get(code, 0) + 1
    parts = ", ".join(f"{n} {code}" for code, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
    head = f"0/{total} nodes are available" + (f": {parts}." if parts else ".")
    affinity = [r.message for r in reasons if r.code in R.AFFINITY_CODES]
    if affinity:
        head += " " + "; ".join(dict.fromkeys(affinity[:4]))
    return head
