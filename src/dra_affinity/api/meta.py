"""Shared object plumbing: the pydantic base that mirrors Kubernetes manifests.

Every model accepts the camelCase keys ``kubectl`` accepts, forbids unknown
keys (a typo must not be silently ignored) and dumps back only what was set,
so ``load(dump(x)) == x``.
"""

from __future__ import annotations

import copy
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from dra_affinity.api._getattr import use_plain_reads
from dra_affinity.api.quantity import Quantity


class K8sModel(BaseModel):
    """Base for every API struct: camelCase aliases, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,
        validate_assignment=False,
        revalidate_instances="never",
        ser_json_inf_nan="strings",
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        # Attribute reads on the fast path of CPython 3.11 (see _getattr): API objects
        # are read everywhere, a decision reads hundreds of fields.
        use_plain_reads(cls)

    def to_dict(self) -> dict[str, Any]:
        """Manifest form: camelCase, only fields that were set."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")

    # API objects are trees of models, lists, dicts and immutable scalars (no cycles, no
    # private attributes, no extra fields), so copies need neither ``copy``'s memo nor
    # its per-type dispatch. Admission deep-copies every object it stores, and stores
    # copy on write: these two are on the path of every write, where pydantic's generic
    # versions cost several times more.
    def __copy__(self) -> Self:
        """A shallow copy whose field set is its own (so ``model_copy(update=...)`` and
        attribute assignment on the copy never touch the original)."""
        return assemble(type(self), dict(self.__dict__), set(self.__pydantic_fields_set__))

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        """A deep copy: every model, list and dict is new; scalars are shared (immutable)."""
        return assemble(type(self), {k: _clone(v) for k, v in self.__dict__.items()},
                        set(self.__pydantic_fields_set__))


_new = object.__new__
# The setters of a model's four slots, taken from pydantic's BaseModel once: calling them
# skips the attribute lookup and checks ``object.__setattr__`` makes on each call.
_SLOTS = BaseModel.__dict__
_set_dict = _SLOTS["__dict__"].__set__
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__

_M = TypeVar("_M", bound=BaseModel)


def assemble(cls: type[_M], fields: dict[str, Any], fields_set: set[str]) -> _M:
    """A ``cls`` holding ``fields`` (every field, by name, already valid), of which
    ``fields_set`` count as set: what validation or ``model_copy`` would make, without
    either (no extra fields, no private attributes, as API models have none). It is
    how copies, copy-on-write updates and objects read back from a store are made."""
    m = _new(cls)
    _set_dict(m, fields)
    _set_extra(m, None)
    _set_fields_set(m, fields_set)
    _set_private(m, None)
    return m
#: Immutable leaf types of API objects: shared by copies, never copied.
_ATOMS = frozenset({str, int, float, bool, type(None), Quantity})


def _clone(v: Any) -> Any:
    """Deep copy of one field value of an API object (see ``K8sModel.__deepcopy__``)."""
    t = type(v)
    if t in _ATOMS:
        return v
    if t is list:
        return [_clone(x) for x in v]
    if t is dict:
        return {k: _clone(x) for k, x in v.items()}
    if isinstance(v, K8sModel):
        return v.__deepcopy__()
    return copy.deepcopy(v)


class OwnerReference(K8sModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(K8sModel):
    name: str = ""
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] | None = None


class TypedObject(K8sModel):
    """An object with apiVersion, kind and metadata."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"


class NodeSelectorRequirement(K8sModel):
    key: str
    operator: str
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(K8sModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(K8sModel):
    node_selector_terms: list[NodeSelectorTerm]
