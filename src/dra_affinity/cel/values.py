"""Runtime value model shared by the evaluator and the function library.

CEL values are plain Python values, except ``uint`` (:class:`UInt`) and type
values (:class:`CelType`), which have no faithful Python counterpart:

=========  ==========================================
CEL        Python
=========  ==========================================
string     ``str``
int        ``int`` (never ``bool``; int64 range)
uint       :class:`UInt`
double     ``float``
bool       ``bool``
null       ``None``
bytes      ``bytes``
list       ``list`` or ``tuple``
map        ``dict`` (any ``Mapping``)
type       :class:`CelType`
=========  ==========================================

Python's ``bool`` is a subclass of ``int``; every check here uses ``type(x) is
...`` so that a CEL bool is never mistaken for an int.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, final

from dra_affinity.api.numbers import INT64_MAX, INT64_MIN, UINT64_MAX

from .errors import INVALID_ARGUMENT, NO_SUCH_OVERLOAD, RUNTIME, CELEvalError
from .optionals import OPTIONAL_TYPE_NAME, CelOptional
from .quantity import Quantity, as_quantity
from .semver import Semver


@final
class UInt:
    """A CEL ``uint`` value (0 .. 2**64-1)."""

    __slots__ = ("value",)
    value: int

    def __init__(self, value: int) -> None:
        if type(value) is not int or not 0 <= value <= UINT64_MAX:
            raise ValueError(f"uint out of range: {value!r}")
        object.__setattr__(self, "value", value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("UInt is immutable")

    def __eq__(self, other: Any) -> bool:
        return type(other) is UInt and other.value == self.value

    def __hash__(self) -> int:
        return hash(("uint", self.value))

    def __lt__(self, other: UInt) -> bool:
        return self.value < other.value

    def __int__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"UInt({self.value})"

    def __str__(self) -> str:
        return str(self.value)


@final
class CelType:
    """A CEL type value, as returned by ``type(x)`` and denoted by ``int``, ``string``..."""

    __slots__ = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("CelType is immutable")

    def __eq__(self, other: Any) -> bool:
        return type(other) is CelType and other.name == self.name

    def __hash__(self) -> int:
        return hash(("type", self.name))

    def __repr__(self) -> str:
        return f"CelType({self.name!r})"

    def __str__(self) -> str:
        return self.name


T_INT = CelType("int")
T_UINT = CelType("uint")
T_DOUBLE = CelType("double")
T_BOOL = CelType("bool")
T_STRING = CelType("string")
T_BYTES = CelType("bytes")
T_NULL = CelType("null_type")
T_LIST = CelType("list")
T_MAP = CelType("map")
T_TYPE = CelType("type")
T_QUANTITY = CelType("kubernetes.Quantity")
T_SEMVER = CelType("kubernetes.Semver")
T_OPTIONAL = CelType(OPTIONAL_TYPE_NAME)

# Identifiers that denote type values in expressions (`type(x) == string`).
TYPE_IDENTIFIERS: Final[Mapping[str, CelType]] = {
    "int": T_INT,
    "uint": T_UINT,
    "double": T_DOUBLE,
    "bool": T_BOOL,
    "string": T_STRING,
    "bytes": T_BYTES,
    "null_type": T_NULL,
    "list": T_LIST,
    "map": T_MAP,
    "type": T_TYPE,
    "optional_type": T_OPTIONAL,
}

_SCALAR_TYPES: Final[dict[type, CelType]] = {
    bool: T_BOOL,
    int: T_INT,
    float: T_DOUBLE,
    str: T_STRING,
    bytes: T_BYTES,
    type(None): T_NULL,
    UInt: T_UINT,
    list: T_LIST,
    tuple: T_LIST,
    dict: T_MAP,
    CelType: T_TYPE,
    Quantity: T_QUANTITY,
    Semver: T_SEMVER,
    CelOptional: T_OPTIONAL,
}


# Value types of library modules (lib_*.py): equal when of one type and ``==``;
# ordered by their own ``<`` when listed in _ORDERED_LIBRARY_TYPES.
_LIBRARY_TYPES: Final[set[type]] = set()
_ORDERED_LIBRARY_TYPES: Final[set[type]] = set()


def register_value_type(py_type: type, name: str, *, ordered: bool = False) -> CelType:
    """Declare a library value type: its CEL type name, equality and (optionally) ordering."""
    t = CelType(name)
    _SCALAR_TYPES[py_type] = t
    _LIBRARY_TYPES.add(py_type)
    if ordered:
        _ORDERED_LIBRARY_TYPES.add(py_type)
    return t


def is_ordered_library_type(t: type) -> bool:
    """Is ``t`` a library value type with an ordering (timestamps, durations)?"""
    return t in _ORDERED_LIBRARY_TYPES


def cel_type_of(value: Any) -> CelType:
    """The CEL type of a runtime value."""
    t = _SCALAR_TYPES.get(type(value))
    if t is not None:
        return t
    if isinstance(value, Mapping):
        return T_MAP
    if isinstance(value, (list, tuple)):
        return T_LIST
    if isinstance(value, str):
        return T_STRING
    if as_quantity(value) is not None:
        return T_QUANTITY
    raise CELEvalError(f"unsupported value type {type(value).__name__}", NO_SUCH_OVERLOAD)


def type_name(value: Any) -> str:
    """CEL type name of a value, for messages; never raises."""
    try:
        return cel_type_of(value).name
    except CELEvalError:
        return type(value).__name__


def no_such_overload(name: str, *args: Any) -> CELEvalError:
    """cel-go's error for a call of ``name`` that no overload accepts, naming the
    arguments' types: ``no such overload: size(int)``."""
    return CELEvalError(
        f"no such overload: {name}({', '.join(type_name(a) for a in args)})", NO_SUCH_OVERLOAD
    )


