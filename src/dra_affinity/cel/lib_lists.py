"""ext.Lists' ``sortBy`` (version 2+, in Kubernetes' environment since 1.34).

cel-go defines ``list.sortBy(e, key)`` as a macro: the list is bound once to a
hidden variable and ``@sortByAssociatedKeys(list, list.map(e, key))`` sorts it by
the keys. Here the parser expands it the same way except for the binding: the
list expression appears twice (:func:`expand_sort_by`), so it is evaluated and
charged twice (a literal or a variable: a few units more than cel-go).

``@sortByAssociatedKeys`` sorts stably (Go's ``sort.Slice`` is not stable for
more than 12 elements, so equal keys in longer lists may come out in another
order there) and fails, as cel-go, when the keys are not all of one comparable
kind; its cost is cel-go's: ``2 n^2`` (``2.1 n^2`` for string or byte keys) + 11.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Final

from . import ast, types
from .errors import INVALID_ARGUMENT, NO_SUCH_OVERLOAD, CELCompileError, CELEvalError
from .values import UInt, compare, is_list, is_ordered_library_type, type_name

SORT_BY_FUNCTION: Final = "@sortByAssociatedKeys"
_COMPARABLE: Final = (int, UInt, float, bool, str, bytes)


def expand_sort_by(pos: int, target: ast.Expr, args: tuple[ast.Expr, ...]) -> ast.Expr:
    """``target.sortBy(e, key)`` -> ``target.@sortByAssociatedKeys(target.map(e, key))``."""
    # cel-go refuses literals and map/struct constructions; operators, indexing and
    # ternaries are calls in its AST, so they are accepted.
    if isinstance(target, (ast.Const, ast.MapLit)):
        raise CELCompileError(
            "sortBy can only be applied to a list, identifier, comprehension, call or select "
            "expression",
            target.pos,
        )
    var = args[0]
    if not isinstance(var, ast.Ident):
        raise CELCompileError("sortBy() macro: argument must be a simple name", var.pos)
    keys = ast.Comprehension(pos, ast.MAP, target, var.name, None, args[1])
    return ast.Call(pos, SORT_BY_FUNCTION, target, (keys,))


def sort_by_associated_keys(lst: Any, keys: Any) -> list[object]:
    if not is_list(lst) or not is_list(keys):
        raise CELEvalError(
            f"no such overload: {SORT_BY_FUNCTION}({type_name(lst)}, {type_name(keys)})",
            NO_SUCH_OVERLOAD,
        )
    items: Sequence[object] = list(lst)
    ks: Sequence[object] = list(keys)
    if len(items) != len(ks):
        raise CELEvalError(
            f"{SORT_BY_FUNCTION}() expected a list of the same size as the associated keys "
            f"list, but got {len(items)} and {len(ks)} elements respectively",
            INVALID_ARGUMENT,
        )
    if not items:
        return []
    kind = type(ks[0])
    if kind not in _COMPARABLE and not is_ordered_library_type(kind):
        raise CELEvalError("list elements must be comparable", INVALID_ARGUMENT)
    if any(type(k) is not kind for k in ks):
        raise CELEvalError("list elements must have the same type", INVALID_ARGUMENT)
    def by_key(i: int, j: int) -> int:
        return compare(ks[i], ks[j]) or 0

    order = sorted(range(len(items)), key=functools.cmp_to_key(by_key))
    return [items[i] for i in order]


def _sort_by_cost(args: tuple[object, ...]) -> int:
    keys: Any = args[1] if len(args) > 1 else None
    if not is_list(keys):
        return 11
    n = len(keys)
    factor = 2.1 if n and type(keys[0]) in (str, bytes) else 2.0
    return int(n * n * factor) + 11


def _same(arg_types: Sequence[types.Ty]) -> types.Ty:
    return arg_types[0]


# Keys must be of a comparable type (statically, when known).
_KEY_TYPES: Final = (types.INT, types.UINT, types.DOUBLE, types.BOOL, types.STRING, types.BYTES,
                     types.Ty("google.protobuf.Timestamp"), types.Ty("google.protobuf.Duration"))  # fmt: skip

# (name, member, arity, impl, overloads as (result, *params), cost)
LIST_FUNCTIONS: Final = (
    (SORT_BY_FUNCTION, True, 1, sort_by_associated_keys,
     [(_same, types.LIST_DYN, types.list_of(k)) for k in _KEY_TYPES], _sort_by_cost),
)


def estimate(name: str, sizes: list[int]) -> tuple[int, int] | None:
    """Static (cost, result size) of a call, from its operands' size bounds."""
    if name == SORT_BY_FUNCTION:
        n = sizes[1] if len(sizes) > 1 else 0
        return int(2.1 * n * n) + 11, n
    return None
