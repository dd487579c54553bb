"""The scheduler's in-memory cache: allocations and locks, the snapshot, selector results.

One value per scheduler, shared by every phase: :attr:`state` is the
``AllocatedState`` with ``AffinityStates`` (written by Reserve, Unreserve, Bind
and reconstruction, read by Filter), :meth:`snapshot` the slices and nodes as
the allocator sees them (rebuilt lazily after a slice, node or class change),
and :attr:`recorded` which devices each claim holds in the cache, so a claim
update can be applied as a difference. :attr:`in_flight` names the claims a
binding cycle is writing: the cycle decides what the cache holds for them when it
ends, so the cluster's notifications of them meanwhile are not applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dra_affinity.cel import SELECTOR_ENV, CELError
from dra_affinity.features import Features
from dra_affinity.structured import reasons
from dra_affinity.structured.claims import ClaimSpec, RequestSpec
from dra_affinity.structured.model import Abort, DeviceInfo, PoolID, PoolInfo, Reason, Result
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState

from .nodefit import NodeFacts, NodeUsage, node_facts
from .placement.index import PlacementIndex
from .view import ClusterView

SELECTOR_COST_BUDGET = 1_000_000

# (device id, request, share id) of one allocation result
ResultTuple = tuple[str, str, str | None]


@dataclass
class SchedulerCache:
    view: ClusterView
    features: Features
    state: AllocatedState = field(default_factory=AllocatedState)
    # claim key -> the results this cache holds for it
    recorded: dict[str, list[ResultTuple]] = field(default_factory=dict)
    # claim key -> the pod whose binding cycle is writing it (see .binding)
    in_flight: dict[str, str] = field(default_factory=dict)
    # Pools as of the last reconciliation (to see whose extractors changed).
    reconciled_pools: dict[PoolID, PoolInfo] = field(default_factory=dict)
    _snapshot: Snapshot | None = None
    _selector_cache: dict[tuple[str, str], bool | CELError] = field(default_factory=dict)
    # Called with the new snapshot whenever one is built (fast paths drop their indexes).
    on_snapshot: list[Callable[[Snapshot], None]] = field(default_factory=list)
    # What the pods bound to each node request (NodeResourcesFit), from pod events.
    usage: NodeUsage = field(default_factory=NodeUsage)
    # Node name -> its NodeFacts, for the nodes of the current snapshot; empty when no
    # node can reject a pod outside DRA (the common case: Filter skips the node filters).
    _facts: dict[str, NodeFacts] = field(default_factory=dict)
    _facts_for: Snapshot | None = None
    # Counts per topology domain over the bound pods (inter-pod affinity, spread); made
    # on first use, for the current snapshot and usage.
    _placement: PlacementIndex | None = None
    _placement_for: Snapshot | None = None

    def placement_index(self) -> PlacementIndex:
        """The placement index of the current snapshot and node usage (made on first use
        and kept up to date from pod events; remade when either is replaced)."""
        snap = self.snapshot()
        index = self._placement
        if index is None or self._placement_for is not snap or index.usage is not self.usage:
            if index is not None:
                index.close()
            index = self._placement = PlacementIndex(self.usage, snap.labels)
            self._placement_for = snap
        return index

    def node_facts(self) -> dict[str, NodeFacts]:
        """The non-trivial nodes' facts (taints, cordon, allocatable) of this snapshot."""
        snap = self.snapshot()
        if self._facts_for is not snap:
            facts = {}
            for n in snap.nodes:
                obj = self.view.node(n)
                if obj is not None:
                    f = node_facts(obj)
                    if not f.trivial:
                        facts[n] = f
            self._facts, self._facts_for = facts, snap
        return self._facts

    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            nodes = list(self.view.nodes())
            labels = {n: self.view.node_labels(n) for n in nodes}
            self._snapshot = Snapshot.build(self.view.slices(), nodes, labels,
                                            preferred_keys=self.features.preferred_keys,
                                            slice_problems=self.view.slice_problems())
            self._selector_cache.clear()
            for fn in self.on_snapshot:
                fn(self._snapshot)
        return self._snapshot

    def invalidate(self, *, classes: bool = False) -> None:
        """Slices, nodes or classes changed: rebuild the snapshot on next use."""
        if classes:
            self._selector_cache.clear()
        self._snapshot = None

    def reset(self) -> None:
        """Drop every allocation and lock (restart)."""
        self.state = AllocatedState()
        self.recorded.clear()
        self.in_flight.clear()

    def selector_matches(self, expr: str, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> bool:
        """A DeviceClass or request CEL selector on a device; a selector that fails to
        evaluate aborts the attempt (an authoring error, as in upstream's allocator)."""
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
                reasons.SELECTOR_ERROR,
                f"claim {claim.key} request {alt.name}: selector {expr!r} on device {d.id}: {hit}",
                None, d.id))
        return hit
