"""PreFilter and Filter of PodTopologySpread and InterPodAffinity (kube-scheduler 1.37).

:func:`prefilter` reads the counts of :mod:`.index` for the incoming pod once per
cycle (what upstream's PreFilter computes by walking every node); :func:`check`
is then a few dictionary reads per constraint and node. The meanings are
upstream's, with the InterPodAffinityHostnameFastPath gate off (its default):

* **PodTopologySpread** (``whenUnsatisfiable: DoNotSchedule``): a node without a
  constraint's topology key is unresolvable; otherwise the pods the constraint
  selects in the pod's namespace (terminating pods excepted) on the domain, plus
  one if the pod matches its own selector, minus the smallest count over the
  eligible domains (0 while there are fewer than ``minDomains`` of them) must not
  exceed ``maxSkew``. Eligible nodes carry every constraint's key and pass the
  constraint's ``nodeAffinityPolicy`` (Honor: the pod's nodeSelector and required
  node affinity) and ``nodeTaintsPolicy`` (Honor: no untolerated NoSchedule or
  NoExecute taint). No cluster-default constraints are applied.
* **InterPodAffinity**: every required affinity term must find a selected pod in
  the node's domain (a node without the key fails), unless no pod anywhere matches
  all the terms and the pod matches them itself; no required anti-affinity term
  may find one; and no bound pod's required anti-affinity term may select this
  pod within its domain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from dra_affinity.api.core import Pod
from dra_affinity.structured import reasons

from ..nodefit import BoundPod, NodeFacts, PodPlacement, Rejection, untolerated
from .index import REQUIRED_ANTI, PlacementIndex, Tally, TermGroup
from .selectors import LabelSelector
from .terms import AffinityTerm, SpreadConstraint

POD_TOPOLOGY_SPREAD: Final = "PodTopologySpread"
INTER_POD_AFFINITY: Final = "InterPodAffinity"
SPREAD_REASON: Final = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL_REASON: Final = SPREAD_REASON + " (missing required label)"
AFFINITY_REASON: Final = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON: Final = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_REASON: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

#: Namespace name -> its labels (the cluster's Namespace objects).
Namespaces = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class SpreadState:
    constraint: SpreadConstraint
    tally: Tally
    domains: int  # eligible domains
    min_match: int
    self_match: int


@dataclass
class PlacementCycle:
    """The incoming pod's PreFilter state for PodTopologySpread and InterPodAffinity,
    as of ``version`` of the node usage it was read from."""

    version: int
    spread: list[SpreadState] = field(default_factory=list)
    affinity: tuple[AffinityTerm, ...] = ()
    affinity_tally: Tally | None = None
    self_affine: bool = False
    anti: list[tuple[AffinityTerm, Tally]] = field(default_factory=list)
    existing_anti: list[TermGroup] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.spread or self.affinity or self.anti or self.existing_anti)


def resolve(terms: Iterable[AffinityTerm], namespaces: Namespaces) -> tuple[AffinityTerm, ...]:
    """The incoming pod's terms with namespace selectors replaced by the names they select."""
    def select(sel: LabelSelector) -> list[str]:
        return [n for n, labels in namespaces.items() if sel.matches(labels)]
    return tuple(t.resolved(select) for t in terms)


def selects(term: AffinityTerm) -> Callable[[BoundPod], bool]:
    """A bound pod selected by one of the incoming pod's (resolved) terms."""
    return lambda p: term.matches(p.namespace, p.labels)


def selects_all(terms: tuple[AffinityTerm, ...]) -> Callable[[BoundPod], bool]:
    return lambda p: all(t.matches(p.namespace, p.labels) for t in terms)


def spread_selects(namespace: str, selector: LabelSelector) -> Callable[[BoundPod], bool]:
    """A bound pod a spread constraint counts: same namespace, not terminating, selected
    (an empty or nil selector counts no pod)."""
    if selector.everything or selector.nothing:
        return lambda p: False
    return lambda p: p.namespace == namespace and not p.terminating and selector.matches(p.labels)


def eligible_nodes(index: PlacementIndex, placement: PodPlacement, constraint: SpreadConstraint,
                   keys: tuple[str, ...], facts: Mapping[str, NodeFacts]) -> tuple[tuple[object, ...], frozenset[str]]:
    """The nodes a spread constraint counts (its key for the index, and the set): they
    carry all ``keys`` and pass the constraint's node inclusion policies."""
    aff = placement.node_affinity_signature() if constraint.honor_node_affinity else None
    tol = placement.tolerations if constraint.honor_taints else None
    key = ("eligible", keys, aff, tol)

    def admits(node: str, labels: Mapping[str, str]) -> bool:
        if any(k not in labels for k in keys):
            return False
        if aff is not None and not placement.matches_node(node, labels):
            return False
        if tol is not None:
            f = facts.get(node)
            if f is not None and f.taints and untolerated(f.taints, placement.tolerations) is not None:
                return False
        return True

    return key, index.node_set(key, admits)


