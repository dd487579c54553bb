"""Projection (:func:`dra_affinity.kube.convert._project`) against a reference.

The reference reads each field's annotation again at every value, as projection did
before each field's shape was resolved once per model. Both must give the same
projected JSON (the same types and key order, the same values passed through and the
same containers made afresh) and the same dropped paths in the same order, on every
example's objects and on hostile shapes of them: an unknown field at each depth, and
at each place a value of the wrong type, None, nested lists and maps, a model. Models
made here add the annotations the project's models do not use yet (unions of several
members in either order, bare and nested lists and dicts, a recursive model).
"""

from __future__ import annotations

import contextlib
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import pytest
import yaml
from pydantic import BaseModel

from dra_affinity.api.meta import NodeSelector
from dra_affinity.kube import convert
from dra_affinity.kube.convert import KIND_MODELS, ConversionError, SharedParts, to_model

from .test_stores import _served_claim, _served_pod
from .world import claim, meta_slice, nic_slice, pod

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# ----------------------------------------------------------------------------- the reference
def _ref_field_map(model: type[BaseModel]) -> dict[str, tuple[str, Any]]:
    return {(info.alias or name): (info.alias or name, info.annotation)
            for name, info in model.model_fields.items()}


def _ref_project(model: type[BaseModel], data: Any, path: str, dropped: list[str]) -> Any:
    if not isinstance(data, Mapping):
        return data
    fields = _ref_field_map(model)
    out: dict[str, Any] = {}
    for k, v in data.items():
        spec = fields.get(k)
        if spec is None:
            dropped.append(f"{path}{k}")
            continue
        key, ann = spec
        out[key] = _ref_project_value(ann, v, f"{path}{k}.", dropped)
    return out


