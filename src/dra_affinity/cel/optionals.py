"""The optional value of cel-go's ``cel.OptionalTypes`` (in Kubernetes' environment since 1.28).

An optional either holds a value or is ``optional.none()``. It is produced by
``x.?f``, ``x[?k]``, ``optional.of``/``optional.none``/``optional.ofNonZeroValue``
and consumed by ``.value()``, ``.hasValue()``, ``.orValue()``, ``.or()``, optional
list elements (``[?x]``) and optional map entries (``{?k: v}``). This module holds
only the value type and the operator names, so that every layer can import it.
"""

from __future__ import annotations

from typing import Final

# Internal function names of the two optional operators (as cel-go names them).
OPT_SELECT: Final = "_?._"  # x.?f, second argument the field name as a string
OPT_INDEX: Final = "_[?_]"  # x[?k]
# Identifiers that are namespaces of optional functions (optional.of(x)).
OPT_NAMESPACES: Final = frozenset({"optional"})
OPTIONAL_TYPE_NAME: Final = "optional_type"


class CelOptional:
    """An immutable optional value: ``present`` and, when present, ``value``."""

    __slots__ = ("present", "value")

    present: bool
    value: object

    def __init__(self, present: bool, value: object = None) -> None:
        object.__setattr__(self, "present", present)
        object.__setattr__(self, "value", value if present else None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CelOptional is immutable")

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"

    # Python equality is not CEL equality (values.cel_eq is); identity hashing keeps
    # optionals usable as dict values without pretending they are CEL map keys.
    __hash__ = object.__hash__


OPT_NONE: Final = CelOptional(False)


def of(value: object) -> CelOptional:
    return CelOptional(True, value)
