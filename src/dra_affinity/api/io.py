"""Reading and writing manifests.

Errors always name the file, the document (1-based, with its line) and the
field path, so a user can find the mistake without reading a traceback.
Hostile YAML is bounded: alias expansion ("billion laughs") and size are
capped before anything is validated.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.meta import K8sModel, TypedObject
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

MAX_INPUT_BYTES = 64 * 1024 * 1024
MAX_EXPANDED_NODES = 2_000_000

KINDS: dict[tuple[str, str], type[TypedObject]] = {
    ("v1", "Node"): Node,
    ("v1", "Pod"): Pod,
    ("resource.k8s.io/v1", "DeviceClass"): DeviceClass,
    ("resource.k8s.io/v1", "ResourceSlice"): ResourceSlice,
    ("resource.k8s.io/v1", "ResourceClaim"): ResourceClaim,
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ResourceClaimTemplate,
}


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path (``spec.devices[0].name``)."""

    path: str
    message: str
    hint: str | None = None

    def render(self) -> str:
        where = f"{self.path}: " if self.path else ""
        tail = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}{self.message}{tail}"


@dataclass
class ManifestError(Exception):
    """Bad input: carries where it is and every field error found."""

    source: str
    errors: list[FieldError]
    document: int | None = None
    line: int | None = None
    object_ref: str | None = None
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.render()

    def location(self) -> str:
        loc = self.source
        if self.document is not None:
            loc += f": document {self.document}"
            if self.line is not None:
                loc += f" (line {self.line})"
        if self.object_ref:
            loc += f" {self.object_ref}"
        return loc

    def render(self) -> str:
        head = self.location()
        if len(self.errors) == 1:
            return f"{head}: {self.errors[0].render()}"
        lines = [f"{head}:"] + [f"  - {e.render()}" for e in self.errors]
        return "\n".join(lines)


@dataclass(frozen=True)
class Document:
    """One YAML document: its data and where it came from."""

    source: str
    index: int  # 1-based
    line: int  # 1-based line of the document start
    data: Any

    def error(self, errors: list[FieldError], object_ref: str | None = None) -> ManifestError:
        return ManifestError(self.source, errors, self.index, self.line, object_ref)


# ------------------------------------------------------------------------- YAML
class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (YAML would keep the last)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hashable = key in seen
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "mapping key is not a scalar", key_node.start_mark
            ) from None
        if hashable:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Node count after alias expansion, memoised so shared subtrees count per use."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # cycles (recursive aliases) count once; the constructor rejects them later
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, memo)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_size(k, memo) + _expanded_size(v, memo)
    memo[key] = total
    return total