def is_list(v: Any) -> bool:
    t = type(v)
    return t is list or t is tuple or (t is not str and isinstance(v, (list, tuple)))


def list_position(k: Any) -> int:
    """A list index as cel-go reads one: an int, a uint or a double without a fraction
    (the caller checks the range)."""
    tk = type(k)
    if tk is int:
        i: int = k
        return i
    if tk is UInt:
        return int(k.value)
    if tk is float and k.is_integer():
        return int(k)
    raise CELEvalError(f"unsupported index type '{type_name(k)}' in list", NO_SUCH_OVERLOAD)


def is_map(v: Any) -> bool:
    return type(v) is dict or isinstance(v, Mapping)


def _num(v: Any) -> int | float | None:
    t = type(v)
    if t is int or t is float:
        return v  # type: ignore[no-any-return]
    if t is UInt:
        return int(v.value)
    return None


def _as_doubles(na: int | float, nb: int | float) -> tuple[int | float, int | float]:
    """An int (or uint) and a double compared as cel-go compares them: the integer
    converted to a double (so 2**63-1 equals 2**63 as a double, as upstream).
    An integer past the double range (only from caller data) stays exact."""
    try:
        return float(na), float(nb)
    except OverflowError:
        return na, nb


def cel_eq(a: Any, b: Any) -> bool:
    """CEL equality with heterogeneous numeric comparison; different kinds are unequal."""
    ta = type(a)
    tb = type(b)
    if ta is tb and (ta is str or ta is int or ta is bool or ta is bytes):
        return bool(a == b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    na = _num(a)
    if na is not None:
        nb = _num(b)
        if nb is None:
            return False
        if type(na) is not type(nb):
            na, nb = _as_doubles(na, nb)
        return na == nb  # NaN is unequal to everything
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if ta is bytes or tb is bytes:
        return ta is tb and a == b
    if is_list(a):
        if not is_list(b):
            return False
        la: list[object] | tuple[object, ...] = a
        lb: list[object] | tuple[object, ...] = b
        return len(la) == len(lb) and all(cel_eq(x, y) for x, y in zip(la, lb, strict=True))
    if is_map(a):
        if not is_map(b):
            return False
        ma: Mapping[object, object] = a
        mb: Mapping[object, object] = b
        if len(ma) != len(mb):
            return False
        for k, v in ma.items():
            found, w = map_lookup(mb, k)
            if not found or not cel_eq(v, w):
                return False
        return True
    if ta is Quantity and tb is Quantity:
        return bool(a == b)
    if ta is Semver and tb is Semver:
        return bool(a == b)
    if ta is CelType and tb is CelType:
        return bool(a == b)
    if ta is CelOptional or tb is CelOptional:
        return (
            ta is tb and a.present == b.present and (not a.present or cel_eq(a.value, b.value))
        )
    if ta in _LIBRARY_TYPES:
        return ta is tb and bool(a == b)
    qa = as_quantity(a)
    if qa is not None:
        qb = as_quantity(b)
        return qb is not None and qa == qb
    return False


class ConstList(list):  # type: ignore[type-arg]
    """A read-only list: the value of a constant list literal, shared across evaluations."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("constant CEL list is read-only")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _readonly
    append = extend = insert = pop = remove = clear = sort = reverse = _readonly


class CelMap(dict):  # type: ignore[type-arg]
    """A map built by a CEL map literal: a ``dict`` plus an index of its keys by CEL equality.

    CEL keys ``1`` and ``1u`` are the same key and ``true`` never equals ``1``;
    the index makes lookups with such keys O(1).
    """

    __slots__ = ("canon", "frozen")

    def __init__(self) -> None:
        super().__init__()
        self.canon: dict[tuple[str, object], object] = {}
        self.frozen = False

    def freeze(self) -> None:
        """Make the map read-only (constant literals are shared across evaluations)."""
        self.frozen = True

    def _check(self) -> None:
        if self.frozen:
            raise TypeError("constant CEL map is read-only")

    def __setitem__(self, key: object, value: object) -> None:
        self._check()
        super().__setitem__(key, value)

    def __delitem__(self, key: object) -> None:
        self._check()
        super().__delitem__(key)

    def clear(self) -> None:
        self._check()
        super().clear()

    def pop(self, *args: Any) -> Any:
        self._check()
        return super().pop(*args)

    def popitem(self) -> tuple[Any, Any]:
        self._check()
        return super().popitem()

    def setdefault(self, *args: Any) -> Any:
        self._check()
        return super().setdefault(*args)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._check()
        super().update(*args, **kwargs)

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]
        self._check()
        return super().__ior__(other)


def canon_key(k: object) -> tuple[str, object] | None:
    """The CEL identity of a map key (int and uint coincide), or None if it cannot be a key."""
    t = type(k)
    if t is str:
        return ("s", k)
    if t is bool:
        return ("b", k)
    if t is int:
        return ("n", k)
    if t is UInt:
        return ("n", k.value)  # type: ignore[attr-defined]
    if t is float and k.is_integer():  # type: ignore[attr-defined]
        return ("n", int(k))  # type: ignore[call-overload]
    return None


_TWO_63: Final = 2.0**63
_TWO_64: Final = 2.0**64


def member_key(v: object) -> tuple[str, object] | None:
    """The key of ``v`` in a set of :func:`set_members` (None: a NaN or not a scalar)."""
    if type(v) is float:
        return ("d", v) if v == v else None
    return canon_key(v)


def set_members(items: Sequence[object]) -> frozenset[tuple[str, object]] | None:
    """A constant list of scalars as cel-go's planner hashes it for ``x in [...]``.

    Each element is a key, plus its conversions to the other numeric kinds: an
    int or uint as a double (rounded, as Go converts), a double as an int or uint
    only where that conversion is exact. So ``2**63-1`` finds the double ``2**63``
    in the set but not the other way round, as upstream. None when an element is
    not a scalar (or is bytes, which cel-go does not hash).
    """
    keys: set[tuple[str, object]] = set()
    for x in items:
        if isinstance(x, float):
            if x == x:
                keys.add(("d", x))
            if x.is_integer() and -_TWO_63 < x < _TWO_64:
                keys.add(("n", int(x)))
            continue
        k = canon_key(x)
        if k is None:
            return None
        keys.add(k)
        if k[0] == "n":
            keys.add(("d", float(k[1])))  # type: ignore[arg-type]
    return frozenset(keys)


_QUALIFIER_TYPES: Final = frozenset({str, int, UInt, float, bool})


def check_qualifier(key: object) -> None:
    """A map index must be a string, number or bool: cel-go refuses any other key
    type ("invalid qualifier type") before it looks at the map, even an empty one."""
    if type(key) not in _QUALIFIER_TYPES:
        raise CELEvalError(f"invalid qualifier type: {type_name(key)}", RUNTIME)


def map_lookup(m: Mapping[object, object], key: Any) -> tuple[bool, object]:
    """Look a key up with CEL key equality (``1``, ``1u`` and ``1.0`` match; ``true`` never matches ``1``)."""
    if type(key) is str:
        try:
            return True, m[key]
        except KeyError:
            return False, None
        except TypeError:
            return False, None
    if type(m) is CelMap:
        ck = canon_key(key)
        if ck is None or ck not in m.canon:
            return False, None
        return True, m[m.canon[ck]]
    # Maps from the activation (decoded JSON) have string keys, so a
    # non-string key rarely matches; small maps are scanned with CEL key
    # equality, large ones use Python hashing (exact unless a caller-supplied
    # map mixes bool and int keys).
    ck = canon_key(key)
    if ck is None:
        return False, None
    if len(m) <= 64:
        for k, v in m.items():
            if canon_key(k) == ck:
                return True, v
        return False, None
    probe = ck[1]
    try:
        if probe in m:
            return True, m[probe]
    except TypeError:
        pass
    return False, None


def compare(a: Any, b: Any) -> int | None:
    """Ordering for ``<``-family operators: -1/0/1, ``None`` if unordered (NaN).

    Raises ``no_such_overload`` for kinds that have no ordering.
    """
    ta = type(a)
    tb = type(b)
    if ta is tb and (ta is str or ta is int or ta is bytes or ta is bool):
        return -1 if a < b else (1 if a > b else 0)
    if ta is not bool and tb is not bool:
        na = _num(a)
        nb = _num(b)
        if na is not None and nb is not None:
            if type(na) is not type(nb):
                na, nb = _as_doubles(na, nb)
            if na < nb:
                return -1
            if na > nb:
                return 1
            if na == nb:
                return 0
            return None
        if isinstance(a, str) and isinstance(b, str):
            return -1 if a < b else (1 if a > b else 0)
    if ta is tb and ta in _ORDERED_LIBRARY_TYPES:
        return -1 if a < b else (1 if b < a else 0)
    raise CELEvalError(
        f"no such overload: ordering of {type_name(a)} and {type_name(b)}", NO_SUCH_OVERLOAD
    )


def length_of(v: Any) -> int | None:
    """The length of a CEL string, bytes, list or map (what ``size()`` accepts); None
    for any other value."""
    t = type(v)
    if t is str or t is list or t is dict or t is bytes or t is tuple:
        return len(v)
    if isinstance(v, (str, list, tuple, Mapping)):
        return len(v)
    return None


def value_size(v: Any) -> int:
    """Size as cel-go's cost tracker sees it: the :func:`length_of` a sized value, 1 otherwise."""
    n = length_of(v)
    return 1 if n is None else n


def format_double(f: float) -> str:
    """Format like Go's ``%g`` (shortest representation), as cel-go's ``string(double)``."""
    if f != f:
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0.0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digit_tuple, exp = Decimal(repr(f)).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    exp += len("".join(map(str, digit_tuple))) - len(digits)
    nd = len(digits)
    dp = nd + exp  # position of the decimal point relative to the digit string
    x = dp - 1
    neg = "-" if sign else ""
    if x < -4 or x >= 6:
        mant = digits[0] + ("." + digits[1:] if nd > 1 else "")
        return f"{neg}{mant}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * (-dp)}{digits}"
    if dp >= nd:
        return f"{neg}{digits}{'0' * (dp - nd)}"
    return f"{neg}{digits[:dp]}.{digits[dp:]}"


def check_int(v: int) -> int:
    """Raise ``overflow`` if ``v`` is outside int64."""
    if INT64_MIN <= v <= INT64_MAX:
        return v
    raise CELEvalError("integer overflow", "overflow")


def check_uint(v: int) -> UInt:
    if 0 <= v <= UINT64_MAX:
        return UInt(v)
    raise CELEvalError("unsigned integer overflow", "overflow")


_ABSENT: Final = object()


def map_insert(out: CelMap, k: object, v: object, *, repeated_ok: bool = True) -> None:
    """Add ``k: v`` to a map being built; CEL's errors for bad (and repeated) keys.

    In a map literal a repeated key keeps its first spelling and takes the last
    value, as cel-go's map literals do (constant or not); ``repeated_ok=False``
    (``transformMapEntry``) makes it an error, as cel-go's ``cel.@mapInsert`` does.
    """
    ck = canon_key(k) if type(k) is not float else None
    if ck is None:
        raise CELEvalError(f"unsupported map key type: {type_name(k)}", INVALID_ARGUMENT)
    first = out.canon.get(ck, _ABSENT)
    if first is not _ABSENT:
        if not repeated_ok:
            raise CELEvalError(f"insert failed: repeated key {k!r}", INVALID_ARGUMENT)
        out[first] = v
        return
    if ck[0] != "s" and k in out:
        # Python's dict cannot hold both true and 1 (or false and 0).
        raise CELEvalError(f"map literal keys {k!r} and {ck!r} collide", INVALID_ARGUMENT)
    out.canon[ck] = k
    out[k] = v
