"""Filter verdicts reused across cycles, per (pod signature, node).

A node's Filter result for a pod is a function of two things. The pod's side: its
claims' specs and the DeviceClasses they name (what the allocator and the
extraction read) and what the node filters read of the pod (tolerations, node
selector and required affinity, requests, host ports): the *signature*. The
node's side: the snapshot (nodes, labels, Node objects, slices), the devices the
node reaches with their shares and locks (:class:`AllocatedState`), and the pods
counted on the node (:class:`NodeUsage`). So a verdict is kept per signature and
node with the node's *generation*, a counter bumped whenever one of the node's
devices changes in the state's change log (every node that reaches the device:
a network-attached pool bumps them all) or a pod starts or stops counting on the
node; a new snapshot, state or usage object drops every verdict. While the
generation is unchanged, the node's verdict for that signature is reused.

A pod that needs one device (``CycleState.single``) fits a node exactly when one
of the node's devices does, in the allocator's order. Its node's result is kept per
node generation like any other, and below it its verdicts are kept finer: the node
filters' pass per node generation, and the allocator's verdict per device with the
device's version (``AllocatedState.device_version``), so a pod assumed on a node
makes the node look again at one device, not at its neighbours. A device whose
version moved is looked up by content first (:meth:`VerdictCache.content_key`):
devices published alike, in the same state, get the same verdict.

What a verdict cannot be reused for:

* pods whose verdict depends on pods on other nodes: the inter-pod filters have
  something to check (:func:`~..filter.placement_state`: the pod's own affinity,
  anti-affinity or spread, or a bound pod with required anti-affinity), claims
  allocated already, experiments that reorder devices: no reuse and nothing kept;
* the claims themselves: a kept result names the claims of the pod it was computed
  for. The scan only reads whether the node fits and its device score, both
  functions of the signature; the node a cycle chooses is filtered again for the
  cycle's own claims (:meth:`CycleVerdicts.finish`), and when the pod fails, the
  nodes whose kept result belongs to other claims are filtered again for their
  reasons, in the same cycle, against the same state.

A cycle past 100 nodes stops once upstream's number of feasible nodes is found. The
kept results are also held as columns, each node's generation and whether it fit, so
the scan finds the changed nodes with one comparison against the nodes' generations
and counts the feasible ones with a running sum (:func:`first_fits`): only changed
nodes before the stop are looked at in Python, and a cycle's cost follows how many
nodes changed, not how many there are.

The feasible nodes' scores are kept likewise: when every score plugin but
DynamicResources reads each node alone (:class:`NodeLocalScores`: taints, free and
balanced resources), a node's raw scores are kept per pod side and node generation,
and only normalizing and weighing them runs over the feasible nodes, as arrays.

The node filters beside DRA (taints, node affinity, ports, resources) read only the
pod's placement part of the signature, not its claims: for a one-device pod their
pass or fail is kept per placement and node generation (:class:`_NodePasses`), so
pods that differ only in their claims (one template per subnet, say) share it.

Memory is bounded by :data:`MAX_SIGNATURES` (least recently used first out) times
the number of nodes and devices, :data:`MAX_CONTENTS` verdicts by content, and
:data:`MAX_CONTENT_IDS` numbered contents.
"""

from __future__ import annotations

import dataclasses
import operator
import uuid
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from dra_affinity.api.resource import DeviceClass
from dra_affinity.structured.affinity import CLEAN, pool_gate
from dra_affinity.structured.allocator import Counters
from dra_affinity.structured.model import Abort, DeviceInfo, NodeResult, Reason
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState

from ..cache import SchedulerCache
from ..cycle import CycleState
from ..filter import (
    AFFINITY,
    dynamic_resources,
    filter_node,
    fit_error_message,
    node_rejection,
    placement_state,
    rank_devices,
)
from ..nodefit import BoundPod, NodeUsage
from ..placement.scores import NodeLocalScores, NodeScores

#: Signatures whose verdicts are kept at once (each holds one entry per node, and nine
#: bytes per device for one-device pods).
MAX_SIGNATURES = 128
#: Verdicts by device and state content kept per signature (all dropped when full).
MAX_CONTENTS = 4096
#: Distinct device contents numbered at once (all numbers, and what was kept under them,
#: dropped when full).
MAX_CONTENT_IDS = 4 * MAX_CONTENTS


