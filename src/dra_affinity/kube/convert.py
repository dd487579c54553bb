"""API-server JSON to the project's models, and the sharingAffinity annotation bridge.

The models forbid unknown keys, which is right for files a person wrote (a typo
must not be ignored) and wrong for objects an API server returns: servers add
fields over releases (``managedFields`` entries, new status fields, new
``PodSpec`` fields), and a scheduler must keep working on a newer server, as
kube-scheduler does (its Go types drop what they do not know). So objects read
from a cluster are *projected* onto the models' fields first: keys a model does
not declare are dropped, recursively, and recorded in
:attr:`Converted.dropped` (logged once per path at debug level by the view).
Values of declared fields are still validated strictly: a malformed value the
model cannot hold is a :class:`ConversionError` naming the object and field.

Parts that many claims have alike are one model shared by them (:class:`SharedParts`):
a claim's spec (claims made from one template are alike), and of its allocation the
node selector and each device config. Models read from a cluster are never
mutated, so sharing them is safe; a shared part is converted once, and a typed
claim costs about 40 % less memory (in CPU it is about even now that projection is
cheap: finding a part by its JSON costs about what converting it would).

``spec.sharingAffinity`` (KEP-5981) is stored by no released API server. Until
it is, a pool's device-less metadata slice can carry the same JSON list in the
annotation :data:`SHARING_AFFINITY_ANNOTATION`. Every ResourceSlice read goes
through :func:`dra_affinity.validation.sharing_affinity.slice_extractors`, the
one reading of field or annotation that the offline commands use too; what it
finds wrong is :attr:`Converted.problem` (the pool is made invalid, fail closed).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from dra_affinity.api import keys
from dra_affinity.api.io import KINDS, validation_errors
from dra_affinity.api.meta import K8sModel, NodeSelector, ObjectMeta, TypedObject
from dra_affinity.api.resource import (
    DeviceAllocationConfiguration,
    ResourceClaimSpec,
    ResourceSlice,
)
from dra_affinity.validation.sharing_affinity import SHARING_AFFINITY_ANNOTATION, slice_extractors

__all__ = [
    "KIND_MODELS",
    "SHARING_AFFINITY_ANNOTATION",
    "ConversionError",
    "Converted",
    "SharedParts",
    "content_digest",
    "object_key",
    "to_metadata",
    "to_model",
]

# The kinds the project models (api.io.KINDS), by kind name.
KIND_MODELS: dict[str, type[TypedObject]] = {kind: model for (_, kind), model in KINDS.items()}

# Each kind's apiVersion (its group/version on the API server), as its model says.
API_VERSIONS: dict[str, str] = {kind: model.type_meta()[0] for kind, model in KIND_MODELS.items()}


class ConversionError(Exception):
    """An object from the API server that the models cannot hold (named, with fields)."""


@dataclass
class Converted:
    """A model and what projection dropped from the server's JSON to build it."""

    model: TypedObject
    dropped: list[str] = field(default_factory=list)
    problem: str | None = None  # unreadable sharing-affinity extractors (the pool is made invalid)


def object_key(kind: str, raw: Mapping[str, Any]) -> str:
    """The store key (:mod:`dra_affinity.api.keys`) of an object as the server sent it."""
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}  # the conversion then names what is wrong with it
    namespace = meta.get("namespace")
    return keys.object_key(kind, str(meta.get("name", "")),
                           namespace if isinstance(namespace, str) or namespace is None else str(namespace))


#: Top-level keys :func:`content_digest` takes apart from the rest.
_DIGEST_OWN = frozenset({"apiVersion", "kind", "metadata", "status"})


#: Kinds whose updates are digested (:func:`content_digest`): pods and nodes, whose
#: kubelets write status often and whose informers drop what moved. A claim, slice or
#: class update that changes nothing is rare; digesting every one of their events (and
#: each of our own claim writes) cost more than the conversions it saved (200 x 8 x 2
#: on the control plane: 0.5 ms a bound pod more).
DIGESTED_KINDS = frozenset({"Pod", "Node"})


