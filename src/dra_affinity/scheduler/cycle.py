"""Per-cycle state and PreFilter.

PreFilter resolves the pod's claims and their DeviceClasses once per attempt;
a claim or class that does not exist ends the attempt as
UnschedulableAndUnresolvable, as in the DynamicResources plugin. What it
resolves is written once into :class:`CycleState` and only read by the later
phases (Filter adds its verdicts; Reserve and Bind read them).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.keys import key_of
from dra_affinity.api.podclaims import claim_key, claim_name, reserved_for_others
from dra_affinity.api.resource import RESERVED_FOR_MAX, DeviceClass, ResourceClaim, subrequest_name
from dra_affinity.features import Features
from dra_affinity.structured import reasons
from dra_affinity.structured.allocator import Counters
from dra_affinity.structured.claims import ClaimRequest, ClaimSpec, Constraint, RequestSpec
from dra_affinity.structured.experiments import ExperimentHooks, is_never_set_lock
from dra_affinity.structured.extraction import ExtractionCache, ExtractionMemo, ExtractionResult
from dra_affinity.structured.model import Abort, NodeResult, Reason, Result

from .nodefit import NO_PLACEMENT, PlacementError, PodPlacement, placement_of
from .placement.filters import PlacementCycle
from .placement.scores import NodeScores
from .unsupported import unsupported_placement
from .view import ClusterView


@dataclass
class Attempt:
    """The outcome of one scheduling attempt."""

    pod: str
    result: Result
    node: str | None = None
    allocations: list[dict[str, Any]] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    message: str = ""


@dataclass
class CycleState:
    """One pod's scheduling cycle, from PreFilter to Bind."""

    pod: Pod
    key: str
    claims: list[ResourceClaim]  # all claims of the pod, in pod order
    to_allocate: list[ClaimSpec]
    allocated: list[ResourceClaim]
    memo: ExtractionMemo
    hooks: ExperimentHooks | None = None
    counters: Counters = field(default_factory=Counters)
    chosen: NodeResult | None = None
    node_reasons: list[Reason] = field(default_factory=list)
    # Nodes Filter rejected, their reasons not rendered yet (see reasons()).
    rejected: list[NodeResult] = field(default_factory=list)
    # free-index categories this cycle may use (None: any, extraction gave no keys)
    free_allowed: tuple[int, ...] | None = None
    # tolerations, required node affinity and resource requests (the node filters)
    placement: PodPlacement = NO_PLACEMENT
    # inter-pod affinity and spread counts read for this pod (PreFilter; see filter.py)
    placement_state: PlacementCycle | None = None
    # Whether the node scores can rank this pod's feasible nodes (see filter.node_scoring)
    ranks_nodes: bool | None = None
    # The chosen node's competitors and their scores, when node scores ranked them
    scores: NodeScores | None = None
    # NodeUsage.version when Filter ran (Reserve re-checks the node filters if it moved)
    usage_version: int = -1
    # The one claim and (sub)request when the pod needs exactly one device: one
    # unallocated claim, one request with one way to satisfy it, count 1, not All, no
    # constraints. Then a node fits exactly when one of its devices does.
    single: tuple[ClaimSpec, RequestSpec] | None = None
    # What Filter saw when it chose: (snapshot, state, state.version). Reserve re-checks
    # the choice only if any of them changed since (another pod's Reserve in between).
    filtered_on: tuple[object, object, int] | None = None
    # When no node fits and the kept verdicts rendered it: (nodes, reasons, FitError
    # message), the signature's last ones when every rejection is the same (see
    # fastpath.verdicts); None: Reserve renders them (reasons()).
    failure: tuple[int, list[Reason], str] | None = None

    @property
    def allocating(self) -> frozenset[str]:
        """Keys of the claims this cycle allocates (the others are allocated already)."""
        return frozenset(c.key for c in self.to_allocate)

    def reasons(self) -> list[Reason]:
        """Why no node fits, rendered now: only a pod that fails (and has its diagnostics
        written) pays for the messages, not one that passed over full nodes to fit."""
        return [*self.node_reasons, *(r for res in self.rejected for r in res.reasons)]

    def __post_init__(self) -> None:
        if len(self.to_allocate) != 1 or self.allocated:
            return
        c = self.to_allocate[0]
        if len(c.requests) != 1 or c.constraints:
            return
        alts = c.requests[0].alternatives
        if len(alts) == 1 and not alts[0].all_devices and alts[0].count == 1:
            self.single = (c, alts[0])


