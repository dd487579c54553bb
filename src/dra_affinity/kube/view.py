"""``KubeView``: the scheduler's :class:`ClusterView` over informer caches and API writes.

Reads come from caches filled by :mod:`.informer` changes, which only the loop
thread applies (:meth:`KubeView.apply`); models are built with
:func:`.convert.to_model`, and of each object only its model and its
resourceVersion are kept, not the server's JSON: every write below is a patch of
fields the models hold whole (``status.allocation``, ``status.reservedFor``,
``metadata.finalizers``) or a binding, built from the model or from a fresh read.
Pods and claims, the many, are kept packed at rest (their model's own JSON, see
:class:`_Entry`) and typed again when read; the most recently used are kept typed.

Writes follow kube-scheduler's DynamicResources plugin, each a minimal write of
the fields the scheduler owns, with the resourceVersion read as precondition:

* PreBind (:meth:`write_claim_status`): the ``resource.kubernetes.io/delete-protection``
  finalizer first, then a merge patch of ``status`` setting ``status.allocation``
  (when this cycle allocates) and appending the pod to ``status.reservedFor``.
  On a conflict the claim is read again and the write retried, unless it is now
  allocated (elsewhere): that is a :class:`WriteConflict`.
* Bind (:meth:`bind_pod`): a POST of the pod's ``binding`` subresource.
* Unreserve (:meth:`unreserve_claim`): what one attempt's PreBind stored is
  undone, and nothing another writer stored (see the method).

Every write leaves through :meth:`KubeView._write`, which refuses it unless this
replica may write at that moment (``may_write``: it leads, within its renew
deadline). API errors become the port's :class:`WriteConflict` (a lost race) or
:class:`WriteFailed` (refused, or no answer: then ``maybe_applied``).

An assume cache holds what this process wrote until the watch echoes it (the
informer's copy reaches that resourceVersion): the next cycle must see its own
writes, or it would allocate the same capacity twice. The echo is not converted
again, nor is an update of a pod or node whose content digest
(:func:`.convert.content_digest`) shows that only its resourceVersion moved (then no
listener is told) or only its status (:meth:`KubeView._upsert`).

Writes may be sent from binding threads while the loop thread schedules: the
caches (and the listeners they call) are touched only under :attr:`KubeView.lock`,
a reentrant lock the caller shares with its scheduling cycles; requests are sent
without it.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.keys import key_of
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.podclaims import PODS, claim_key, recorded_claim_name
from dra_affinity.api.resource import RESERVED_FOR_MAX, DeviceClass, ResourceClaim, ResourceSlice
from dra_affinity.scheduler.view import Listener, WriteConflict, WriteFailed

from . import protowire
from .api import MERGE_PATCH, RESOURCES, STRATEGIC_MERGE_PATCH, Api, ApiError
from .convert import (
    ConversionError,
    SharedParts,
    content_digest,
    object_key,
    to_metadata,
    to_model,
)
from .informer import ADDED, DELETED, MODIFIED, REPLACE, SYNCED, Change, as_informed
from .leader import fenced

log = logging.getLogger("dra_affinity.kube.view")
_T = TypeVar("_T")
_M = TypeVar("_M", bound=TypedObject)

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
WATCHED_KINDS = ("Namespace", "Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "Pod")
MAX_WRITE_ATTEMPTS = 5
MAX_CONDITION_MESSAGE = 32 * 1024
# The example taint of nodes whose pools declare sharing affinity (deploy/affinity-pools.yaml).
AFFINITY_POOLS_TAINT = "dra-affinity.io/affinity-pools"


def rv_int(obj: Mapping[str, Any] | None) -> int:
    """A resourceVersion as a number (etcd revisions): which of two versions is newer, and
    whether a resync brings a new one (-1: none)."""
    if not obj:
        return -1
    rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
    try:
        return int(rv)
    except (TypeError, ValueError):
        return -1


#: Kinds kept packed at rest (see :class:`_Entry`): every pod and claim of the cluster.
PACKED: dict[str, type[TypedObject]] = {"Pod": Pod, "ResourceClaim": ResourceClaim}
#: Kinds whose model keeps ``status`` as the server sent it (a plain mapping): an update
#: of the status alone is the model with that status, not a conversion.
STATUS_AS_SENT = frozenset({"Pod", "Node"})
#: How many packed objects are also kept typed, the most recently used (an attempt
#: reads its pod and claims several times; a binding reads them again).
TYPED_RECENT = 64


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the view keeps of one object: its model, or for a pod or claim (:data:`PACKED`)
    the model's own JSON (``model_dump_json`` of the fields set: packed), and its
    resourceVersion (a number, :func:`rv_int`). Not the server's JSON: the writes are
    built from the model (see the module's docstring).

    A packed object is typed again (``model_validate_json``, in pydantic's core) when it
    is read: an equal model, with the same fields set. Typed, a pod or claim costs 5 to
    15 KB (every sub-object a model with a field per attribute); packed, about a tenth."""

    kept: TypedObject | str
    rv: int
    #: What the informer's object held besides its resourceVersion
    #: (:func:`~.convert.content_digest`): an update with the same digest changes nothing else.
    digest: bytes | None = None

    @property
    def model(self) -> TypedObject:
        """The model of an entry kept typed (of a kind not :data:`PACKED`)."""
        if isinstance(self.kept, str):
            raise TypeError("a packed entry is read through KubeView._typed")
        return self.kept