def content_digest(kind: str, raw: Mapping[str, Any]) -> bytes | None:
    """A digest of an object as the server sent it, all but its
    ``metadata.resourceVersion``, in two halves of 16 bytes: everything but ``status``,
    then ``status``. Two versions of an object with one digest differ in nothing else;
    with the first half alike, in their status only (None: not plain data).

    ``kind`` and ``apiVersion`` count as :func:`to_model` defaults them (list items come
    without them, watch events with) and the other top-level keys in one order; below
    that the server sends keys in one order. From ``marshal`` version 2 (a faithful
    serialization of values, without back-references, in C: three times quicker than
    ``json.dumps``); content whose keys come in another order counts as changed, which
    costs a conversion, never a change missed. None for kinds not in
    :data:`DIGESTED_KINDS`."""
    if kind not in DIGESTED_KINDS:
        return None
    meta = raw.get("metadata")
    if isinstance(meta, Mapping) and "resourceVersion" in meta:
        meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
    rest: Any = (raw.get("kind") or kind, raw.get("apiVersion") or API_VERSIONS.get(kind), meta,
            [(k, v) for k, v in sorted(raw.items()) if k not in _DIGEST_OWN])
    try:
        parts = (marshal.dumps(rest, 2), marshal.dumps(raw.get("status"), 2))
    except ValueError:
        return None
    return (hashlib.blake2b(parts[0], digest_size=16).digest()
            + hashlib.blake2b(parts[1], digest_size=16).digest())