class _Entry:
    """A node's kept result at a generation, for the claims it was computed for."""

    __slots__ = ("counts", "generation", "neutral", "owner", "result")

    def __init__(self, generation: int, result: NodeResult, owner: tuple[str, ...] | None,
                 counts: tuple[int, int] = (0, 0)) -> None:
        self.generation = generation
        self.result = result
        # The claims the result was computed for; None for a result the device verdicts
        # stand for (no reasons: never a rejection's text).
        self.owner = owner
        # What computing it added to the cycle's counters (lock conflicts, no keys): a
        # cycle whose outcome it stands in for counts them as a fresh one would.
        self.counts = counts
        # Whether no reason's text names an owner's claim (see :meth:`names_no_claim`);
        # None until asked.
        self.neutral: bool | None = None

    def names_no_claim(self) -> bool:
        """Whether the result's reasons read the same for any claims of the signature:
        none of their texts contains a key of the claims it was computed for. (The text
        is a function of the signature, the node's state and the claims' keys; a key
        never written into it cannot change it.) Rendered and decided once."""
        if self.neutral is None:
            owner = self.owner
            self.neutral = owner is not None and not any(
                k in r.message for r in self.result.reasons for k in owner)
        return self.neutral


class _Template(NamedTuple):
    """A node's rejection computed for placeholder claim keys (see
    :meth:`CycleVerdicts._templated`), at a node generation, with what computing it
    counted; ``result`` None when the text cannot be made so."""

    generation: int
    result: NodeResult | None
    counts: tuple[int, int]


class _Failure(NamedTuple):
    """A signature's last outcome in which no node fit: the rejected nodes' results (the
    very objects), and the reasons and FitError message rendered from them."""

    results: tuple[NodeResult, ...]
    reasons: list[Reason]
    message: str


#: A device's verdict for a one-device pod (see :class:`_Kept`).
UNKNOWN, NOT_VIABLE, VIABLE, JOINS_LOCK = 0, 1, 2, 3


class _Kept:
    """The verdicts kept for one signature: per node (any pod), and for a pod that
    needs one device, per device (a node fits exactly when one of its devices does,
    and that verdict moves only with the device: one node's pods changing does not
    drop its devices' verdicts, and a device reached from several nodes is judged
    once)."""

    __slots__ = ("by_content", "devices", "failure", "fit", "generation", "joins", "nodes",
                 "templates", "versions")

    def __init__(self, nodes: int, devices: int) -> None:
        # By node position: the node's result at a generation (for a one-device pod, a
        # result the device verdicts stand for, owned by no claim).
        self.nodes: list[_Entry | None] = [None] * nodes
        # The same as columns, for the scan to compare and count in one pass (see
        # CycleVerdicts.first_feasible): each entry's generation (-1: none) and fit.
        self.generation = array("q", [-1]) * nodes
        self.fit = bytearray(nodes)
        # By the device's snapshot order: its verdict, at which ``device_version``.
        self.devices = bytearray(devices)
        self.versions = array("q", [-1]) * devices
        # The share of each device that JOINS_LOCK (the affinity device score reads it).
        self.joins: dict[int, NodeResult] = {}
        # Verdicts by the number of the device's content (see VerdictCache.content_id),
        # with the result when it joins a lock.
        self.by_content: dict[int, tuple[int, NodeResult | None]] = {}
        # The last outcome where no node fit (see CycleVerdicts.finish).
        self.failure: _Failure | None = None
        # By node position: a rejection whose reasons name the claims, computed with
        # placeholders for their keys (see CycleVerdicts._templated), at a generation;
        # None as the result: the text depends on the claims otherwise.
        self.templates: list[_Template | None] = [None] * nodes

    def put(self, p: int, entry: _Entry) -> None:
        """Keep ``entry`` as the result of the node at position ``p``."""
        self.nodes[p] = entry
        self.generation[p] = entry.generation
        self.fit[p] = entry.result.ok


