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

The raw JSON is kept beside the model by the view: writes are built from it,
so a PUT never erases a field this project does not model.

``spec.sharingAffinity`` (KEP-5981) is stored by no released API server. Until
it is, a pool's device-less metadata slice can carry the same JSON list in the
annotation :data:`SHARING_AFFINITY_ANNOTATION`; :func:`bridge_sharing_affinity`
merges it into the slice's spec, validated by the project's own admission
rules. Field and annotation disagreeing, or an annotation that does not parse
or validate, makes the pool invalid (fail closed) rather than picking one.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.io import validation_errors
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

__all__ = [
    "KIND_MODELS",
    "SHARING_AFFINITY_ANNOTATION",
    "ConversionError",
    "Converted",
    "bridge_sharing_affinity",
    "object_key",
    "to_model",
]

SHARING_AFFINITY_ANNOTATION = "sharing-affinity.dra-affinity.io/extractors"

KIND_MODELS: dict[str, type[TypedObject]] = {
    "Node": Node,
    "Pod": Pod,
    "DeviceClass": DeviceClass,
    "ResourceSlice": ResourceSlice,
    "ResourceClaim": ResourceClaim,
    "ResourceClaimTemplate": ResourceClaimTemplate,
}

CLUSTER_SCOPED = frozenset({"Node", "DeviceClass", "ResourceSlice"})

# Where each kind lives on the API server: (group/version path prefix, plural).
API_VERSIONS: dict[str, str] = {
    "Node": "v1",
    "Pod": "v1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
}


class ConversionError(Exception):
    """An object from the API server that the models cannot hold (named, with fields)."""


@dataclass
class Converted:
    """A model and what projection dropped from the server's JSON to build it."""

    model: TypedObject
    dropped: list[str] = field(default_factory=list)
    problem: str | None = None  # a bridge problem (the pool is made invalid)


