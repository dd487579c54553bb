"""An embedded, in-memory cluster: the API server and controllers the simulator needs.

Every write goes through the API server's write path
(:func:`~dra_affinity.validation.apiserver.admit`: a created pod's label keys merged,
the DRASharingAffinity gate strategy, validation) before it is stored, so a rejected object
changes nothing. Listeners (the scheduler) are told about every change, as
informers would tell them. Two controllers are folded in: the resourceclaim
controller (claims from templates for new pods; deallocation of claims that
no pod reserves any more) and the pod GC (a deleted pod's generated claims
are deleted).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.io import FieldError
from dra_affinity.api.keys import CLUSTER_SCOPED, key_of
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.podclaims import (
    claim_key,
    generated_claim_name,
    reserved_for_others,
)
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from dra_affinity.features import Features
from dra_affinity.scheduler.view import Listener, WriteConflict
from dra_affinity.sim.store import DEFAULT_HOT, ObjectStore
from dra_affinity.validation.apiserver import admit
from dra_affinity.validation.sharing_affinity import (
    EffectiveSlices,
    SliceExtractors,
    effective_slices,
)

T = TypeVar("T", bound=TypedObject)

KIND_ORDER = ("Namespace", "Node", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim",
              "Pod")
#: Kinds that a large cluster holds by the hundred thousand and that are kept compact at
#: rest (see :mod:`dra_affinity.sim.store`); the others are few and always typed.
COMPACT_KINDS = frozenset({"Pod", "ResourceClaim"})


def make_uid(kind: str, key: str, generation: int = 0) -> str:
    """Deterministic UIDs keep runs byte-for-byte reproducible."""
    h = hashlib.sha256(f"{kind}/{key}/{generation}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


@dataclass
class WriteResult:
    """Outcome of one write through the API server."""

    applied: bool
    object: TypedObject | None = None
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    created: list[TypedObject] = field(default_factory=list)  # side effects (generated claims)

    @property
    def result(self) -> str:
        return "Applied" if self.applied else "Rejected"


class Cluster:
    """Object store keyed by kind and namespace/name, in insertion order.

    Implements :class:`~dra_affinity.scheduler.view.ClusterView` for the scheduler."""

    def __init__(self, features: Features | None = None, *, hot: int | None = DEFAULT_HOT) -> None:
        """``hot``: how many pods and how many claims are kept typed; the rest are kept
        compact until read (``None``: all typed). Reads return equal objects either way."""
        # The API server reads its own gates of these (drop-on-disable of new fields).
        self.features = features or Features()
        self._objects: dict[str, ObjectStore[TypedObject]] = {
            k: ObjectStore(hot if k in COMPACT_KINDS else None) for k in KIND_ORDER}
        self.node_order: list[str] = []  # first appearance, as SCENARIO.md orders nodes
        self._node_set: set[str] = set()
        self.listeners: list[Listener] = []
        self._resource_version = 0
        self.generation = 0  # bumps on every change; lets readers cache views
        # The slices as the scheduler reads them, at a generation; per slice, the last reading.
        self._slices_read: tuple[int, EffectiveSlices] | None = None
        self._slices_memo: dict[str, tuple[ResourceSlice, SliceExtractors]] = {}
        self._classes: dict[str, DeviceClass] | None = None  # see classes()

    # ------------------------------------------------------------------ reads
    def get(self, kind: str, key: str) -> TypedObject | None:
        return self._objects[kind].get(key)

    def list_objects(self, kind: str) -> list[TypedObject]:
        return list(self._objects[kind].values())

    def items(self, kind: str) -> Iterator[tuple[str, TypedObject]]:
        return self._objects[kind].items()

    def count(self, kind: str) -> int:
        """How many objects of ``kind`` are stored."""
        return len(self._objects[kind])

    def slices(self) -> list[ResourceSlice]:
        """The slices as the scheduler reads them: ``spec.sharingAffinity`` from the field
        or the bridge annotation (:func:`~dra_affinity.validation.sharing_affinity.slice_extractors`)."""
        return self._effective_slices().slices

    def claims(self) -> list[ResourceClaim]:
        return [c for c in self._objects["ResourceClaim"].values() if isinstance(c, ResourceClaim)]

    def classes(self) -> Mapping[str, DeviceClass]:
        """The DeviceClasses by name: one mapping until a class changes (every attempt
        reads it; a cluster has a handful of classes, and they seldom change)."""
        if self._classes is None:
            self._classes = {k: v for k, v in self._objects["DeviceClass"].items()
                             if isinstance(v, DeviceClass)}
        return self._classes

    def pod(self, key: str) -> Pod | None:
        p = self._objects["Pod"].get(key)
        return p if isinstance(p, Pod) else None

    def claim(self, key: str) -> ResourceClaim | None:
        c = self._objects["ResourceClaim"].get(key)
        return c if isinstance(c, ResourceClaim) else None

    def nodes(self) -> list[str]:
        """Nodes in order of first appearance (SCENARIO.md's node order)."""
        return self.node_order

    def node(self, name: str) -> Node | None:
        n = self._objects["Node"].get(name)
        return n if isinstance(n, Node) else None

    def pods(self) -> list[Pod]:
        return [p for p in self._objects["Pod"].values() if isinstance(p, Pod)]

    def namespaces(self) -> dict[str, dict[str, str]]:
        return {k: dict(v.metadata.labels) for k, v in self._objects["Namespace"].items()}

    def slice_problems(self) -> dict[str, str]:
        """Slices whose bridge annotation does not validate (admission refuses a bad field,
        but, as on a real API server, not a bad annotation)."""
        return self._effective_slices().problems

    def _effective_slices(self) -> EffectiveSlices:
        if self._slices_read is None or self._slices_read[0] != self.generation:
            stored = [s for s in self._objects["ResourceSlice"].values() if isinstance(s, ResourceSlice)]
            read, self._slices_memo = effective_slices(stored, self._slices_memo)
            self._slices_read = (self.generation, read)
        return self._slices_read[1]

    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)

    def node_labels(self, name: str) -> dict[str, str]:
        n = self._objects["Node"].get(name)
        labels = dict(n.metadata.labels) if n is not None else {}
        # Every kubelet sets this label; nodes inferred from slices get it too.
        labels.setdefault("kubernetes.io/hostname", name)
        return labels

    # ------------------------------------------------------------------ writes
    def _stamp(self, obj: T, old: TypedObject | None, key: str) -> T:
        """A shallow copy of ``obj`` (stored under ``key``) with new metadata: the fields
        the API server sets (namespace default, uid, resourceVersion, generation). Its
        other parts are shared with ``obj`` (stored objects are never mutated)."""
        self._resource_version += 1
        m = obj.metadata
        if old is None:
            uid = m.uid or make_uid(obj.kind, key)
            gen = 1
        else:
            uid = old.metadata.uid or m.uid or make_uid(obj.kind, key)
            gen = old.metadata.generation or 1
            if _spec_changed(old, obj):
                gen += 1
        stamped: dict[str, Any] = {"uid": uid, "resource_version": str(self._resource_version),
                                   "generation": gen}
        if not m.namespace and obj.kind not in CLUSTER_SCOPED:
            stamped["namespace"] = "default"
        return obj.model_copy(update={"metadata": m.model_copy(update=stamped)})

    def _store(self, obj: TypedObject, old: TypedObject | None, key: str) -> None:
        self._objects[obj.kind].put(key, obj)
        self.generation += 1
        if obj.kind == "DeviceClass":
            self._classes = None
        self._note_nodes(obj)
        for li in self.listeners:
            li.on_change(obj.kind, old, obj)

    def _note_nodes(self, obj: TypedObject) -> None:
        name: str | None = None
        if isinstance(obj, Node):
            name = obj.metadata.name
        elif isinstance(obj, ResourceSlice):
            name = obj.spec.node_name
        if name and name not in self._node_set:
            self._node_set.add(name)
            self.node_order.append(name)

    def apply(self, obj: TypedObject, *, owned: bool = False) -> WriteResult:
        """Create or update through admission; a rejected write changes nothing.

        ``owned``: the caller hands ``obj`` over, as an API server's decoder hands over
        what it decoded: neither it nor any of its parts is mutated again (parts may be
        shared with objects the caller keeps, which it must not mutate either). Then
        admission stores it without a defensive deep copy: the stored object shares its
        parts, with a new ``metadata`` (uid, resourceVersion, ...). By default the stored
        object is a deep copy, and the caller may do what it likes with ``obj`` afterwards."""
        if obj.kind not in self._objects:
            return WriteResult(False, None, [FieldError("kind", f"unsupported kind {obj.kind!r}")])
        key = key_of(obj)
        old = self._objects[obj.kind].get(key)
        res = admit(obj, old, features=self.features, copy=not owned)
        if res.errors or res.object is None:
            return WriteResult(False, None, list(res.errors), list(res.warnings))
        admitted = res.object
        assert isinstance(admitted, TypedObject)
        stored = self._stamp(admitted, old, key)
        # Status is written by controllers and the scheduler, not by apply, except
        # for objects given already allocated (the file's initial state).
        self._store(stored, old, key)
        out = WriteResult(True, stored, [], list(res.warnings))
        if isinstance(stored, Pod) and old is None:
            out.created.extend(self._create_template_claims(stored, out))
        return out

    def _create_template_claims(self, pod: Pod, out: WriteResult) -> list[TypedObject]:
        created: list[TypedObject] = []
        ns = pod.metadata.namespace or "default"
        for prc in pod.spec.resource_claims:
            if not prc.resource_claim_template_name:
                continue
            tmpl = self._objects["ResourceClaimTemplate"].get(f"{ns}/{prc.resource_claim_template_name}")
            if not isinstance(tmpl, ResourceClaimTemplate):
                continue  # the pod stays pending until the template exists
            name = generated_claim_name(pod, prc)
            if f"{ns}/{name}" in self._objects["ResourceClaim"]:
                continue
            claim = ResourceClaim.model_validate({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": dict(tmpl.spec.metadata.labels),
                    "annotations": {**tmpl.spec.metadata.annotations,
                                    "resource.kubernetes.io/pod-claim-name": prc.name},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name,
                                         "uid": pod.metadata.uid or "", "controller": True}],
                },
                "spec": tmpl.spec.spec.to_dict(),
            })
            r = self.apply(claim)
            if r.applied and r.object is not None:
                created.append(r.object)
            else:
                out.warnings.extend(e.render() for e in r.errors)
        return created

    def sync_template_claims(self, pod_key: str) -> None:
        """The resourceclaim controller's pass for one pod: its template claims exist
        before the scheduler looks at it (also when the template came after the pod)."""
        pod = self.pod(pod_key)
        if pod is not None and not pod.spec.node_name:
            self._create_template_claims(pod, WriteResult(True))

    def replace(self, obj: TypedObject) -> TypedObject:
        """Controller/scheduler write of status (no admission: status subresource).

        Copy on write: the stored object is a shallow copy of ``obj`` with new metadata
        (its resourceVersion), so nothing the caller holds is changed, and sub-objects
        are shared with ``obj`` (stored objects are never mutated)."""
        key = key_of(obj)
        return self._replace(key, self._objects[obj.kind].get(key), obj, {})

    def _replace(self, key: str, old: TypedObject | None, obj: T, update: dict[str, Any]) -> T:
        """:meth:`replace` of ``obj`` with the fields in ``update`` (a copy's, in one)
        over ``old``, the object stored under ``key``."""
        self._resource_version += 1
        meta = obj.metadata.model_copy(update={"resource_version": str(self._resource_version)})
        stored = obj.model_copy(update={**update, "metadata": meta})
        self._store(stored, old, key)
        return stored

    def delete(self, kind: str, key: str) -> TypedObject | None:
        store = self._objects.get(kind)
        old = store.pop(key) if store is not None else None
        if old is None:
            return None
        self.generation += 1
        if kind == "DeviceClass":
            self._classes = None
        for li in self.listeners:
            li.on_change(kind, old, None)
        if isinstance(old, Pod):
            self._after_pod_deleted(old)
        return old

    def _after_pod_deleted(self, pod: Pod) -> None:
        for prc in pod.spec.resource_claims:
            key = claim_key(pod, prc)
            claim = self.claim(key)
            if claim is None:
                continue
            reserved = reserved_for_others(claim, pod)
            owned = any(o.kind == "Pod" and o.uid == pod.metadata.uid
                        for o in claim.metadata.owner_references)
            if owned and prc.resource_claim_template_name:
                self.delete("ResourceClaim", key)
                continue
            drained: dict[str, Any] = {} if reserved else {"allocation": None}
            status = claim.status.model_copy(update={"reserved_for": reserved, **drained})
            self.replace(claim.model_copy(update={"status": status}))

    # ------------------------------------------------------------------ scheduler writes
    def write_claim_status(self, claim: ResourceClaim) -> ResourceClaim:
        """The scheduler's status write, with the API server's precondition: the claim
        must still exist and, when the write names a resourceVersion, still be at it
        (else :class:`WriteConflict`, and nothing is written)."""
        key = key_of(claim)
        current = self._objects["ResourceClaim"].get(key)
        if current is None:
            raise WriteConflict(f"claim {key} was deleted")
        rv = claim.metadata.resource_version
        if rv is not None and rv != current.metadata.resource_version:
            raise WriteConflict(f"claim {key} changed since it was read (resourceVersion {rv}, "
                                f"now {current.metadata.resource_version})")
        return self._replace(key, current, claim, {})

    def bind_pod(self, pod: Pod, node: str) -> None:
        """``pods/binding``: refused (a conflict) for a pod that is gone, is another pod
        of the same name, or is bound already."""
        key = key_of(pod)
        current = self.pod(key)
        if current is None or (pod.metadata.uid and current.metadata.uid != pod.metadata.uid):
            raise WriteConflict(f"pod {key} was deleted")
        if current.spec.node_name:
            raise WriteConflict(f"pod {key} is already assigned to node {current.spec.node_name}")
        self._replace(key, current, current,
                      {"spec": current.spec.model_copy(update={"node_name": node})})

    def unreserve_claim(self, written: ResourceClaim, pod: Pod, *,
                        allocated: bool) -> ResourceClaim | None:
        """Undo one attempt's PreBind write (see ``ClusterView.unreserve_claim``)."""
        key = key_of(written)
        current = self.claim(key)
        if current is None:
            return None
        reserved = reserved_for_others(current, pod)
        status: dict[str, Any] = {}
        if len(reserved) != len(current.status.reserved_for):
            status["reserved_for"] = reserved
        mine = written.status.allocation
        if allocated and not reserved and mine is not None and \
                current.status.allocation is not None and \
                current.status.allocation.devices.results == mine.devices.results:
            status["allocation"] = None
        if not status:
            return current
        stored = self.replace(current.model_copy(
            update={"status": current.status.model_copy(update=status)}))
        assert isinstance(stored, ResourceClaim)
        return stored

    def read_claim(self, key: str) -> ResourceClaim | None:
        """The stored claim (the embedded cluster's cache is the store itself)."""
        return self.claim(key)


def _spec_changed(old: BaseModel, new: BaseModel) -> bool:
    """Whether an update changes the spec (bumps metadata.generation). An unchanged
    spec is most often the very same object (copy on write), which needs no dump."""
    a, b = getattr(old, "spec", None), getattr(new, "spec", None)
    if a is b:
        return False
    return bool(_dump(a) != _dump(b))


def _dump(spec: Any) -> Any:
    return spec.model_dump() if isinstance(spec, BaseModel) else None