class _NodePasses:
    """Whether the node filters pass each node, for one placement signature: by node
    position, the generation it was judged at (-1: never) and the answer."""

    __slots__ = ("generations", "passed")

    def __init__(self, nodes: int) -> None:
        self.generations = array("q", [-1]) * nodes
        self.passed = bytearray(nodes)


class _RawScores:
    """The raw scores of each node that read the node alone (see
    :class:`NodeLocalScores`), for one pod side of them: by node position, the
    generation they were computed at (-1: never) and the scores."""

    __slots__ = ("balanced", "fit", "generation", "taints")

    def __init__(self, nodes: int) -> None:
        self.generation = array("q", [-1]) * nodes
        self.taints = array("q", [0]) * nodes
        self.fit = array("q", [0]) * nodes
        self.balanced = array("q", [0]) * nodes


class VerdictCache:
    """Kept Filter verdicts of the current snapshot, state and node usage."""

    def __init__(self, cache: SchedulerCache) -> None:
        self.cache = cache
        self._snap: Snapshot | None = None
        self._state: AllocatedState | None = None
        self._usage: NodeUsage | None = None
        self._pos: dict[str, int] = {}
        self._devices = 0  # snapshot order bound
        # Device id -> positions of the nodes that reach it.
        self._reach: dict[str, tuple[int, ...]] = {}
        # By node position. Columns here and in _Kept and _RawScores are arrays that
        # Python reads and writes one element at a time (as fast as a list) and numpy
        # compares and counts whole, without a copy (see column()).
        self.generations = array("q")
        self.fits: list[NodeResult] = []
        self.fails: list[NodeResult] = []
        self._seen = 0  # the state's change log read up to here
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._passes: OrderedDict[str, _NodePasses] = OrderedDict()  # by placement signature
        self._raw: OrderedDict[str, _RawScores] = OrderedDict()  # by NodeLocalScores.key
        # Content keys by number, and each device's number at a version (content_id).
        self._content_ids: dict[tuple[int, object], int] = {}
        self._content_at: dict[str, tuple[int, int]] = {}
        # Device id -> the number of its content class; content -> number (this snapshot).
        self._device_class: dict[str, int] = {}
        self._classes: dict[tuple[object, ...], int] = {}
        # DeviceClass content by object (the object held, so its id is not reused).
        self._class_json: dict[int, tuple[DeviceClass, str]] = {}
        # Counters (tests, diagnostics): verdicts reused, computed, chosen nodes whose
        # fresh result did not fit (a missed invalidation: the cycle falls back).
        self.reused = 0
        self.computed = 0
        self.stale = 0
        # Stand-ins for the keys of a pod's claims in a rejection's text (by the claim's
        # position): NUL-delimited around a random nonce, so no published text holds one.
        self._nonce = uuid.uuid4().hex

    def placeholder(self, i: int) -> str:
        """What stands for the key of the pod's ``i``-th claim in a templated text."""
        return f"\x00{self._nonce}:{i}\x00"

    @property
    def signatures(self) -> int:
        """How many signatures have verdicts kept."""
        return len(self._kept)

    # ------------------------------------------------------------------ stamps
    def _sync(self, snap: Snapshot, state: AllocatedState) -> None:
        """Bring the node generations up to date with the state's change log, or start
        afresh when the snapshot, the state or the usage was replaced."""
        usage = self.cache.usage
        if snap is not self._snap or state is not self._state or usage is not self._usage:
            self._reset(snap, state, usage)
            return
        changes = state.changes_since(self._seen)
        if changes is None:
            # Changes dropped from the log before this read them: any node may have
            # changed, so every node's generation moves.
            self.generations = array("q", (g + 1 for g in self.generations))
        else:
            gens, reach = self.generations, self._reach
            for dev in changes:
                for p in reach.get(dev, ()):
                    gens[p] += 1
        self._seen = state.change_seq

    def _reset(self, snap: Snapshot, state: AllocatedState, usage: NodeUsage) -> None:
        self.close()
        self._snap, self._state, self._usage = snap, state, usage
        self._pos = {n: i for i, n in enumerate(snap.nodes)}
        reach: dict[str, list[int]] = {}
        for i, n in enumerate(snap.nodes):
            for d in snap.by_node.get(n, ()):
                reach.setdefault(d.id, []).append(i)
        self._reach = {d: tuple(ps) for d, ps in reach.items()}
        self._devices = max((d.order for d in snap.devices.values()), default=-1) + 1
        self.generations = array("q", [0]) * len(snap.nodes)
        # Per node, the results a kept device verdict stands for (fits with no lock
        # joined, does not fit): read-only, so one pair serves every cycle.
        self.fits = [NodeResult(n, True) for n in snap.nodes]
        self.fails = [NodeResult(n, False) for n in snap.nodes]
        self._kept.clear()
        self._passes.clear()
        self._raw.clear()
        self._content_ids.clear()
        self._content_at.clear()
        self._class_json.clear()
        self._device_class.clear()
        self._classes.clear()
        self._seen = state.change_seq
        usage.listeners.append(self)

    def close(self) -> None:
        """Stop listening to the node usage (replaced, or the scheduler stops)."""
        if self._usage is not None and self in self._usage.listeners:
            self._usage.listeners.remove(self)

    def pod_added(self, pod: BoundPod) -> None:
        self._bump(pod.node)

    def pod_removed(self, pod: BoundPod) -> None:
        self._bump(pod.node)

    def _bump(self, node: str) -> None:
        p = self._pos.get(node)
        if p is not None:
            self.generations[p] += 1

    def content_id(self, d: DeviceInfo, state: AllocatedState, version: int) -> int:
        """The number of :meth:`content_key` for device ``d`` at its ``version``: worked
        out once per device version, however many signatures look (with 64 subnets, a
        device a pod landed on is looked at by every one)."""
        seen = self._content_at.get(d.id)
        if seen is not None and seen[0] == version:
            return seen[1]
        if len(self._content_ids) >= MAX_CONTENT_IDS:
            # Numbers are about to be reused: what was kept under them goes too.
            self._content_ids.clear()
            self._content_at.clear()
            for kept in self._kept.values():
                kept.by_content.clear()
        key = self.content_key(d, state)
        n = self._content_ids.setdefault(key, len(self._content_ids))
        self._content_at[d.id] = (version, n)
        return n

    def content_key(self, d: DeviceInfo, state: AllocatedState) -> tuple[int, object]:
        """What the allocator reads of a device for a one-device request, as content:
        the device as published but its name (what selectors and capacity see), its
        pool's gate and extractor set, and its state (lock, exclusive use, what is
        consumed). Devices published alike in the same state get the same verdict."""
        c = self._device_class.get(d.id)
        if c is None:
            enabled = self.cache.features.sharing_affinity
            content = (d.driver, pool_gate(d, enabled) is None, d.multi, d.gated,
                       d.pool_info.extraction_token if d.gated else "",
                       d.device.model_dump_json(exclude={"name"}))
            c = self._device_class[d.id] = self._classes.setdefault(content, len(self._classes))
        u = state.usage.get(d.id)
        st = state.affinity_states.get(d.id, CLEAN)
        if u is None or not u.shares:
            return c, st
        return c, (st, u.exclusive, tuple(sorted(u.consumed.items())))

    def raw_scores(self, key: str) -> _RawScores:
        """The kept raw scores for the pod side ``key`` (the least recently used go first)."""
        nodes = len(self.generations)
        return _recent(self._raw, key, lambda: _RawScores(nodes))

    # ------------------------------------------------------------------ per cycle
    @staticmethod
    def placement_signature(cyc: CycleState) -> str:
        """What decides the node filters' verdict on a node (tolerations, node affinity,
        requests, host ports), beside the node's own state."""
        p = cyc.placement
        return "\x00".join([p.signature(), repr(sorted(p.requests.items())), repr(p.terms.ports)])

    def signature(self, cyc: CycleState, placement: str | None = None) -> str:
        """What decides the pod's verdict on a node, beside the node's own state: its
        placement signature (``placement``, when already made) and its claims."""
        parts = [self.placement_signature(cyc) if placement is None else placement]
        classes = self.cache.view.classes()
        named: dict[str, None] = {}
        for c in cyc.claims:
            parts.append(c.spec.model_dump_json())
        for spec in cyc.to_allocate:
            for r in spec.requests:
                for alt in r.alternatives:
                    named[alt.class_name] = None
        for name in named:
            parts.append(f"{name}={self._class_content(classes.get(name))}")
        return "\x00".join(parts)

    def _class_content(self, cls: DeviceClass | None) -> str:
        if cls is None:
            return ""
        hit = self._class_json.get(id(cls))
        if hit is None or hit[0] is not cls:
            hit = self._class_json[id(cls)] = (cls, cls.model_dump_json())
        return hit[1]

    def for_cycle(self, cyc: CycleState, snap: Snapshot, state: AllocatedState,
                  scoring: str, *, whole: bool = False) -> CycleVerdicts | None:
        """The cycle's node filter with kept verdicts, or None when they must not be
        used for this pod (see the module's docstring). ``whole``: a changed node is
        filtered whole, never device by device (the indexes found nothing: the pod
        will need every node's reasons)."""
        if state is not self.cache.state or cyc.allocated or cyc.hooks is not None:
            return None
        if placement_state(self.cache, cyc) is not None:
            return None
        self._sync(snap, state)
        place = self.placement_signature(cyc)
        sig = self.signature(cyc, place)
        nodes, devices = len(snap.nodes), self._devices if cyc.single else 0
        kept = _recent(self._kept, sig, lambda: _Kept(nodes, devices))
        passes = _recent(self._passes, place, lambda: _NodePasses(nodes))
        return CycleVerdicts(self, cyc, snap, state, scoring, kept, whole, passes)


