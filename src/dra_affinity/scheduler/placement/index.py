"""What the bound pods say about each topology domain, kept up to date from pod events.

Upstream's InterPodAffinity and PodTopologySpread compute, in every PreFilter,
counts per topology pair ``(key, value)`` by walking every node's pods, and
update them on AddPod/RemovePod. Here the same counts live across cycles:

* a :class:`Tally` counts the bound pods one predicate selects, per topology pair
  (and per node): the pods matching all of an incoming pod's required affinity
  terms, those matching one anti-affinity or preferred term, those a spread
  constraint counts on the nodes it considers. A tally is made on first use by one
  walk over the bound pods, then changed by one step per pod event. Pods of one
  Deployment share their tallies, so a cycle costs O(constraints), not O(pods);
* the terms *bound* pods carry (required anti-affinity against newcomers, and the
  affinity terms the score reads) are grouped by term, each with its count per
  topology pair: a cycle tests each distinct term once against the incoming pod.

The index belongs to one snapshot (nodes and their labels) and one
:class:`~..nodefit.NodeUsage`; the cache makes a new one when either changes.
At most :data:`MAX_TALLIES` tallies are kept (the least recently used dropped).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ..nodefit import BoundPod, NodeUsage
from .terms import AffinityTerm

Pair = tuple[str, str]

MAX_TALLIES: Final = 256
MAX_NODE_SETS: Final = 64

# The kinds of term a bound pod carries that matter to an incoming pod.
REQUIRED_ANTI, REQUIRED_AFFINITY, PREFERRED_AFFINITY, PREFERRED_ANTI = (
    "requiredAnti", "requiredAffinity", "preferredAffinity", "preferredAnti")


class Tally:
    """The bound pods ``selects`` picks, counted per topology pair of their node over
    ``keys`` (a pod counts once per key: twice when two keys are equal, as upstream's
    per-term updates do), and per node. ``nodes`` limits the pair counts to those nodes
    (None: every node); the per-node counts cover every node."""

    __slots__ = ("keys", "nodes", "pairs", "per_node", "selects")

    def __init__(self, keys: tuple[str, ...], selects: Callable[[BoundPod], bool],
                 nodes: frozenset[str] | None) -> None:
        self.keys = keys
        self.selects = selects
        self.nodes = nodes
        self.pairs: dict[Pair, int] = {}
        self.per_node: dict[str, int] = {}

    def count(self, pod: BoundPod, labels: Mapping[str, str], sign: int) -> None:
        if not self.selects(pod):
            return
        node = pod.node
        n = self.per_node.get(node, 0) + sign
        if n:
            self.per_node[node] = n
        else:
            self.per_node.pop(node, None)
        if self.nodes is not None and node not in self.nodes:
            return
        pairs = self.pairs
        for k in self.keys:
            v = labels.get(k)
            if v is None:
                continue
            c = pairs.get((k, v), 0) + sign
            if c:
                pairs[(k, v)] = c
            else:
                del pairs[(k, v)]

    def at(self, key: str, value: str) -> int:
        return self.pairs.get((key, value), 0)


@dataclass
class TermGroup:
    """Bound pods that carry one term (of one kind and weight): how many per topology
    value of their node under the term's key."""

    kind: str
    term: AffinityTerm
    weight: int
    per_value: dict[str, int] = field(default_factory=dict)