class SharedParts:
    """One model for each part alike of many claims, found by its JSON as the server
    sent it (compact, in the server's key order: parts that differ only in key order are
    not shared). A part seen before is neither projected nor validated again.

    Bounded: after :attr:`limit` parts it starts afresh (what is shared stays shared; new
    objects share with each other again)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._parts: dict[tuple[type[K8sModel], str], K8sModel] = {}

    def __len__(self) -> int:
        return len(self._parts)

    def share(self, data: dict[str, Any], dropped: list[str]) -> None:
        """Put the shared model in place of each shareable part of a claim's JSON
        (``data``: a copy of the server's, whose nested parts are copied here before
        they are changed). A part not seen before is projected and validated alone; one
        that does not validate is left for the whole object's validation to report,
        with its path."""
        for holder, at, cls, path in _claim_parts(data):
            part = holder[at]
            try:
                key = (cls, json.dumps(part, separators=(",", ":"), allow_nan=False))
            except (TypeError, ValueError):
                continue
            shared = self._parts.get(key)
            if shared is None:
                try:
                    shared = cls.model_validate(_project(cls, part, path, dropped))
                except (ValidationError, RecursionError):
                    continue
                if len(self._parts) >= self.limit:
                    self._parts.clear()
                self._parts[key] = shared
            holder[at] = shared


_Holder = dict[str, Any] | list[Any]


def _claim_parts(data: dict[str, Any]) -> Iterator[tuple[_Holder, Any, type[K8sModel], str]]:
    """(holder, key or index, model, path) of each part claims share, in a claim's JSON;
    the holders on the way from ``data`` are copied first (the server's JSON is not
    changed)."""
    if isinstance(data.get("spec"), dict):
        yield data, "spec", ResourceClaimSpec, "spec."
    status = data.get("status")
    if not isinstance(status, dict) or not isinstance(status.get("allocation"), dict):
        return
    alloc = dict(status["allocation"])
    data["status"] = {**status, "allocation": alloc}
    if isinstance(alloc.get("nodeSelector"), dict):
        yield alloc, "nodeSelector", NodeSelector, "status.allocation.nodeSelector."
    devices = alloc.get("devices")
    if isinstance(devices, dict) and isinstance(devices.get("config"), list):
        configs = list(devices["config"])
        alloc["devices"] = {**devices, "config": configs}
        for i, c in enumerate(configs):
            if isinstance(c, dict):
                yield configs, i, DeviceAllocationConfiguration, f"status.allocation.devices.config[{i}]."


def to_model(kind: str, raw: Mapping[str, Any], shared: SharedParts | None = None) -> Converted:
    """Project a server object onto its model and validate it. With ``shared``, a
    claim's parts alike of other claims' are their model (:class:`SharedParts`).

    A ResourceSlice comes with the extractors the scheduler reads from it (field or
    annotation, :func:`~dra_affinity.validation.sharing_affinity.slice_extractors`)."""
    model = KIND_MODELS.get(kind)
    if model is None:
        raise ConversionError(f"unsupported kind {kind!r}")
    dropped: list[str] = []
    data = dict(raw)
    data.setdefault("apiVersion", API_VERSIONS[kind])
    data.setdefault("kind", kind)
    if shared is not None and kind == "ResourceClaim":
        shared.share(data, dropped)
    projected = _project(model, data, "", dropped)
    try:
        obj = model.model_validate(projected)
    except ValidationError as e:
        detail = "; ".join(err.render() for err in validation_errors(e, model))
        raise ConversionError(f"{kind} {object_key(kind, raw)}: {detail}") from None
    except RecursionError:
        raise ConversionError(f"{kind} {object_key(kind, raw)}: object nested too deeply") from None
    if isinstance(obj, ResourceSlice):
        read = slice_extractors(obj)
        return Converted(read.slice, dropped, read.problem)
    return Converted(obj, dropped)


def to_metadata(kind: str, raw: Mapping[str, Any]) -> ObjectMeta:
    """A server object's ``metadata`` alone, projected and validated as :func:`to_model`
    does it (for a write that changed an object's metadata and nothing else)."""
    try:
        return ObjectMeta.model_validate(_project(ObjectMeta, raw.get("metadata") or {},
                                                  "metadata.", []))
    except ValidationError as e:
        detail = "; ".join(err.render() for err in validation_errors(e, ObjectMeta))
        raise ConversionError(f"{kind} {object_key(kind, raw)}: {detail}") from None


# ---------------------------------------------------------------------------- projection
# How a declared field's value is projected, read once from the field's annotation (by
# _shape) and kept in its model's field map, since reading annotations again at every
# value (typing.get_origin, get_args) was most of projection's cost. None keeps the
# value as it is; otherwise (how, of), called as how(of, value, path, dropped) on a value
# that is not None: (_project, model) for a model, (_project_list, item shape) for a
# list, (_project_dict, item shape) for a dict. A value of another type than its shape
# expects is kept as it is, for validation to report. Shapes are kept per field, not per
# annotation object: unions that differ only in order are equal (and hash alike), while
# their shapes, read from the first member, can differ.
_Shape = tuple[Callable[[Any, Any, str, list[str]], Any], Any] | None


def _shape(ann: Any) -> _Shape:
    """The shape of an annotation: a union's is its first member's other than None (so
    Optional[X]'s is X's); a model; a list or dict of a shape (of Any's when the item type
    is not given); anything else is kept as it is (None)."""
    origin = typing.get_origin(ann)
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(ann):
            if arg is not type(None):
                return _shape(arg)
        return None
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return (_project, ann)
    if origin is list:
        (item,) = typing.get_args(ann) or (Any,)
        return (_project_list, _shape(item))
    if origin is dict:
        args = typing.get_args(ann)
        return (_project_dict, _shape(args[1] if len(args) == 2 else Any))
    return None


def _field_map(model: type[BaseModel]) -> dict[str, tuple[str, _Shape]]:
    """JSON key -> (key to pass, shape) for a model's declared fields."""
    cached = _FIELD_MAPS.get(model)
    if cached is None:
        cached = {}
        for name, info in model.model_fields.items():
            alias = info.alias or name
            cached[alias] = (alias, _shape(info.annotation))
        _FIELD_MAPS[model] = cached
    return cached


_FIELD_MAPS: dict[type[BaseModel], dict[str, tuple[str, _Shape]]] = {}


def _project(model: type[BaseModel], data: Any, path: str, dropped: list[str]) -> Any:
    if not isinstance(data, Mapping):
        return data  # validation reports the wrong type (a shared part passes as it is)
    fields = _field_map(model)
    out: dict[str, Any] = {}
    for k, v in data.items():
        spec = fields.get(k)
        if spec is None:
            dropped.append(f"{path}{k}")
            continue
        key, shape = spec
        if shape is None or v is None:
            out[key] = v
        else:
            how, of = shape
            out[key] = how(of, v, f"{path}{k}.", dropped)
    return out


def _project_list(item: _Shape, value: Any, path: str, dropped: list[str]) -> Any:
    if not isinstance(value, list):
        return value  # validation reports the wrong type
    if item is None:
        return list(value)
    how, of = item
    at = path[:-1]
    return [None if v is None else how(of, v, f"{at}[{i}].", dropped) for i, v in enumerate(value)]


def _project_dict(item: _Shape, value: Any, path: str, dropped: list[str]) -> Any:
    if not isinstance(value, Mapping):
        return value  # validation reports the wrong type
    if item is None:
        return dict(value)
    how, of = item
    return {k: None if v is None else how(of, v, f"{path}{k}.", dropped) for k, v in value.items()}
