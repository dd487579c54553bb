"""Reflectors: list, then watch from the list's resourceVersion, in one thread per kind.

A reflector never touches the scheduler: it puts :class:`Change` items on the
loop's queue (a :class:`~.fifo.ChangeFIFO`, which keeps one per object), and only
the loop thread applies them (the scheduler core is single-threaded). Each object
goes through the reflector's ``transform`` first, in the reflector's thread (as
client-go's informer transform): ``managedFields`` are always dropped, and the
pod informer keeps only a projection of pods it will not schedule
(:mod:`.projection`). A list is delivered as one ``REPLACE`` change holding every
object, so the consumer can also see what disappeared while the watch was down;
``SYNCED`` follows the first one. Watches ask for bookmarks (the resourceVersion
moves on without object traffic) and end after ``timeout`` seconds; the reflector
then watches again from the last version seen. A ``410 Gone`` (the version was
compacted away) or an ``ERROR`` event means list again; other failures back off
and retry (up to ``max_backoff`` seconds), forever, until stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dra_affinity.observe.profiles import ThreadProfiles

from .api import RESOURCES, Api, ApiError

log = logging.getLogger("dra_affinity.kube.informer")

# Change types: the watch's ADDED, MODIFIED, DELETED; REPLACE (a full list); SYNCED.
ADDED, MODIFIED, DELETED, REPLACE, SYNCED = "ADDED", "MODIFIED", "DELETED", "REPLACE", "SYNCED"


@dataclass
class Change:
    """One item for the loop: a watch event, a full list, or 'this kind is synced'.

    ``key`` and ``digest``: the object's store key and
    :func:`~.convert.content_digest`, when whoever queued the change computed them (the
    :class:`~.fifo.ChangeFIFO` does, in the reflector's thread); None: the consumer
    computes what it needs."""

    kind: str
    type: str
    object: dict[str, Any] | None = None
    objects: list[dict[str, Any]] = field(default_factory=list)
    key: str | None = None
    digest: bytes | None = None


class ChangeSink(Protocol):
    """Where a reflector puts its changes (a :class:`~.fifo.ChangeFIFO` in the scheduler)."""

    def put(self, ch: Change) -> None: ...


class Reflector:
    """List+watch of one kind into a queue, in its own daemon thread."""

    def __init__(self, api: Api, kind: str, out: ChangeSink, *,
                 field_selector: str | None = None, namespace: str | None = None,
                 page_size: int = 500, watch_timeout: int = 300, max_backoff: float = 5.0,
                 transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 profiles: ThreadProfiles | None = None) -> None:
        self.api = api
        self.kind = kind
        self.resource = RESOURCES[kind]
        self.out = out
        self.field_selector = field_selector
        self.namespace = namespace
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self.transform = transform
        self.profiles = profiles  # each thread's CPU profile (--profile-dir), or None
        self.resource_version = ""
        self.lists = 0  # how many full lists were done (re-lists after 410 count too)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._synced = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        target = self.profiles.thread(self.run) if self.profiles else self.run
        self._thread = threading.Thread(target=target, name=f"reflector-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        backoff = 0.2
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.list_once()
                    need_list = False
                self.watch_once()
                backoff = 0.2
            except ApiError as e:
                if e.gone:
                    log.info("%s: resourceVersion %s is gone; listing again", self.kind,
                             self.resource_version)
                    need_list = True
                    continue
                log.warning("%s: %s; retrying in %.1fs", self.kind, e, backoff)
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, self.max_backoff)
            except Exception as e:  # a bug or a malformed stream: log, back off, list again
                log.exception("%s: reflector failed: %s", self.kind, e)
                need_list = True
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, self.max_backoff)

    def _query(self) -> dict[str, str]:
        q: dict[str, str] = {}
        if self.field_selector:
            q["fieldSelector"] = self.field_selector
        return q

    def list_once(self) -> None:
        """A paginated list, delivered as one REPLACE change."""
        items: list[dict[str, Any]] = []
        version = ""
        for page in list_pages(self.api, self.kind, self._query(),
                               namespace=self.namespace, page_size=self.page_size):
            items.extend(self._object(it) for it in page.items)
            version = page.resource_version
        self.resource_version = version
        self.lists += 1
        self.out.put(Change(self.kind, REPLACE, objects=items))
        if not self._synced:
            self._synced = True
            self.out.put(Change(self.kind, SYNCED))

    def watch_once(self) -> None:
        """One watch from the last version until the server ends it (or 410 Gone)."""
        q = {**self._query(), "resourceVersion": self.resource_version,
             "allowWatchBookmarks": "true", "timeoutSeconds": str(self.watch_timeout)}
        path = self.resource.collection(self.namespace)
        for ev in self.api.watch(path, q, float(self.watch_timeout)):
            if self._stop.is_set():
                return
            self.handle(ev)
            if self.profiles is not None:
                self.profiles.tick()

    def handle(self, ev: Mapping[str, Any]) -> None:
        """One watch event: bookmarks move the version; ERROR raises (410 lists again)."""
        typ = ev.get("type")
        obj = ev.get("object") or {}
        if typ == "ERROR":
            code = int(obj.get("code", 0) or 0)
            raise ApiError(code or 500, str(obj.get("reason", "")), str(obj.get("message", "")), obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        if typ == "BOOKMARK":
            return
        if typ in (ADDED, MODIFIED, DELETED):
            self.out.put(Change(self.kind, str(typ), object=self._object(obj)))

    def _object(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = as_informed(obj, self.kind)
        return obj if self.transform is None else self.transform(obj)


@dataclass(frozen=True)
class Page:
    """One page of a list: its items, the list's resourceVersion, and how many items
    the server says are left after it (``remainingItemCount``, when it tells)."""

    items: list[dict[str, Any]]
    resource_version: str
    remaining: int | None


def list_pages(api: Api, kind: str, query: Mapping[str, str] | None = None, *,
               namespace: str | None = None, page_size: int = 500) -> Iterator[Page]:
    """A paginated list of one kind, page by page.

    Items come as :func:`as_informed` leaves them; a consumer that streams (``snapshot``)
    holds one page at a time."""
    cont = ""
    path = RESOURCES[kind].collection(namespace)
    version = ""
    while True:
        q = {**(query or {}), "limit": str(page_size)}
        if cont:
            q["continue"] = cont
        page = api.request("GET", path, query=q)
        meta = page.get("metadata") or {}
        version = str(meta.get("resourceVersion", "") or version)
        cont = str(meta.get("continue", "") or "")
        remaining = meta.get("remainingItemCount")
        yield Page([as_informed(it, kind) for it in page.get("items") or ()], version,
                   int(remaining) if isinstance(remaining, int) else None)
        if not cont:
            return


def as_informed(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """An object as the informers keep it. List items come without kind/apiVersion; the
    view wants them. ``managedFields``
    are dropped (as the kube-scheduler's informers drop them): nothing here reads them,
    and they are about a third of a pod's JSON, kept for every pod of the cluster."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    if obj.get("kind") != kind:
        obj = {**obj, "kind": kind}
    return obj
