"""cel-go extension libraries of the Kubernetes CEL environment: ``ext.Sets`` and ``ext.Lists`` (version 3).

Costs are those of cel-go's trackers for these versions, charged before the
call from the arguments (so a result the budget cannot pay for, such as
``lists.range(10000000)``, is never built):

* ``sets.contains``/``sets.intersects``: 1 + |a| x |b|; ``sets.equivalent``: 1 + 2 |a| x |b|;
* ``slice``, ``reverse``, ``lists.range``: the result's size + 1 + 10 (list creation);
* ``flatten(depth)``: depth x the input's size + 11 (version 3's "legacy" rule), or the
  half of what the result holds beyond the input + 11 where that is more (beyond
  cel-go: the result is counted before it is built);
* ``distinct``, ``sort``: 2 n^2 (2.1 n^2 for strings and bytes) + 11.

Namespaced functions (``sets.contains(a, b)``) are resolved by the parser into
global calls named ``sets.contains``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Final

from . import types
from .errors import INVALID_ARGUMENT, CELEvalError
from .values import (
    UInt,
    cel_eq,
    compare,
    is_list,
    is_ordered_library_type,
    no_such_overload,
)

_CALL: Final = 1
_LIST_CREATE: Final = 10


def _lists(name: str, *args: Any) -> tuple[list[object], ...]:
    if not all(is_list(a) for a in args):
        raise no_such_overload(name, *args)
    return tuple(list(a) for a in args)


def _has(items: Sequence[object], x: object) -> bool:
    return any(cel_eq(x, y) for y in items)


# -- ext.Sets -------------------------------------------------------------------


def sets_contains(a: Any, b: Any) -> bool:
    la, lb = _lists("sets.contains", a, b)
    return all(_has(la, x) for x in lb)


def sets_intersects(a: Any, b: Any) -> bool:
    la, lb = _lists("sets.intersects", a, b)
    return any(_has(la, x) for x in lb)


def sets_equivalent(a: Any, b: Any) -> bool:
    la, lb = _lists("sets.equivalent", a, b)
    return all(_has(la, x) for x in lb) and all(_has(lb, x) for x in la)


def _sets_cost(factor: int) -> Any:
    def cost(args: tuple[object, ...]) -> int:
        a, b = args
        na = len(a) if is_list(a) else 1  # type: ignore[arg-type]
        nb = len(b) if is_list(b) else 1  # type: ignore[arg-type]
        return _CALL + factor * na * nb

    return cost


# -- ext.Lists (version 3) ------------------------------------------------------


def list_slice(lst: Any, start: Any, end: Any) -> list[object]:
    if not is_list(lst) or type(start) is not int or type(end) is not int:
        raise no_such_overload("slice", lst, start, end)
    n = len(lst)
    if start < 0 or end < 0:
        raise CELEvalError(
            f"cannot slice({start}, {end}), negative indexes not supported", INVALID_ARGUMENT
        )
    if start > end:
        raise CELEvalError(
            f"cannot slice({start}, {end}), start index must be less than or equal to end index",
            INVALID_ARGUMENT,
        )
    if end > n:
        raise CELEvalError(f"cannot slice({start}, {end}), list is length {n}", INVALID_ARGUMENT)
    return list(lst)[start:end]


def _slice_cost(args: tuple[object, ...]) -> int:
    lst, start, end = args
    size = 0
    if is_list(lst) and type(start) is int and type(end) is int and 0 <= start <= end:
        size = min(end, len(lst)) - start  # type: ignore[arg-type]
    return max(size, 0) + _CALL + _LIST_CREATE


def lists_range(n: Any) -> list[object]:
    if type(n) is not int:
        raise no_such_overload("lists.range", n)
    if n < 0:
        raise CELEvalError(f"lists.range: size must be non-negative, got {n}", INVALID_ARGUMENT)
    return list(range(n))


def _range_cost(args: tuple[object, ...]) -> int:
    n = args[0]
    return (max(n, 0) if type(n) is int else 0) + _CALL + _LIST_CREATE


def list_reverse(lst: Any) -> list[object]:
    if not is_list(lst):
        raise no_such_overload("reverse", lst)
    return list(lst)[::-1]


def _size_cost(args: tuple[object, ...]) -> int:
    lst = args[0]
    return (len(lst) if is_list(lst) else 0) + _CALL + _LIST_CREATE  # type: ignore[arg-type]


def list_flatten(lst: Any, depth: Any = 1) -> list[object]:
    if not is_list(lst) or type(depth) is not int:
        raise no_such_overload("flatten", lst, depth)
    if depth < 0:
        raise CELEvalError("level must be non-negative", INVALID_ARGUMENT)

    def flat(items: Sequence[object], level: int) -> list[object]:
        out: list[object] = []
        for x in items:
            if level > 0 and is_list(x):
                out.extend(flat(list(x), level - 1))  # type: ignore[call-overload]
            else:
                out.append(x)
        return out

    return flat(list(lst), depth)


#: More elements than any budget pays for: counting a flattened size stops here.
_FLATTEN_COUNT_CAP: Final = 1 << 40


def flattened_size(lst: Sequence[object], depth: int) -> int:
    """How many elements ``lst.flatten(depth)`` has, without building it: a list seen
    again at the same level (``l.map(x, l)`` holds one list n times) is counted once,
    so this is linear in the distinct lists, while the result may be far larger."""
    seen: dict[tuple[int, int], int] = {}

    def count(items: Sequence[object], level: int) -> int:
        key = (id(items), level)
        hit = seen.get(key)
        if hit is None:
            hit = 0
            for x in items:
                hit += count(x, level - 1) if level > 0 and is_list(x) else 1  # type: ignore[arg-type]
                if hit > _FLATTEN_COUNT_CAP:
                    break
            seen[key] = hit
        return hit

    return count(lst, depth)


def _flatten_cost(args: tuple[object, ...]) -> int:
    """cel-go's ``depth x size + 11``, or half a unit per element the result holds
    beyond the input's + 11 where that is more: ``flatten`` copies every element it
    returns (8 bytes each), and a list of n references to one list of n references
    flattens to n^3 elements, for which cel-go charges 2n + 11. Half a unit keeps
    cel-go's charge wherever the inner lists hold up to three elements on average, and
    holds a result to 2 million elements (16 MB) per budget of 1,000,000."""
    lst = args[0]
    depth = args[1] if len(args) > 1 else 1
    if not is_list(lst) or type(depth) is not int or depth < 0:
        return _CALL + _LIST_CREATE  # an error, raised by the call
    size = len(lst)  # type: ignore[arg-type]
    grown = flattened_size(lst, depth) - size  # type: ignore[arg-type]
    return max(size * depth, -(-grown // 2)) + _CALL + _LIST_CREATE


def list_distinct(lst: Any) -> list[object]:
    if not is_list(lst):
        raise no_such_overload("distinct", lst)
    out: list[object] = []
    for x in lst:
        if not _has(out, x):
            out.append(x)
    return out


_SORTABLE: Final = (int, UInt, float, bool, str, bytes)


def list_sort(lst: Any) -> list[object]:
    if not is_list(lst):
        raise no_such_overload("sort", lst)
    items = list(lst)
    if not items:
        return []
    kind = type(items[0])
    sortable = kind in _SORTABLE or is_ordered_library_type(kind)
    if not sortable or any(type(x) is not kind for x in items):
        raise CELEvalError(
            "list elements must have the same type and be comparable", INVALID_ARGUMENT
        )
    return sorted(items, key=functools.cmp_to_key(lambda a, b: compare(a, b) or 0))


def _self_compare_cost(args: tuple[object, ...]) -> int:
    lst = args[0]
    if not is_list(lst):
        return _CALL + _LIST_CREATE
    items = list(lst)  # type: ignore[call-overload]
    factor = 2.0
    if items and type(items[0]) in (str, bytes):
        factor += 0.1
    return int(len(items) * len(items) * factor) + _CALL + _LIST_CREATE


# -- signatures (name, member, arity, impl, overloads as (result, *params), cost) ------

_L, _B, _I = types.LIST_DYN, types.BOOL, types.INT


def _same(arg_types: Sequence[types.Ty]) -> types.Ty:
    return arg_types[0]


def _flattened(arg_types: Sequence[types.Ty]) -> types.Ty:
    """``list(list(T)).flatten()`` is a ``list(T)`` (cel-go's typed overload)."""
    recv = arg_types[0]
    if recv.name == "list" and recv.elem.name == "list":
        return recv.elem
    return _L


EXT_FUNCTIONS: Final = (
    ("sets.contains", False, 2, sets_contains, [(_B, _L, _L)], _sets_cost(1)),
    ("sets.intersects", False, 2, sets_intersects, [(_B, _L, _L)], _sets_cost(1)),
    ("sets.equivalent", False, 2, sets_equivalent, [(_B, _L, _L)], _sets_cost(2)),
    ("slice", True, 2, list_slice, [(_same, _L, _I, _I)], _slice_cost),
    ("lists.range", False, 1, lists_range, [(types.list_of(_I), _I)], _range_cost),
    ("reverse", True, 0, list_reverse, [(_same, _L)], _size_cost),
    ("flatten", True, 0, list_flatten, [(_flattened, _L)], _flatten_cost),
    ("flatten", True, 1, list_flatten, [(_L, _L, _I)], _flatten_cost),
    ("distinct", True, 0, list_distinct, [(_same, _L)], _self_compare_cost),
    ("sort", True, 0, list_sort, [(_same, _L)], _self_compare_cost),
)

NAMESPACES: Final = frozenset({"sets", "lists"})
