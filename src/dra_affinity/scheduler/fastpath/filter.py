"""Filter through the indexes: the node a full scan would choose, found with less work.

Only for a pod whose claims are all unallocated and no experiment reorders
devices. For a one-device request with a positive capacity need, the free
index proposes candidate nodes in order (clean devices or devices locked to
the request's keys, with room); otherwise the node index skips nodes known not
to fit since they last changed. Candidates are still evaluated by the
reference per-node Filter, so the choice is the reference's. When nothing
fits, the caller runs the full scan for every node's reasons.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from dra_affinity.cel import OutcomeKind
from dra_affinity.structured import reasons
from dra_affinity.structured.model import DeviceInfo, NodeResult
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState

from ..cache import SchedulerCache
from ..cycle import CycleState
from ..filter import (
    AFFINITY,
    filter_node,
    node_rejection,
    node_scoring,
    placement_state,
    rank_devices,
)
from . import FastPaths
from .freeindex import FreeIndex
from .nodeindex import NodeIndex, Verdicts


class IndexedFilter:
    """The free and node indexes of one snapshot, kept up to date from the state's log."""

    def __init__(self, cache: SchedulerCache, switches: FastPaths) -> None:
        self.cache = cache
        self.switches = switches
        self._free: FreeIndex | None = None
        self._nodes: NodeIndex | None = None
        cache.on_snapshot.append(self._drop)

    def _drop(self, _snap: Snapshot) -> None:
        self._free = None
        if self._nodes is not None:
            self._nodes.close()
        self._nodes = None

    def free_index(self) -> FreeIndex:
        snap = self.cache.snapshot()
        if self._free is None or self._free.nodes is not snap.nodes or \
                self._free.state is not self.cache.state:
            self._free = FreeIndex(snap, self.cache.state, self.cache.features.sharing_affinity)
        return self._free

    def node_index(self) -> NodeIndex:
        snap = self.cache.snapshot()
        if self._nodes is None or self._nodes.state is not self.cache.state:
            if self._nodes is not None:
                self._nodes.close()
            device_node: dict[str, str | None] = {}
            for n in snap.nodes:
                for d in snap.by_node.get(n, []):
                    device_node[d.id] = n if d.id not in device_node else None
            for did, local in snap.node_local.items():
                if not local:
                    device_node[did] = None
            self._nodes = NodeIndex(snap.nodes, device_node, self.cache.state, self.cache.usage)
        elif self._nodes.usage is not self.cache.usage:
            self._nodes.listen(self.cache.usage)
        return self._nodes

    def warm(self) -> None:
        """Build the indexes that are on (at start, so the first cycle does not pay)."""
        if self.switches.free_index:
            self.free_index()
        if self.switches.node_index:
            self.node_index()

    def applies(self, cyc: CycleState, state: AllocatedState) -> bool:
        """Whether the indexes may look for the pod: they find the device score's choice,
        so not when node scores rank the feasible nodes."""
        return (self.switches.indexed and state is self.cache.state and not cyc.allocated
                and bool(cyc.to_allocate) and cyc.hooks is None and not node_scoring(self.cache, cyc))

    # ------------------------------------------------------------------ search
    def find(self, cyc: CycleState, snap: Snapshot, state: AllocatedState, scoring: str) -> bool:
        """Set ``cyc.chosen`` to the reference's choice and return True, or return False
        (no node fits, or the indexes cannot tell: the caller runs the full scan)."""
        cache = self.cache
        results: dict[str, NodeResult] = {}
        single = _single_device(cyc)
        free = self._free_candidates(cyc, snap) if single and self.switches.free_index else None
        # The node index finds the first node that fits: first-fit's choice only. (Affinity
        # scoring ranks nodes; the free index handles that for one-device requests.)
        sig = _signature(cyc) if free is None and self.switches.node_index and scoring != AFFINITY \
            else None
        if sig is not None and placement_state(cache, cyc) is not None:
            sig = None  # spread or inter-pod affinity: a node's verdict moves with pods anywhere
        if free is None and sig is None:
            return False
        bad = self.node_index().verdicts(sig, len(snap.devices)) if single and sig is not None else None
        counters = (state.device_version, state.lock_version, state.release_version)

        def fits(node: str, pos: int | None = None) -> bool:
            """Whether the pod fits ``node`` (``pos``: its position, on the free index's
            path)."""
            if bad is None:
                devs: Sequence[DeviceInfo] | None = None
                if free is not None:
                    # Only devices the index says can take the request (room, and
                    # clean or locked to the request's keys); same first viable one.
                    assert pos is not None
                    devs = self.free_index().devices_in(pos, snap.by_node.get(node, ()),
                                                        cyc.free_allowed)
                res = filter_node(cache, cyc, node, snap, state, scoring, devs)
                results[node] = res
                return res.ok
            # One device decides: skip devices whose "not viable" verdict still
            # holds; the first viable one is first-fit's choice. A node the node
            # filters reject records no device verdict (it is about the node, and a
            # pod leaving it brings it back: NodeIndex hears of that).
            if node_rejection(cache, cyc, node, snap.labels.get(node, {})) is not None:
                return False
            kinds, vers = bad.kind, bad.version
            node_devs: Sequence[DeviceInfo] = snap.by_node.get(node, ())
            if scoring == AFFINITY:
                node_devs = rank_devices(cache, cyc, node_devs)
            for d in node_devs:
                o = d.order
                if vers[o] == counters[kinds[o]].get(d.id, 0):
                    continue
                res = filter_node(cache, cyc, node, snap, state, scoring, [d])
                if res.ok:
                    results[node] = res
                    return True
                kind = _verdict_kind(res.codes)
                kinds[o] = kind
                vers[o] = counters[kind].get(d.id, 0)
            return False

        found: str | None = None
        if free is not None:
            if scoring == AFFINITY:
                # Consolidation first: the first node with a compatibly-locked device
                # that takes the request; then first-fit over everything with room.
                for pos in self._lock_candidates(cyc, snap):
                    node = snap.nodes[pos]
                    if fits(node, pos) and results[node].shares and results[node].shares[0].reused_lock:
                        found = node
                        break
                if found is None:
                    free = self._free_candidates(cyc, snap)
            if found is None and free is not None:
                for pos in free:
                    node = snap.nodes[pos]
                    if fits(node, pos):
                        found = node
                        break
        else:
            assert sig is not None
            found = self.node_index().find(sig, fits)
        if found is None:
            return False
        cyc.chosen = results[found]
        return True

    def _free_candidates(self, cyc: CycleState, snap: Snapshot) -> Iterator[int] | None:
        """Candidate node positions for a one-device request with a positive capacity need."""
        claim = cyc.to_allocate[0]
        alt = claim.requests[0].alternatives[0]
        if not alt.needs_capacity:
            return None
        index = self.free_index()
        if not index.usable:
            return None
        keys: list[Any] | None = []
        if self.cache.features.sharing_affinity:
            for pool in snap.extractor_pools():
                res = cyc.memo(claim, alt, pool)
                if res.kind is not OutcomeKind.OK:
                    keys = None  # let the allocator meet the outcome where a full scan would
                    break
                keys.append(res.keys)  # type: ignore[union-attr]
        cyc.free_allowed = allowed = index.allowed(keys)
        return index.candidates_in(allowed)

    def _lock_candidates(self, cyc: CycleState, snap: Snapshot) -> Iterator[int]:
        """Node positions with a device locked to this request's keys and room."""
        claim = cyc.to_allocate[0]
        alt = claim.requests[0].alternatives[0]
        keys = []
        for pool in snap.extractor_pools():
            res = cyc.memo(claim, alt, pool)
            if res.kind is OutcomeKind.OK:
                keys.append(res.keys)
        return self.free_index().locked_candidates(keys)


def _verdict_kind(codes: Sequence[str]) -> int:
    if len(codes) == 1:
        if codes[0] in (reasons.AFFINITY_LOCK_MISMATCH, reasons.AFFINITY_UNRECONSTRUCTABLE):
            return Verdicts.LOCK
        if codes[0] == reasons.INSUFFICIENT_CAPACITY:
            return Verdicts.RELEASE
    return Verdicts.ANY


def _single_device(cyc: CycleState) -> bool:
    """One claim, one request, one way to satisfy it, one device, no constraints:
    then a node fits exactly when one of its devices does."""
    return cyc.single is not None


def _signature(cyc: CycleState) -> str | None:
    """Content of what decides feasibility on a node; None when the index must not be used."""
    if cyc.allocated or not cyc.to_allocate:
        return None
    if cyc.placement.depends_on_pods:
        return None  # resources, ports, inter-pod terms change with every pod bound or gone
    parts = [cyc.placement.signature()]
    for c in cyc.claims:
        parts.append(c.spec.model_dump_json())
    return "\x00".join(parts)
