"""Building the API objects PreBind writes, without re-validating parts validated once.

Every part of an allocation result is already valid when PreBind writes it: device,
pool and driver names come from admitted ResourceSlices, request names and configs
from the admitted claim and its classes, consumed capacity from the allocator's plan.
Running pydantic's validation (or ``model_copy``, which deep-walks private state)
again for each pod was a quarter of a scheduling decision. :func:`built` assembles a
model from such parts and :func:`replaced` copies one with some fields replaced; both
leave ``model_fields_set`` exactly as the validating constructor and ``model_copy``
would, so dumps (which omit unset defaults) are byte for byte the same.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from dra_affinity.api.meta import assemble

M = TypeVar("M", bound=BaseModel)

# Per model class: the defaults as one dict in field order, the fields with a default
# factory, and every field name.
_Shape = tuple[dict[str, Any], tuple[tuple[str, Any], ...], frozenset[str]]
_SHAPES: dict[type[BaseModel], _Shape] = {}


def _shape(cls: type[BaseModel]) -> _Shape:
    sh = _SHAPES.get(cls)
    if sh is None:
        if cls.model_config.get("extra") == "allow" or cls.__private_attributes__:
            raise TypeError(f"{cls.__name__}: built() supports models without extra or private state")
        fields = cls.model_fields
        # Every field, in declaration order (a dump follows it); the factories' slots
        # are filled per object.
        plain = {n: f.default for n, f in fields.items()}
        factories = tuple((n, f.default_factory) for n, f in fields.items()
                          if f.default_factory is not None)
        sh = _SHAPES[cls] = (plain, factories, frozenset(fields))
    return sh


def built(cls: type[M], **values: Any) -> M:
    """``cls(**values)`` for values that are already valid (field names, not aliases):
    unset fields get their defaults (a fresh value from a default factory) and only the
    given names count as set, as with validation."""
    plain, factories, names = _shape(cls)
    if not names.issuperset(values):
        raise TypeError(f"{cls.__name__}: unknown fields {sorted(set(values) - names)}")
    data = plain.copy()
    data.update(values)
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    return assemble(cls, data, set(values))


def replaced(m: M, **updates: Any) -> M:
    """``m.model_copy(update=updates)`` (a shallow copy; the updated fields count as set)."""
    cls = type(m)
    names = _shape(cls)[2]
    if not names.issuperset(updates):
        raise TypeError(f"{cls.__name__}: unknown fields {sorted(set(updates) - names)}")
    data = m.__dict__.copy()
    data.update(updates)
    return assemble(cls, data, m.__pydantic_fields_set__ | updates.keys())