def spread_state(index: PlacementIndex, pod: Pod, placement: PodPlacement, constraint: SpreadConstraint,
                 keys: tuple[str, ...], facts: Mapping[str, NodeFacts]) -> SpreadState:
    set_key, nodes = eligible_nodes(index, placement, constraint, keys, facts)
    tk = constraint.topology_key
    ns = pod.namespace
    tally = index.tally(("spread", ns, constraint.selector, tk, set_key), (tk,),
                        spread_selects(ns, constraint.selector), nodes)
    domains = len(index.domains(set_key, nodes, tk))
    if domains < constraint.min_domains or len(tally.pairs) < domains:
        least = 0  # too few domains, or one holds no selected pod
    else:
        least = min(tally.pairs.values())
    return SpreadState(constraint, tally, domains, least,
                       1 if constraint.selector.matches(pod.metadata.labels) else 0)


def prefilter(index: PlacementIndex, pod: Pod, placement: PodPlacement, namespaces: Namespaces,
              facts: Mapping[str, NodeFacts]) -> PlacementCycle:
    """The counts the incoming pod's Filter reads (upstream's PreFilter states)."""
    out = PlacementCycle(index.usage.version)
    terms = placement.terms
    if terms.spread:
        keys = tuple(c.topology_key for c in terms.spread)
        out.spread = [spread_state(index, pod, placement, c, keys, facts) for c in terms.spread]
    if terms.affinity:
        out.affinity = resolve(terms.affinity, namespaces)
        out.affinity_tally = index.tally(("affinity", out.affinity),
                                         tuple(t.topology_key for t in out.affinity),
                                         selects_all(out.affinity))
        labels = pod.metadata.labels
        out.self_affine = all(t.matches(pod.namespace, labels) for t in out.affinity)
    for t in resolve(terms.anti_affinity, namespaces):
        out.anti.append((t, index.tally(("term", t), (t.topology_key,), selects(t))))
    groups = index.groups[REQUIRED_ANTI]
    if groups:
        ns_labels = namespaces.get(pod.namespace, {})
        labels = pod.metadata.labels
        out.existing_anti = [g for g in groups.values()
                             if g.term.matches(pod.namespace, labels, ns_labels)]
    return out


def check(state: PlacementCycle, node: str, labels: Mapping[str, str]) -> Rejection | None:
    """PodTopologySpread, then InterPodAffinity, on one node: the first rejection."""
    for s in state.spread:
        c = s.constraint
        v = labels.get(c.topology_key)
        if v is None:
            return Rejection(reasons.TOPOLOGY_SPREAD_MISSING_LABEL,
                             f"node {node} has no label {c.topology_key} "
                             f"(topology spread constraint {c.describe()})",
                             POD_TOPOLOGY_SPREAD, (SPREAD_LABEL_REASON,))
        here = s.tally.at(c.topology_key, v)
        if here + s.self_match - s.min_match > c.max_skew:
            return Rejection(reasons.TOPOLOGY_SPREAD_SKEW,
                             f"node {node}: {c.topology_key}={v} holds {here} selected pod(s) and the "
                             f"least of {s.domains} domain(s) {s.min_match}; one more would exceed "
                             f"maxSkew {c.max_skew} ({c.describe()})",
                             POD_TOPOLOGY_SPREAD, (SPREAD_REASON,))
    if state.affinity:
        assert state.affinity_tally is not None
        tally = state.affinity_tally
        exist = True
        for t in state.affinity:
            v = labels.get(t.topology_key)
            if v is None:
                return _affinity(node, f"has no label {t.topology_key} (pod affinity term {t.describe()})")
            if tally.at(t.topology_key, v) <= 0:
                exist = False
                missing = t
        if not exist and not (not tally.pairs and state.self_affine):
            return _affinity(node, f"{missing.topology_key}={labels[missing.topology_key]} holds no "
                                   f"pod matching the pod affinity term {missing.describe()}")
    for t, tally in state.anti:
        v = labels.get(t.topology_key)
        if v is not None and tally.at(t.topology_key, v) > 0:
            return Rejection(reasons.POD_ANTI_AFFINITY_MISMATCH,
                             f"node {node}: {t.topology_key}={v} holds {tally.at(t.topology_key, v)} "
                             f"pod(s) matching the pod anti-affinity term {t.describe()}",
                             INTER_POD_AFFINITY, (ANTI_AFFINITY_REASON,))
    for g in state.existing_anti:
        v = labels.get(g.term.topology_key)
        if v is not None and g.per_value.get(v, 0) > 0:
            return Rejection(reasons.EXISTING_POD_ANTI_AFFINITY,
                             f"node {node}: {g.term.topology_key}={v} holds {g.per_value[v]} pod(s) whose "
                             f"required anti-affinity term {g.term.describe()} selects this pod",
                             INTER_POD_AFFINITY, (EXISTING_ANTI_REASON,))
    return None


def _affinity(node: str, what: str) -> Rejection:
    return Rejection(reasons.POD_AFFINITY_MISMATCH, f"node {node} {what}", INTER_POD_AFFINITY,
                     (AFFINITY_REASON,))
