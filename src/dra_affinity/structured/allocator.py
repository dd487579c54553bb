"""The per-node structured-parameters allocator with sharing affinity.

For a pod's unallocated claims and one node, find devices for every request:
``exactly`` requests with ExactCount / All, ``firstAvailable`` subrequests in
order, class and request CEL selectors, ``matchAttribute`` and
``distinctAttribute`` constraints,
consumable capacity (KEP-5075) and KEP-5981's sharing-affinity gate
("Filter Phase and Device Selection"). Devices are tried first-fit in the
snapshot's order; a request that cannot be satisfied backtracks into earlier
choices, like the Kubernetes allocator.

The allocator is pure: the cache, extraction and selector evaluation are
passed in, and it only reads :class:`AllocatedState`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dra_affinity.api.quantity import Quantity
from dra_affinity.cel import ExtractionResult, OutcomeKind
from dra_affinity.structured import reasons
from dra_affinity.structured.affinity import (
    CLEAN,
    AffinityKeys,
    AffinityStatus,
    Lock,
    check_lock,
    gated,
    pool_gate,
    unknown_message,
)
from dra_affinity.structured.capacity import CapacityRequestError, fits, plan_consumption
from dra_affinity.structured.claims import ClaimRequest, ClaimSpec, RequestSpec
from dra_affinity.structured.model import (
    Abort,
    DeviceInfo,
    NodeResult,
    PlannedShare,
    PoolInfo,
    Reason,
    Result,
)
from dra_affinity.structured.state import AllocatedState, Number

if TYPE_CHECKING:
    from dra_affinity.structured.experiments import Hooks

# Upper bound on device placements tried per node and pod: backtracking is
# exponential in the worst case, and a Filter call must always return.
SEARCH_STEP_LIMIT = 100_000


ExtractFn = Callable[[ClaimSpec, RequestSpec, PoolInfo], ExtractionResult]
SelectorFn = Callable[[str, DeviceInfo, ClaimSpec, RequestSpec], bool]
OrderFn = Callable[[Sequence[DeviceInfo], ClaimSpec, RequestSpec], Sequence[DeviceInfo]]

# ResourceClaim authoring errors: the pod is unresolvable until the claim changes.
_CLAIM_ERRORS = {
    OutcomeKind.SELF_INCONSISTENT: reasons.AFFINITY_SELF_INCONSISTENT,
    OutcomeKind.VALUE_TOO_LONG: reasons.AFFINITY_VALUE_TOO_LONG,
}

# ResourceSlice authoring errors: scheduling of the pod aborts.
_SLICE_ERRORS = {
    OutcomeKind.CEL_ERROR: reasons.AFFINITY_CEL_ERROR,
    OutcomeKind.MISSING_FIELD: reasons.AFFINITY_CEL_ERROR,
    OutcomeKind.NON_STRING: reasons.AFFINITY_CEL_ERROR,
    OutcomeKind.COST_EXCEEDED: reasons.AFFINITY_COST_EXCEEDED,
}


def share_id_for(claim_uid: str, request: str, device: str, n: int) -> str:
    """Deterministic share ID (a UUID, like Kubernetes' ShareID) for reproducible runs:
    the first 16 bytes of a SHA-256 of the placement, stamped as a version-4 RFC 4122
    UUID. Written out rather than through :class:`uuid.UUID`, whose constructor cost
    several times the hash: the text is the same (tested against it)."""
    b = bytearray(hashlib.sha256(f"{claim_uid}\x00{request}\x00{device}\x00{n}".encode()).digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def with_share_ids(result: NodeResult, claims: Sequence[ClaimSpec],
                   state: AllocatedState) -> NodeResult:
    """The chosen node's placement with the share IDs of its multi-allocatable
    placements, numbered after the shares each device holds in ``state`` (the state
    the node was filtered against). :meth:`NodeAllocator.allocate` leaves them unset:
    only the node a cycle chooses pays for the hashes."""
    uids = {c.key: c.uid for c in claims}
    seen: dict[str, int] = {}
    out: list[PlannedShare] = []
    for s in result.shares:
        if s.exclusive or s.share_id is not None:
            out.append(s)
            continue
        d = s.device.id
        n = len(state.shares(d)) + seen.get(d, 0)
        seen[d] = seen.get(d, 0) + 1
        out.append(PlannedShare(s.claim, s.request, s.device,
                                share_id_for(uids[s.claim], s.request, d, n), s.consumed,
                                s.keys, s.exclusive, s.reused_lock, s.preferred))
    return NodeResult(result.node, result.ok, out, result.reasons, result.codes)


@dataclass
class Counters:
    """Per-attempt diagnostics counters, folded into metrics by the scheduler."""

    lock_conflicts: int = 0
    no_keys: int = 0


@dataclass
class _Partial:
    shares: list[PlannedShare] = field(default_factory=list)
    consumed: dict[str, dict[str, Number]] = field(default_factory=dict)
    exclusive: set[str] = field(default_factory=set)
    keys: dict[str, AffinityKeys] = field(default_factory=dict)
    uses: dict[str, int] = field(default_factory=dict)


class NodeAllocator:
    """Allocates a pod's claims on one node. One instance per (pod, node) attempt."""

    def __init__(
        self,
        node: str,
        devices: Sequence[DeviceInfo],
        state: AllocatedState,
        *,
        affinity_enabled: bool,
        extract: ExtractFn,
        selector_matches: SelectorFn,
        order: OrderFn | None = None,
        counters: Counters | None = None,
        plan_cache: dict[tuple[str, tuple[tuple[str, Quantity], ...]], dict[str, Quantity] | str]
        | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.node = node
        self.devices = devices
        self.state = state
        self.affinity_enabled = affinity_enabled
        self.extract = extract
        self.selector_matches = selector_matches
        self.order = order
        self.hooks = hooks  # experiments; None on the stable path
        self.counters = counters if counters is not None else Counters()
        # Consumption plans depend only on (device, request capacity): shareable across attempts.
        self.plan_cache = plan_cache if plan_cache is not None else {}
        # Reasons are only rendered when the node fails, so messages are built lazily.
        self._reasons: dict[tuple[str, str], Callable[[], str]] = {}
        self._steps = 0
        self._p = _Partial()

    # ------------------------------------------------------------------ entry
    def allocate(self, claims: Sequence[ClaimSpec]) -> NodeResult:
        """Find devices for every request of every claim, or say why not.

        Raises :class:`Abort` for outcomes that end the attempt for the pod
        (slice authoring errors, self-inconsistent claims, selector errors).
        """
        blocked = self._all_mode_pools(claims)
        if blocked is not None:
            return NodeResult(self.node, False, [], [blocked], [blocked.code])
        flat = [(c, r) for c in claims for r in c.requests]
        ok = self._solve(flat, 0)
        if ok:
            # Share IDs are stamped on the chosen node only (with_share_ids): not every
            # feasible node of a scan is worth a hash per placement.
            return NodeResult(self.node, True, self._p.shares)
        codes = [code for (_dev, code) in self._reasons]
        if self._steps > SEARCH_STEP_LIMIT:
            codes.append(reasons.SEARCH_LIMIT)
        return NodeResult(self.node, False, [], self._final_reasons, codes)

    def _all_mode_pools(self, claims: Sequence[ClaimSpec]) -> Reason | None:
        """``allocationMode: All`` cannot know how much "all" is while a pool on the node
        is incomplete or invalid: the node fails for the pod, whichever pool and class.

        As upstream's allocator, before any search and for every (sub)request in All
        mode, including alternatives of ``firstAvailable`` that may not be needed, with
        upstream's message. Upstream marks this a failure on this node
        (``ErrFailedAllocationOnNode``, kubernetes#141829): the other nodes are still
        tried and the pod is Unschedulable, not aborted."""
        modes = [(c, alt) for c in claims for r in c.requests for alt in r.alternatives
                 if alt.all_devices]
        if not modes:
            return None
        pools: dict[tuple[str, str], PoolInfo] = {}
        for d in self.devices:
            pools.setdefault(d.pool_info.id, d.pool_info)
        for claim, alt in modes:
            for pid in sorted(pools):
                pi = pools[pid]
                if pi.incomplete_reason:
                    return Reason(reasons.POOL_INCOMPLETE,
                                  f"claim {claim.key}, request {alt.name}: asks for all devices, "
                                  f"but resource pool {pi.driver}/{pi.name} is currently being "
                                  f"updated ({pi.incomplete_reason})", self.node)
                if pi.invalid_reason:
                    return Reason(reasons.POOL_INVALID,
                                  f"claim {claim.key}, request {alt.name}: asks for all devices, "
                                  f"but resource pool {pi.driver}/{pi.name} is currently invalid "
                                  f"({pi.invalid_reason})", self.node)
        return None

    def check_device(self, d: DeviceInfo, claim: ClaimSpec,
                     alt: RequestSpec) -> tuple[PlannedShare | None, Reason | None]:
        """One device against one (sub)request, nothing else picked yet: the share it
        would get, or the reason it is not viable. For diagnostics (``explain``); it
        raises :class:`Abort` exactly where :meth:`allocate` would."""
        before = len(self._reasons)
        share = self._viable(d, claim, alt) if self._static_match(d, claim, alt) else None
        if share is not None:
            return share, None
        fresh = self.reasons()[before:]
        return None, fresh[0] if fresh else Reason(
            reasons.NO_DEVICES, f"device {d.id} is not viable for request {alt.name}", self.node, d.id)

    def _final_reasons(self) -> list[Reason]:
        found = self.reasons()
        if self._steps > SEARCH_STEP_LIMIT:
            found.append(
                Reason(reasons.SEARCH_LIMIT, f"allocation search stopped after {SEARCH_STEP_LIMIT} steps",
                       self.node)
            )
        if not found:
            found.append(Reason(reasons.NO_DEVICES, "no devices on this node match the requests",
                                self.node))
        return found

    def reasons(self) -> list[Reason]:
        return [Reason(code, msg(), self.node, dev) for (dev, code), msg in self._reasons.items()]

    # ------------------------------------------------------------------ search
    def _solve(self, flat: Sequence[tuple[ClaimSpec, ClaimRequest]], i: int) -> bool:
        if i == len(flat):
            return True
        claim, req = flat[i]
        for alt in req.alternatives:
            candidates = [d for d in self.devices if self._static_match(d, claim, alt)]
            if self.order is not None:
                candidates = list(self.order(candidates, claim, alt))
            if alt.all_devices:
                if alt.capacity:
                    candidates = [d for d in candidates if self._all_mode_member(d, alt)]
                if not candidates:
                    continue
                if self._pick_all(flat, i, claim, alt, candidates):
                    return True
            elif self._pick(flat, i, claim, alt, candidates, 0, alt.count):
                return True
        return False

    def _pick_all(self, flat: Sequence[tuple[ClaimSpec, ClaimRequest]], i: int,
                  claim: ClaimSpec, alt: RequestSpec, candidates: Sequence[DeviceInfo]) -> bool:
        mark = len(self._p.shares)
        for d in candidates:
            share = self._viable(d, claim, alt)
            if share is None:
                self._undo(mark)
                return False
            self._push(share)
        if self._solve(flat, i + 1):
            return True
        self._undo(mark)
        return False

    def _pick(self, flat: Sequence[tuple[ClaimSpec, ClaimRequest]], i: int, claim: ClaimSpec,
              alt: RequestSpec, candidates: Sequence[DeviceInfo], start: int, left: int) -> bool:
        if left == 0:
            return self._solve(flat, i + 1)
        for j in range(start, len(candidates)):
            self._steps += 1
            if self._steps > SEARCH_STEP_LIMIT:
                return False
            share = self._viable(candidates[j], claim, alt)
            if share is None:
                continue
            mark = len(self._p.shares)
            self._push(share)
            if self._pick(flat, i, claim, alt, candidates, j + 1, left - 1):
                return True
            self._undo(mark)
        return False

    # ------------------------------------------------------------------ partial state
    def _push(self, s: PlannedShare) -> None:
        p = self._p
        p.shares.append(s)
        d = s.device.id
        p.uses[d] = p.uses.get(d, 0) + 1
        if s.exclusive:
            p.exclusive.add(d)
        if s.consumed:
            used = p.consumed.setdefault(d, {})
            for name, amount in s.consumed:
                used[name] = used.get(name, 0) + amount.num
        if s.keys is not None and d not in p.keys:
            p.keys[d] = s.keys

    def _undo(self, mark: int) -> None:
        p = self._p
        while len(p.shares) > mark:
            s = p.shares.pop()
            d = s.device.id
            p.uses[d] -= 1
            if s.exclusive:
                p.exclusive.discard(d)
            for name, amount in s.consumed:
                p.consumed[d][name] = p.consumed[d][name] - amount.num
            if p.uses[d] == 0:
                del p.uses[d]
                p.keys.pop(d, None)
                p.consumed.pop(d, None)

    # ------------------------------------------------------------------ checks
    def _reject(self, d: DeviceInfo, code: str, message: Callable[[], str]) -> None:
        key = (d.id, code)
        if key in self._reasons:
            return
        self._reasons[key] = message
        if code == reasons.AFFINITY_LOCK_MISMATCH:
            self.counters.lock_conflicts += 1
        elif code == reasons.AFFINITY_NO_KEYS:
            self.counters.no_keys += 1

    def _static_match(self, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> bool:
        for expr in alt.selectors:
            if not self.selector_matches(expr, d, claim, alt):
                self._reject(d, reasons.SELECTOR_MISMATCH,
                             lambda: f"device {d.id} does not match selector {_clip(expr)!r} of "  # noqa: B023 (returns right after: the cell holds this value)
                             f"request {alt.name} (class {alt.class_name})")
                return False
        return True

    def _viable(self, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> PlannedShare | None:
        """Check one device for one (sub)request given the partial allocation."""
        pi = d.pool_info
        gate = pool_gate(d, self.affinity_enabled)
        if gate is not None:
            self._reject(d, *gate)
            return None

        # 1. capacity (KEP-5075)
        consumed: tuple[tuple[str, Quantity], ...] = ()
        share_id: str | None = None  # assigned once the placement is final
        if d.multi:
            if self.state.is_exclusively_allocated(d.id) or d.id in self._p.exclusive:
                self._reject(d, reasons.DEVICE_ALLOCATED, lambda: f"device {d.id} is already allocated")
                return None
            plan = self._plan(d, alt)
            if isinstance(plan, str):
                err = plan
                self._reject(d, reasons.INVALID_CAPACITY_REQUEST, lambda: f"device {d.id}: {err}")
                return None
            used = _merged(self.state.consumed(d.id), self._p.consumed.get(d.id))
            over = fits(d.limits, used, plan.items())
            if over is not None:
                self._reject(d, reasons.INSUFFICIENT_CAPACITY,
                             lambda: f"device {d.id}: not enough {over} left "
                             f"(capacity {d.capacity[over].value}, in use {used.get(over, Quantity(0))}, "
                             f"requested {plan[over]})")
                return None
            consumed = tuple(sorted(plan.items()))
        else:
            if self.state.is_allocated(d.id) or d.id in self._p.uses:
                self._reject(d, reasons.DEVICE_ALLOCATED, lambda: f"device {d.id} is already allocated")
                return None
            for name, amount in alt.capacity.items():
                cap = d.capacity.get(name)
                if cap is None or cap.value.value < amount.value:
                    self._reject(d, reasons.INSUFFICIENT_CAPACITY,
                                 lambda: f"device {d.id}: capacity {name} is less than the requested {amount}")  # noqa: B023 (returns right after: the cell holds this value)
                    return None

        # constraints (matchAttribute, distinctAttribute) against devices already picked
        if not self._constraints_ok(d, claim, alt):
            return None

        # 2-5. sharing affinity
        keys: AffinityKeys | None = None
        reused = False
        if gated(d, self.affinity_enabled):
            st = self.state.affinity_states.get(d.id, CLEAN)
            if st.status is AffinityStatus.UNRECONSTRUCTABLE:
                self._reject(d, reasons.AFFINITY_UNRECONSTRUCTABLE, lambda: unknown_message(d, st))
                return None
            res = self.extract(claim, alt, pi)
            if res.kind is not OutcomeKind.OK:
                self._check_fatal(res, d, claim, alt)
                if res.kind is OutcomeKind.NO_KEYS:
                    self._reject(d, reasons.AFFINITY_NO_KEYS,
                                 lambda: f"claim {claim.key} request {alt.name}: strict gating: not every "
                                 f"sharingAffinity extractor of pool {pi.driver}/{pi.name} (slices "
                                 f"{', '.join(pi.metadata_slices)}) produced a non-empty value: "
                                 f"{res.message} (device {d.id} filtered)")
                    return None
            keys = res.keys
            assert keys is not None
            picked = self._p.keys
            pending = picked.get(d.id) if picked else None
            verdict = check_lock(st, keys, pending)
            if verdict is Lock.MISMATCH:
                if pending is not None and st.status is AffinityStatus.CLEAN:
                    self._reject(d, reasons.AFFINITY_LOCK_MISMATCH,
                                 lambda: f"device {d.id} is picked for another request of this pod with "
                                 f"affinity {dict(pending)}, request {alt.name} needs {dict(keys)}")
                else:
                    self._reject(d, reasons.AFFINITY_LOCK_MISMATCH,
                                 lambda: f"device {d.id} is locked to incompatible affinity values "
                                 f"{st.lock_dict()}; claim {claim.key} request {alt.name} "
                                 f"needs {dict(keys)}")
                return None
            reused = verdict is Lock.MATCH and st.status is AffinityStatus.LOCKED
            if verdict is Lock.CLEAN and self.hooks is not None:
                veto = self.hooks.veto_clean(d, claim, alt, keys)
                if veto is not None:
                    self._reject(d, *veto)
                    return None
        soft = self.hooks.soft_keys(d, claim, alt) if self.hooks is not None else None
        return PlannedShare(claim.key, alt.name, d, share_id, consumed, keys,
                            exclusive=not d.multi, reused_lock=reused, preferred=soft)

    def _plan(self, d: DeviceInfo, alt: RequestSpec) -> dict[str, Quantity] | str:
        """What the request consumes of a multi-allocatable device, or why it cannot."""
        pkey = (d.id, alt.capacity_key)
        plan = self.plan_cache.get(pkey)
        if plan is None:
            plan = self.plan_cache[pkey] = _consumption_plan(d, alt)
        return plan

    def _all_mode_member(self, d: DeviceInfo, alt: RequestSpec) -> bool:
        """Whether a device is part of "all" for a request with capacity requests.

        The API: "the request fails if there are devices that otherwise match the
        request, and have this capacity, with a value >= the requested amount, but
        which cannot be allocated". So a device that does not publish a requested
        capacity, or whose total capacity (after its requestPolicy) can never hold the
        request, is not part of "all"; one that could hold it on its own stays in, and
        the request fails if what others already use leaves too little."""
        if d.multi:
            plan = self._plan(d, alt)
            if isinstance(plan, str):
                err = plan
                self._reject(d, reasons.INVALID_CAPACITY_REQUEST,
                             lambda: f"device {d.id}: {err} (not part of allocationMode All)")
                return False
            over = fits(d.limits, {}, plan.items())
        else:
            over = next((n for n, q in alt.capacity.items()
                         if n not in d.capacity or d.capacity[n].value.value < q.value), None)
        if over is None:
            return True
        self._reject(d, reasons.INSUFFICIENT_CAPACITY,
                     lambda: f"device {d.id}: capacity {over} can never hold request {alt.name} "
                     "(not part of allocationMode All)")
        return False

    def _check_fatal(self, res: ExtractionResult, d: DeviceInfo, claim: ClaimSpec,
                     alt: RequestSpec) -> None:
        code = _SLICE_ERRORS.get(res.kind)
        pi = d.pool_info
        if code is not None:
            raise Abort(Result.ERROR, Reason(
                code,
                f"ResourceSlice authoring error in pool {pi.driver}/{pi.name} "
                f"(sharingAffinity in {', '.join(pi.metadata_slices)}): {res.kind.value}: "
                f"{res.message} (claim {claim.key}, request {alt.name}, device {d.id})",
                self.node, d.id))
        code = _CLAIM_ERRORS.get(res.kind)
        if code is not None:
            raise Abort(Result.UNRESOLVABLE, Reason(
                code, f"claim {claim.key} request {alt.name}: {res.message}", self.node, d.id))
        if res.kind is not OutcomeKind.NO_KEYS:  # an outcome this allocator does not know: fail closed
            raise Abort(Result.ERROR, Reason(
                reasons.AFFINITY_CEL_ERROR,
                f"unclassified extraction outcome {res.kind.value}: {res.message} "
                f"(claim {claim.key}, request {alt.name}, device {d.id})", self.node, d.id))

    def _constraints_ok(self, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> bool:
        """The claim's constraints hold with ``d`` added for ``alt`` (they are monotonic, as
        upstream assumes: once one fails, adding devices cannot make it hold again)."""
        for k in claim.constraints:
            if k.requests and alt.parent not in k.requests and alt.name not in k.requests:
                continue
            mine = _attribute(d, k.attribute)
            if mine is None:
                missing = f"device {d.id} has no attribute {k.attribute} ({k.field} of claim {claim.key})"
                self._reject(d, reasons.CONSTRAINT_MISMATCH, lambda: missing)  # noqa: B023 (returns right after: the cell holds this value)
                return False
            for s in self._p.shares:
                if s.claim != claim.key:
                    continue
                parent = s.request.split("/", 1)[0]
                if k.requests and parent not in k.requests and s.request not in k.requests:
                    continue
                other = _attribute(s.device, k.attribute)
                if (other == mine) is not k.distinct:
                    continue
                if k.distinct:
                    text = (f"device {d.id}: attribute {k.attribute} ({mine[1]!r}) is also the value "
                            f"of {s.device.id}, picked for request {s.request} "
                            f"(distinctAttribute of claim {claim.key})")
                else:
                    text = (f"device {d.id}: attribute {k.attribute} ({mine[1]!r}) does not match "
                            f"{s.device.id} ({other[1] if other else None!r}) "
                            f"(matchAttribute of claim {claim.key})")
                self._reject(d, reasons.CONSTRAINT_MISMATCH, lambda: text)  # noqa: B023 (returns right after: the cell holds this value)
                return False
        return True

def _consumption_plan(d: DeviceInfo, alt: RequestSpec) -> dict[str, Quantity] | str:
    """What the request consumes of a multi-allocatable device, or why it cannot."""
    try:
        return plan_consumption(d.capacity, alt.capacity)
    except CapacityRequestError as e:
        return str(e)


def _merged(a: Mapping[str, Number], b: Mapping[str, Number] | None) -> Mapping[str, Number]:
    if not b:
        return a
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _attribute(d: DeviceInfo, qualified: str) -> tuple[str, object] | None:
    """The device's attribute as (type, value), so that ``1`` and ``true`` differ as
    they do upstream; an attribute of the driver's own domain may be written short."""
    attrs = d.device.attributes
    a = attrs.get(qualified)
    if a is None and "/" in qualified:
        domain, name = qualified.split("/", 1)
        if domain == d.driver:
            a = attrs.get(name)
    if a is None:
        return None
    for kind, v in (("int", a.int_), ("bool", a.bool_), ("string", a.string),
                    ("version", a.version)):
        if v is not None:
            return kind, v
    return None


def _clip(s: str, n: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."
