"""Reserve, and the claims PreBind writes.

Reserve re-checks what Filter chose against the live cache (capacity, and the
lock rule for the keys Filter extracted: no second CEL pass) and records the
pod's shares as tentative, atomically: a conflict records nothing.
:func:`unreserve_shares` removes exactly those tentative shares again.
:func:`claim_statuses` is what PreBind writes, in plain form (:class:`ClaimWrite`,
made typed at the write): each claim's ``status.reservedFor`` with the pod, and
``status.allocation`` for a claim this cycle allocates (the allocation result as
upstream's allocator records it: results, then configs FromClass before FromClaim). The writes themselves, Bind and the rollback of
both are in :mod:`.binding`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dra_affinity.api.keys import key_of
from dra_affinity.api.meta import NodeSelector
from dra_affinity.api.podclaims import is_reserved_for, reservation_fields
from dra_affinity.api.resource import (
    DeviceClass,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimStatus,
    subrequest_name,
)
from dra_affinity.structured import reasons
from dra_affinity.structured.affinity import (
    CLEAN,
    AffinityKeys,
    AffinityStatus,
    Lock,
    check_lock,
)
from dra_affinity.structured.capacity import fits
from dra_affinity.structured.extraction import in_scope
from dra_affinity.structured.model import PlannedShare, Reason
from dra_affinity.structured.nodes import selector_for_node
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState, Number, Share

from .cache import ResultTuple
from .cycle import CycleState
from .view import ClusterView


def refresh_claims(view: ClusterView, cyc: CycleState) -> Reason | None:
    """Re-read the pod's claims before Reserve: a pod earlier in the same batch may
    have allocated (or reserved) a claim this pod shares. Allocating it again would
    double-count capacity and overwrite that pod's reservation."""
    assert cyc.chosen is not None
    planned = {c.key for c in cyc.to_allocate}
    fresh: list[ResourceClaim] = []
    for c in cyc.claims:
        key = key_of(c)
        now = view.claim(key)
        if now is None:
            return Reason(reasons.RESERVE_CONFLICT, f"claim {key} was deleted since Filter",
                          cyc.chosen.node)
        if key in planned and now.status.allocation is not None:
            return Reason(reasons.RESERVE_CONFLICT,
                          f"claim {key} was allocated by another pod since Filter; the next "
                          "attempt uses that allocation", cyc.chosen.node)
        fresh.append(now)
    cyc.claims = fresh
    return None


def reserve(state: AllocatedState, snap: Snapshot, cyc: CycleState) -> Reason | None:
    """Atomically re-check and record this pod's shares as tentative.

    The re-check is skipped when nothing changed since Filter chose (the same snapshot,
    and the same state at the same version): it would re-derive Filter's own answer.
    Another pod's Reserve in between (a batch), a slice change or a restart changes
    one of them, and then every share is re-checked."""
    assert cyc.chosen is not None
    shares = cyc.chosen.shares
    seen = cyc.filtered_on
    if seen is None or seen[0] is not snap or seen[1] is not state or seen[2] != state.version:
        conflict = _recheck(state, snap, cyc.chosen.node, shares)
        if conflict is not None:
            return conflict
    for s in shares:
        state.add(s.device.id, Share(s.claim, s.request, s.share_id, s.consumed, s.keys,
                                     tentative=True, gated=s.keys is not None, preferred=s.preferred),
                  exclusive=s.exclusive)
    return None