_T = TypeVar("_T")


def _recent(table: OrderedDict[str, _T], key: str, make: Callable[[], _T]) -> _T:
    """``table[key]``, made when missing, as the most recently used; past
    :data:`MAX_SIGNATURES` entries the least recently used goes."""
    got = table.get(key)
    if got is None:
        got = table[key] = make()
        if len(table) > MAX_SIGNATURES:
            table.popitem(last=False)
    else:
        table.move_to_end(key)
    return got


def column(values: array[int]) -> npt.NDArray[np.int64]:
    """A column of numbers kept as an array, seen by numpy without a copy."""
    return np.frombuffer(values, dtype=np.int64)


def flags(values: bytearray) -> npt.NDArray[np.uint8]:
    """A column of yes and no kept as bytes, seen by numpy without a copy."""
    return np.frombuffer(values, dtype=np.uint8)


def first_fits(fit: bytearray, stale: list[int], limit: int,
               look: Callable[[int], bool]) -> tuple[list[int], int]:
    """The positions of the first ``limit`` nodes that fit, in order, and how many nodes
    were looked at: ``fit`` holds each node's kept answer, ``stale`` (ascending) the
    positions whose answer may have moved, and ``look`` gives a stale node's answer
    afresh (and writes it into ``fit``). Only the stale nodes before the ``limit``-th
    fit are looked at, as filtering node after node would reach them and no others;
    the kept answers are counted as a column, not one by one."""
    looked = 0
    if stale:
        # Fits before each position, as kept; each stale node looked at corrects the
        # count past it by how its answer moved.
        kept = flags(fit)
        before: list[int] = (np.cumsum(kept) - kept).tolist()
        moved = 0
        for p in stale:
            if before[p] + moved >= limit:
                break
            was = bool(fit[p])
            moved += look(p) - was
            looked += 1
    found: list[int] = np.flatnonzero(flags(fit))[:limit].tolist()
    return found, looked


