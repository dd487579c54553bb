"""Reading and writing manifests.

Errors always name the file, the document (1-based, with its line) and the
field path, so a user can find the mistake without reading a traceback.
Any bytes at all end in a ManifestError or in JSON values: YAML is read
the way kubectl converts it to JSON (docs/decisions.md, "Reading manifests"),
and size, nesting and alias expansion ("billion laughs") are bounded while
reading, before anything is validated.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from dra_affinity.api._yaml import dump_documents, read_documents
from dra_affinity.api.core import Namespace, Node, Pod
from dra_affinity.api.errors import (
    MAX_DEPTH,
    MAX_INPUT_BYTES,
    MAX_NODES,
    Document,
    FieldError,
    ManifestError,
)
from dra_affinity.api.meta import K8sModel, TypedObject
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

__all__ = [
    "KINDS",
    "MANIFEST_SUFFIXES",
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_NODES",
    "Document",
    "FieldError",
    "ManifestError",
    "decode_text",
    "dump_documents",
    "dump_json",
    "dump_yaml",
    "format_path",
    "load_file",
    "load_objects",
    "manifest_files",
    "object_ref",
    "parse_object",
    "read_documents",
    "read_paths",
    "read_text",
    "validation_errors",
]

KINDS: dict[tuple[str, str], type[TypedObject]] = {
    model.type_meta(): model
    for model in (Node, Pod, Namespace, DeviceClass, ResourceSlice, ResourceClaim,
                  ResourceClaimTemplate)
}


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def decode_text(data: bytes, source: str) -> str:
    """Manifest bytes as text: UTF-8 (a BOM is dropped) or UTF-16 with a BOM, as YAML allows."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) and not data.startswith(b"\xff\xfe\x00\x00"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as e:
            raise ManifestError(source, [FieldError("", f"not UTF-16 text: {e.reason} at byte "
                                                        f"{e.start}")]) from None
    if data.startswith((b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00")):
        raise ManifestError(source, [FieldError("", "UTF-32 text is not supported (YAML "
                                                    "manifests are UTF-8)")])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ManifestError(source, [FieldError("", f"not UTF-8 text: byte 0x{data[e.start]:02x} "
                                                    f"at line {line} ({e.reason})")],
                            line=line) from None


def read_text(path: str) -> str:
    """A manifest file's text; at most MAX_INPUT_BYTES are read, whatever the file is."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise ManifestError(path, [FieldError("", f"cannot read: {e.strerror or e}")]) from None
    if len(data) > MAX_INPUT_BYTES:
        raise ManifestError(path, [FieldError("", f"file larger than {MAX_INPUT_BYTES:,} bytes")])
    return decode_text(data, path)


def manifest_files(paths: Iterable[str]) -> list[str]:
    """Files named on the command line, and the manifests under named folders (sorted)."""
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found: list[str] = []
            for root, dirs, names in os.walk(p):
                dirs.sort()
                found.extend(os.path.join(root, n) for n in sorted(names)
                             if n.endswith(MANIFEST_SUFFIXES))
            if not found:
                raise ManifestError(p, [FieldError("", "no manifests (" +
                                                   ", ".join(MANIFEST_SUFFIXES) + ") found in "
                                                   "this folder")])
            files.extend(found)
        else:
            files.append(p)
    return files


def read_paths(paths: Iterable[str],
               errors: list[ManifestError] | None = None) -> list[Document]:
    """Every document of the given files and folders, in order: the one way commands read input.

    An unreadable file raises its ManifestError, or, when ``errors`` is given,
    is recorded there and skipped (so ``validate`` can report every bad file).
    Input with no documents at all is an error: a command never quietly checks nothing.
    """
    paths = list(paths)
    docs: list[Document] = []
    failed: list[ManifestError] = []

    def fail(e: ManifestError) -> None:
        if errors is None:
            raise e
        errors.append(e)
        failed.append(e)

    files: list[str] = []
    for p in paths:
        try:
            files.extend(manifest_files([p]))
        except ManifestError as e:
            fail(e)
    for f in files:
        try:
            docs.extend(read_documents(read_text(f), f))
        except ManifestError as e:
            fail(e)
    if not docs and not failed:
        fail(ManifestError(", ".join(paths) or "(no paths)",
                           [FieldError("", "no manifests found (the files hold no documents)")]))
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
        # Drop pydantic's validator tags (function-after, ...) from the location.
        clean: list[int | str] = [p for p in err["loc"]
                                  if not (isinstance(p, str) and p.startswith("function-"))]
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
    """Every document of one file, typed (see :func:`read_text` for what is read)."""
    return load_objects(read_text(path), path)


def dump_yaml(objects: Iterable[K8sModel]) -> str:
    """Manifests back out, camelCase, only set fields, documents separated by ---."""
    return dump_documents([o.to_dict() for o in objects])


def dump_json(obj: K8sModel) -> str:
    return json.dumps(obj.to_dict(), sort_keys=False)