def _recheck(state: AllocatedState, snap: Snapshot, node: str,
             shares: Sequence[PlannedShare]) -> Reason | None:
    """Filter's choice against the live cache: capacity, and the lock rule for the keys
    Filter extracted (no second CEL pass); the first conflict, or None."""
    pending: dict[str, AffinityKeys] = {}
    extra: dict[str, dict[str, Number]] = {}
    affinity_states = state.affinity_states
    for s in shares:
        d = s.device
        if d.id not in snap.devices:
            return Reason(reasons.RESERVE_CONFLICT, f"device {d.id} disappeared before Reserve", node, d.id)
        if s.exclusive:
            if state.is_allocated(d.id):
                return Reason(reasons.RESERVE_CONFLICT, f"device {d.id} was allocated since Filter", node, d.id)
        else:
            if state.is_exclusively_allocated(d.id):
                return Reason(reasons.RESERVE_CONFLICT, f"device {d.id} was allocated since Filter", node, d.id)
            used = dict(state.consumed(d.id))
            for n, a in extra.get(d.id, {}).items():
                used[n] = used.get(n, 0) + a
            over = fits(d.limits, used, s.consumed)
            if over is not None:
                return Reason(reasons.RESERVE_CONFLICT,
                              f"device {d.id}: capacity {over} was consumed since Filter", node, d.id)
            ex = extra.setdefault(d.id, {})
            for n, q in s.consumed:
                ex[n] = ex.get(n, 0) + q.num
        keys = s.keys
        if keys is not None:
            did = d.id
            st = affinity_states.get(did, CLEAN)
            verdict = check_lock(st, keys, pending.get(did))
            if verdict is Lock.UNKNOWN:
                return Reason(reasons.RESERVE_CONFLICT, f"device {d.id} became Unreconstructable since Filter",
                              node, d.id)
            if verdict is Lock.MISMATCH:
                lock = st.locked_affinity if st.status is AffinityStatus.LOCKED else pending[d.id]
                return Reason(reasons.RESERVE_CONFLICT,
                              f"device {d.id} was locked to {dict(lock or ())} since Filter; "
                              f"claim {s.claim} request {s.request} needs {dict(keys)}", node, d.id)
            pending.setdefault(did, keys)
    return None


def unreserve_shares(state: AllocatedState, cyc: CycleState) -> None:
    """Take out exactly the tentative shares this cycle's Reserve recorded."""
    assert cyc.chosen is not None
    for s in cyc.chosen.shares:
        state.remove(s.device.id, s.claim, s.request, tentative_only=True)


#: A config entry of an allocation result in plain form: source, requests, opaque config.
ConfigEntry = tuple[str, tuple[str, ...], OpaqueDeviceConfiguration]


class ClaimWrite:
    """One claim of the pod as PreBind writes it, in plain form: the claim as Reserve read
    it, the pod's ``reservedFor`` entry when this cycle adds it, and the shares (with the
    configs in scope and the node selector) when this cycle allocates the claim.

    The typed claim is made by :meth:`export`, at the write edge, in one validation of
    the new status (pydantic's compiled core builds the nested results there, about half
    the cost of building each of them and copying the status). A record holds only
    immutable parts and parts shared read-only with the cache (the claim, the opaque
    configs, the node selector); an exported claim has containers of its own, so neither
    can change the other."""

    __slots__ = ("claim", "config", "key", "node_selector", "reserve_for", "shares")

    def __init__(self, claim: ResourceClaim, key: str, reserve_for: Mapping[str, str] | None = None,
                 shares: tuple[PlannedShare, ...] | None = None, config: tuple[ConfigEntry, ...] = (),
                 node_selector: NodeSelector | None = None) -> None:
        self.claim = claim
        self.key = key
        self.reserve_for = dict(reserve_for) if reserve_for is not None else None
        self.shares = shares
        self.config = config
        self.node_selector = node_selector

    @property
    def changes(self) -> bool:
        """Whether the claim needs a write (a reservation or an allocation to add)."""
        return self.reserve_for is not None or self.shares is not None

    @property
    def allocates(self) -> bool:
        """Whether this cycle sets the claim's allocation (not only its reservation)."""
        return self.shares is not None

    def export(self) -> ResourceClaim:
        """The typed claim to write: the claim as read when nothing changes (not
        copied), else a copy with the new status. The status's set fields are the
        read status's and the ones this cycle sets, as a ``model_copy`` with an update
        would set them; the same for each part of the allocation."""
        if not self.changes:
            return self.claim
        status = self.claim.status
        fields: dict[str, Any] = {name: getattr(status, name) for name in status.model_fields_set}
        if self.reserve_for is not None:
            fields["reserved_for"] = [*status.reserved_for, dict(self.reserve_for)]
        if self.shares is not None:
            fields["allocation"] = {
                "devices": {
                    "results": [{"request": s.request, "driver": s.device.driver, "pool": s.device.pool,
                                 "device": s.device.name, "share_id": s.share_id,
                                 "consumed_capacity": dict(s.consumed)} for s in self.shares],
                    "config": [{"source": source, "requests": list(requests), "opaque": opaque}
                               for source, requests, opaque in self.config]},
                "node_selector": self.node_selector}
        return self.claim.model_copy(update={"status": ResourceClaimStatus.model_validate(fields)})

    def rows(self) -> list[dict[str, Any]]:
        """The claim's allocation results as the simulator's output lists them
        (:func:`allocation_rows` of the exported claim, without exporting it)."""
        if self.shares is None:
            return allocation_rows(self.claim)
        return [{"claim": self.key, "request": s.request, "device": s.device.id, "shareID": s.share_id,
                 "consumedCapacity": {k: str(v) for k, v in sorted(s.consumed)}}
                for s in self.shares]


