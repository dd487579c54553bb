"""Shared object plumbing: the pydantic base that mirrors Kubernetes manifests.

Every model accepts the camelCase keys ``kubectl`` accepts, forbids unknown
keys (a typo must not be silently ignored) and dumps back only what was set,
so ``load(dump(x)) == x``.
"""

from __future__ import annotations

import copy
from typing import Any, Self, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

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

    def to_dict(self) -> dict[str, Any]:
        """Manifest form: camelCase, only fields that were set."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")

    # API objects are trees of models, lists, dicts and immutable scalars (no cycles, no
    # private attributes, no extra fields), so a deep copy needs neither ``copy``'s memo
    # nor its per-type dispatch. Admission deep-copies every object it is given; the
    # generic version costs several times more.
    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        """A deep copy: every model, list and dict is new; scalars are shared (immutable);
        the same fields count as set."""
        fields = {name: _clone(v) for name, v in self}
        return cast(Self, type(self).model_construct(set(self.model_fields_set), **fields))


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

    @classmethod
    def type_meta(cls) -> tuple[str, str]:
        """``(apiVersion, kind)`` of a concrete kind: the defaults of its own fields, the
        one place each kind's group/version is written."""
        fields = cls.model_fields
        return str(fields["api_version"].default), str(fields["kind"].default)

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