class LeadershipLost(WriteFailed):
    """A write refused before it was sent: this replica no longer leads (fencing)."""


class KubeView:
    """A :class:`~dra_affinity.scheduler.view.ClusterView` over a real API server."""

    def __init__(self, api: Api, *, on_problem: Callable[[str, str, str], None] | None = None,
                 tolerated_taints: Iterable[str] = (AFFINITY_POOLS_TAINT,),
                 may_write: Callable[[], bool] | None = None,
                 lock: AbstractContextManager[Any] | None = None) -> None:
        self.api = api
        # Guards the caches below (reentrant; see the module's docstring).
        self.lock: AbstractContextManager[Any] = lock if lock is not None else threading.RLock()
        # Whether this replica may write now (leader election's fence); None: always.
        self.may_write = may_write
        # Taints every pod of this scheduler tolerates (see node()).
        self.tolerated_taints = frozenset(tolerated_taints)
        self._node_views: dict[str, tuple[Node, Node]] = {}
        self._store: dict[str, dict[str, _Entry]] = {k: {} for k in WATCHED_KINDS}
        # (kind, key) -> (entry, its model): packed entries read or written last, typed;
        # under a lock of its own, so that a read never waits for a scheduling cycle.
        self._recent: OrderedDict[tuple[str, str], tuple[_Entry, TypedObject]] = OrderedDict()
        self._recent_lock = threading.Lock()
        # Claims' parts alike (specs from one template, allocations' configs): one model.
        self.shared = SharedParts()
        # The assume cache: key -> what this process wrote, until the informer catches up.
        self._assumed: dict[str, dict[str, _Entry]] = {"ResourceClaim": {}, "Pod": {}}
        self.listeners: list[Listener] = []
        self.synced: set[str] = set()
        self._nodes: list[str] | None = None
        self._slices: list[ResourceSlice] | None = None
        self._classes: dict[str, DeviceClass] | None = None
        self._namespaces: dict[str, Mapping[str, str]] | None = None

        # Pod key -> the PodScheduled=False (reason, message) last written, until the pod
        # leaves the cache (the informer's copy may not show the write yet).
        self._conditions: dict[str, tuple[str, str]] = {}
        self._dropped_seen: set[tuple[str, str]] = set()
        self._problems_seen: dict[str, str] = {}
        # Slice name -> why its sharingAffinity bridge could not be read (slice_problems()).
        self._slice_problems: dict[str, str] = {}
        # Called as on_problem(kind, key, message) for objects the scheduler cannot use.
        self.on_problem = on_problem
        self.pod_listeners: list[Callable[[Pod | None, Pod | None], None]] = []
        self.claim_created: list[Callable[[TypedObject], None]] = []

    # ================================================================== informer side
    def apply(self, change: Change) -> None:
        """Apply one informer change and tell listeners."""
        with self.lock:
            self._apply(change)

    def _apply(self, change: Change) -> None:
        kind = change.kind
        if kind not in self._store:
            return
        if change.type == SYNCED:
            self.synced.add(kind)
            return
        if change.type == REPLACE:
            seen: set[str] = set()
            for raw in change.objects:
                key = object_key(kind, raw)
                seen.add(key)
                self._upsert(kind, key, raw)
            for key in [k for k in self._store[kind] if k not in seen]:
                self._remove(kind, key)
            return
        if change.object is None:
            return
        key = change.key if change.key is not None else object_key(kind, change.object)
        if change.type in (ADDED, MODIFIED):
            self._upsert(kind, key, change.object, change.digest)
        elif change.type == DELETED:
            self._remove(kind, key)

    def has_synced(self, kinds: Iterable[str] = WATCHED_KINDS) -> bool:
        return all(k in self.synced for k in kinds)

    def _convert(self, kind: str, key: str, raw: dict[str, Any]) -> TypedObject | None:
        try:
            conv = to_model(kind, raw, self.shared)
        except ConversionError as e:
            self._problem(kind, key, f"ignored: {e}")
            return None
        for path in conv.dropped:
            if (kind, path) not in self._dropped_seen:
                self._dropped_seen.add((kind, path))
                log.debug("%s: field %s is not modelled and was dropped", kind, path)
        if conv.problem:
            self._problem(kind, key, conv.problem)
        else:
            self._problems_seen.pop(f"{kind}/{key}", None)
        if kind == "ResourceSlice":
            if conv.problem and conv.model is not None:
                self._slice_problems[key] = conv.problem
            else:
                self._slice_problems.pop(key, None)
        return conv.model

    def _problem(self, kind: str, key: str, message: str) -> None:
        """Report a problem once per object and message (not on every resync)."""
        if self._problems_seen.get(f"{kind}/{key}") == message:
            return
        self._problems_seen[f"{kind}/{key}"] = message
        log.warning("%s %s: %s", kind, key, message)
        if self.on_problem is not None:
            self.on_problem(kind, key, message)

    def _upsert(self, kind: str, key: str, raw: dict[str, Any],
                digest: bytes | None = None) -> None:
        cur = self._store[kind].get(key)
        rv = rv_int(raw)
        if cur is not None and rv >= 0 and cur.rv == rv:
            return  # a resync of an unchanged object (a resourceVersion names one content)
        assumed = self._assumed.get(kind, {}).get(key)
        echo: TypedObject | None = None
        if kind == "ResourceClaim" and assumed is not None and rv >= 0:
            if rv < assumed.rv:
                # A step before our own write (its finalizer, say): readers see our write
                # until the watch reaches it, and the event that does will be kept.
                return
            if rv == assumed.rv:
                echo = self._typed(kind, key, assumed)  # our write's answer: this content
        if digest is None:
            digest = content_digest(kind, raw)
        # What the informer held before, when nothing of ours stands in between.
        prev = cur.digest if cur is not None and echo is None and assumed is None else None
        if cur is not None and prev is not None and prev == digest:
            # Only the resourceVersion moved (what changed is what the informer drops:
            # managedFields, a bound pod's kubelet status): the stored version moves,
            # nothing a listener reads changed, so none is told.
            self._store[kind][key] = self._moved(kind, key, cur, raw, rv)
            return
        before = self._effective(kind, key)
        model: TypedObject | None
        status = raw.get("status")
        if echo is not None:
            model = echo
        elif kind in STATUS_AS_SENT and before is not None and prev is not None \
                and digest is not None and prev[:16] == digest[:16] and isinstance(status, dict):
            # Only the status moved, which the model keeps as sent: no conversion.
            version = (raw.get("metadata") or {}).get("resourceVersion")
            model = _at_version(before, version).model_copy(update={"status": dict(status)})
        else:
            model = self._convert(kind, key, raw)
        if model is None:
            self._store[kind].pop(key, None)
        else:
            self._store[kind][key] = self._entry(kind, key, model, rv, digest)
        if assumed is not None and self._caught_up(kind, model, rv, assumed):
            del self._assumed[kind][key]  # the watch caught up with our write
            assumed = None
        self._changed(kind, before, model if assumed is None else self._effective(kind, key))

    def _moved(self, kind: str, key: str, cur: _Entry, raw: Mapping[str, Any], rv: int) -> _Entry:
        """``cur`` at the resourceVersion of ``raw``, an object of the same content
        otherwise: the model's ``metadata.resourceVersion`` moves too, so a reader sees
        the version the server holds."""
        version = (raw.get("metadata") or {}).get("resourceVersion")
        kept = cur.kept
        if not isinstance(kept, str):
            return _Entry(_at_version(kept, version), rv, cur.digest)
        data = json.loads(kept)
        data.setdefault("metadata", {})["resourceVersion"] = version
        moved = _Entry(json.dumps(data, separators=(",", ":"), ensure_ascii=False), rv, cur.digest)
        with self._recent_lock:
            hit = self._recent.get((kind, key))
            if hit is not None and hit[0] is cur:
                self._recent[(kind, key)] = (moved, _at_version(hit[1], version))
        return moved

    def _remove(self, kind: str, key: str) -> None:
        before = self._effective(kind, key)
        self._store[kind].pop(key, None)
        self._assumed.get(kind, {}).pop(key, None)
        self._problems_seen.pop(f"{kind}/{key}", None)
        if kind == "ResourceSlice":
            self._slice_problems.pop(key, None)
        if kind == "Pod":
            self._conditions.pop(key, None)
        self._changed(kind, before, None)

    @staticmethod
    def _caught_up(kind: str, model: TypedObject | None, rv: int, assumed: _Entry) -> bool:
        """Claims: the informer holds our write or a later one (resourceVersions are etcd
        revisions). Pods: the informer shows the binding (any other update of the pod,
        a late status patch say, must not make a bound pod look pending again)."""
        if kind == "Pod":
            return isinstance(model, Pod) and bool(model.spec.node_name)
        return rv >= assumed.rv

    def _effective_entry(self, kind: str, key: str) -> _Entry | None:
        cur = self._store[kind].get(key)
        assumed = self._assumed.get(kind, {}).get(key)
        if assumed is not None and (cur is None or kind == "Pod" or assumed.rv > cur.rv):
            return assumed
        return cur

    def _effective(self, kind: str, key: str) -> TypedObject | None:
        e = self._effective_entry(kind, key)
        return self._typed(kind, key, e) if e is not None else None

    def _entry(self, kind: str, key: str, model: TypedObject, rv: int,
               digest: bytes | None = None) -> _Entry:
        """The store's entry for a model just converted: packed for a pod or claim, which
        is then among the recently used (its listeners and the next cycle read it)."""
        if kind not in PACKED:
            return _Entry(model, rv, digest)
        e = _Entry(model.model_dump_json(by_alias=True, exclude_unset=True), rv, digest)
        self._remember(kind, key, e, model)
        return e

    def _typed(self, kind: str, key: str, e: _Entry) -> TypedObject:
        """An entry's model: as kept, or typed again from its packed form."""
        kept = e.kept
        if not isinstance(kept, str):
            return kept
        with self._recent_lock:
            hit = self._recent.get((kind, key))
            if hit is not None and hit[0] is e:
                self._recent.move_to_end((kind, key))
                return hit[1]
        model = PACKED[kind].model_validate_json(kept)
        self._remember(kind, key, e, model)
        return model

    def _remember(self, kind: str, key: str, e: _Entry, model: TypedObject) -> None:
        with self._recent_lock:
            recent = self._recent
            recent[(kind, key)] = (e, model)
            recent.move_to_end((kind, key))
            while len(recent) > TYPED_RECENT:
                recent.popitem(last=False)

    def _changed(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None:
        if old is new:
            return
        if kind == "Node":
            self._nodes = None
            gone = old if new is None else None
            if gone is not None:
                self._node_views.pop(gone.name, None)
        elif kind == "ResourceSlice":
            self._slices = None
        elif kind == "DeviceClass":
            self._classes = None
        elif kind == "Namespace":
            self._namespaces = None
        if kind == "Pod":
            for fn in self.pod_listeners:
                fn(old if isinstance(old, Pod) else None, new if isinstance(new, Pod) else None)
        if kind == "ResourceClaim" and old is None and new is not None:
            for created in self.claim_created:
                created(new)
        for li in list(self.listeners):
            li.on_change(kind, old, new)

    # ================================================================== listers
    def nodes(self) -> Sequence[str]:
        """Every node, by name (a stable order across restarts). Cordoned and tainted
        nodes are offered too: the scheduler's node filters reject them with a reason."""
        if self._nodes is None:
            self._nodes = sorted(k for k, e in self._store["Node"].items() if isinstance(e.model, Node))
        return self._nodes

    def node_count(self) -> int:
        """All nodes (for logs)."""
        return len(self._store["Node"])

    def node(self, name: str) -> Node | None:
        """The Node, without the taints this scheduler's pods tolerate implicitly
        (``--tolerated-taint``: the taint that keeps the stock scheduler off affinity
        pools must not keep this scheduler's own pods off them)."""
        e = self._store["Node"].get(name)
        if e is None or not isinstance(e.model, Node):
            return None
        node = e.model
        if not any(t.get("key") in self.tolerated_taints for t in node.spec.taints):
            return node
        seen = self._node_views.get(name)
        if seen is not None and seen[0] is node:
            return seen[1]
        kept = [t for t in node.spec.taints if t.get("key") not in self.tolerated_taints]
        view = node.model_copy(update={"spec": node.spec.model_copy(update={"taints": kept})})
        self._node_views[name] = (node, view)
        return view

    def node_labels(self, name: str) -> Mapping[str, str]:
        e = self._store["Node"].get(name)
        labels = dict(e.model.metadata.labels) if e is not None else {}
        labels.setdefault("kubernetes.io/hostname", name)
        return labels

    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        if self._namespaces is None:
            self._namespaces = {k: e.model.metadata.labels for k, e in self._store["Namespace"].items()}
        return self._namespaces

    def slices(self) -> Sequence[ResourceSlice]:
        if self._slices is None:
            self._slices = [e.model for _, e in sorted(self._store["ResourceSlice"].items())
                            if isinstance(e.model, ResourceSlice)]
        return self._slices


    def slice_problems(self) -> Mapping[str, str]:
        """Slices whose bridge annotation (or its agreement with the field) failed, with why."""
        return self._slice_problems
    def classes(self) -> Mapping[str, DeviceClass]:
        if self._classes is None:
            self._classes = {k: e.model for k, e in sorted(self._store["DeviceClass"].items())
                             if isinstance(e.model, DeviceClass)}
        return self._classes

    def claims(self) -> Sequence[ResourceClaim]:
        """Every claim, by key, each typed when it is read (:class:`Typed`): a caller
        that goes through them once never holds them all typed at once."""
        keys = sorted(set(self._store["ResourceClaim"]) | set(self._assumed["ResourceClaim"]))
        return Typed(keys, self.claim)

    def claim_count(self) -> int:
        """Claims in the cache (for logs)."""
        return len(set(self._store["ResourceClaim"]) | set(self._assumed["ResourceClaim"]))

    def claim(self, key: str) -> ResourceClaim | None:
        m = self._effective("ResourceClaim", key)
        return m if isinstance(m, ResourceClaim) else None

    def pod(self, key: str) -> Pod | None:
        m = self._effective("Pod", key)
        return m if isinstance(m, Pod) else None

    def pods(self) -> Sequence[Pod]:
        """Every pod, by key, each typed when it is read (:class:`Typed`)."""
        keys = sorted(set(self._store["Pod"]) | set(self._assumed["Pod"]))
        return Typed(keys, self.pod)

    # ================================================================== notification
    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)

    def _assume(self, kind: str, key: str, raw: dict[str, Any]) -> TypedObject | None:
        """Record our own write (the object as the server answered it) so readers see it
        before the watch does."""
        with self.lock:
            rv = rv_int(raw)
            # The view may hold that very version already (the watch was quicker than
            # the answer): a resourceVersion names one content, so it is not converted.
            model = self._at_version(kind, key, rv)
            if model is None:
                # As the informer will have it, so that its echo reads the same.
                model = self._convert(kind, key, as_informed(raw, kind))
            if model is not None:
                self._assume_model(kind, key, model, rv)
            return model

    def _at_version(self, kind: str, key: str, rv: int) -> TypedObject | None:
        """The model the view holds of exactly the server's version ``rv``, if any: the
        informer's, or a claim write's answer (a pod's assumed binding is not the
        server's content at the version it carries)."""
        if rv < 0:
            return None
        for e in (self._store[kind].get(key),
                  self._assumed.get(kind, {}).get(key) if kind == "ResourceClaim" else None):
            if e is not None and e.rv == rv:
                return self._typed(kind, key, e)
        return None

    def _assume_metadata(self, key: str, base: ResourceClaim, stored: dict[str, Any]) -> None:
        """Record a write of a claim's metadata alone (its finalizers) made on ``base``'s
        resourceVersion: the write was a compare-and-swap on that version, a claim's spec
        is immutable and an update of the claim leaves its status alone, so the server
        holds ``base`` with the answer's metadata. Only the metadata is converted (the
        watch's event of this version is then the write's echo, not converted either)."""
        rv = rv_int(stored)
        with self.lock:
            held = [e.rv for e in (self._store["ResourceClaim"].get(key),
                                   self._assumed["ResourceClaim"].get(key)) if e is not None]
            if rv < 0 or any(h >= rv for h in held):
                return  # the view holds this version or a later one already
            try:
                meta = to_metadata("ResourceClaim", as_informed(stored, "ResourceClaim"))
            except ConversionError:
                return  # the watch brings it, converted whole
            self._assume_model("ResourceClaim", key, base.model_copy(update={"metadata": meta}),
                               rv)

    def _assume_model(self, kind: str, key: str, model: TypedObject, rv: int) -> None:
        with self.lock:
            before = self._effective(kind, key)
            cur = self._store[kind].get(key)
            if cur is None or kind == "Pod" or rv > cur.rv:
                self._assumed[kind][key] = _Entry(model, rv)  # typed: few, and soon gone
            self._changed(kind, before, self._effective(kind, key))

    def missing_claims(self, pod: Pod) -> list[str]:
        """The pod's claims not in the cache yet (a template's claim not created yet)."""
        out = []
        for prc in pod.spec.resource_claims:
            if prc.resource_claim_template_name and recorded_claim_name(pod, prc) is None:
                out.append(f"{pod.namespace}/<{prc.name} from {prc.resource_claim_template_name}>")
                continue
            key = claim_key(pod, prc)
            if self.claim(key) is None:
                out.append(key)
        return out

    # ================================================================== every write
    def _write(self, method: str, path: str, *, body: Any, content_type: str = "application/json",
               what: str) -> Any:
        """Every write leaves through here: refused unless this replica may write now
        (it holds the Lease within its renew deadline), checked just before the request."""
        if not fenced(self.may_write, method, path):
            raise LeadershipLost(f"{what}: not written, this replica no longer leads")
        if isinstance(body, bytes):
            return json.loads(self.api.request_bytes(method, path, body=body,
                                                     content_type=content_type))
        return self.api.request(method, path, body=body, content_type=content_type)

    # ================================================================== PreBind
    def write_claim_status(self, claim: ResourceClaim) -> ResourceClaim:
        key = key_of(claim)
        with self.lock:
            cached = self.claim(key)
        if cached is None:
            raise WriteConflict(f"claim {key} was deleted")
        raw = _written_fields(cached)
        have = {r.uid for r in cached.status.reserved_for if r.uid}
        added = [r for r in claim.status.reserved_for if r.uid not in have]
        allocating = claim.status.allocation is not None and cached.status.allocation is None
        want = claim.status.allocation.to_dict() if claim.status.allocation is not None else None
        seen = cached.status.allocation.to_dict() if cached.status.allocation is not None else None
        touched = False  # something of this call's may be stored (the finalizer, say)
        base: ResourceClaim | None = cached  # the model of what ``raw`` holds
        for attempt in range(MAX_WRITE_ATTEMPTS):
            if attempt:
                read = self._read("ResourceClaim", claim.name, claim.namespace,
                                  maybe_applied=touched)
                if read is None:
                    raise WriteConflict(f"claim {key} was deleted")
                raw = read
                got = self._assume("ResourceClaim", key, raw)  # newer than the informer's copy
                base = got if isinstance(got, ResourceClaim) else None
            status = raw.get("status") or {}
            cur_alloc = status.get("allocation")
            if allocating and cur_alloc is not None:
                raise WriteConflict(f"claim {key} was allocated elsewhere since Filter",
                                    maybe_applied=touched)
            if not allocating and not _same_allocation(cur_alloc, seen):
                raise WriteConflict(f"claim {key} was deallocated or reallocated since Filter",
                                    maybe_applied=touched)
            if (raw.get("metadata") or {}).get("deletionTimestamp"):
                raise WriteConflict(f"claim {key} is being deleted", maybe_applied=touched)
            reserved = list(status.get("reservedFor") or [])
            uids = {r.get("uid") for r in reserved}
            reserved += [r.to_dict() for r in added if r.uid not in uids]
            if len(reserved) > RESERVED_FOR_MAX:
                raise WriteConflict(f"claim {key} is already reserved for "
                                    f"{len(reserved) - 1} consumers", maybe_applied=touched)
            try:
                if want is not None and DELETE_PROTECTION not in _finalizers(raw):
                    raw = self._set_finalizers(raw, [*_finalizers(raw), DELETE_PROTECTION])
                    touched = True
                    if base is not None:
                        self._assume_metadata(key, base, raw)
                patch: dict[str, Any] = {"reservedFor": reserved}
                if allocating:
                    patch["allocation"] = want
                stored = self._patch_status(raw, patch)
            except ApiError as e:
                if e.conflict:
                    continue
                if e.not_found:
                    raise WriteConflict(f"claim {key} was deleted") from None
                raise WriteFailed(f"writing claim {key}: {e}",
                                  maybe_applied=touched or _answer_lost(e)) from None
            model = self._assume("ResourceClaim", key, stored)
            if not isinstance(model, ResourceClaim):
                raise WriteFailed(f"claim {key} as stored cannot be read back", maybe_applied=True)
            return model
        raise WriteConflict(f"claim {key}: still conflicting after {MAX_WRITE_ATTEMPTS} attempts",
                            maybe_applied=touched)

    def _set_finalizers(self, raw: Mapping[str, Any], finalizers: list[str]) -> dict[str, Any]:
        """The claim's finalizers, on the resourceVersion read (409 when it changed).

        One merge patch of ``metadata.finalizers`` (upstream sends one update). The
        server refuses (422) every JSON-encoded write of a claim whose creator sent its
        opaque parameters with whitespace; such a claim is then read and written back as
        protobuf with only ``metadata.finalizers`` edited (:mod:`.protowire`)."""
        meta = raw.get("metadata") or {}
        path = RESOURCES["ResourceClaim"].item(meta.get("name", ""), meta.get("namespace"))
        what = f"finalizers of claim {meta.get('name')}"
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                             "finalizers": finalizers}}
        try:
            stored: dict[str, Any] = self._write("PATCH", path, body=body,
                                                 content_type=MERGE_PATCH, what=what)
        except ApiError as e:
            if e.status != 422:
                raise
            current = self.api.request_bytes("GET", path, accept=protowire.CONTENT_TYPE)
            if protowire.resource_version(current) != meta.get("resourceVersion"):
                raise ApiError(409, "Conflict", "the claim changed since it was read") from None
            stored = self._write("PUT", path, body=protowire.with_finalizers(current, finalizers),
                                 content_type=protowire.CONTENT_TYPE, what=what)
        stored.setdefault("kind", "ResourceClaim")
        return stored

    def _patch_status(self, raw: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        """A merge patch of ``status`` carrying the resourceVersion read, so it is a
        compare-and-swap (409 when the claim changed). Only status is sent: never the
        spec, which the server compares byte for byte with what it stores."""
        meta = raw.get("metadata") or {}
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": dict(status)}
        stored: dict[str, Any] = self._write(
            "PATCH", RESOURCES["ResourceClaim"].item(meta.get("name", ""), meta.get("namespace"),
                                                     "status"),
            body=body, content_type=MERGE_PATCH, what=f"status of claim {meta.get('name')}")
        stored.setdefault("kind", "ResourceClaim")
        return stored

    def _read(self, kind: str, name: str, namespace: str | None, *,
              maybe_applied: bool = False) -> dict[str, Any] | None:
        """A quorum read of one object (None: not found); WriteFailed when unreachable."""
        res = RESOURCES[kind]
        try:
            got: dict[str, Any] = self.api.request("GET", res.item(name, namespace))
        except ApiError as e:
            if e.not_found:
                return None
            raise WriteFailed(f"reading {kind} {namespace}/{name}: {e}",
                              maybe_applied=maybe_applied) from None
        got.setdefault("kind", kind)
        return got

    def read_claim(self, key: str) -> ResourceClaim | None:
        ns, name = key.split("/", 1)
        raw = self._read("ResourceClaim", name, ns)
        if raw is None:
            return None
        model = self._assume("ResourceClaim", key, raw)
        return model if isinstance(model, ResourceClaim) else None

    # ================================================================== Bind
    def bind_pod(self, pod: Pod, node: str) -> None:
        """POST ``pods/binding`` with the pod's UID as precondition. A lost answer or a
        409 is settled by reading the pod: bound to this node is success (an earlier
        answer of ours was lost); unreadable, it may be bound (``maybe_applied``)."""
        key = key_of(pod)
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": pod.namespace,
                             **({"uid": pod.metadata.uid} if pod.metadata.uid else {})},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            self._write("POST", RESOURCES["Pod"].item(pod.name, pod.namespace, "binding"),
                        body=body, what=f"binding of pod {key}")
        except ApiError as e:
            if e.not_found:
                raise WriteConflict(f"pod {key} was deleted") from None
            if not (e.conflict or _answer_lost(e)):
                raise WriteFailed(f"{e}") from None
            self._settle_binding(pod, node, e)
        with self.lock:
            cur = self._effective_entry("Pod", key)
            seen = self._typed("Pod", key, cur) if cur is not None else None
            base = seen if isinstance(seen, Pod) else pod
            bound = base.model_copy(update={"spec": base.spec.model_copy(update={"node_name": node})})
            self._assume_model("Pod", key, bound, cur.rv if cur is not None else -1)

    def _settle_binding(self, pod: Pod, node: str, e: ApiError) -> None:
        """After a binding that failed with a conflict or a lost answer: return when the
        pod is bound to ``node``; raise what the scheduler must know otherwise."""
        key = key_of(pod)
        try:
            cur = self._read("Pod", pod.name, pod.namespace)
        except WriteFailed as unread:
            raise WriteFailed(f"{e}; the pod cannot be read back ({unread})",
                              maybe_applied=True) from None
        if cur is None or (pod.metadata.uid and
                           (cur.get("metadata") or {}).get("uid") != pod.metadata.uid):
            raise WriteConflict(f"pod {key} was deleted") from None
        bound = (cur.get("spec") or {}).get("nodeName")
        if bound == node:
            return
        if bound:
            raise WriteConflict(f"pod {key} is already assigned to node {bound}") from None
        if e.conflict:
            raise WriteConflict(f"{e}") from None
        raise WriteFailed(f"{e}") from None

    # ================================================================== Unreserve
    def unreserve_claim(self, written: ResourceClaim, pod: Pod, *,
                        allocated: bool) -> ResourceClaim | None:
        """Read the claim; remove the pod's reservation (by UID); clear the allocation
        only when ``allocated`` and the server holds exactly ``written``'s with no other
        consumer; drop the delete-protection finalizer from a claim left unallocated.
        Each write on the resourceVersion read (a 409 reads again)."""
        key = key_of(written)
        mine = written.status.allocation.to_dict() if written.status.allocation is not None else None
        uid = pod.metadata.uid or ""
        for _ in range(MAX_WRITE_ATTEMPTS):
            raw = self._read("ResourceClaim", written.name, written.namespace, maybe_applied=True)
            if raw is None:
                return None
            status = raw.get("status") or {}
            before = list(status.get("reservedFor") or [])
            reserved = [r for r in before if not (r.get("resource") == PODS and r.get("uid") == uid)]
            patch: dict[str, Any] = {}
            if len(reserved) != len(before):
                patch["reservedFor"] = reserved or None
            alloc = status.get("allocation")
            if allocated and not reserved and alloc is not None and _same_allocation(alloc, mine):
                patch["allocation"] = None
                alloc = None
            try:
                if patch:
                    raw = self._patch_status(raw, patch)
                if alloc is None and DELETE_PROTECTION in _finalizers(raw):
                    raw = self._set_finalizers(
                        raw, [f for f in _finalizers(raw) if f != DELETE_PROTECTION])
            except ApiError as e:
                if e.conflict:
                    continue
                if e.not_found:
                    return None
                raise WriteFailed(f"unreserving claim {key}: {e}", maybe_applied=True) from None
            model = self._assume("ResourceClaim", key, raw)
            return model if isinstance(model, ResourceClaim) else None
        raise WriteFailed(f"unreserving claim {key}: still conflicting after "
                          f"{MAX_WRITE_ATTEMPTS} attempts", maybe_applied=True)

    # ================================================================== status
    def set_unschedulable(self, pod: Pod, reason: str, message: str) -> bool:
        """The pod's ``PodScheduled=False`` condition with the attempt's diagnostics, written
        only when its reason or message changes (as kube-scheduler's status update): a pod
        that stays unschedulable for the same reason costs no write per attempt. Returns
        whether it wrote."""
        key = key_of(pod)
        message = message[:MAX_CONDITION_MESSAGE]
        cur = pod_scheduled(pod.status)
        with self.lock:
            written = self._conditions.get(key)
        if (reason, message) in (written, (cur.get("reason"), cur.get("message"))
                                 if cur.get("status") == "False" else None):
            return False
        # The transition is when the status became False, not this attempt.
        since = cur.get("lastTransitionTime") if cur.get("status") == "False" else None
        cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastProbeTime": None, "lastTransitionTime": since or _now()}
        body = {"status": {"conditions": [cond]}}
        try:
            self._write("PATCH", RESOURCES["Pod"].item(pod.name, pod.namespace, "status"),
                        body=body, content_type=STRATEGIC_MERGE_PATCH,
                        what=f"PodScheduled of pod {pod.namespace}/{pod.name}")
        except (ApiError, LeadershipLost) as e:
            log.info("pod %s/%s: cannot set PodScheduled=False: %s", pod.namespace, pod.name, e)
            return False
        with self.lock:
            self._conditions[key] = (reason, message)
        return True