def claim_statuses(cyc: CycleState, snap: Snapshot, classes: Mapping[str, DeviceClass],
                   node: str) -> tuple[list[ClaimWrite], frozenset[str]]:
    """The pod's claims as PreBind writes them (:class:`ClaimWrite`): reserved for the
    pod, and the ones this cycle allocates with their allocation results; and the keys
    of those that change. A claim already allocated and reserved for this pod needs no
    write, and is handed on as the cache has it (not copied)."""
    assert cyc.chosen is not None
    by_claim: dict[str, list[PlannedShare]] = {}
    for s in cyc.chosen.shares:
        by_claim.setdefault(s.claim, []).append(s)
    written: list[ClaimWrite] = []
    changes: set[str] = set()
    node_local = snap.node_local
    for c in cyc.claims:
        ckey = key_of(c)
        shares = by_claim.get(ckey) if c.status.allocation is None else None
        reserve_for = None if is_reserved_for(c, cyc.pod) else reservation_fields(cyc.pod)
        if shares is None:
            written.append(ClaimWrite(c, ckey, reserve_for))
        else:
            local = all(node_local.get(s.device.id, False) for s in shares)
            written.append(ClaimWrite(c, ckey, reserve_for, tuple(shares),
                                      allocation_config(c, shares, classes),
                                      selector_for_node(node) if local else None))
        if written[-1].changes:
            changes.add(ckey)
    return written, frozenset(changes)


def allocation_config(c: ResourceClaim, shares: Sequence[PlannedShare],
                      classes: Mapping[str, DeviceClass]) -> tuple[ConfigEntry, ...]:
    """FromClass then FromClaim configs, as the Kubernetes allocator records them: a
    class's opaque configs for the requests (of those the shares allocate) that use the
    class, classes by name; then the claim's opaque configs whose requests include one
    of them (or that name none)."""
    used = sorted({s.request for s in shares})
    by_class: dict[str, list[str]] = {}
    for req in used:
        cls = _class_of(c, req)
        if cls:
            by_class.setdefault(cls, []).append(req)
    out: list[ConfigEntry] = []
    for cls_name in sorted(by_class):
        dclass = classes.get(cls_name)
        if dclass is None:
            continue
        for cfg in dclass.spec.config:
            if cfg.opaque is not None:
                out.append(("FromClass", tuple(by_class[cls_name]), cfg.opaque))
    for ccfg in c.spec.devices.config:
        if ccfg.opaque is None:
            continue
        if ccfg.requests and not any(in_scope(ccfg.requests, r) for r in used):
            continue
        out.append(("FromClaim", tuple(ccfg.requests), ccfg.opaque))
    return tuple(out)


def _class_of(c: ResourceClaim, request: str) -> str:
    """The DeviceClass a request (``req`` or ``req/sub``) of ``c`` names ("" when none)."""
    for r in c.spec.devices.requests:
        if r.name == request and r.exactly is not None:
            return r.exactly.device_class_name
        for s in r.first_available:
            if subrequest_name(r.name, s.name) == request:
                return s.device_class_name
    return ""


def result_tuples(claim: ResourceClaim | None) -> list[ResultTuple]:
    if claim is None or claim.status.allocation is None:
        return []
    return [(r.device_id, r.request, r.share_id) for r in claim.status.allocation.devices.results]


def allocation_rows(c: ResourceClaim) -> list[dict[str, Any]]:
    """A claim's allocation results as the simulator's output lists them."""
    rows: list[dict[str, Any]] = []
    if c.status.allocation is None:
        return rows
    for r in c.status.allocation.devices.results:
        rows.append({
            "claim": key_of(c),
            "request": r.request,
            "device": r.device_id,
            "shareID": r.share_id,
            "consumedCapacity": {k: str(v) for k, v in sorted(r.consumed_capacity.items())},
        })
    return rows
