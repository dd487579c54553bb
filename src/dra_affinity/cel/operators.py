"""CEL's operators as metered functions ``op(a, b, meter) -> value``.

Every operator family is written once: arithmetic is a table of
:class:`Arith` rows (per operand kind, the Python operation and its range
rule) turned into a metered function by :func:`metered_arith`; ordering is a
table of Python comparisons turned into metered functions by
:func:`metered_ordering`. Costs follow cel-go's runtime ``CostTracker``: 1 for
arithmetic and ordering of numbers, ``ceil(0.1 * size)`` for string and bytes
work, the list size for ``in`` on a list.

Beyond cel-go, where its O(1) accounting hides O(n) work here: list
concatenation also costs 0.1 per element copied, and equality of nested
lists/maps also costs the size of every inner list/map compared. A string is
charged at least 0.1 per byte of the memory it takes (see
:func:`~.library.build_cost`) before it is built.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from dra_affinity.api.numbers import INT64_MAX, INT64_MIN, UINT64_MAX

from .errors import (
    DIVISION_BY_ZERO,
    INVALID_ARGUMENT,
    OVERFLOW,
    RUNTIME,
    CELEvalError,
)
from .lib_dra import DomainMap
from .library import build_cost, nso, str_cost
from .library_opt import opt_index
from .libs import TIME_NO_MATCH, time_arith
from .meter import Meter, charge, exceeded, missing_key
from .optionals import CelOptional
from .quantity import Quantity
from .semver import Semver
from .values import (
    UInt,
    cel_eq,
    check_qualifier,
    compare,
    is_list,
    is_map,
    list_position,
    map_lookup,
    value_size,
)

BinaryOp = Callable[[Any, Any, Meter], object]


def overflow() -> NoReturn:
    raise CELEvalError("integer overflow", OVERFLOW)


# -- indexing -------------------------------------------------------------


def index_value(v: Any, k: Any) -> object:
    """``v[k]`` on a list or map (no cost: the caller charges the index)."""
    tv = type(v)
    if tv is list or tv is tuple or (tv is not str and tv is not dict and is_list(v)):
        i = list_position(k)
        seq: list[object] = v
        if 0 <= i < len(seq):
            return seq[i]
        raise CELEvalError(f"index out of range: {i}", INVALID_ARGUMENT)
    if tv is dict or is_map(v):
        found, r = map_lookup(v, k)
        if found:
            return r
        check_qualifier(k)
        missing_key(k)
    if tv is CelOptional:  # indexing through an optional: an optional
        return opt_index(v, k)
    nso("_[_]", v, k)


# -- equality with nested metering ------------------------------------------


_PLAIN_TYPES: Final = frozenset({str, int, float, bool, bytes, type(None)})
_NUMBERS: Final = frozenset({int, float})


def _element_types(v: Any, m: Meter) -> tuple[frozenset[type], bool]:
    """Element (or map value) types of a container, and whether its floats are NaN-free.

    Cached per object for the evaluation (the cache keeps the object alive, so
    its id cannot be reused); values are never mutated during evaluation.
    """
    cache = m.types
    if cache is None:
        cache = m.types = {}
    hit = cache.get(id(v))
    if hit is not None and hit[0] is v:
        return hit[1], hit[2]
    items = v.values() if type(v) is dict else v
    types = frozenset(map(type, items))
    if type(v) is dict and not set(map(type, v)) <= {str}:
        types = types | {object}  # non-string keys: never take the shortcut
    nan_free = True
    if float in types and types <= _NUMBERS:
        total = sum(items)
        nan_free = total == total
    elif float in types:
        nan_free = False  # mixed with non-numbers: not worth a scan; use the slow path
    cache[id(v)] = (v, types, nan_free)
    return types, nan_free


def _fast_flat_eq(x: Any, y: Any, m: Meter) -> bool | None:
    """Equality at C speed when Python's ``==`` agrees with CEL's for every element pair.

    That holds for flat lists (and str-keyed maps) of str, int, float, bool,
    bytes and null, as long as bools never meet numbers and no NaN is
    involved. ``None`` when the shortcut does not apply.
    """
    tx, ty = type(x), type(y)
    lists = (tx is list or tx is tuple) and (ty is list or ty is tuple)
    if not lists and not (tx is dict and ty is dict):
        return None
    types_x, ok_x = _element_types(x, m)
    types_y, ok_y = _element_types(y, m)
    both = types_x | types_y
    if not (ok_x and ok_y and both <= _PLAIN_TYPES):
        return None
    if (bool in both and (int in both or float in both)) or (int in both and float in both):
        return None  # Python's == differs from CEL's: bool meets a number, int a double
    if x is y:
        return True
    if tx is not ty:
        return bool(list(x) == list(y))
    return bool(x == y)


def deep_eq(a: Any, b: Any, m: Meter, free_levels: int) -> bool:
    """CEL equality of containers; charges the size of every container below ``free_levels``.

    cel-go charges equality by the top-level size only; comparing nested
    containers element by element in Python is far slower than in Go, so
    inner containers are charged by their size to keep the work
    proportional to the budget.
    """

    def rec(x: Any, y: Any, depth: int) -> bool:
        if is_list(x):
            if not is_list(y):
                return False
        elif is_map(x):
            if not is_map(y):
                return False
        else:
            return cel_eq(x, y)
        if len(x) != len(y):
            return False
        if depth >= free_levels:
            charge(m, len(x))
        fast = _fast_flat_eq(x, y, m)
        if fast is not None:
            return fast
        if is_list(x):
            return all(rec(xi, yi, depth + 1) for xi, yi in zip(x, y, strict=True))
        for k, xv in x.items():
            found, yv = map_lookup(y, k)
            if not found or not rec(xv, yv, depth + 1):
                return False
        return True

    return rec(a, b, 0)


def is_container(v: Any) -> bool:
    t = type(v)
    if t is str or t is int or t is bool or t is float or t is bytes or v is None:
        return False
    return is_list(v) or is_map(v)


def eq_op(a: Any, b: Any, m: Meter) -> bool:
    ta = type(a)
    tb = type(b)
    if ta is tb and (ta is int or ta is bool or ta is float):
        c = m.cost + 1
        m.cost = c
        if c > m.limit:
            exceeded(m)
        return bool(a == b)
    if ta is str and tb is str:
        la = len(a)
        lb = len(b)
        charge(m, str_cost(la if la < lb else lb))
        return bool(a == b)
    if (ta is Semver or ta is Quantity) and tb is not ta and b is not None:
        # Kubernetes' Semver and Quantity values compare only with their own type
        # (their Equal is no such overload otherwise; a string on the left is unequal)
        charge(m, 1)
        nso("_==_", a, b)
    sa = value_size(a)
    sb = value_size(b)
    charge(m, str_cost(sa if sa < sb else sb))
    if is_container(a) and is_container(b):
        return deep_eq(a, b, m, 1)
    return cel_eq(a, b)


def ne_op(a: Any, b: Any, m: Meter) -> bool:
    return not eq_op(a, b, m)


def in_op(a: Any, b: Any, m: Meter) -> bool:
    if is_list(b):
        seq: list[object] = b
        charge(m, len(seq))
        if is_container(a):
            return any(is_container(x) and deep_eq(a, x, m, 0) for x in seq)
        ta = type(a)
        if ta is str or ta is int:
            for x in seq:
                if type(x) is ta and x == a:
                    return True
            if ta is str:
                return False
        return any(cel_eq(a, x) for x in seq)
    if is_map(b):
        charge(m, 1)
        if type(b) is DomainMap:  # real membership, not the empty map of an unknown domain
            return type(a) is str and dict.__contains__(b, a)
        return map_lookup(b, a)[0]
    nso("@in", a, b)


# -- arithmetic: one table, one metered factory ---------------------------------


def _int_div(x: int, y: int) -> int:
    if y == 0:
        raise CELEvalError("division by zero", DIVISION_BY_ZERO)
    if x == INT64_MIN and y == -1:
        overflow()
    q = abs(x) // abs(y)
    return -q if (x < 0) != (y < 0) else q


def _int_mod(x: int, y: int) -> int:
    if y == 0:
        raise CELEvalError("modulus by zero", DIVISION_BY_ZERO)
    if x == INT64_MIN and y == -1:
        overflow()
    r = abs(x) % abs(y)
    return -r if x < 0 else r


def _uint_div(x: int, y: int) -> int:
    if y == 0:
        raise CELEvalError("division by zero", DIVISION_BY_ZERO)
    return x // y


def _uint_mod(x: int, y: int) -> int:
    if y == 0:
        raise CELEvalError("modulus by zero", DIVISION_BY_ZERO)
    return x % y


def _float_div(x: float, y: float) -> float:
    if y == 0.0:
        # IEEE 754, as in Go: no error for floating-point division by zero.
        if x != x or x == 0.0:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def _concat(a: Any, b: Any, m: Meter) -> object:
    """``+`` of strings, bytes and lists: charged for what it builds, before building it."""
    ta = type(a)
    if ta is type(b) and (ta is str or ta is bytes):
        n = len(a) + len(b)
        charge(m, build_cost(str_cost(n), n, a, b) if ta is str else str_cost(n))
        return a + b
    if ta is not str and type(b) is not str and is_list(a) and is_list(b):
        la: list[object] = a
        lb: list[object] = b
        charge(m, 1 + str_cost(len(la) + len(lb)))
        return [*la, *lb]
    return _NO_MATCH


_NO_MATCH: Final = object()


def _time(op: str, a: Any, b: Any, m: Meter) -> object:
    """Timestamp and duration arithmetic (cost 1), or _NO_MATCH."""
    r = time_arith(op, a, b)
    if r is TIME_NO_MATCH:
        return _NO_MATCH
    charge(m, 1)
    return r


def _concat_or_time(a: Any, b: Any, m: Meter) -> object:
    r = _concat(a, b, m)
    return _time("+", a, b, m) if r is _NO_MATCH else r


@dataclass(frozen=True, slots=True)
class Arith:
    """One arithmetic operator: its CEL name and the operation per operand kind.

    ``on_int``/``on_uint`` operations take and return Python ints; the factory
    checks the int64/uint64 range of the result. ``other`` handles the
    remaining kinds (concatenation) and returns ``_NO_MATCH`` if it does not
    apply.
    """

    name: str
    on_int: Callable[[int, int], int] | None
    on_float: Callable[[float, float], float] | None
    on_uint: Callable[[int, int], int] | None
    other: BinaryOp | None = None


ARITHMETIC: Final[Mapping[str, Arith]] = {
    "+": Arith("_+_", operator.add, operator.add, operator.add, lambda a, b, m: _concat_or_time(a, b, m)),
    "-": Arith("_-_", operator.sub, operator.sub, operator.sub, lambda a, b, m: _time("-", a, b, m)),
    "*": Arith("_*_", operator.mul, operator.mul, operator.mul),
    "/": Arith("_/_", _int_div, _float_div, _uint_div),
    "%": Arith("_%_", _int_mod, None, _uint_mod),
}


def metered_arith(spec: Arith) -> BinaryOp:
    """The metered function of one arithmetic operator (cost 1, range-checked)."""
    name, fi, ff, fu, other = spec.name, spec.on_int, spec.on_float, spec.on_uint, spec.other

    def arith(a: Any, b: Any, m: Meter) -> object:
        ta = type(a)
        if ta is type(b):
            if ta is int and fi is not None:
                c = m.cost + 1
                m.cost = c
                if c > m.limit:
                    exceeded(m)
                r = fi(a, b)
                if INT64_MIN <= r <= INT64_MAX:
                    return r
                overflow()
            if ta is float and ff is not None:
                charge(m, 1)
                return ff(a, b)
            if ta is UInt and fu is not None:
                charge(m, 1)
                u = fu(a.value, b.value)
                if 0 <= u <= UINT64_MAX:
                    return UInt(u)
                raise CELEvalError("unsigned integer overflow", OVERFLOW)
        if other is not None:
            r2 = other(a, b, m)
            if r2 is not _NO_MATCH:
                return r2
        nso(name, a, b)

    arith.__name__ = arith.__qualname__ = "arith" + name
    return arith


# -- ordering: one table, one metered factory -----------------------------------

ORDERING: Final[Mapping[str, Callable[[Any, Any], bool]]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def metered_ordering(op: str) -> BinaryOp:
    """The metered function of one ordering operator.

    Numbers of one kind cost 1 and compare natively; strings and bytes cost
    ``ceil(0.1 * the shorter size)``; the rest (cross-kind numbers, uint,
    bool, Quantity...) go through CEL's ``compare``.
    """
    py = ORDERING[op]
    name = f"_{op}_"

    def ordering(a: Any, b: Any, m: Meter) -> bool:
        ta = type(a)
        tb = type(b)
        if ta is tb and (ta is int or (ta is float and a == a and b == b)):
            c = m.cost + 1
            m.cost = c
            if c > m.limit:
                exceeded(m)
            return bool(py(a, b))
        if ta is tb and (ta is str or ta is bytes):
            la = len(a)
            lb = len(b)
            charge(m, str_cost(la if la < lb else lb))
        else:
            charge(m, 1)
        try:
            r = compare(a, b)
        except CELEvalError:
            nso(name, a, b)
        if r is None:
            raise CELEvalError("NaN values cannot be ordered", RUNTIME)
        return py(r, 0)

    ordering.__name__ = ordering.__qualname__ = "ordering" + name
    return ordering


BINARY: Final[Mapping[str, BinaryOp]] = {
    **{op: metered_arith(spec) for op, spec in ARITHMETIC.items()},
    **{op: metered_ordering(op) for op in ORDERING},
    "==": eq_op,
    "!=": ne_op,
    "in": in_op,
}


# -- unary --------------------------------------------------------------------


def not_op(v: Any) -> bool:
    if v is True:
        return False
    if v is False:
        return True
    nso("!_", v)


def neg_op(v: Any) -> object:
    t = type(v)
    if t is int:
        if v == INT64_MIN:
            overflow()
        return -v
    if t is float:
        return -v
    nso("-_", v)


UNARY: Final[Mapping[str, Callable[[Any], object]]] = {"!": not_op, "-": neg_op}