class Typed(Sequence[_T]):
    """Objects of the view by key, each read (typed) when it is taken: a sequence over
    every pod or claim of the cluster that never holds them all typed at once. The keys
    are those of when it was made; one whose object is gone since is skipped."""

    def __init__(self, keys: list[str], read: Callable[[str], _T | None]) -> None:
        self._keys = keys
        self._read = read

    def __iter__(self) -> Iterator[_T]:
        for k in self._keys:
            obj = self._read(k)
            if obj is not None:
                yield obj

    def __len__(self) -> int:
        return len(self._keys)

    @overload
    def __getitem__(self, i: int) -> _T: ...

    @overload
    def __getitem__(self, i: slice) -> list[_T]: ...

    def __getitem__(self, i: int | slice) -> _T | list[_T]:
        if isinstance(i, slice):
            return [o for o in (self._read(k) for k in self._keys[i]) if o is not None]
        obj = self._read(self._keys[i])
        if obj is None:
            raise IndexError(f"{self._keys[i]} is gone")
        return obj


def _at_version(model: _M, version: Any) -> _M:
    """The model with its ``metadata.resourceVersion`` set to ``version``."""
    meta = model.metadata.model_copy(update={"resource_version": version})
    return model.model_copy(update={"metadata": meta})


def pod_scheduled(status: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod's PodScheduled condition ({} when it has none)."""
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "PodScheduled":
            return c
    return {}


def _written_fields(claim: ResourceClaim) -> dict[str, Any]:
    """What PreBind's writes read of a cached claim, in the server's JSON form: its name,
    resourceVersion, finalizers and deletion, and its status (every field of which the
    model holds: the allocation and the ``reservedFor`` entries)."""
    meta = claim.metadata
    return {"metadata": {"name": meta.name, "namespace": meta.namespace,
                         "resourceVersion": meta.resource_version,
                         "finalizers": list(meta.finalizers),
                         "deletionTimestamp": meta.deletion_timestamp},
            "status": claim.status.to_dict()}


def _finalizers(raw: Mapping[str, Any]) -> list[str]:
    return list((raw.get("metadata") or {}).get("finalizers") or [])


def _answer_lost(e: ApiError) -> bool:
    """No answer, or a server error: the request may have been carried out."""
    return e.status == 0 or e.status >= 500


def _same_allocation(a: Any, b: Any) -> bool:
    """Two allocations (JSON) are the same when their device results are."""
    if a is None or b is None:
        return a is None and b is None

    def results(x: Any) -> list[tuple[Any, ...]]:
        rs = ((x or {}).get("devices") or {}).get("results") or []
        return sorted((r.get("request"), r.get("driver"), r.get("pool"), r.get("device"),
                       r.get("shareID")) for r in rs)

    return results(a) == results(b)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
