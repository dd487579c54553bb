"""PreScore, Score and NormalizeScore of kube-scheduler's default profile (1.37).

The plugins, their weights and their normalization are upstream's:

==================================  ======  ==============================================
plugin                              weight  raw score, then normalization over the feasible
                                            nodes
==================================  ======  ==============================================
TaintToleration                     3       PreferNoSchedule taints the pod does not
                                            tolerate; reversed: the fewest get 100
NodeAffinity                        2       the weights of the preferred terms the node
                                            matches; the most get 100
NodeResourcesFit (LeastAllocated)   1       per resource (cpu, memory, weight 1 each) the
                                            free share after the pod, in the *non-zero*
                                            requests (100m cpu, 200 MiB memory for a
                                            container that does not say)
PodTopologySpread (ScheduleAnyway)  2       per soft constraint the selected pods in the
                                            node's domain times log(domains + 2) plus
                                            maxSkew - 1; reversed min-max
InterPodAffinity                    2       preferred (anti-)affinity weights, both ways,
                                            and bound pods' required affinity (weight 1),
                                            summed per topology domain; min-max
NodeResourcesBalancedAllocation     1       how much the pod improves the balance of cpu
                                            and memory fractions (actual requests)
DynamicResources                    2       the device score of ``--scoring``; the most
                                            get 100
==================================  ======  ==============================================

ImageLocality (weight 1 upstream) is not run: the scheduler reads no image lists of
nodes, and a constant score would rank nothing (docs/decisions.md, "Scores").

A plugin *skips* (upstream's PreScore ``Skip``) when it has nothing to say for the
pod: NodeAffinity without preferred terms, PodTopologySpread without ScheduleAnyway
constraints, BalancedAllocation for a pod requesting neither cpu nor memory,
InterPodAffinity when no term matches any pod. A skipped plugin adds nothing.

The counts come from :mod:`.index` (kept across cycles), so PreScore costs
O(distinct terms and constraints) and Score a few reads per node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from dra_affinity.api.core import Pod
from dra_affinity.structured.nodes import node_selector_term_matches

from ..nodefit import (
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    TAINT_TOLERATION,
    NodeFacts,
    NodeUsage,
    PodPlacement,
    Toleration,
    nonzero_requests,
)
from .filters import (
    INTER_POD_AFFINITY,
    POD_TOPOLOGY_SPREAD,
    Namespaces,
    eligible_nodes,
    resolve,
    selects,
    spread_selects,
)
from .index import PREFERRED_AFFINITY, PREFERRED_ANTI, REQUIRED_AFFINITY, PlacementIndex, Tally
from .terms import HOSTNAME, SpreadConstraint

MAX_NODE_SCORE: Final = 100
BALANCED_ALLOCATION: Final = "NodeResourcesBalancedAllocation"
DYNAMIC_RESOURCES: Final = "DynamicResources"
#: The default profile's score weights (kube-scheduler 1.37), in the profile's order;
#: DynamicResources carries the device score of ``--scoring``.
WEIGHTS: Final[Mapping[str, int]] = {
    TAINT_TOLERATION: 3, NODE_AFFINITY: 2, NODE_RESOURCES_FIT: 1, POD_TOPOLOGY_SPREAD: 2,
    INTER_POD_AFFINITY: 2, BALANCED_ALLOCATION: 1, DYNAMIC_RESOURCES: 2,
}
#: InterPodAffinityArgs.hardPodAffinityWeight's default: how much a bound pod's required
#: affinity term that selects the incoming pod counts.
HARD_POD_AFFINITY_WEIGHT: Final = 1
#: The resources NodeResourcesFit and BalancedAllocation score (the default
#: ``scoringStrategy.resources``: cpu and memory, weight 1 each).
SCORED_RESOURCES: Final = ("cpu", "memory")

Scores = dict[str, int]  # node -> score


@dataclass(frozen=True)
class NodeScores:
    """Each feasible node's normalized score per plugin that did not skip, and the
    weighted total the scheduler ranks by. Kept as columns in the order of ``nodes``
    (a cycle scores hundreds of nodes and reads the best one's total)."""

    plugins: tuple[str, ...]
    nodes: tuple[str, ...]
    columns: Mapping[str, Sequence[int]]  # plugin -> score per node, in ``nodes``' order
    totals: Sequence[int]

    def total(self, node: str) -> int:
        return self.totals[self.nodes.index(node)]

    def best(self) -> int:
        """The position of the highest total; ties go to the earlier node."""
        totals = self.totals
        return totals.index(max(totals))

    @property
    def per_node(self) -> dict[str, dict[str, int]]:
        """Node -> plugin -> score (explanations and tests)."""
        return {n: {p: self.columns[p][i] for p in self.plugins} for i, n in enumerate(self.nodes)}


# ------------------------------------------------------------------ normalization
def default_normalize(raw: list[int], *, reverse: bool) -> list[int]:
    """Upstream's DefaultNormalizeScore over a column of raw scores: scaled so the
    largest is 100 (reversed: 100 minus that); all zero stays zero (reversed: all 100)."""
    top = max(raw, default=0)
    if top <= 0:
        return [MAX_NODE_SCORE] * len(raw) if reverse else raw
    if reverse:
        return [MAX_NODE_SCORE - MAX_NODE_SCORE * s // top for s in raw]
    return [MAX_NODE_SCORE * s // top for s in raw]


def _go_round(x: float) -> int:
    """Go's math.Round for a non-negative value: halves away from zero."""
    whole = math.floor(x)
    return int(whole) + (1 if x - whole >= 0.5 else 0)


# ------------------------------------------------------------------ TaintToleration
def _prefer_tolerations(tolerations: Iterable[Toleration]) -> tuple[Toleration, ...]:
    return tuple(t for t in tolerations if t.effect in ("", "PreferNoSchedule"))


def untolerated_preferences(facts: NodeFacts | None, tolerations: tuple[Toleration, ...]) -> int:
    """PreferNoSchedule taints of the node that none of ``tolerations`` tolerates."""
    if facts is None:
        return 0
    return sum(1 for t in facts.prefer_taints if not any(x.tolerates(t) for x in tolerations))


# ------------------------------------------------------------------ NodeResources
_NOTHING: Final = (0, 0)


def _allocatable(facts: NodeFacts | None) -> tuple[int, int]:
    return facts.scored if facts is not None else _NOTHING


def least_allocated(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """NodeResourcesFit's LeastAllocated: the mean free share in percent after the pod,
    over the resources the node reports (integer arithmetic, as upstream)."""
    total = count = 0
    for req, cap in zip(requested, allocatable, strict=True):
        if cap == 0:
            continue
        total += 0 if req > cap else (cap - req) * MAX_NODE_SCORE // cap
        count += 1
    return total // count if count else 0


def _balance(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    fractions = [min(req / cap, 1.0) for req, cap in zip(requested, allocatable, strict=True) if cap != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_allocation(before: Sequence[int], after: Sequence[int], allocatable: Sequence[int]) -> int:
    """BalancedAllocation (1.37): 75 when the pod leaves the node's balance of cpu and
    memory fractions as it was, towards 100 as it improves it, towards 50 as it worsens."""
    half = MAX_NODE_SCORE // 2
    return half + (half + _balance(after, allocatable) - _balance(before, allocatable)) // 2


# ------------------------------------------------------------------ PodTopologySpread
def _spread_scores(index: PlacementIndex, pod: Pod, placement: PodPlacement,
                   soft: tuple[SpreadConstraint, ...], facts: Mapping[str, NodeFacts],
                   feasible: Sequence[str]) -> Scores:
    labels = index.labels
    keys = tuple(c.topology_key for c in soft)
    ignored = {n for n in feasible if any(k not in labels.get(n, {}) for k in keys)}
    counted = [n for n in feasible if n not in ignored]
    parts: list[tuple[SpreadConstraint, float, Tally]] = []
    for c in soft:
        tk = c.topology_key
        set_key, nodes = eligible_nodes(index, placement, c, keys, facts)
        tally = index.tally(("spread", pod.namespace, c.selector, tk, set_key), (tk,),
                            spread_selects(pod.namespace, c.selector), nodes)
        # Hostname: every counted node is its own domain, and its own pods count.
        size = len(counted) if tk == HOSTNAME else len({labels[n][tk] for n in counted})
        parts.append((c, math.log(size + 2), tally))

    def count(n: str, c: SpreadConstraint, tally: Tally) -> int:
        tk = c.topology_key
        return tally.per_node.get(n, 0) if tk == HOSTNAME else tally.at(tk, labels[n][tk])

    raw: Scores = {}
    for n in counted:
        raw[n] = _go_round(sum(count(n, c, tally) * weight + (c.max_skew - 1) for c, weight, tally in parts))
    top = max(raw.values(), default=0)
    least = min(raw.values(), default=0)
    out: Scores = {}
    for n in feasible:
        if n in ignored:
            out[n] = 0
        elif top == 0:
            out[n] = MAX_NODE_SCORE
        else:
            out[n] = MAX_NODE_SCORE * (top + least - raw[n]) // top
    return out


# ------------------------------------------------------------------ InterPodAffinity
def _affinity_domains(index: PlacementIndex, pod: Pod, placement: PodPlacement,
                      namespaces: Namespaces) -> dict[str, dict[str, int]] | None:
    """Topology key -> value -> summed weight; None when no term matched any pod (skip)."""
    out: dict[str, dict[str, int]] = {}
    matched = False

    def add(key: str, value: str, amount: int) -> None:
        per = out.setdefault(key, {})
        per[value] = per.get(value, 0) + amount

    terms = placement.terms
    for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
        resolved = resolve((w.term for w in weighted), namespaces)
        for w, t in zip(weighted, resolved, strict=True):
            tally = index.tally(("term", t), (t.topology_key,), selects(t))
            for (key, value), n in tally.pairs.items():
                add(key, value, sign * w.weight * n)
                matched = True
    ns_labels = namespaces.get(pod.namespace, {})
    labels = pod.metadata.labels
    for kind, sign in ((REQUIRED_AFFINITY, 1), (PREFERRED_AFFINITY, 1), (PREFERRED_ANTI, -1)):
        for g in index.groups[kind].values():
            if not g.term.matches(pod.namespace, labels, ns_labels):
                continue
            weight = HARD_POD_AFFINITY_WEIGHT if kind == REQUIRED_AFFINITY else g.weight
            for value, n in g.per_value.items():
                add(g.term.topology_key, value, sign * weight * n)
                matched = True
    return out if matched else None


def _affinity_scores(domains: Mapping[str, Mapping[str, int]], labels: Mapping[str, Mapping[str, str]],
                     feasible: Sequence[str]) -> Scores:
    raw = {}
    for n in feasible:
        node_labels = labels.get(n, {})
        raw[n] = sum(per.get(node_labels[k], 0) for k, per in domains.items() if k in node_labels)
    if not domains:
        return raw
    least, top = min(raw.values(), default=0), max(raw.values(), default=0)
    spread = top - least
    return {n: int(MAX_NODE_SCORE * ((s - least) / spread)) if spread > 0 else 0 for n, s in raw.items()}


# ------------------------------------------------------------------ the profile
def ranks_nodes(index: PlacementIndex, pod: Pod, placement: PodPlacement,
                facts: Mapping[str, NodeFacts]) -> bool:
    """Whether any score plugin but DynamicResources can give two nodes different
    scores for this pod (False: every node gets the same node score, so the device
    score alone decides and the fast paths' choice stands)."""
    terms = placement.terms
    if terms.soft_spread or terms.preferred_nodes or terms.preferred_affinity or terms.preferred_anti_affinity:
        return True
    groups = index.groups
    if groups[REQUIRED_AFFINITY] or groups[PREFERRED_AFFINITY] or groups[PREFERRED_ANTI]:
        return True
    if any(_allocatable(f) != (0, 0) for f in facts.values()):
        return True  # the resource scores differ with what each node holds
    prefer = _prefer_tolerations(placement.tolerations)
    return any(untolerated_preferences(f, prefer) for f in facts.values() if f.prefer_taints)


def score_nodes(index: PlacementIndex, pod: Pod, placement: PodPlacement, namespaces: Namespaces,
                facts: Mapping[str, NodeFacts], feasible: Sequence[str],
                device: Mapping[str, int] | None = None) -> NodeScores:
    """PreScore, Score and NormalizeScore of every plugin over the ``feasible`` nodes
    (``device``: each node's raw device score; None: DynamicResources scores 0)."""
    usage = index.usage
    terms = placement.terms
    nodes = tuple(feasible)
    node_facts = [facts.get(n) for n in nodes]
    columns: dict[str, Sequence[int]] = {}
    local = NodeLocalScores.of(pod, placement)

    columns[TAINT_TOLERATION] = _normalize_taints([local.taints(f) for f in node_facts])

    if terms.preferred_nodes:
        labels = index.labels
        columns[NODE_AFFINITY] = default_normalize([sum(
            w.weight for w in terms.preferred_nodes
            if node_selector_term_matches(w.term, n, labels.get(n, {}))) for n in nodes], reverse=False)

    nonzero = usage.nonzero
    # Nodes alike (as large, holding as much) score alike: each distinct pair is
    # computed once.
    fit_of: dict[tuple[int, int, tuple[int, int]], int] = {}
    fit: list[int] = []
    for n, f in zip(nodes, node_facts, strict=True):
        used_cpu, used_memory = nonzero.get(n) or _NOTHING
        alloc = _allocatable(f)
        key = (used_cpu, used_memory, alloc)
        v = fit_of.get(key)
        if v is None:
            v = fit_of[key] = local.fit((used_cpu, used_memory), alloc)
        fit.append(v)
    columns[NODE_RESOURCES_FIT] = fit

    if terms.soft_spread:
        spread = _spread_scores(index, pod, placement, terms.soft_spread, facts, nodes)
        columns[POD_TOPOLOGY_SPREAD] = [spread[n] for n in nodes]

    domains = _affinity_domains(index, pod, placement, namespaces)
    if domains is not None:
        affinity = _affinity_scores(domains, index.labels, nodes)
        columns[INTER_POD_AFFINITY] = [affinity[n] for n in nodes]

    if local.balances:
        columns[BALANCED_ALLOCATION] = [local.balanced(usage, n, f)
                                        for n, f in zip(nodes, node_facts, strict=True)]

    columns[DYNAMIC_RESOURCES] = _normalize_devices(nodes, device)
    return _weighted(nodes, columns)


def _normalize_taints(raw: list[int]) -> list[int]:
    return default_normalize(raw, reverse=True)


def _normalize_devices(nodes: Sequence[str], device: Mapping[str, int] | None) -> list[int]:
    return default_normalize([device.get(n, 0) for n in nodes] if device else [0] * len(nodes),
                             reverse=False)


def _weighted(nodes: tuple[str, ...], columns: Mapping[str, Sequence[int] | npt.NDArray[np.int64]]
              ) -> NodeScores:
    """The plugins that did not skip, in the profile's order, and each node's weighted
    total (summed as arrays: a cycle scores up to hundreds of nodes)."""
    plugins = tuple(p for p in WEIGHTS if p in columns)
    totals = np.zeros(len(nodes), dtype=np.int64)
    kept: dict[str, Sequence[int]] = {}
    for p in plugins:
        column = np.asarray(columns[p], dtype=np.int64)
        if len(column) != len(nodes):
            raise ValueError(f"{p}: {len(column)} scores for {len(nodes)} nodes")
        totals += WEIGHTS[p] * column
        kept[p] = column.tolist()
    return NodeScores(plugins, nodes, kept, totals.tolist())


@dataclass(frozen=True)
class NodeLocalScores:
    """What the pod's Score reads of one node when that is the node alone (its facts
    and the pods counted on it): TaintToleration's, NodeResourcesFit's and
    BalancedAllocation's raw scores. When no other plugin but DynamicResources has
    anything to say (:meth:`applies`), a caller that knows when a node changed can
    keep these per node, and only the normalization runs over the feasible nodes
    (:meth:`scores`): the kept Filter verdicts do so."""

    prefer: tuple[Toleration, ...]  # the tolerations TaintToleration reads
    cpu: int  # the pod's non-zero requests, as NodeResourcesFit counts them
    memory: int
    asked: tuple[int, ...]  # its requests of SCORED_RESOURCES, as BalancedAllocation reads them

    @classmethod
    def of(cls, pod: Pod, placement: PodPlacement) -> NodeLocalScores:
        cpu, memory = nonzero_requests(pod)
        return cls(_prefer_tolerations(placement.tolerations), cpu, memory,
                   tuple(placement.requests.get(r, 0) for r in SCORED_RESOURCES))

    @property
    def balances(self) -> bool:
        """BalancedAllocation scores: the pod requests cpu or memory."""
        return any(self.asked)

    @property
    def key(self) -> str:
        """The pod's side of the raw scores, as content."""
        return repr((self.prefer, self.cpu, self.memory, self.asked))

    @staticmethod
    def applies(index: PlacementIndex, pod: Pod, placement: PodPlacement, namespaces: Namespaces) -> bool:
        """No preferred node terms, soft spread or inter-pod terms for the pod: every
        plugin that scores reads each node alone (or, DynamicResources, its device score)."""
        terms = placement.terms
        return not terms.preferred_nodes and not terms.soft_spread and \
            _affinity_domains(index, pod, placement, namespaces) is None

    def taints(self, f: NodeFacts | None) -> int:
        return untolerated_preferences(f, self.prefer) if f is not None and f.prefer_taints else 0

    def fit(self, used: Sequence[int], allocatable: tuple[int, int]) -> int:
        return least_allocated((used[0] + self.cpu, used[1] + self.memory), allocatable)

    def balanced(self, usage: NodeUsage, node: str, f: NodeFacts | None) -> int:
        held = usage.on(node)
        before = tuple(held.get(r, 0) for r in SCORED_RESOURCES)
        after = tuple(b + a for b, a in zip(before, self.asked, strict=True))
        return balanced_allocation(before, after, _allocatable(f))

    def raw(self, usage: NodeUsage, node: str, f: NodeFacts | None) -> tuple[int, int, int]:
        """The node's raw TaintToleration, NodeResourcesFit and BalancedAllocation scores
        (0 for the last when it skips)."""
        return (self.taints(f), self.fit(usage.nonzero.get(node) or _NOTHING, _allocatable(f)),
                self.balanced(usage, node, f) if self.balances else 0)

    def scores(self, nodes: tuple[str, ...], taints: npt.NDArray[np.int64], fit: npt.NDArray[np.int64],
               balanced: npt.NDArray[np.int64], device: Mapping[str, int] | None) -> NodeScores:
        """The feasible ``nodes``' scores from their raw scores (in ``nodes``' order), as
        :func:`score_nodes` would give them."""
        columns: dict[str, Sequence[int] | npt.NDArray[np.int64]] = {
            TAINT_TOLERATION: _normalize_taints(taints.tolist()), NODE_RESOURCES_FIT: fit}
        if self.balances:
            columns[BALANCED_ALLOCATION] = balanced
        columns[DYNAMIC_RESOURCES] = _normalize_devices(nodes, device)
        return _weighted(nodes, columns)