def _ref_project_value(ann: Any, value: Any, path: str, dropped: list[str]) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(ann)
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(ann):
            if arg is type(None):
                continue
            return _ref_project_value(arg, value, path, dropped)
        return value
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return _ref_project(ann, value, path, dropped)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(ann) or (Any,)
        return [_ref_project_value(item, v, f"{path[:-1]}[{i}].", dropped) for i, v in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        args = typing.get_args(ann)
        item = args[1] if len(args) == 2 else Any
        return {k: _ref_project_value(item, v, f"{path}{k}.", dropped) for k, v in value.items()}
    return value


@contextlib.contextmanager
def _reference_projection() -> Iterator[None]:
    """to_model and SharedParts projecting by the reference (both call ``_project``)."""
    real = convert._project
    convert._project = _ref_project  # type: ignore[assignment]
    try:
        yield
    finally:
        convert._project = real  # type: ignore[assignment]


# ----------------------------------------------------------------------------- comparison
def _ids(value: Any, into: set[int]) -> set[int]:
    into.add(id(value))
    if isinstance(value, Mapping):
        for v in value.values():
            _ids(v, into)
    elif isinstance(value, list | tuple):
        for v in value:
            _ids(v, into)
    return into


def _assert_same(got: Any, want: Any, given: set[int], at: str = "") -> None:
    """``got`` is ``want``: what the reference passed through is passed through, what it
    made afresh (a projected dict or list) is made afresh alike, in the same key order."""
    if id(want) in given or not isinstance(want, dict | list):
        assert got is want, at
        return
    assert type(got) is type(want) and id(got) not in given, at
    if isinstance(want, dict):
        assert list(got) == list(want), at
        for k, w in want.items():
            _assert_same(got[k], w, given, f"{at}{k}.")
    else:
        assert len(got) == len(want), at
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same(g, w, given, f"{at}[{i}].")


def _check(model: type[BaseModel], data: Any) -> None:
    got_dropped: list[str] = []
    want_dropped: list[str] = []
    got = convert._project(model, data, "", got_dropped)
    want = _ref_project(model, data, "", want_dropped)
    _assert_same(got, want, _ids(data, set()))
    assert got_dropped == want_dropped


# ----------------------------------------------------------------------------- inputs
HOSTILE: list[Any] = [
    None, "x", 0, 2.5, True, ("a", "tuple"), NodeSelector(node_selector_terms=[]),
    [], [None], ["x", None, 3], [{"unknownField": 1, "name": "n"}], [[{"name": "n"}], None],
    {}, {"unknownField": {"deeper": [1]}}, {"name": None, "items": [None, {"name": "n"}]},
    types.MappingProxyType({"name": "m", "unknownField": [{}]}),
]


def _variants(value: Any) -> Iterator[Any]:
    """``value`` changed at one place each: every hostile value in place of it or of a
    value within it, and an unknown field added to it or to a mapping within it."""
    yield from HOSTILE
    if isinstance(value, dict):
        yield {**value, "unknownField": {"name": "n"}}
        for k, v in value.items():
            for w in _variants(v):
                yield {**value, k: w}
    elif isinstance(value, list):
        for i, v in enumerate(value):
            for w in _variants(v):
                yield [*value[:i], w, *value[i + 1:]]


def _example_objects() -> list[dict[str, Any]]:
    objects = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        with path.open() as f:
            objects += [d for d in yaml.safe_load_all(f)
                        if isinstance(d, dict) and d.get("kind") in KIND_MODELS]
    return objects


def _served() -> list[dict[str, Any]]:
    """Objects as a server sends them (status, defaults, fields no model declares)."""
    managed = {"managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                                  "fieldsV1": {"f:status": {}}}]}
    objects = [_served_claim(3, "node-1"), _served_pod(3), _served_pod(4, "node-2"),
               nic_slice("n1"), meta_slice("n1"), claim("c", "net-1"), pod("p", "c")]
    for o in objects:
        o["metadata"] = {**o["metadata"], **managed}
    return objects


def test_the_examples_give_objects_of_each_kind_a_scheduler_reads() -> None:
    kinds = {o["kind"] for o in _example_objects()}
    assert set(KIND_MODELS) - {"Namespace"} <= kinds


@pytest.mark.parametrize("obj", _example_objects() + _served(),
                         ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_projection_is_the_reference_on_each_object_and_its_hostile_shapes(obj: dict[str, Any]) -> None:
    model = KIND_MODELS[obj["kind"]]
    for variant in _variants(obj):
        _check(model, variant)


# ----------------------------------------------------------------------------- annotations
class _Leaf(BaseModel):
    name: str | None = None
    items: list[_Leaf | None] | None = None


class _Shapes(BaseModel):
    """Every kind of annotation the reference reads, some the project's models lack."""

    leaf: _Leaf | None = None
    leaf_or_str: _Leaf | str | None = None
    str_or_leaf: str | _Leaf | None = None  # equal to the one above (unions are sets)
    none_first: None | _Leaf = None  # noqa: RUF036
    old_optional: Optional[Union[list[_Leaf], _Leaf]] = None  # noqa: UP007, UP045
    lists: list[list[_Leaf]] | None = None
    maps: dict[str, dict[str, _Leaf]] | None = None
    map_of_lists: dict[str, list[_Leaf | None]] | None = None
    list_of_maps: list[dict[str, _Leaf]] | None = None
    typing_list: typing.List[_Leaf] | None = None  # noqa: UP006
    typing_dict: typing.Dict[str, _Leaf] | None = None  # noqa: UP006
    bare_list: list | None = None  # type: ignore[type-arg]
    bare_typing_list: typing.List | None = None  # type: ignore[type-arg]  # noqa: UP006
    bare_dict: dict | None = None  # type: ignore[type-arg]
    bare_typing_dict: typing.Dict | None = None  # type: ignore[type-arg]  # noqa: UP006
    abc_mapping: Mapping[str, _Leaf] | None = None
    annotated: Annotated[list[_Leaf], "meta"] | None = None
    literal: Literal["a", "b"] | None = None
    anything: Any = None
    plain: int = 0


def _shapes_objects() -> Iterator[dict[str, Any]]:
    """Each field alone with a model, a list and a map of them (an unknown field beside)."""
    leaf = {"name": "l", "unknownField": 1, "items": [None, {"name": "i", "unknownField": 2}]}
    for name in _Shapes.model_fields:
        for value in (leaf, [leaf, None, [leaf]], {"a": leaf, "b": None, "c": {"d": [leaf]}}):
            yield {name: value, "unknownField": leaf}


def test_projection_is_the_reference_on_every_kind_of_annotation() -> None:
    for obj in _shapes_objects():
        for variant in _variants(obj):
            _check(_Shapes, variant)


# ----------------------------------------------------------------------------- whole objects
def _outcome(kind: str, raw: dict[str, Any], shared: SharedParts | None) -> tuple[Any, ...]:
    try:
        conv = to_model(kind, raw, shared)
    except ConversionError as e:
        return ("error", str(e))
    except Exception as e:  # metadata not a mapping: object_key fails, alike
        return ("raised", type(e), str(e))
    m = conv.model
    return (repr(m), m, m.model_fields_set, conv.dropped, conv.problem)


@pytest.mark.parametrize("obj", [o for o in _served() if o["kind"] in ("ResourceClaim", "Pod")],
                         ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_to_model_with_shared_parts_is_the_reference_on_hostile_shapes(obj: dict[str, Any]) -> None:
    """The same models, dropped paths and errors for wrong types, through SharedParts
    (kept across the variants, so later ones find their parts shared)."""
    shared, ref_shared = SharedParts(), SharedParts()
    for variant in _variants(obj):
        if not isinstance(variant, dict):
            continue  # to_model takes a mapping
        got = _outcome(obj["kind"], variant, shared)
        with _reference_projection():
            want = _outcome(obj["kind"], variant, ref_shared)
        assert got == want
