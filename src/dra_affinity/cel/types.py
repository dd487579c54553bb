"""Static CEL types used by the checker and the cost estimator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Ty:
    """A static type: a name plus type parameters (``list(int)``, ``map(string, dyn)``)."""

    name: str
    params: tuple[Ty, ...] = ()

    def __str__(self) -> str:
        if self.name == "null":
            return "null_type"
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name

    @property
    def elem(self) -> Ty:
        """Element type of a list, value type of a map, ``dyn`` otherwise."""
        if self.name == "list" and self.params:
            return self.params[0]
        if self.name == "map" and len(self.params) == 2:
            return self.params[1]
        return DYN

    @property
    def key(self) -> Ty:
        if self.name == "map" and len(self.params) == 2:
            return self.params[0]
        return DYN


DYN: Final = Ty("dyn")
INT: Final = Ty("int")
UINT: Final = Ty("uint")
DOUBLE: Final = Ty("double")
BOOL: Final = Ty("bool")
STRING: Final = Ty("string")
BYTES: Final = Ty("bytes")
NULL: Final = Ty("null")
TYPE: Final = Ty("type")
QUANTITY: Final = Ty("kubernetes.Quantity")
SEMVER: Final = Ty("kubernetes.Semver")
DEVICE: Final = Ty("kubernetes.DRADevice")
OPTIONAL_NAME: Final = "optional_type"  # optional_type(T), cel-go's optional types


def list_of(t: Ty) -> Ty:
    return Ty("list", (t,))


def map_of(k: Ty, v: Ty) -> Ty:
    return Ty("map", (k, v))


LIST_DYN: Final = list_of(DYN)
MAP_DYN: Final = map_of(DYN, DYN)
LIST_STRING: Final = list_of(STRING)

NUMERIC: Final = frozenset({"int", "uint", "double"})
ORDERED: Final = frozenset({
    "int", "uint", "double", "string", "bytes", "bool",
    "google.protobuf.Timestamp", "google.protobuf.Duration",
})
MAP_KEYS: Final = frozenset({"int", "uint", "bool", "string", "dyn"})

# Fields of the `device` variable of DeviceClass / request selectors, as in
# Kubernetes: device.attributes[domain][name], device.capacity[domain][name].
DEVICE_FIELDS: Final[Mapping[str, Ty]] = {
    "driver": STRING,
    "attributes": map_of(STRING, map_of(STRING, DYN)),
    "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
    "allowMultipleAllocations": BOOL,
}
STRUCT_FIELDS: Final[Mapping[str, Mapping[str, Ty]]] = {DEVICE.name: DEVICE_FIELDS}

_NAMED: Final = {
    "dyn": DYN,
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "bool": BOOL,
    "string": STRING,
    "bytes": BYTES,
    "null": NULL,
    "type": TYPE,
    "quantity": QUANTITY,
    "kubernetes.Quantity": QUANTITY,
    "semver": SEMVER,
    "kubernetes.Semver": SEMVER,
    "device": DEVICE,
    "kubernetes.DRADevice": DEVICE,
    "list": LIST_DYN,
    "map": MAP_DYN,
}


def parse_type(text: str) -> Ty:
    """Parse a declared type: a name (``dyn``, ``device``, ``string``...), ``list(T)`` or ``map(K, V)``."""
    s = text.replace(" ", "")
    if s in _NAMED:
        return _NAMED[s]
    if s.startswith("list(") and s.endswith(")"):
        return list_of(parse_type(s[5:-1]))
    if s.startswith("map(") and s.endswith(")"):
        inner = s[4:-1]
        depth = 0
        for i, c in enumerate(inner):
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "," and depth == 0:
                return map_of(parse_type(inner[:i]), parse_type(inner[i + 1 :]))
    raise ValueError(f"unknown CEL type {text!r}")


def assignable(param: Ty, arg: Ty) -> bool:
    """Can a value of static type ``arg`` be passed where ``param`` is expected?"""
    if param.name == "dyn" or arg.name == "dyn":
        return True
    if param.name != arg.name:
        return False
    if not param.params or not arg.params:
        return True
    return len(param.params) == len(arg.params) and all(
        assignable(p, a) for p, a in zip(param.params, arg.params, strict=True)
    )


_NULLABLE_PAIRS: Final = ({"null", "kubernetes.Quantity"}, {"null", "kubernetes.Semver"})


def comparable_eq(a: Ty, b: Ty) -> bool:
    """Does ``a == b`` type-check? CEL's ``_==_(A, A)``: the types unify, ``dyn`` with
    anything; numbers of different static types do not (``1 == 1.0`` is a compile
    error in cel-go; ``dyn(1) == 1.0`` compares the values at run time)."""
    if a.name == "dyn" or b.name == "dyn":
        return True
    if {a.name, b.name} in _NULLABLE_PAIRS:  # object types (Kubernetes') are nullable
        return True
    if a.name != b.name:
        return False
    if not a.params or not b.params:
        return True
    return len(a.params) == len(b.params) and all(
        comparable_eq(x, y) for x, y in zip(a.params, b.params, strict=True)
    )


def join(a: Ty, b: Ty) -> Ty:
    """The most specific type covering both (``dyn`` if they differ)."""
    if a == b:
        return a
    if a.name == b.name and a.params and b.params and len(a.params) == len(b.params):
        return Ty(a.name, tuple(join(x, y) for x, y in zip(a.params, b.params, strict=True)))
    return DYN