class CycleVerdicts:
    """Filter for one cycle, node by node, through the kept verdicts."""

    def __init__(self, verdicts: VerdictCache, cyc: CycleState, snap: Snapshot,
                 state: AllocatedState, scoring: str, kept: _Kept, whole: bool,
                 passes: _NodePasses) -> None:
        self.verdicts = verdicts
        self.cyc, self.snap, self.state, self.scoring = cyc, snap, state, scoring
        self.kept = kept
        self.passes = passes  # the node filters' pass, shared by the placement signature
        self.whole = whole
        self.owner = tuple(c.key for c in cyc.to_allocate)
        # The positions of the nodes first_feasible found.
        self.found: list[int] = []

    def borrowed(self, res: NodeResult) -> bool:
        """Whether ``res``, a node's result this cycle's scan returned, was not computed
        for this cycle's claims (kept for another pod's, or one the device verdicts stand
        for): the chosen node is filtered again, and the rejected ones when the pod
        fails, unless their reasons name no claim."""
        e = self.kept.nodes[self.verdicts._pos[res.node]]
        return e is not None and e.result is res and e.owner != self.owner

    def _filter(self, node: str) -> tuple[NodeResult, tuple[int, int]]:
        """:func:`filter_node` for this cycle's claims, and what it added to the counters."""
        c = self.cyc.counters
        conflicts, no_keys = c.lock_conflicts, c.no_keys
        res = filter_node(self.verdicts.cache, self.cyc, node, self.snap, self.state, self.scoring)
        return res, (c.lock_conflicts - conflicts, c.no_keys - no_keys)

    def __call__(self, node: str) -> NodeResult:
        """The node's kept result while its generation holds (nothing it reaches
        changed); else a fresh one, kept."""
        return self._at(self.verdicts._pos[node], node)

    def _at(self, p: int, node: str) -> NodeResult:
        v = self.verdicts
        gen = v.generations[p]
        e = self.kept.nodes[p]
        if e is not None and e.generation == gen:
            v.reused += 1
            return e.result
        if self.cyc.single is not None and not self.whole:
            e = self._by_device(node, p, gen)
        else:
            v.computed += 1
            res, counts = self._filter(node)
            e = _Entry(gen, res, self.owner, counts)
        self.kept.put(p, e)
        return e.result

    def first_feasible(self, limit: int) -> tuple[list[NodeResult], list[NodeResult]]:
        """What filtering node after node until ``limit`` fit finds: the results of the
        nodes that fit, in node order, and when none does, every node's rejection (see
        :func:`first_fits`)."""
        v, kept, nodes = self.verdicts, self.kept, self.snap.nodes
        stale: list[int] = np.flatnonzero(column(kept.generation) != column(v.generations)).tolist()

        def look(p: int) -> bool:
            return self._at(p, nodes[p]).ok

        found, looked = first_fits(kept.fit, stale, limit, look)
        self.found = found
        entries = kept.nodes
        # Every node up to the last one found was reached, as node after node would.
        v.reused += (found[-1] + 1 if len(found) == limit else len(nodes)) - looked
        if found:
            return [entries[p].result for p in found], []  # type: ignore[union-attr]
        return [], [e.result for e in entries]  # type: ignore[union-attr]

    def score(self, feasible: list[NodeResult], device: Mapping[str, int] | None) -> NodeScores | None:
        """The scores of the nodes first_feasible found (``feasible``: their results), from
        raw scores kept per node while its generation holds (only the changed nodes'
        computed afresh); None when some plugin reads more than each node alone."""
        cache, cyc = self.verdicts.cache, self.cyc
        index = cache.placement_index()
        if not NodeLocalScores.applies(index, cyc.pod, cyc.placement, cache.view.namespaces()):
            return None
        local = NodeLocalScores.of(cyc.pod, cyc.placement)
        raw = self.verdicts.raw_scores(local.key)
        at = np.array(self.found, dtype=np.intp)
        assert len(at) == len(feasible)
        gens = self.verdicts.generations
        changed: list[int] = at[column(raw.generation)[at] != column(gens)[at]].tolist()
        if changed:
            facts, nodes = cache.node_facts(), self.snap.nodes
            for p in changed:
                n = nodes[p]
                raw.taints[p], raw.fit[p], raw.balanced[p] = local.raw(index.usage, n, facts.get(n))
                raw.generation[p] = gens[p]
        names = tuple(map(self.snap.nodes.__getitem__, self.found))
        return local.scores(names, column(raw.taints)[at],
                            column(raw.fit)[at], column(raw.balanced)[at], device)

    def _by_device(self, node: str, p: int, gen: int) -> _Entry:
        """A one-device pod whose node (at position ``p``) changed to generation ``gen``:
        the node filters, then the node's devices in the order the allocator tries them,
        each judged by its kept verdict while the device is unchanged; the first viable
        one decides, as in the allocator. A result the device verdicts stand for
        belongs to no claim and counts nothing; the node filters' rejection is computed
        for this cycle's claims, with its counts."""
        v, cyc, snap, state, kept = self.verdicts, self.cyc, self.snap, self.state, self.kept
        passes = self.passes
        if passes.generations[p] != gen:
            passes.passed[p] = node_rejection(v.cache, cyc, node, snap.labels.get(node, {})) is None
            passes.generations[p] = gen
        if not passes.passed[p]:
            v.computed += 1
            res, counts = self._filter(node)  # no claim in it
            return _Entry(gen, res, self.owner, counts)
        devs: Sequence[DeviceInfo] = snap.by_node.get(node, ())
        if self.scoring == AFFINITY:
            assert cyc.single is not None
            devs = rank_devices(v.cache, cyc, devs, *cyc.single, state)
        versions, kept_versions, kept_devices = state.device_version, kept.versions, kept.devices
        reused = 0  # counted once at the end: this loop runs for every device of the node
        for d in devs:
            o = d.order
            version = versions.get(d.id, 0)
            if kept_versions[o] == version:
                reused += 1
                verdict = kept_devices[o]
                if verdict == NOT_VIABLE:
                    continue
            else:
                verdict = self._device_verdict(d, node, version)
                if verdict == NOT_VIABLE:
                    continue
            v.reused += reused
            found = NodeResult(node, True, kept.joins[o].shares) if verdict == JOINS_LOCK else v.fits[p]
            return _Entry(gen, found, None)
        v.reused += reused
        return _Entry(gen, v.fails[p], None)

    def _device_verdict(self, d: DeviceInfo, node: str, version: int) -> int:
        """The verdict of device ``d`` (reached from ``node``) at ``version``, whose kept
        one is of another version: by its content when kept, else from the allocator;
        kept for the device at this version."""
        v, kept = self.verdicts, self.kept
        key = v.content_id(d, self.state, version)
        hit = kept.by_content.get(key)
        if hit is None:
            v.computed += 1
            res = dynamic_resources(v.cache, self.cyc, node, self.snap, self.state, self.scoring, [d])
            joins = res.ok and any(s.reused_lock for s in res.shares)
            hit = (JOINS_LOCK if joins else VIABLE if res.ok else NOT_VIABLE, res if joins else None)
            if len(kept.by_content) >= MAX_CONTENTS:
                kept.by_content.clear()
            kept.by_content[key] = hit
        else:
            v.reused += 1
        verdict, joined = hit
        o = d.order
        kept.devices[o], kept.versions[o] = verdict, version
        if joined is not None:
            kept.joins[o] = joined
        else:
            kept.joins.pop(o, None)
        return verdict

    def _fresh(self, node: str) -> NodeResult:
        self.verdicts.computed += 1
        res, counts = self._filter(node)
        p = self.verdicts._pos[node]
        self.kept.put(p, _Entry(self.verdicts.generations[p], res, self.owner, counts))
        return res

    def _own(self, node: str) -> NodeResult:
        """The node's whole result for this cycle's claims: kept when it was computed for
        them at the node's current generation (the same pod tried again), or for other
        claims of the signature with reasons that name none of them (they read the same
        for these); else fresh."""
        v = self.verdicts
        p = v._pos[node]
        e = self.kept.nodes[p]
        gen = v.generations[p]
        if e is not None and e.generation == gen:
            if e.owner == self.owner:
                v.reused += 1
                return e.result
            if e.names_no_claim():
                return e.result  # (counted reused in the scan already)
            if e.owner is not None:
                # Reasons that name the other pod's claims: this pod's own text, from
                # the node's template (made once per node generation).
                own = self._templated(node, p, gen)
                if own is not None:
                    return own
        return self._fresh(node)

    def _templated(self, node: str, p: int, gen: int) -> NodeResult | None:
        """The node's rejection for this pod, made from the signature's template of it:
        the node filtered for claims whose keys are placeholders (the same claims
        otherwise), each placeholder then replaced by this pod's key. Sound when the
        template names no real claim key (a key never written into a text cannot change
        it; the placeholders stand where the keys were written); None when it does (an
        extraction's message names the claim's configs), or when the template fits (it
        cannot, for the same signature and node: the caller filters afresh)."""
        v, kept = self.verdicts, self.kept
        t = kept.templates[p]
        if t is None or t.generation != gen:
            t = kept.templates[p] = self._template(node, gen)
        if t.result is None:
            return None
        swap = [(v.placeholder(i), key) for i, key in enumerate(self.owner)]
        reasons = []
        for r in t.result.reasons:
            text = r.message
            if "\x00" in text:
                for stand_in, key in swap:
                    text = text.replace(stand_in, key)
                r = Reason(r.code, text, r.node, r.device, r.plugin, r.fit)
            reasons.append(r)
        res = NodeResult(node, False, [], reasons, list(t.result.codes))
        kept.put(p, _Entry(gen, res, self.owner, t.counts))
        return res

    def _template(self, node: str, gen: int) -> _Template:
        """Filter the node for this cycle's claims under placeholder keys (a cycle of
        its own: its extraction memo maps the placeholders to the same claims)."""
        v, cyc = self.verdicts, self.cyc
        stand_ins = [v.placeholder(i) for i in range(len(cyc.to_allocate))]
        memo = cyc.memo
        claims = dict(memo.claims)
        for stand_in, spec in zip(stand_ins, cyc.to_allocate, strict=True):
            claims[stand_in] = memo.claims[spec.key]
        twin = dataclasses.replace(
            cyc, to_allocate=[dataclasses.replace(c, key=k) for k, c in zip(stand_ins, cyc.to_allocate,
                                                                             strict=True)],
            memo=dataclasses.replace(memo, claims=claims, results={}, evaluations=0),
            counters=Counters(), chosen=None, node_reasons=[], rejected=[], failure=None)
        v.computed += 1
        try:
            res = filter_node(v.cache, twin, node, self.snap, self.state, self.scoring)
        except Abort:
            return _Template(gen, None, (0, 0))
        finally:
            memo.evaluations += twin.memo.evaluations
        counts = (twin.counters.lock_conflicts, twin.counters.no_keys)
        owner = self.owner
        if res.ok or any(k in r.message for r in res.reasons for k in owner):
            return _Template(gen, None, counts)
        return _Template(gen, res, counts)

    def finish(self) -> bool:
        """Make the scan's outcome the cycle's own: the chosen node's result for these
        claims, or (when the pod fails) every rejected node's reasons for them, and the
        FitError message. False when a fresh result disagrees with a kept verdict (one
        was stale: the caller scans again without them)."""
        cyc = self.cyc
        if cyc.chosen is not None:
            if self.borrowed(cyc.chosen):
                fresh = self._fresh(cyc.chosen.node)
                if not fresh.ok:
                    return self._stale()
                cyc.chosen = fresh
            return True
        rejected = [self._own(r.node) if self.borrowed(r) else r for r in cyc.rejected]
        if any(r.ok for r in rejected):
            return self._stale()
        cyc.rejected = rejected
        self._failed()
        return True

    def _failed(self) -> None:
        """No node fits: the reasons and FitError message, rendered again only when a
        rejected node's result is not the very one of the signature's last failure
        (a node changed, or reasons that name the claims of another pod)."""
        cyc, kept, v = self.cyc, self.kept, self.verdicts
        # Counted as a scan without kept verdicts counts them: every node filtered once
        # (each rejected node's entry is its whole result for these claims, or one whose
        # reasons read the same, with what computing it counted).
        entries = [kept.nodes[v._pos[r.node]] for r in cyc.rejected]
        cyc.counters.lock_conflicts = sum(e.counts[0] for e in entries if e is not None)
        cyc.counters.no_keys = sum(e.counts[1] for e in entries if e is not None)
        if cyc.node_reasons:
            return
        last = kept.failure
        rejected = cyc.rejected
        if last is None or len(last.results) != len(rejected) or \
                not all(map(operator.is_, last.results, rejected)):
            why = cyc.reasons()
            last = kept.failure = _Failure(tuple(rejected), why,
                                           fit_error_message(len(self.snap.nodes), why))
        cyc.failure = (len(self.snap.nodes), last.reasons, last.message)

    def _stale(self) -> bool:
        self.verdicts.stale += 1
        self.verdicts._kept.clear()
        return False
