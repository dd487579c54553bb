"""Filter and Score: the reference full scan.

Filter runs the node filters and the pure per-node allocator for each node in
order; Score picks the node. Scores are kube-scheduler's default profile
(:mod:`.placement.scores`) with the device score of ``--scoring`` in the place of
DynamicResources' (``firstfit``: 0 everywhere; ``affinity``: how many of the
node's placements join a compatible lock); the highest weighted total wins, ties
in node order.

When no node score can tell two nodes apart for the pod (:func:`node_scoring`:
no preferences, no PreferNoSchedule taint it minds, no Node reporting
allocatable, no bound pod's affinity term), the device score alone decides:
with ``firstfit`` the first feasible node wins and the scan stops there; with
``affinity`` the most consolidating node, ties in node order. Otherwise every
node is filtered (up to upstream's number of feasible nodes to find) and scored.
The fast paths (:mod:`dra_affinity.scheduler.fastpath`) must choose exactly the
node this scan chooses; they only skip work: the indexes only when the device
score alone decides, the kept verdicts (``check``) in either scan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from dra_affinity.cel import OutcomeKind
from dra_affinity.structured import reasons
from dra_affinity.structured.affinity import CLEAN, AffinityStatus, Lock, check_lock, gated
from dra_affinity.structured.allocator import NodeAllocator, OrderFn
from dra_affinity.structured.claims import ClaimSpec, RequestSpec
from dra_affinity.structured.experiments import preferred_order
from dra_affinity.structured.model import Abort, DeviceInfo, NodeResult, Reason
from dra_affinity.structured.nodes import node_selector_matches
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState

from .cache import SchedulerCache
from .cycle import CycleState
from .nodefit import NO_PLACEMENT, NodeFacts, Rejection, check_node
from .placement import filters as placement_filters
from .placement import scores as placement_scores
from .placement.filters import PlacementCycle
from .placement.scores import NodeScores

FIRSTFIT, AFFINITY = "firstfit", "affinity"
SCORING = (FIRSTFIT, AFFINITY)


def placement_state(cache: SchedulerCache, cyc: CycleState) -> PlacementCycle | None:
    """The pod's PreFilter state for PodTopologySpread and InterPodAffinity, read once per
    cycle (again when pods were bound or removed since); None when neither can reject
    a node: the pod has no such constraint and no bound pod has anti-affinity."""
    usage = cache.usage
    terms = cyc.placement.terms
    if not (terms.spread or terms.affinity or terms.anti_affinity or usage.with_affinity):
        return None
    st = cyc.placement_state
    if st is None or st.version != usage.version:
        st = cyc.placement_state = placement_filters.prefilter(
            cache.placement_index(), cyc.pod, cyc.placement, cache.view.namespaces(), cache.node_facts())
    return None if st.empty else st


def node_rejection(cache: SchedulerCache, cyc: CycleState, node: str, labels: Mapping[str, str]) -> Rejection | None:
    """The node filters beside DRA, in upstream's order: NodeUnschedulable, TaintToleration,
    NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity."""
    facts = cache.node_facts().get(node)
    placement = cyc.placement
    if facts is not None or placement is not NO_PLACEMENT:
        usage = cache.usage
        bad = check_node(placement, facts or NodeFacts(node), labels, usage.on(node),
                         usage.ports.get(node) if placement.terms.ports else None)
        if bad is not None:
            return bad
    st = placement_state(cache, cyc)
    return None if st is None else placement_filters.check(st, node, labels)


def placement_conflict(cache: SchedulerCache, cyc: CycleState) -> Reason | None:
    """Reserve's re-check of the chosen node's filters beside DRA, when pods were bound
    or removed since Filter (an earlier pod of the same batch): kube-scheduler sees each
    assumed pod in the next cycle, so a batch must not place two pods where one fits."""
    assert cyc.chosen is not None
    if cyc.usage_version == cache.usage.version:
        return None
    node = cyc.chosen.node
    bad = node_rejection(cache, cyc, node, cache.snapshot().labels.get(node, {}))
    if bad is None:
        return None
    return Reason(reasons.RESERVE_CONFLICT, f"since Filter: {bad.message}", node)


def filter_node(cache: SchedulerCache, cyc: CycleState, node: str, snap: Snapshot,
                state: AllocatedState, scoring: str,
                devices: Sequence[DeviceInfo] | None = None) -> NodeResult:
    """Filter for one pod on one node: the node filters (:func:`node_rejection`), then
    DynamicResources (:func:`dynamic_resources`)."""
    labels = snap.labels.get(node, {})
    bad = node_rejection(cache, cyc, node, labels)
    if bad is not None:
        return NodeResult(node, False, [], [Reason(bad.code, bad.message, node, plugin=bad.plugin,
                                                   fit=bad.reasons)])
    return dynamic_resources(cache, cyc, node, snap, state, scoring, devices)


def dynamic_resources(cache: SchedulerCache, cyc: CycleState, node: str, snap: Snapshot,
                      state: AllocatedState, scoring: str,
                      devices: Sequence[DeviceInfo] | None = None) -> NodeResult:
    """Filter's DRA part on a node the node filters passed: claims allocated elsewhere,
    then the allocator over the node's devices (or the ``devices`` a fast path narrowed
    to)."""
    labels = snap.labels.get(node, {})
    for c in cyc.allocated:
        sel = c.status.allocation.node_selector if c.status.allocation else None
        if sel is not None and not node_selector_matches(sel, node, labels):
            return NodeResult(node, False, [], [Reason(
                reasons.CLAIM_ALLOCATED_ELSEWHERE,
                f"claim {c.namespace}/{c.name} is allocated to devices not available on node {node}",
                node)])
    if not cyc.to_allocate:
        return NodeResult(node, True)
    order = order_fn(cache, cyc, scoring, state)
    alloc = NodeAllocator(
        node, snap.by_node.get(node, []) if devices is None else devices, state,
        affinity_enabled=cache.features.sharing_affinity,
        extract=cyc.memo, selector_matches=cache.selector_matches, counters=cyc.counters,
        plan_cache=snap.plan_cache, order=order, hooks=cyc.hooks)
    return alloc.allocate(cyc.to_allocate)


#: The plugin a node's DRA reasons (the allocator's, claims allocated elsewhere) come from.
DYNAMIC_RESOURCES_PLUGIN = "DynamicResources"


def node_fit_reasons(node_reasons: Sequence[Reason]) -> list[str]:
    """What one node counts for in kube-scheduler's FitError message: a node filter's
    short texts ("node(s) didn't match pod anti-affinity rules", "Insufficient cpu"),
    or a DRA reason's code (the KEP's diagnostics: "AffinityLockMismatch"), each once."""
    texts: dict[str, None] = {}
    for r in node_reasons:
        for text in r.fit or (r.code,):
            texts[text] = None
    return list(texts)


def fit_error_message(total: int, node_reasons: Sequence[Reason]) -> str:
    """kube-scheduler's FitError message: ``0/N nodes are available:``, then each of
    :func:`node_fit_reasons` with the number of nodes it rejected, sorted as strings (as
    upstream sorts them); the sharing affinity messages follow (the KEP asks for them
    on the pod)."""
    by_node: dict[str, list[Reason]] = {}
    for r in node_reasons:
        by_node.setdefault(r.node or "", []).append(r)
    counts: dict[str, int] = {}
    for rs in by_node.values():
        for text in node_fit_reasons(rs):
            counts[text] = counts.get(text, 0) + 1
    parts = ", ".join(sorted(f"{n} {text}" for text, n in counts.items()))
    head = f"0/{total} nodes are available" + (f": {parts}." if parts else ".")
    affinity = [r.message for r in node_reasons if r.code in reasons.AFFINITY_CODES]
    if affinity:
        head += " " + "; ".join(dict.fromkeys(affinity[:4]))
    return head


def explain_node(cache: SchedulerCache, cyc: CycleState, node: str, snap: Snapshot,
                 scoring: str) -> tuple[dict[str, Any], list[Reason]]:
    """Whole-node verdict for diagnostics, and its reasons: never raises, never changes
    state or metrics. A rejected node names the filter plugin that rejected it and what
    it counts for in the FitError message (:func:`node_fit_reasons`)."""
    try:
        res = filter_node(cache, cyc, node, snap, cache.state, scoring)
    except Abort as a:
        return {"fits": False, "result": a.result.value, "reasons": [a.reason.as_dict()]}, [a.reason]
    out: dict[str, Any] = {"fits": res.ok, "reasons": [r.as_dict() for r in res.reasons]}
    if not res.ok and res.reasons:
        out["plugin"] = res.reasons[0].plugin or DYNAMIC_RESOURCES_PLUGIN
        out["fitReasons"] = node_fit_reasons(res.reasons)
    return out, list(res.reasons)


def order_fn(cache: SchedulerCache, cyc: CycleState, scoring: str,
             state: AllocatedState) -> OrderFn | None:
    """Device order within a node: first-fit, unless scoring or preferred keys reorder."""
    preferred = cyc.hooks is not None and cyc.hooks.preferred is not None
    if scoring != AFFINITY and not preferred:
        return None

    def order(devs: Sequence[DeviceInfo], c: ClaimSpec, a: RequestSpec) -> list[DeviceInfo]:
        ranked = rank_devices(cache, cyc, devs, c, a, state) if scoring == AFFINITY else list(devs)
        if preferred:
            assert cyc.hooks is not None and cyc.hooks.preferred is not None
            pref = cyc.hooks.preferred
            ranked = preferred_order(ranked, lambda d: pref(c, a, d.pool_info), state)
        return ranked

    return order


def rank_devices(cache: SchedulerCache, cyc: CycleState, devices: Sequence[DeviceInfo],
                 claim: ClaimSpec | None = None, alt: RequestSpec | None = None,
                 state: AllocatedState | None = None) -> list[DeviceInfo]:
    """Affinity-aware device preference within a node: a device already locked to the
    request's keys first, then clean (or ungated) devices, then the rest (other locks,
    unknown state: not viable now); first-fit order within each group."""
    if claim is None or alt is None:
        claim = cyc.to_allocate[0]
        alt = claim.requests[0].alternatives[0]
    states = (state or cache.state).affinity_states
    enabled = cache.features.sharing_affinity

    def rank(d: DeviceInfo) -> int:
        if not gated(d, enabled):
            return 1
        st = states.get(d.id, CLEAN)
        if st.status is AffinityStatus.CLEAN:
            return 1
        if st.status is not AffinityStatus.LOCKED:
            return 2  # unknown state: not viable now (and nothing to extract for)
        res = cyc.memo(claim, alt, d.pool_info)
        if res.kind is not OutcomeKind.OK or res.keys is None:
            return 2
        return 0 if check_lock(st, res.keys) is Lock.MATCH else 2

    return sorted(devices, key=lambda d: (rank(d), d.order))


def affinity_score(res: NodeResult) -> int:
    """Node score for ``--scoring affinity``: placements that join a compatible lock."""
    return sum(1 for s in res.shares if s.reused_lock)


#: Upstream's bounds on how many feasible nodes a cycle looks for before it scores
#: (``percentageOfNodesToScore`` unset: adaptive).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50


def feasible_nodes_to_find(nodes: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind`` with the adaptive percentage: every
    node below 100; then 50 % less one point per 125 nodes, at least 5 %, at least 100."""
    if nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return nodes
    percentage = max(BASE_PERCENTAGE_OF_NODES_TO_SCORE - nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def node_scoring(cache: SchedulerCache, cyc: CycleState) -> bool:
    """Whether the node scores can rank this pod's feasible nodes (decided once per
    cycle, before Filter): when not, the device score alone chooses."""
    if cyc.ranks_nodes is None:
        cyc.ranks_nodes = placement_scores.ranks_nodes(cache.placement_index(), cyc.pod, cyc.placement,
                                                       cache.node_facts())
    return cyc.ranks_nodes


class NodeScan(Protocol):
    """Filter for the cycle's nodes that a fast path answers from kept verdicts."""

    def __call__(self, node: str) -> NodeResult:
        """The node's result."""

    def first_feasible(self, limit: int) -> tuple[list[NodeResult], list[NodeResult]]:
        """What filtering node after node until ``limit`` nodes fit finds: their results
        in node order, and when none fits, every node's rejection in order."""

    def score(self, feasible: list[NodeResult], device: Mapping[str, int] | None) -> NodeScores | None:
        """The scores of the nodes :meth:`first_feasible` found, as
        :func:`~.placement.scores.score_nodes` gives them; None: it scores them."""


def scored_scan(cache: SchedulerCache, cyc: CycleState, snap: Snapshot, state: AllocatedState,
                scoring: str, check: NodeScan | None = None) -> None:
    """Filter every node in order until upstream's number of feasible nodes is found,
    then Score them; the highest weighted total wins, ties in node order. ``check``
    stands for :func:`filter_node` where given."""
    feasible: list[NodeResult] = []
    limit = feasible_nodes_to_find(len(snap.nodes))
    if check is not None:
        feasible, rejected = check.first_feasible(limit)
        cyc.rejected.extend(rejected)  # rendered only if the pod fails (CycleState.reasons)
    else:
        for node in snap.nodes:
            res = filter_node(cache, cyc, node, snap, state, scoring)
            if res.ok:
                feasible.append(res)
                if len(feasible) >= limit:
                    break
                continue
            cyc.rejected.append(res)
    if not feasible:
        return
    device = {r.node: affinity_score(r) for r in feasible} if scoring == AFFINITY else None
    scores = check.score(feasible, device) if check is not None else None
    if scores is None:
        scores = placement_scores.score_nodes(
            cache.placement_index(), cyc.pod, cyc.placement, cache.view.namespaces(),
            cache.node_facts(), [r.node for r in feasible], device)
    cyc.chosen = feasible[scores.best()]
    cyc.scores = scores
    cyc.node_reasons = []
    cyc.rejected = []


def full_scan(cache: SchedulerCache, cyc: CycleState, snap: Snapshot, state: AllocatedState,
              scoring: str, check: NodeScan | None = None) -> None:
    """The reference Filter and Score over every node, in order (``check``: as in
    :func:`scored_scan`)."""
    if node_scoring(cache, cyc):
        scored_scan(cache, cyc, snap, state, scoring, check)
        return
    best: NodeResult | None = None
    best_score = -1
    for node in snap.nodes:
        res = check(node) if check is not None else filter_node(cache, cyc, node, snap, state, scoring)
        if res.ok:
            if scoring != AFFINITY:
                best = res
                break  # first-fit: the first feasible node in order wins
            score = affinity_score(res)
            if score > best_score:  # ties keep the earlier node (first-fit order)
                best, best_score = res, score
            continue
        cyc.rejected.append(res)  # rendered only if the pod fails (CycleState.reasons)
    if best is not None:
        cyc.chosen = best
        cyc.node_reasons = []
        cyc.rejected = []