def object_key(kind: str, raw: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced kinds, ``name`` for cluster-scoped ones."""
    meta = raw.get("metadata") or {}
    name = str(meta.get("name", ""))
    if kind in CLUSTER_SCOPED:
        return name
    return f"{meta.get('namespace') or 'default'}/{name}"


def to_model(kind: str, raw: Mapping[str, Any]) -> Converted:
    """Project a server object onto its model and validate it.

    ResourceSlices also go through the sharingAffinity bridge."""
    model = KIND_MODELS.get(kind)
    if model is None:
        raise ConversionError(f"unsupported kind {kind!r}")
    ref = f"{kind} {object_key(kind, raw)}"
    dropped: list[str] = []
    data = dict(raw)
    data.setdefault("apiVersion", API_VERSIONS[kind])
    data.setdefault("kind", kind)
    problem: str | None = None
    if kind == "ResourceSlice":
        data, problem = bridge_sharing_affinity(data)
    projected = _project(model, data, "", dropped)
    try:
        obj = model.model_validate(projected)
    except ValidationError as e:
        detail = "; ".join(err.render() for err in validation_errors(e, model))
        raise ConversionError(f"{ref}: {detail}") from None
    except RecursionError:
        raise ConversionError(f"{ref}: object nested too deeply") from None
    return Converted(obj, dropped, problem)


# ---------------------------------------------------------------------------- projection
def _field_map(model: type[BaseModel]) -> dict[str, tuple[str, Any]]:
    """JSON key -> (key to pass, annotation) for a model's declared fields."""
    cached = _FIELD_MAPS.get(model)
    if cached is None:
        cached = {}
        for name, info in model.model_fields.items():
            alias = info.alias or name
            cached[alias] = (alias, info.annotation)
        _FIELD_MAPS[model] = cached
    return cached


_FIELD_MAPS: dict[type[BaseModel], dict[str, tuple[str, Any]]] = {}


def _project(model: type[BaseModel], data: Any, path: str, dropped: list[str]) -> Any:
    if not isinstance(data, Mapping):
        return data  # validation reports the wrong type
    fields = _field_map(model)
    out: dict[str, Any] = {}
    for k, v in data.items():
        spec = fields.get(k)
        if spec is None:
            dropped.append(f"{path}{k}")
            continue
        key, ann = spec
        out[key] = _project_value(ann, v, f"{path}{k}.", dropped)
    return out


def _project_value(ann: Any, value: Any, path: str, dropped: list[str]) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(ann)
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(ann):
            if arg is type(None):
                continue
            return _project_value(arg, value, path, dropped)
        return value
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return _project(ann, value, path, dropped)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(ann) or (Any,)
        return [_project_value(item, v, f"{path[:-1]}[{i}].", dropped) for i, v in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        args = typing.get_args(ann)
        item = args[1] if len(args) == 2 else Any
        return {k: _project_value(item, v, f"{path}{k}.", dropped) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- bridge
def bridge_sharing_affinity(raw: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The slice with ``spec.sharingAffinity`` taken from the field or the annotation.

    Returns the (copied) JSON and a problem, if any. With a problem the spec
    carries no ``sharingAffinity`` at all (neither the field nor the annotation can
    be trusted); the view reports the slice in ``slice_problems()``, which makes the
    pool invalid for sharing affinity (its multi-allocatable devices fail closed),
    and logs the problem and sends it as an event."""
    data = dict(raw)
    meta = data.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    spec = dict(data.get("spec") or {})
    data["spec"] = spec
    text = annotations.get(SHARING_AFFINITY_ANNOTATION) if isinstance(annotations, Mapping) else None
    if text is None:
        return data, None
    name = meta.get("name", "")
    where = f"ResourceSlice {name}: annotation {SHARING_AFFINITY_ANNOTATION}"
    problem = _annotation_problem(data, text, where)
    if problem is None:
        from_annotation = json.loads(text)
        from_field = spec.get("sharingAffinity")
        if from_field is not None and _normalized(from_field) != _normalized(from_annotation):
            problem = (f"{where} and spec.sharingAffinity disagree "
                       f"({_short(from_annotation)} vs {_short(from_field)})")
        else:
            spec["sharingAffinity"] = from_annotation
            return data, None
    spec.pop("sharingAffinity", None)
    return data, problem


def _normalized(entries: Any) -> Any:
    if not isinstance(entries, list):
        return entries
    return [{"name": e.get("name"), "expression": e.get("expression")} if isinstance(e, Mapping) else e
            for e in entries]


def _short(value: Any) -> str:
    s = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return s if len(s) <= 200 else s[:197] + "..."


def _annotation_problem(data: Mapping[str, Any], text: Any, where: str) -> str | None:
    """Why the annotation cannot be used, or None: JSON list of {name, expression}
    that passes the same admission rules as ``spec.sharingAffinity``."""
    from dra_affinity.validation.admission import validate_resource_slice

    if not isinstance(text, str):
        return f"{where}: must be a string"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return f"{where}: not JSON: {e.msg} at line {e.lineno} column {e.colno}"
    if not isinstance(value, list):
        return f"{where}: must be a JSON list of {{name, expression}}, got {type(value).__name__}"
    probe = {**data, "spec": {**data["spec"], "sharingAffinity": value}}
    dropped: list[str] = []
    try:
        slice_ = ResourceSlice.model_validate(_project(ResourceSlice, probe, "", dropped))
    except ValidationError as e:
        errs = validation_errors(e, ResourceSlice)
        return f"{where}: " + "; ".join(err.render() for err in errs)
    bad = [d for d in dropped if d.startswith("spec.sharingAffinity")]
    if bad:
        return f"{where}: unknown field(s) {', '.join(bad)}"
    errs = [e for e in validate_resource_slice(slice_) if "sharingAffinity" in e.render()]
    if errs:
        return f"{where}: " + "; ".join(e.render() for e in errs)
    return None
