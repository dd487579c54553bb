"""Pending informer changes, at most one per object: client-go's DeltaFIFO rule.

The reflectors put every watch event here and the loop thread takes them. When the
loop falls behind, a plain queue would hold every version of a busy object (a pod
patched five times, a claim's finalizer then its status) and grow without bound; here
a change for an object that already waits *replaces* the waiting one in place (the
object keeps its place in line, with its latest version), so the queue holds at most
one entry per object of the cluster plus a list and a "synced" marker per kind.
A change taken out carries its object's store key and content digest
(:attr:`Change.key`, :attr:`Change.digest`), computed here in the reflector's thread,
so that the loop thread, which applies every change, does not.

* ADDED or MODIFIED after anything: the newest object, as MODIFIED unless the waiting
  one was ADDED (the loop upserts both alike).
* DELETED after anything: DELETED (the loop removes it, whatever it had waiting).
* ADDED after DELETED (the object was recreated): the new object as MODIFIED, so the
  loop sees the old version replaced by the new one (a new UID, say).
* REPLACE (a full list) drops what waits for that kind (the list is newer) and takes
  the place of a list of the kind still waiting, so it stays ahead of that kind's
  SYNCED marker.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict

from .convert import content_digest, object_key
from .informer import ADDED, DELETED, MODIFIED, REPLACE, SYNCED, Change

__all__ = ["ChangeFIFO"]

_LIST, _SYNCED = "\x00list", "\x00synced"  # keys no object has


class ChangeFIFO:
    """A coalescing, thread-safe FIFO of :class:`Change` items (put by reflectors,
    taken by one consumer), with :class:`queue.Queue`'s ``put``/``get``/``get_nowait``."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str], Change] = OrderedDict()
        self._cond = threading.Condition()
        self.coalesced = 0  # changes folded into one already waiting

    def __len__(self) -> int:
        return len(self._items)

    def put(self, ch: Change) -> None:
        if ch.object is not None and ch.type in (ADDED, MODIFIED, DELETED):
            # In the reflector's thread, before the lock: what the loop would compute.
            ch = Change(ch.kind, ch.type, object=ch.object, key=object_key(ch.kind, ch.object),
                        digest=None if ch.type == DELETED else content_digest(ch.kind, ch.object))
        with self._cond:
            self._put(ch)
            self._cond.notify()

    def _put(self, ch: Change) -> None:
        items = self._items
        if ch.type == SYNCED:
            items[(ch.kind, _SYNCED)] = ch
            return
        if ch.type == REPLACE:
            stale = [k for k in items if k[0] == ch.kind and k[1] not in (_LIST, _SYNCED)]
            for k in stale:
                del items[k]
            self.coalesced += len(stale)
            if (ch.kind, _LIST) in items:
                self.coalesced += 1
            items[(ch.kind, _LIST)] = ch  # in place when one waits
            return
        if ch.object is None:
            return
        key = (ch.kind, ch.key or object_key(ch.kind, ch.object))
        waiting = items.get(key)
        if waiting is None:
            items[key] = ch
            return
        self.coalesced += 1
        if ch.type == DELETED:
            typ = DELETED
        elif waiting.type == ADDED:
            typ = ADDED
        else:
            typ = MODIFIED
        items[key] = Change(ch.kind, typ, object=ch.object, key=ch.key, digest=ch.digest)

    def get(self, block: bool = True, timeout: float | None = None) -> Change:
        """The oldest waiting change; raises :class:`queue.Empty` when none comes in time."""
        with self._cond:
            if block and not self._items:
                self._cond.wait_for(lambda: bool(self._items), timeout)
            if not self._items:
                raise queue.Empty
            return self._items.popitem(last=False)[1]

    def get_nowait(self) -> Change:
        return self.get(block=False)

    def qsize(self) -> int:
        return len(self._items)
