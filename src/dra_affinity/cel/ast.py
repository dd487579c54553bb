"""The engine's own small, immutable CEL syntax tree.

Nodes compare by identity (``eq=False``) so they can key per-node side
tables (types, size estimates) without structural hashing.
"""

from __future__ import annotations

from dataclasses import dataclass

# Comprehension macro kinds.
ALL = "all"
EXISTS = "exists"
EXISTS_ONE = "exists_one"
MAP = "map"
MAP_FILTER = "map_filter"  # map(x, predicate, transform)
FILTER = "filter"
# Two-variable comprehensions (cel-go ext.TwoVarComprehensions) also use ALL,
# EXISTS, EXISTS_ONE, MAP and MAP_FILTER (transformList), plus:
TRANSFORM_MAP = "transformMap"
TRANSFORM_MAP_ENTRY = "transformMapEntry"
# cel.bind(var, init, expr) (cel-go ext.Bindings): range holds init, transform expr.
BIND = "cel.bind"


@dataclass(frozen=True, slots=True, eq=False)
class Expr:
    pos: int


@dataclass(frozen=True, slots=True, eq=False)
class Const(Expr):
    value: object


@dataclass(frozen=True, slots=True, eq=False)
class Ident(Expr):
    name: str


@dataclass(frozen=True, slots=True, eq=False)
class Select(Expr):
    operand: Expr
    field: str
    test_only: bool = False  # has(operand.field)


@dataclass(frozen=True, slots=True, eq=False)
class Index(Expr):
    operand: Expr
    index: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Unary(Expr):
    op: str  # "!" or "-"
    operand: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Binary(Expr):
    op: str  # + - * / % == != < <= > >= in
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True, eq=False)
class And(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Or(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Cond(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Call(Expr):
    name: str
    target: Expr | None
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ListLit(Expr):
    elems: tuple[Expr, ...]
    optional: tuple[int, ...] = ()  # indices of optional elements ([?x]: added if present)


@dataclass(frozen=True, slots=True, eq=False)
class MapLit(Expr):
    entries: tuple[tuple[Expr, Expr], ...]
    optional: tuple[int, ...] = ()  # indices of optional entries ({?k: v}: added if present)


@dataclass(frozen=True, slots=True, eq=False)
class Comprehension(Expr):
    macro: str
    range: Expr
    var: str
    pred: Expr | None  # predicate (all/exists/exists_one/filter/map_filter)
    transform: Expr | None  # map / map_filter
    var2: str | None = None  # second variable: the element (lists) or value (maps)


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions, in evaluation order."""
    if isinstance(e, (Const, Ident)):
        return ()
    if isinstance(e, Select):
        return (e.operand,)
    if isinstance(e, Index):
        return (e.operand, e.index)
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, (Binary, And, Or)):
        return (e.left, e.right)
    if isinstance(e, Cond):
        return (e.cond, e.then, e.other)
    if isinstance(e, Call):
        return ((e.target,) if e.target is not None else ()) + e.args
    if isinstance(e, ListLit):
        return e.elems
    if isinstance(e, MapLit):
        return tuple(x for kv in e.entries for x in kv)
    if isinstance(e, Comprehension):
        return tuple(x for x in (e.range, e.pred, e.transform) if x is not None)
    raise TypeError(f"unknown node {type(e).__name__}")
