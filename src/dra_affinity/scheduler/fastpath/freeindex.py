"""Which nodes can possibly fit a one-device request: an index by free capacity and lock.

For a request that needs one device and a positive amount of some capacity, a
device can only be viable if it has room and is either clean (or not gated by
sharing affinity) or locked to exactly the request's keys. The index keeps,
per such category (clean, or a lock value), the sorted positions of nodes that
have at least one device in it, so the first node worth evaluating is found
in O(log n). Candidates are still evaluated by the full allocator, in node
order, so the node chosen is the one a full first-fit scan would choose: the
index only skips nodes that cannot fit.

It is kept up to date from :meth:`AllocatedState.changes_since`, and rebuilt with
the snapshot. Devices visible from several nodes disable it (fallback to the
other paths).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from dra_affinity.structured.affinity import CLEAN as CLEAN_STATE
from dra_affinity.structured.affinity import admitted_keys, gated, pool_gate
from dra_affinity.structured.model import DeviceInfo
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState

CLEAN: Any = ("",)  # category of clean or ungated devices with room
ANY: Any = ("*",)  # every node with a device that has room (any category)
_CLEAN_ID, _ANY_ID = 0, 1


class FreeIndex:
    def __init__(self, snap: Snapshot, state: AllocatedState, affinity_enabled: bool) -> None:
        self.state = state
        self.affinity_enabled = affinity_enabled
        self.nodes = snap.nodes
        self.usable = True
        # Device id -> (device, its node's position, its place among the node's devices).
        self.devices: dict[str, tuple[DeviceInfo, int, int]] = {}
        # Per node position, each device's category id in the node's device order (None:
        # no room). Filter reads one node's short list here instead of a lookup per
        # device by id: a node met for the first time in a while is cold in memory, and
        # its devices' ids and a dict of every device would be too.
        self.node_cats: list[list[int | None]] = []
        for i, n in enumerate(snap.nodes):
            devs = snap.by_node.get(n, ())
            self.node_cats.append([None] * len(devs))
            for j, d in enumerate(devs):
                if d.id in self.devices or not snap.node_local.get(d.id, False):
                    self.usable = False
                self.devices[d.id] = (d, i, j)
        # Categories are interned to small ints: queries compare a device's category
        # against the request's once per device, and lock values are nested tuples.
        self._ids: dict[Any, int] = {CLEAN: _CLEAN_ID, ANY: _ANY_ID}
        self._cat_of: dict[int, Any] = {_CLEAN_ID: CLEAN, _ANY_ID: ANY}
        self._next_id = 2
        # Plain sorted lists: at most one entry per node, so an insert or delete is one
        # bisect and one memmove in C, cheaper up to ~10^5 nodes than a SortedList's
        # bookkeeping in Python, and lock categories come and go often (one per value).
        self.by_category: dict[int, list[int]] = {}
        self.seen = state.change_seq
        if self.usable:
            for did in self.devices:
                self._update(did)

    # ------------------------------------------------------------------ maintenance
    def _category(self, d: DeviceInfo) -> Any:
        """CLEAN, the lock value the device admits, or None (no room, or ruled out)."""
        st = self.state
        if pool_gate(d, self.affinity_enabled) is not None:
            return None
        if not d.multi:
            return None if st.is_allocated(d.id) else CLEAN
        if st.is_exclusively_allocated(d.id):
            return None
        used = st.consumed(d.id)
        limits = d.limits
        if limits and all(used.get(n, 0) >= lim for n, lim in limits.items()):
            return None  # full: no positive request fits
        if gated(d, self.affinity_enabled):
            keys = admitted_keys(st.affinity_states.get(d.id, CLEAN_STATE))
            if keys is None:
                return None  # Unreconstructable: takes nothing
            return keys or CLEAN
        return CLEAN

    def _id(self, cat: Any) -> int:
        i = self._ids.get(cat)
        if i is None:
            i = self._ids[cat] = self._next_id
            self._cat_of[i] = cat
            self._next_id += 1
        return i

    def _enter(self, pos: int, key: int) -> None:
        """Node ``pos`` now has a device in category ``key`` (it had none)."""
        lst = self.by_category.get(key)
        if lst is None:
            self.by_category[key] = [pos]
        else:
            insort(lst, pos)

    def _leave(self, pos: int, key: int) -> None:
        """Node ``pos`` no longer has a device in category ``key``."""
        lst = self.by_category[key]
        i = bisect_left(lst, pos)
        if i < len(lst) and lst[i] == pos:
            del lst[i]
        if not lst and key > _ANY_ID:
            # no device has this lock value any more: forget its id
            del self.by_category[key]
            del self._ids[self._cat_of.pop(key)]

    def _set(self, pos: int, j: int, new: int | None) -> None:
        """Device ``j`` of node ``pos`` is now in category ``new`` (None: no room).

        Whether a node has a device in a category is read off its short list of
        categories (a scan in C of a node's few devices), not kept as a count per
        (node, category) as well: one fact in one place, and no large dict to reach
        into on every change."""
        cats = self.node_cats[pos]
        old = cats[j]
        if new == old:
            return
        cats[j] = new
        if old is not None and old not in cats:
            self._leave(pos, old)
        if new is not None and cats.count(new) == 1:
            self._enter(pos, new)
        # ANY (room in any category) only changes when the device gains or loses room;
        # a lock set or cleared on a device with room leaves it as it is.
        if old is None:
            if cats.count(None) == len(cats) - 1:
                self._enter(pos, _ANY_ID)
        elif new is None and cats.count(None) == len(cats):
            self._leave(pos, _ANY_ID)

    def _update(self, did: str) -> None:
        entry = self.devices.get(did)
        if entry is None:
            return
        d, pos, j = entry
        cat = self._category(d)
        self._set(pos, j, None if cat is None else self._id(cat))

    def catch_up(self) -> None:
        state = self.state
        now = state.change_seq
        if self.seen < now:
            changed = state.changes_since(self.seen)
            # Changes dropped from the log before this index saw them: re-derive every
            # device's category (``_update`` only moves the ones that changed).
            for did in set(changed) if changed is not None else list(self.devices):
                self._update(did)
            self.seen = now

    # ------------------------------------------------------------------ queries
    def allowed(self, keys: Sequence[Any] | None) -> tuple[int, ...] | None:
        """The categories a request with these lock ``keys`` may use, brought up to date
        first: clean or ungated room, or room under one of ``keys``; None (extraction
        gave no keys) means any device with room. Valid until the state next changes."""
        self.catch_up()
        if keys is None:
            return None
        if len(keys) == 1:  # one extractor set among the pools: the common case
            i = self._ids.get(keys[0])
            return (_CLEAN_ID,) if i is None or i == _CLEAN_ID else (_CLEAN_ID, i)
        return tuple(self._known({CLEAN: None, **dict.fromkeys(keys)}))

    def candidates_in(self, allowed: tuple[int, ...] | None) -> Iterator[int]:
        """Node positions, ascending, with a device in one of the ``allowed`` categories."""
        by = self.by_category
        return _union([by[i] for i in ((_ANY_ID,) if allowed is None else allowed) if i in by])

    def devices_in(self, pos: int, devices: Sequence[DeviceInfo],
                   allowed: tuple[int, ...] | None) -> list[DeviceInfo]:
        """The devices of the node at ``pos`` (``devices``: its devices, in the snapshot's
        order) in one of the ``allowed`` categories, in their order."""
        cats = self.node_cats[pos]
        if allowed is None:
            return [d for d, c in zip(devices, cats, strict=True) if c is not None]
        if len(allowed) == 1:
            only = allowed[0]
            return [d for d, c in zip(devices, cats, strict=True) if c == only]
        return [d for d, c in zip(devices, cats, strict=True) if c in allowed]

    def _known(self, cats: Iterable[Any]) -> list[int]:
        ids = self._ids
        return [ids[c] for c in cats if c in ids]

    def locked_candidates(self, keys: Iterable[Any]) -> Iterator[int]:
        """Node positions, ascending, with room on a device locked to one of ``keys``."""
        self.catch_up()
        return _union([self.by_category[i] for i in self._known(set(keys)) if i in self.by_category])


def _union(lists: list[list[int]]) -> Iterator[int]:
    """Ascending positions in any of the sorted lists, each once.

    Callers usually stop at the first candidate, and there are few lists (clean and
    the request's lock values), so a plain walk over the heads beats a heap merge."""
    if not lists:
        return iter(())
    if len(lists) == 1:
        return iter(lists[0])
    if len(lists) == 2:
        return _walk2(lists[0], lists[1])
    return _walk(lists)


def _walk2(a: list[int], b: list[int]) -> Iterator[int]:
    """The common case: clean devices and one lock value."""
    ia, ib = iter(a), iter(b)
    x, y = next(ia, None), next(ib, None)
    while x is not None and y is not None:
        if x < y:
            yield x
            x = next(ia, None)
        elif y < x:
            yield y
            y = next(ib, None)
        else:
            yield x
            x, y = next(ia, None), next(ib, None)
    rest, it = (x, ia) if x is not None else (y, ib)
    if rest is not None:
        yield rest
        yield from it


def _walk(lists: list[list[int]]) -> Iterator[int]:
    its = [iter(lst) for lst in lists]
    heads = [next(it, None) for it in its]
    while True:
        best = min([h for h in heads if h is not None], default=None)
        if best is None:
            return
        yield best
        for i, h in enumerate(heads):
            if h == best:
                heads[i] = next(its[i], None)