def prefilter(view: ClusterView, features: Features, pod: Pod,
              shared: ExtractionCache | None,
              remembered: dict[Hashable, ExtractionResult] | None = None) -> CycleState:
    """Resolve the pod's claims and what to allocate; raises :class:`Abort`."""
    key = key_of(pod)
    unsupported = unsupported_placement(pod)
    if unsupported:
        raise Abort(Result.UNRESOLVABLE, Reason(
            reasons.UNSUPPORTED_PLACEMENT,
            f"pod {key}: {', '.join(unsupported)}: placement constraints this scheduler does not "
            "evaluate; the pod is not placed (schedule it with the default scheduler)"))
    try:
        placement = placement_of(pod)
    except PlacementError as e:
        raise Abort(Result.UNRESOLVABLE, Reason(reasons.INVALID_POD_SPEC, f"pod {key}: {e}")) from None
    classes = view.classes()
    claims: list[ResourceClaim] = []
    for prc in pod.spec.resource_claims:
        name = claim_name(pod, prc)
        claim = view.claim(claim_key(pod, prc))
        if claim is None:
            src = (f"template {prc.resource_claim_template_name}"
                   if prc.resource_claim_template_name else "resourceClaimName")
            raise Abort(Result.UNRESOLVABLE, Reason(
                reasons.CLAIM_NOT_FOUND,
                f"pod {key}: resource claim {pod.namespace}/{name} ({src}) does not exist"))
        claims.append(claim)
    to_allocate: list[ClaimSpec] = []
    allocated: list[ResourceClaim] = []
    for c in claims:
        ckey = key_of(c)
        if c.status.allocation is not None:
            others = reserved_for_others(c, pod)
            if len(others) >= RESERVED_FOR_MAX:
                raise Abort(Result.UNSCHEDULABLE, Reason(
                    reasons.CLAIM_IN_USE, f"claim {ckey} is already reserved for {len(others)} consumers"))
            allocated.append(c)
            continue
        to_allocate.append(claim_spec(c, classes))
    memo = ExtractionMemo({key_of(c): c for c in claims}, classes, shared=shared,
                          remembered=remembered)
    return CycleState(pod, key, claims, to_allocate, allocated, memo, _hooks(features, claims, memo),
                      placement=placement)


def _hooks(features: Features, claims: list[ResourceClaim],
           memo: ExtractionMemo) -> ExperimentHooks | None:
    """The experiments that are on, or None: the stable path."""
    if not (features.never_set_lock or features.preferred_keys):
        return None
    never = frozenset(key_of(c) for c in claims
                      if features.never_set_lock and is_never_set_lock(c.metadata.annotations))
    return ExperimentHooks(never, memo.preferred if features.preferred_keys else None)


def claim_spec(c: ResourceClaim, classes: Mapping[str, DeviceClass]) -> ClaimSpec:
    """A claim reduced to what the allocator reads; a missing class is unresolvable."""
    ckey = key_of(c)

    def selectors(class_name: str, own: list[Any], req: str) -> tuple[str, ...]:
        cls = classes.get(class_name)
        if cls is None:
            raise Abort(Result.UNRESOLVABLE, Reason(
                reasons.DEVICE_CLASS_NOT_FOUND,
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
            full = subrequest_name(r.name, s.name)
            alts.append(RequestSpec(
                full, r.name, s.device_class_name, selectors(s.device_class_name, s.selectors, full),
                s.allocation_mode == "All", s.count or 1,
                dict(s.capacity.requests) if s.capacity else {}))
        reqs.append(ClaimRequest(r.name, tuple(alts)))
    # Admission allows exactly one of the two; a constraint with both is kept as both.
    cons: list[Constraint] = []
    for k in c.spec.devices.constraints:
        if k.match_attribute:
            cons.append(Constraint(tuple(k.requests), k.match_attribute))
        if k.distinct_attribute:
            cons.append(Constraint(tuple(k.requests), k.distinct_attribute, distinct=True))
    return ClaimSpec(ckey, c.metadata.uid or ckey, tuple(reqs), tuple(cons))