def read_documents(text: str, source: str) -> list[Document]:
    """Split a YAML (or JSON) stream into documents; errors name the source and line."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise ManifestError(source, [FieldError("", f"input larger than {MAX_INPUT_BYTES} bytes")])
    loader = _StrictLoader(text)
    docs: list[Document] = []
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            index += 1
            if node is None:
                continue
            if _expanded_size(node, {}) > MAX_EXPANDED_NODES:
                raise ManifestError(
                    source,
                    [FieldError("", "document expands to too many nodes (YAML alias bomb?)")],
                    index,
                    node.start_mark.line + 1,
                )
            data = loader.construct_document(node)
            if data is None:
                continue
            docs.append(Document(source, index, node.start_mark.line + 1, data))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        msg = f"malformed YAML: {problem}" + (f" ({context})" if context else "")
        if mark is not None:
            msg += f" at line {mark.line + 1}, column {mark.column + 1}"
        raise ManifestError(source, [FieldError("", msg)], line=line) from None
    except RecursionError:
        raise ManifestError(source, [FieldError("", "malformed YAML: nesting too deep")]) from None
    finally:
        loader.dispose()
    return docs


# ------------------------------------------------------------------------- paths
def format_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "/" in part or "." in part or not part:
            out += f"[{part}]"  # a map key such as a qualified capacity name
        else:
            out += f".{part}" if out else str(part)
    return out


def _known_fields(model: type[BaseModel]) -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names


def _model_at(root: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class that owns the field at ``loc`` (for unknown-field hints)."""
    import typing

    current: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        match = None
        for name, info in current.model_fields.items():
            if (info.alias or name) == part or name == part:
                match = info
                break
        if match is None:
            return current
        ann = match.annotation
        # unwrap Optional[X], list[X], dict[str, X]
        for _ in range(4):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                break
            if not args:
                break
            ann = args[-1]
        current = ann
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def validation_errors(exc: ValidationError, model: type[BaseModel]) -> list[FieldError]:
    """Turn pydantic's errors into field errors with Kubernetes-style paths."""
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        # Drop pydantic's union/type tags such as 'str' or 'constrained-str'.
        clean: list[int | str] = []
        for p in loc:
            clean.append(p)
        path = format_path(clean)
        etype = err["type"]
        hint = None
        if etype == "extra_forbidden":
            owner = _model_at(model, clean[:-1])
            msg = "unknown field"
            if owner is not None and isinstance(clean[-1], str):
                close = difflib.get_close_matches(clean[-1], _known_fields(owner), n=1)
                if close:
                    hint = f"did you mean {close[0]!r}?"
        elif etype == "missing":
            msg = "required value"
        elif etype == "literal_error":
            msg = f"unsupported value {err.get('input')!r}: {err['msg']}"
        elif etype in ("value_error", "assertion_error"):
            msg = str(err.get("ctx", {}).get("error", err["msg"]))
        else:
            msg = f"{err['msg']} (got {_short(err.get('input'))})"
        out.append(FieldError(path, msg, hint))
    # stable, de-duplicated
    seen: set[tuple[str, str]] = set()
    uniq = []
    for e in out:
        if (e.path, e.message) not in seen:
            seen.add((e.path, e.message))
            uniq.append(e)
    return uniq


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


# ------------------------------------------------------------------------- objects
def object_ref(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return None
    kind = data.get("kind")
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    if not isinstance(kind, str):
        return None
    if not isinstance(name, str):
        return f"({kind})"
    prefix = f"{ns}/" if isinstance(ns, str) and ns else ""
    return f"({kind} {prefix}{name})"


def parse_object(
    doc: Document,
    kinds: Mapping[tuple[str, str], type[BaseModel]] | None = None,
) -> BaseModel:
    """Validate one document into its typed object, or raise a ManifestError."""
    kinds = kinds if kinds is not None else KINDS
    data = doc.data
    ref = object_ref(data)
    if not isinstance(data, Mapping):
        raise doc.error([FieldError("", f"a document must be a mapping, got {type(data).__name__}")])
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise doc.error([FieldError("apiVersion", "required value")], ref)
    if not isinstance(kind, str) or not kind:
        raise doc.error([FieldError("kind", "required value")], ref)
    model = kinds.get((api_version, kind))
    if model is None:
        known = sorted(f"{k} ({v})" for v, k in kinds)
        same_kind = [v for v, k in kinds if k == kind]
        hint = (
            f"{kind} is served as apiVersion {same_kind[0]}"
            if same_kind
            else "known kinds: " + ", ".join(known)
        )
        raise doc.error([FieldError("kind", f"unsupported kind {kind!r} in {api_version!r}", hint)], ref)
    try:
        obj = model.model_validate(data)
    except ValidationError as e:
        raise doc.error(validation_errors(e, model), ref) from None
    except RecursionError:
        raise doc.error([FieldError("", "object nested too deeply")], ref) from None
    return obj


def load_objects(text: str, source: str) -> list[tuple[Document, BaseModel]]:
    """Every document of a stream, typed. Stops at the first bad document."""
    return [(d, parse_object(d)) for d in read_documents(text, source)]


def load_file(path: str) -> list[tuple[Document, BaseModel]]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ManifestError(path, [FieldError("", f"cannot read: {e.strerror}")]) from None
    except UnicodeDecodeError:
        raise ManifestError(path, [FieldError("", "not UTF-8 text")]) from None
    return load_objects(text, path)


def dump_yaml(objects: Iterable[K8sModel]) -> str:
    """Manifests back out, camelCase, only set fields, documents separated by ---."""
    return yaml.safe_dump_all(
        [o.to_dict() for o in objects], sort_keys=False, default_flow_style=False
    )


def dump_json(obj: K8sModel) -> str:
    return json.dumps(obj.to_dict(), sort_keys=False)