class PlacementIndex:
    """Tallies and term groups over one snapshot's nodes, fed by a NodeUsage's events."""

    def __init__(self, usage: NodeUsage, labels: Mapping[str, Mapping[str, str]]) -> None:
        self.usage = usage
        self.labels = labels  # node -> its labels (the snapshot's)
        self._tallies: OrderedDict[Hashable, Tally] = OrderedDict()
        self._node_sets: OrderedDict[Hashable, frozenset[str]] = OrderedDict()
        # kind -> (term, weight) -> its group
        self.groups: dict[str, dict[tuple[AffinityTerm, int], TermGroup]] = {
            k: {} for k in (REQUIRED_ANTI, REQUIRED_AFFINITY, PREFERRED_AFFINITY, PREFERRED_ANTI)}
        for pod in usage.with_affinity.values():
            self._group(pod, 1)
        usage.listeners.append(self)

    def close(self) -> None:
        """Stop listening (the cache made a newer index)."""
        if self in self.usage.listeners:
            self.usage.listeners.remove(self)

    # ------------------------------------------------------------------ events
    def pod_added(self, pod: BoundPod) -> None:
        self._changed(pod, 1)

    def pod_removed(self, pod: BoundPod) -> None:
        self._changed(pod, -1)

    def _changed(self, pod: BoundPod, sign: int) -> None:
        labels = self.labels.get(pod.node)
        if labels is None:
            return  # a node this snapshot does not have: upstream's NodeInfo list lacks it too
        for t in self._tallies.values():
            t.count(pod, labels, sign)
        if pod.terms.any_affinity:
            self._group(pod, sign)

    def _group(self, pod: BoundPod, sign: int) -> None:
        labels = self.labels.get(pod.node)
        if labels is None:
            return
        t = pod.terms
        kinds: list[tuple[str, Iterable[tuple[AffinityTerm, int]]]] = [
            (REQUIRED_ANTI, ((x, 1) for x in t.anti_affinity)),
            (REQUIRED_AFFINITY, ((x, 1) for x in t.affinity)),
            (PREFERRED_AFFINITY, ((w.term, w.weight) for w in t.preferred_affinity)),
            (PREFERRED_ANTI, ((w.term, w.weight) for w in t.preferred_anti_affinity)),
        ]
        for kind, terms in kinds:
            groups = self.groups[kind]
            for term, weight in terms:
                v = labels.get(term.topology_key)
                if v is None:
                    continue
                key = (term, weight)
                g = groups.get(key)
                if g is None:
                    if sign < 0:
                        continue
                    g = groups[key] = TermGroup(kind, term, weight)
                n = g.per_value.get(v, 0) + sign
                if n:
                    g.per_value[v] = n
                else:
                    del g.per_value[v]
                    if not g.per_value:
                        del groups[key]

    # ------------------------------------------------------------------ queries
    def tally(self, key: Hashable, keys: tuple[str, ...], selects: Callable[[BoundPod], bool],
              nodes: frozenset[str] | None = None) -> Tally:
        """The tally under ``key`` (which must determine the other arguments), made by
        one walk over the bound pods when it is not kept yet."""
        t = self._tallies.get(key)
        if t is not None:
            self._tallies.move_to_end(key)
            return t
        t = Tally(keys, selects, nodes)
        labels = self.labels
        for pod in self.usage.pods.values():
            node_labels = labels.get(pod.node)
            if node_labels is not None:
                t.count(pod, node_labels, 1)
        self._tallies[key] = t
        if len(self._tallies) > MAX_TALLIES:
            self._tallies.popitem(last=False)
        return t

    def node_set(self, key: Hashable, admits: Callable[[str, Mapping[str, str]], bool]) -> frozenset[str]:
        """The snapshot's nodes ``admits`` accepts, kept under ``key``."""
        s = self._node_sets.get(key)
        if s is None:
            s = frozenset(n for n, lab in self.labels.items() if admits(n, lab))
            self._node_sets[key] = s
            if len(self._node_sets) > MAX_NODE_SETS:
                self._node_sets.popitem(last=False)
        else:
            self._node_sets.move_to_end(key)
        return s

    def domains(self, key: Hashable, nodes: frozenset[str], topology_key: str) -> frozenset[str]:
        """The values of ``topology_key`` among ``nodes`` (kept under ``key``)."""
        full = ("domains", key, topology_key)
        s = self._node_sets.get(full)
        if s is None:
            labels = self.labels
            s = frozenset(v for n in nodes if (v := labels[n].get(topology_key)) is not None)
            self._node_sets[full] = s
            if len(self._node_sets) > MAX_NODE_SETS:
                self._node_sets.popitem(last=False)
        return s
