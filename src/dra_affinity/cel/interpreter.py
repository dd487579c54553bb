"""Compile a checked AST into Python closures that evaluate with a cost meter.

Each node becomes one closure ``f(env, meter) -> value``; compilation happens
once per expression and evaluation is plain function calls, no tree walking.

Cost is charged as cel-go's runtime ``CostTracker`` counts it: constants 0;
identifiers, field selections, index operations and ``has()`` 1; operators and
function calls 1 or a size-dependent amount (string and bytes concatenation,
comparison and equality by length, ``in`` on lists by list size, ``contains``,
``matches``, the Kubernetes string and list functions); list literals 10, map
literals 30; ``&&``, ``||`` and ``?:`` nothing beyond their operands;
comprehensions exactly the steps of cel-go's macro expansion (e.g. ``all`` is
2 per loop condition, 1 per accumulator read, plus the predicate). The meter
raises :class:`CELCostExceeded` as soon as the running total passes the
budget, so evaluation stops deterministically.

Three charges go beyond cel-go, where its O(1) accounting hides O(n) work in a
Python implementation; each keeps real work proportional to the budget:
list concatenation also costs 0.1 per element copied, ``replace`` also costs
0.1 per character it adds, and equality of nested lists/maps also costs the
size of every inner list/map compared. Flat values cost exactly as in cel-go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from . import ast as A
from .errors import (
    DIVISION_BY_ZERO,
    INVALID_ARGUMENT,
    MISSING_FIELD,
    NO_SUCH_OVERLOAD,
    OVERFLOW,
    RUNTIME,
    CELCompileError,
    CELCostExceeded,
    CELEvalError,
)
from .library import REGEX_FUNCTIONS, REGISTRY, compile_regex, nso, str_cost
from .values import (
    INT64_MAX,
    INT64_MIN,
    TYPE_IDENTIFIERS,
    UINT64_MAX,
    CelMap,
    ConstList,
    UInt,
    canon_key,
    cel_eq,
    compare,
    is_list,
    is_map,
    map_lookup,
    type_name,
    value_size,
)

LIST_CREATE_BASE_COST: Final = 10
MAP_CREATE_BASE_COST: Final = 30


class Meter:
    """Running cost of one evaluation (plus a per-evaluation cache for equality)."""

    __slots__ = ("cost", "limit", "types")

    def __init__(self, limit: int) -> None:
        self.cost = 0
        self.limit = limit
        self.types: dict[int, tuple[Any, frozenset[type], bool]] | None = None


Env = dict[str, object]
Fn = Callable[[Env, Meter], object]


def exceeded(m: Meter) -> NoReturn:
    raise CELCostExceeded(m.limit, m.cost)


def charge(m: Meter, n: int) -> None:
    c = m.cost + n
    m.cost = c
    if c > m.limit:
        exceeded(m)


def _missing_key(key: Any) -> NoReturn:
    shown = key if type(key) is str else repr(key)
    raise CELEvalError(f"no such key: {shown}", MISSING_FIELD)


def _no_var(name: str) -> NoReturn:
    raise CELEvalError(f"no such attribute: {name} (not bound in the activation)", RUNTIME)


def select_field(v: Any, field: str) -> object:
    if type(v) is dict or isinstance(v, Mapping):
        try:
            return v[field]
        except KeyError:
            _missing_key(field)
        except TypeError:
            _missing_key(field)
    raise CELEvalError(f"type '{type_name(v)}' does not support field selection", NO_SUCH_OVERLOAD)


def index_value(v: Any, k: Any) -> object:
    tv = type(v)
    if tv is list or tv is tuple or (tv is not str and tv is not dict and is_list(v)):
        tk = type(k)
        if tk is int:
            i: int = k
        elif tk is UInt:
            i = k.value
        elif tk is float and k.is_integer():
            i = int(k)
        else:
            raise CELEvalError(
                f"unsupported index type '{type_name(k)}' for a list", NO_SUCH_OVERLOAD
            )
        seq: list[object] = v
        if 0 <= i < len(seq):
            return seq[i]
        raise CELEvalError(f"index out of range: {i}", INVALID_ARGUMENT)
    if tv is dict or is_map(v):
        found, r = map_lookup(v, k)
        if found:
            return r
        _missing_key(k)
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
    if bool in both and (int in both or float in both):
        return None
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


def _is_container(v: Any) -> bool:
    t = type(v)
    if t is str or t is int or t is bool or t is float or t is bytes or v is None:
        return False
    return is_list(v) or is_map(v)


def eq_op(a: Any, b: Any, m: Meter) -> bool:
    ta = type(a)
    tb = type(b)
    if ta is str and tb is str:
        la = len(a)
        lb = len(b)
        c = m.cost + math.ceil((la if la < lb else lb) * 0.1)
        m.cost = c
        if c > m.limit:
            exceeded(m)
        return bool(a == b)
    if ta is tb and (ta is int or ta is bool or ta is float):
        c = m.cost + 1
        m.cost = c
        if c > m.limit:
            exceeded(m)
        return bool(a == b)
    sa = value_size(a)
    sb = value_size(b)
    charge(m, str_cost(sa if sa < sb else sb))
    if _is_container(a) and _is_container(b):
        return deep_eq(a, b, m, 1)
    return cel_eq(a, b)


def in_op(a: Any, b: Any, m: Meter) -> bool:
    if is_list(b):
        seq: list[object] = b
        charge(m, len(seq))
        if _is_container(a):
            return any(_is_container(x) and deep_eq(a, x, m, 0) for x in seq)
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
        return map_lookup(b, a)[0]
    nso("@in", a, b)


# -- arithmetic ---------------------------------------------------------------


def _overflow() -> NoReturn:
    raise CELEvalError("integer overflow", OVERFLOW)


def add_op(a: Any, b: Any, m: Meter) -> object:
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        c = m.cost + 1
        m.cost = c
        if c > m.limit:
            exceeded(m)
        s = a + b
        if INT64_MIN <= s <= INT64_MAX:
            return s
        _overflow()
    if ta is str and tb is str:
        charge(m, str_cost(len(a) + len(b)))
        return a + b
    if ta is float and tb is float:
        charge(m, 1)
        return a + b
    if ta is UInt and tb is UInt:
        charge(m, 1)
        u = a.value + b.value
        if u > UINT64_MAX:
            raise CELEvalError("unsigned integer overflow", OVERFLOW)
        return UInt(u)
    if ta is bytes and tb is bytes:
        charge(m, str_cost(len(a) + len(b)))
        return a + b
    if ta is not str and tb is not str and is_list(a) and is_list(b):
        la: list[object] = a
        lb: list[object] = b
        charge(m, 1 + str_cost(len(la) + len(lb)))
        return [*la, *lb]
    nso("_+_", a, b)


def sub_op(a: Any, b: Any, m: Meter) -> object:
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        charge(m, 1)
        s = a - b
        if INT64_MIN <= s <= INT64_MAX:
            return s
        _overflow()
    if ta is float and tb is float:
        charge(m, 1)
        return a - b
    if ta is UInt and tb is UInt:
        charge(m, 1)
        u = a.value - b.value
        if u < 0:
            raise CELEvalError("unsigned integer overflow", OVERFLOW)
        return UInt(u)
    nso("_-_", a, b)


def mul_op(a: Any, b: Any, m: Meter) -> object:
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        charge(m, 1)
        s = a * b
        if INT64_MIN <= s <= INT64_MAX:
            return s
        _overflow()
    if ta is float and tb is float:
        charge(m, 1)
        return a * b
    if ta is UInt and tb is UInt:
        charge(m, 1)
        u = a.value * b.value
        if u > UINT64_MAX:
            raise CELEvalError("unsigned integer overflow", OVERFLOW)
        return UInt(u)
    nso("_*_", a, b)


def div_op(a: Any, b: Any, m: Meter) -> object:
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        charge(m, 1)
        x: int = a
        y: int = b
        if y == 0:
            raise CELEvalError("division by zero", DIVISION_BY_ZERO)
        if x == INT64_MIN and y == -1:
            _overflow()
        q = abs(x) // abs(y)
        return -q if (x < 0) != (y < 0) else q
    if ta is float and tb is float:
        charge(m, 1)
        fx: float = a
        fy: float = b
        if fy == 0.0:
            # IEEE 754, as in Go: no error for floating-point division by zero.
            if fx != fx or fx == 0.0:
                return math.nan
            return math.copysign(math.inf, fx) * math.copysign(1.0, fy)
        return fx / fy
    if ta is UInt and tb is UInt:
        charge(m, 1)
        if b.value == 0:
            raise CELEvalError("division by zero", DIVISION_BY_ZERO)
        return UInt(a.value // b.value)
    nso("_/_", a, b)


def mod_op(a: Any, b: Any, m: Meter) -> object:
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        charge(m, 1)
        x: int = a
        y: int = b
        if y == 0:
            raise CELEvalError("modulus by zero", DIVISION_BY_ZERO)
        if x == INT64_MIN and y == -1:
            _overflow()
        r = abs(x) % abs(y)
        return -r if x < 0 else r
    if ta is UInt and tb is UInt:
        charge(m, 1)
        if b.value == 0:
            raise CELEvalError("modulus by zero", DIVISION_BY_ZERO)
        return UInt(a.value % b.value)
    nso("_%_", a, b)


def _ordering(name: str, a: Any, b: Any, m: Meter) -> int | None:
    ta = type(a)
    if (ta is str and type(b) is str) or (ta is bytes and type(b) is bytes):
        la = len(a)
        lb = len(b)
        charge(m, str_cost(la if la < lb else lb))
    else:
        charge(m, 1)
    try:
        return compare(a, b)
    except CELEvalError:
        nso(name, a, b)


def lt_op(a: Any, b: Any, m: Meter) -> bool:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is float):
        c = m.cost + 1
        m.cost = c
        if c > m.limit:
            exceeded(m)
        return bool(a < b)
    r = _ordering("_<_", a, b, m)
    return r is not None and r < 0


def le_op(a: Any, b: Any, m: Meter) -> bool:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is float):
        c = m.cost + 1
        m.cost = c
        if c > m.limit:
            exceeded(m)
        return bool(a <= b)
    r = _ordering("_<=_", a, b, m)
    return r is not None and r <= 0


def gt_op(a: Any, b: Any, m: Meter) -> bool:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is float):
        c = m.cost + 1
        m.cost = c
        if c > m.limit:
            exceeded(m)
        return bool(a > b)
    r = _ordering("_>_", a, b, m)
    return r is not None and r > 0


def ge_op(a: Any, b: Any, m: Meter) -> bool:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is float):
        c = m.cost + 1
        m.cost = c
        if c > m.limit:
            exceeded(m)
        return bool(a >= b)
    r = _ordering("_>=_", a, b, m)
    return r is not None and r >= 0


def ne_op(a: Any, b: Any, m: Meter) -> bool:
    return not eq_op(a, b, m)


_BINARY: Final[Mapping[str, Callable[[object, object, Meter], object]]] = {
    "+": add_op,
    "-": sub_op,
    "*": mul_op,
    "/": div_op,
    "%": mod_op,
    "==": eq_op,
    "!=": ne_op,
    "<": lt_op,
    "<=": le_op,
    ">": gt_op,
    ">=": ge_op,
    "in": in_op,
}


def _range_items(v: Any) -> list[object] | tuple[object, ...]:
    t = type(v)
    if t is list or t is tuple:
        return v  # type: ignore[no-any-return]
    if t is dict or is_map(v):
        return list(v)
    if t is not str and is_list(v):
        return list(v)
    raise CELEvalError(
        f"expression of type '{type_name(v)}' cannot be the range of a comprehension",
        NO_SUCH_OVERLOAD,
    )


_MISSING: Final = object()


class Compiler:
    """Turns a checked AST into closures. ``variables`` are the declared activation names."""

    def __init__(self, variables: frozenset[str]) -> None:
        self.variables = variables

    def compile(self, e: A.Expr, scope: frozenset[str] = frozenset()) -> Fn:
        if isinstance(e, (A.ListLit, A.MapLit, A.And, A.Or, A.Cond)):
            folded = self._fold(e)
            if folded is not None:
                value, cost = folded

                # Constant structure is built once, at compile time; the cost
                # charged is still what cel-go charges for building it.
                def const_structure(env: Env, m: Meter) -> object:
                    c = m.cost + cost
                    m.cost = c
                    if c > m.limit:
                        exceeded(m)
                    return value

                return const_structure
        method = getattr(self, "_c_" + type(e).__name__)
        fn: Fn = method(e, scope)
        return fn

    def _fold(self, e: A.Expr) -> tuple[object, int] | None:
        """(value, runtime cost) of a constant sub-expression, or None.

        Literals of constants fold to read-only values (ConstList, frozen CelMap);
        ``&&``, ``||`` and ``?:`` fold when constants decide them, charging
        only the operands cel-go would evaluate.
        """
        if isinstance(e, A.Const):
            return e.value, 0
        if isinstance(e, A.ListLit):
            parts = [self._fold(x) for x in e.elems]
            if any(p is None for p in parts):
                return None
            done = [p for p in parts if p is not None]
            return ConstList(v for v, _ in done), LIST_CREATE_BASE_COST + sum(c for _, c in done)
        if isinstance(e, A.MapLit):
            out = CelMap()
            cost = MAP_CREATE_BASE_COST
            for k, v in e.entries:
                fk = self._fold(k)
                fv = self._fold(v)
                if fk is None or fv is None:
                    return None
                ck = canon_key(fk[0]) if type(fk[0]) is not float else None
                if ck is None or ck in out.canon or (ck[0] != "s" and fk[0] in out):
                    return None  # left to fail at run time, as in cel-go
                out.canon[ck] = fk[0]
                out[fk[0]] = fv[0]
                cost += fk[1] + fv[1]
            out.freeze()
            return out, cost
        if isinstance(e, (A.And, A.Or)):
            decisive = isinstance(e, A.Or)  # the value that short-circuits
            left = self._fold(e.left)
            if left is None or type(left[0]) is not bool:
                return None
            if left[0] is decisive:
                return left
            right = self._fold(e.right)
            if right is None or type(right[0]) is not bool:
                return None
            return right[0], left[1] + right[1]
        if isinstance(e, A.Cond):
            cond = self._fold(e.cond)
            if cond is None or type(cond[0]) is not bool:
                return None
            branch = self._fold(e.then if cond[0] else e.other)
            if branch is None:
                return None
            return branch[0], cond[1] + branch[1]
        return None

    # -- leaves ---------------------------------------------------------

    def _c_Const(self, e: A.Const, scope: frozenset[str]) -> Fn:
        value = e.value

        def const(env: Env, m: Meter) -> object:
            return value

        return const

    def _c_Ident(self, e: A.Ident, scope: frozenset[str]) -> Fn:
        name = e.name
        if name not in scope and name not in self.variables:
            tv = TYPE_IDENTIFIERS[name]

            def type_ident(env: Env, m: Meter) -> object:
                c = m.cost + 1
                m.cost = c
                if c > m.limit:
                    exceeded(m)
                return tv

            return type_ident

        def ident(env: Env, m: Meter) -> object:
            c = m.cost + 1
            m.cost = c
            if c > m.limit:
                exceeded(m)
            try:
                return env[name]
            except KeyError:
                _no_var(name)

        return ident

    # -- selection and indexing ------------------------------------------

    def _c_Select(self, e: A.Select, scope: frozenset[str]) -> Fn:
        field = e.field
        if e.test_only:
            operand = self.compile(e.operand, scope)

            def has(env: Env, m: Meter) -> object:
                v = operand(env, m)
                c = m.cost + 1
                m.cost = c
                if c > m.limit:
                    exceeded(m)
                if type(v) is dict or isinstance(v, Mapping):
                    return field in v
                raise CELEvalError(
                    f"invalid type '{type_name(v)}' for has() field test", NO_SUCH_OVERLOAD
                )

            return has
        # Fuse a selection path rooted at a variable (object.a.b) into one closure.
        fields: list[str] = []
        node: A.Expr = e
        while isinstance(node, A.Select) and not node.test_only:
            fields.append(node.field)
            node = node.operand
        if isinstance(node, A.Ident) and (node.name in scope or node.name in self.variables):
            fields.reverse()
            return self._path(node.name, tuple(fields))
        operand = self.compile(e.operand, scope)

        def select(env: Env, m: Meter) -> object:
            v = operand(env, m)
            c = m.cost + 1
            m.cost = c
            if c > m.limit:
                exceeded(m)
            if type(v) is dict:
                try:
                    return v[field]
                except KeyError:
                    _missing_key(field)
            return select_field(v, field)

        return select

    def _path(self, root: str, fields: tuple[str, ...]) -> Fn:
        k = 1 + len(fields)
        if len(fields) == 1:
            (f0,) = fields

            def path1(env: Env, m: Meter) -> object:
                c = m.cost + k
                m.cost = c
                if c > m.limit:
                    exceeded(m)
                try:
                    v = env[root]
                except KeyError:
                    _no_var(root)
                if type(v) is dict:
                    try:
                        return v[f0]
                    except KeyError:
                        _missing_key(f0)
                return select_field(v, f0)

            return path1

        def path(env: Env, m: Meter) -> object:
            c = m.cost + k
            m.cost = c
            if c > m.limit:
                exceeded(m)
            try:
                v = env[root]
            except KeyError:
                _no_var(root)
            for f in fields:
                if type(v) is dict:
                    try:
                        v = v[f]
                    except KeyError:
                        _missing_key(f)
                else:
                    v = select_field(v, f)
            return v

        return path

    def _c_Index(self, e: A.Index, scope: frozenset[str]) -> Fn:
        operand = self.compile(e.operand, scope)
        idx = self.compile(e.index, scope)

        def index(env: Env, m: Meter) -> object:
            v = operand(env, m)
            k = idx(env, m)
            c = m.cost + 1
            m.cost = c
            if c > m.limit:
                exceeded(m)
            if type(v) is dict and type(k) is str:
                try:
                    return v[k]
                except KeyError:
                    _missing_key(k)
            return index_value(v, k)

        return index

    # -- operators ------------------------------------------------------

    def _c_Unary(self, e: A.Unary, scope: frozenset[str]) -> Fn:
        operand = self.compile(e.operand, scope)
        if e.op == "!":

            def not_(env: Env, m: Meter) -> object:
                v = operand(env, m)
                charge(m, 1)
                if v is True:
                    return False
                if v is False:
                    return True
                nso("!_", v)

            return not_

        def neg(env: Env, m: Meter) -> object:
            v: Any = operand(env, m)
            charge(m, 1)
            t = type(v)
            if t is int:
                if v == INT64_MIN:
                    _overflow()
                return -v
            if t is float:
                return -v
            nso("-_", v)

        return neg

    def _c_Binary(self, e: A.Binary, scope: frozenset[str]) -> Fn:
        left = self.compile(e.left, scope)
        right = self.compile(e.right, scope)
        op = _BINARY[e.op]
        if e.op == "==" and isinstance(e.right, A.Const) and type(e.right.value) is str:
            # The extractor idiom compares a field with a string literal.
            lit: str = e.right.value
            lit_len = len(lit)

            def eq_str_const(env: Env, m: Meter) -> object:
                a = left(env, m)
                if type(a) is str:
                    la = len(a)
                    c = m.cost + math.ceil((la if la < lit_len else lit_len) * 0.1)
                    m.cost = c
                    if c > m.limit:
                        exceeded(m)
                    return a == lit
                return eq_op(a, lit, m)

            return eq_str_const

        # Hot paths (comprehension bodies such as `a + b >= 0`): read variable
        # and constant operands directly instead of through their closures.
        # The charges are the same; idents are charged together before the op.
        lvar = self._variable(e.left, scope)
        rvar = self._variable(e.right, scope)
        if isinstance(e.right, A.Const):
            rconst = e.right.value
            if lvar is not None:
                lname = lvar

                def var_const(env: Env, m: Meter) -> object:
                    c = m.cost + 1
                    m.cost = c
                    if c > m.limit:
                        exceeded(m)
                    try:
                        a = env[lname]
                    except KeyError:
                        _no_var(lname)
                    return op(a, rconst, m)

                return var_const

            def expr_const(env: Env, m: Meter) -> object:
                return op(left(env, m), rconst, m)

            return expr_const
        if rvar is not None:
            rname = rvar
            if lvar is not None:
                lname2 = lvar

                def var_var(env: Env, m: Meter) -> object:
                    c = m.cost + 2
                    m.cost = c
                    if c > m.limit:
                        exceeded(m)
                    try:
                        a = env[lname2]
                        b = env[rname]
                    except KeyError as err:
                        _no_var(str(err.args[0]))
                    return op(a, b, m)

                return var_var

            def expr_var(env: Env, m: Meter) -> object:
                a = left(env, m)
                c = m.cost + 1
                m.cost = c
                if c > m.limit:
                    exceeded(m)
                try:
                    b = env[rname]
                except KeyError:
                    _no_var(rname)
                return op(a, b, m)

            return expr_var

        def binary(env: Env, m: Meter) -> object:
            return op(left(env, m), right(env, m), m)

        return binary

    def _variable(self, e: A.Expr, scope: frozenset[str]) -> str | None:
        """The name if ``e`` is a plain variable reference (not a type name)."""
        if isinstance(e, A.Ident) and (e.name in scope or e.name in self.variables):
            return e.name
        return None

    def _c_And(self, e: A.And, scope: frozenset[str]) -> Fn:
        return self._logical(e.left, e.right, scope, decisive=False, op="_&&_")

    def _c_Or(self, e: A.Or, scope: frozenset[str]) -> Fn:
        return self._logical(e.left, e.right, scope, decisive=True, op="_||_")

    def _logical(self, le: A.Expr, re_: A.Expr, scope: frozenset[str], *, decisive: bool,
                 op: str) -> Fn:
        """``&&`` (decisive value false) and ``||`` (decisive value true), with CEL's
        commutative error absorption: the decisive value on either side wins over an
        error on the other; otherwise the first error is raised."""
        left = self.compile(le, scope)
        right = self.compile(re_, scope)
        neutral = not decisive

        def logical(env: Env, m: Meter) -> object:
            try:
                a = left(env, m)
            except CELCostExceeded:
                raise
            except CELEvalError as err:
                a = err
            if a is decisive:
                return decisive
            try:
                b = right(env, m)
            except CELCostExceeded:
                raise
            except CELEvalError as err:
                if a is neutral:
                    raise
                b = err
            if b is decisive:
                return decisive
            if a is neutral and b is neutral:
                return neutral
            if isinstance(a, CELEvalError):
                raise a
            if isinstance(b, CELEvalError):
                raise b
            nso(op, a, b)

        return logical

    def _c_Cond(self, e: A.Cond, scope: frozenset[str]) -> Fn:
        cond = self.compile(e.cond, scope)
        then = self.compile(e.then, scope)
        other = self.compile(e.other, scope)

        def conditional(env: Env, m: Meter) -> object:
            c = cond(env, m)
            if c is True:
                return then(env, m)
            if c is False:
                return other(env, m)
            nso("_?_:_", c)

        return conditional

    # -- literals -------------------------------------------------------

    def _c_ListLit(self, e: A.ListLit, scope: frozenset[str]) -> Fn:
        elems = tuple(self.compile(x, scope) for x in e.elems)

        def list_lit(env: Env, m: Meter) -> object:
            out = [f(env, m) for f in elems]
            charge(m, LIST_CREATE_BASE_COST)
            return out

        return list_lit

    def _c_MapLit(self, e: A.MapLit, scope: frozenset[str]) -> Fn:
        entries = tuple((self.compile(k, scope), self.compile(v, scope)) for k, v in e.entries)

        def map_lit(env: Env, m: Meter) -> object:
            out = CelMap()
            canon = out.canon
            for kf, vf in entries:
                k = kf(env, m)
                v = vf(env, m)
                ck = canon_key(k) if type(k) is not float else None
                if ck is None:
                    raise CELEvalError(f"unsupported map key type: {type_name(k)}", INVALID_ARGUMENT)
                if ck in canon:
                    raise CELEvalError(f"map literal has repeated key: {k!r}", INVALID_ARGUMENT)
                if ck[0] != "s" and k in out:
                    # Python's dict cannot hold both true and 1 (or false and 0).
                    raise CELEvalError(f"map literal keys {k!r} and {canon_key(k)!r} collide", INVALID_ARGUMENT)
                canon[ck] = k
                out[k] = v
            charge(m, MAP_CREATE_BASE_COST)
            return out

        return map_lit

    # -- comprehensions -------------------------------------------------

    def _c_Comprehension(self, e: A.Comprehension, scope: frozenset[str]) -> Fn:
        rng = self.compile(e.range, scope)
        inner = scope | {e.var}
        pred = self.compile(e.pred, inner) if e.pred is not None else None
        transform = self.compile(e.transform, inner) if e.transform is not None else None
        var = e.var
        macro = e.macro

        def restore(env: Env, saved: Any) -> None:
            if saved is _MISSING:
                env.pop(var, None)
            else:
                env[var] = saved

        if macro in (A.ALL, A.EXISTS):
            assert pred is not None
            p = pred
            # all: loop condition @not_strictly_false(__result__) costs 2, step
            # `__result__ && p` reads the accumulator (1); exists adds a `!` (3).
            cond_cost = 2 if macro == A.ALL else 3
            stop = macro == A.EXISTS  # value that ends the loop

            def quantifier(env: Env, m: Meter) -> object:
                items = _range_items(rng(env, m))
                saved = env.get(var, _MISSING)
                result = not stop
                err: CELEvalError | None = None
                step = cond_cost + 1
                try:
                    for x in items:
                        if result is stop:
                            c = m.cost + cond_cost
                            m.cost = c
                            if c > m.limit:
                                exceeded(m)
                            break
                        c = m.cost + step
                        m.cost = c
                        if c > m.limit:
                            exceeded(m)
                        env[var] = x
                        try:
                            v = p(env, m)
                        except CELCostExceeded:
                            raise
                        except CELEvalError as ex:
                            if err is None:
                                err = ex
                            continue
                        if v is stop:
                            result = stop
                        elif v is not (not stop) and err is None:
                            err = CELEvalError(
                                f"no such overload: {macro}() predicate returned {type_name(v)}",
                                NO_SUCH_OVERLOAD,
                            )
                finally:
                    restore(env, saved)
                charge(m, 1)
                if result is stop:
                    return stop
                if err is not None:
                    raise err
                return not stop

            return quantifier

        if macro == A.EXISTS_ONE:
            assert pred is not None
            p = pred

            def exists_one(env: Env, m: Meter) -> object:
                items = _range_items(rng(env, m))
                saved = env.get(var, _MISSING)
                count = 0
                err: CELEvalError | None = None
                try:
                    for x in items:
                        env[var] = x
                        try:
                            v = p(env, m)
                        except CELCostExceeded:
                            raise
                        except CELEvalError as ex:
                            # an erroring condition takes neither branch
                            if err is None:
                                err = ex
                            continue
                        if v is True:
                            count += 1
                            charge(m, 2)
                        elif v is False:
                            charge(m, 1)
                        elif err is None:
                            err = CELEvalError(
                                f"no such overload: exists_one() predicate returned {type_name(v)}",
                                NO_SUCH_OVERLOAD,
                            )
                finally:
                    restore(env, saved)
                charge(m, 2)
                if err is not None:
                    raise err
                return count == 1

            return exists_one

        if macro == A.MAP:
            assert transform is not None
            t = transform

            def map_(env: Env, m: Meter) -> object:
                items = _range_items(rng(env, m))
                charge(m, LIST_CREATE_BASE_COST)
                saved = env.get(var, _MISSING)
                out: list[object] = []
                try:
                    for x in items:
                        env[var] = x
                        out.append(t(env, m))
                        # __result__ + [t]: accumulator read, list literal, concatenation
                        c = m.cost + 12
                        m.cost = c
                        if c > m.limit:
                            exceeded(m)
                finally:
                    restore(env, saved)
                charge(m, 1)
                return out

            return map_

        assert pred is not None
        p = pred
        tr = transform

        def filter_(env: Env, m: Meter) -> object:
            items = _range_items(rng(env, m))
            charge(m, LIST_CREATE_BASE_COST)
            saved = env.get(var, _MISSING)
            out: list[object] = []
            try:
                for x in items:
                    env[var] = x
                    v = p(env, m)
                    if v is True:
                        if tr is None:
                            out.append(x)
                            charge(m, 13)
                        else:
                            out.append(tr(env, m))
                            charge(m, 12)
                    elif v is False:
                        charge(m, 1)
                    else:
                        nso(f"{macro}() predicate", v)
            finally:
                restore(env, saved)
            charge(m, 1)
            return out

        return filter_

    # -- calls ----------------------------------------------------------

    def _c_Call(self, e: A.Call, scope: frozenset[str]) -> Fn:
        member = e.target is not None
        fn = REGISTRY[(e.name, member, len(e.args))]
        if e.name in REGEX_FUNCTIONS:
            pattern = e.args[-1] if e.name == "matches" else e.args[0]
            if isinstance(pattern, A.Const) and type(pattern.value) is str:
                try:
                    compile_regex(pattern.value)
                except CELEvalError as err:
                    raise CELCompileError(err.message, pattern.pos) from None
        arg_exprs = ((e.target,) if e.target is not None else ()) + e.args
        arg_fns = tuple(self.compile(a, scope) for a in arg_exprs if a is not None)
        impl = fn.impl
        cost = fn.cost
        post = fn.result_cost
        if post is not None:
            pre = cost

            def call_post(env: Env, m: Meter) -> object:
                vals = tuple(f(env, m) for f in arg_fns)
                charge(m, 1 if pre is None else pre(vals))
                result = impl(*vals)
                charge(m, post(result))
                return result

            return call_post
        if len(arg_fns) == 1:
            (a0,) = arg_fns
            if cost is None:

                def call1(env: Env, m: Meter) -> object:
                    v = a0(env, m)
                    c = m.cost + 1
                    m.cost = c
                    if c > m.limit:
                        exceeded(m)
                    return impl(v)

                return call1
            cost1 = cost

            def call1c(env: Env, m: Meter) -> object:
                v = a0(env, m)
                charge(m, cost1((v,)))
                return impl(v)

            return call1c
        if len(arg_fns) == 2:
            a0, a1 = arg_fns
            if cost is None:

                def call2(env: Env, m: Meter) -> object:
                    v0 = a0(env, m)
                    v1 = a1(env, m)
                    charge(m, 1)
                    return impl(v0, v1)

                return call2
            cost2 = cost

            def call2c(env: Env, m: Meter) -> object:
                v0 = a0(env, m)
                v1 = a1(env, m)
                charge(m, cost2((v0, v1)))
                return impl(v0, v1)

            return call2c

        def call(env: Env, m: Meter) -> object:
            vals = tuple(f(env, m) for f in arg_fns)
            charge(m, 1 if cost is None else cost(vals))
            return impl(*vals)

        return call
