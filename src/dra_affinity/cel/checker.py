"""A light CEL type checker.

Infers a static type for every node, rejects what is statically wrong
(undeclared identifiers, unknown functions, wrong arity, operand types that
no overload accepts, e.g. ``1 + "a"``, ``"a" > 1``, ``size(1)``) and leaves
``dyn`` where the type depends on data. Deliberate leniency relative to
cel-go's checker: mixed numeric operands of ``==``/``!=`` and of the ordering
operators are accepted (``1 == 1.0``), matching cel-go's runtime behaviour and
Kubernetes' cross-type numeric comparisons.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from . import ast, types
from .errors import CELCompileError
from .library import FUNCTION_NAMES, REGISTRY, Overload
from .libs import FORMAT_S_TYPES, TIME_TYPES, time_arith_type, validate_literal_format
from .optionals import OPT_INDEX, OPT_SELECT
from .quantity import Quantity
from .semver import Semver
from .types import Ty
from .values import TYPE_IDENTIFIERS, UInt

TypeMap = dict[ast.Expr, Ty]


def const_type(value: object) -> Ty:
    t = type(value)
    if t is bool:
        return types.BOOL
    if t is int:
        return types.INT
    if t is UInt:
        return types.UINT
    if t is float:
        return types.DOUBLE
    if t is str:
        return types.STRING
    if t is bytes:
        return types.BYTES
    if value is None:
        return types.NULL
    if t is Quantity:
        return types.QUANTITY
    if t is Semver:
        return types.SEMVER
    return types.DYN



def _err(msg: str, node: ast.Expr) -> CELCompileError:
    return CELCompileError(msg, node.pos)


def _sig(arg_types: tuple[Ty, ...]) -> str:
    return ", ".join(str(t) for t in arg_types)


# Types a null may stand for (cel-go: null, dyn, and object types such as Kubernetes').
_NULLABLE: Final = frozenset({"null", "dyn", "kubernetes.Quantity", "kubernetes.Semver"})

# The element type of an empty list or map literal: free, it takes the type of
# the other elements (cel-go's type parameter), only in the homogeneity check.
_FREE: Final = Ty("*")


def _fits(expected: Ty, found: Ty) -> Ty | None:
    """``expected`` refined by ``found`` if a homogeneous literal may hold both, else None.

    cel-go's HomogeneousAggregateLiterals: element types must agree exactly (``dyn``
    is a type of its own here, not a wildcard); only empty literals' free element
    types unify with anything.
    """
    if expected.name == "*":
        return found
    if found.name == "*":
        return expected
    if expected.name != found.name or len(expected.params) != len(found.params):
        return None
    params: list[Ty] = []
    for a, b in zip(expected.params, found.params, strict=True):
        p = _fits(a, b)
        if p is None:
            return None
        params.append(p)
    return Ty(expected.name, tuple(params))


def _concrete(t: Ty) -> Ty:
    """``t`` with free element types replaced by ``dyn``."""
    if t.name == "*":
        return types.DYN
    if not t.params:
        return t
    return Ty(t.name, tuple(_concrete(p) for p in t.params))


class Checker:
    """Static types of one expression. ``bindings``: the environment has ``cel.bind``."""

    def __init__(self, variables: Mapping[str, Ty], *, bindings: bool = False) -> None:
        self.variables = variables
        self.bindings = bindings
        self.types: TypeMap = {}
        # shape of each list/map literal: its type with empty literals' element types free
        self.shapes: TypeMap = {}
        # list literals exempt from homogeneity (format()'s arguments, as cel-go exempts)
        self.exempt: set[ast.Expr] = set()
        # inside a format() call: cel-go exempts every list literal below one
        self._in_format = 0

    def _shape(self, e: ast.Expr) -> Ty:
        return self.shapes.get(e) or self.types[e]

    def _homogeneous(self, expected: Ty | None, e: ast.Expr, found: Ty) -> Ty:
        if expected is None:
            return found
        fit = _fits(expected, found)
        if fit is None:
            raise _err(
                f"expected type '{_concrete(expected)}' but found '{_concrete(found)}'", e
            )
        return fit

    def _format_nested(self, e: ast.Expr) -> str | None:
        """The first type a ``%s`` clause cannot print among the elements of list / map
        literal ``e`` (cel-go's format check looks into literals, at any depth)."""
        if isinstance(e, ast.ListLit):
            inner: list[ast.Expr] = list(e.elems)
        elif isinstance(e, ast.MapLit):
            inner = [x for kv in e.entries for x in kv]
        else:
            return None
        for x in inner:
            name = self.types[x].name
            if name != "dyn" and name not in FORMAT_S_TYPES:
                return name
            bad = self._format_nested(x)
            if bad is not None:
                return bad
        return None

    def _opt_elem(self, e: ast.Expr, t: Ty) -> Ty:
        """The element an optional list element / map value ``e`` of type ``t`` adds."""
        if t.name == types.OPTIONAL_NAME:
            return t.params[0] if t.params else types.DYN
        if t.name == "dyn":
            return types.DYN
        raise _err(f"expected type 'optional_type({t})' but found '{t}'", e)

    def check(self, e: ast.Expr, scope: Mapping[str, Ty]) -> Ty:
        t = self._check(e, scope)
        self.types[e] = t
        return t

    def _check(self, e: ast.Expr, scope: Mapping[str, Ty]) -> Ty:
        if isinstance(e, ast.Const):
            return const_type(e.value)
        if isinstance(e, ast.Ident):
            if e.name in scope:
                return scope[e.name]
            if e.name in self.variables:
                return self.variables[e.name]
            if e.name in TYPE_IDENTIFIERS:
                return types.TYPE
            raise _err(f"undeclared reference to '{e.name}'", e)
        if isinstance(e, ast.Select):
            return self._select(e, scope)
        if isinstance(e, ast.Index):
            return self._index(e, scope)
        if isinstance(e, ast.Unary):
            ot = self.check(e.operand, scope)
            if e.op == "!":
                if ot.name in ("bool", "dyn"):
                    return types.BOOL
            elif ot.name in ("int", "double", "dyn"):
                return ot
            raise _err(f"found no matching overload for '{e.op}_' applied to '({ot})'", e)
        if isinstance(e, ast.Binary):
            return self._binary(e, scope)
        if isinstance(e, (ast.And, ast.Or)):
            lt = self.check(e.left, scope)
            rt = self.check(e.right, scope)
            for t in (lt, rt):
                if t.name not in ("bool", "dyn"):
                    op = "&&" if isinstance(e, ast.And) else "||"
                    raise _err(
                        f"found no matching overload for '_{op}_' applied to '({lt}, {rt})'", e
                    )
            return types.BOOL
        if isinstance(e, ast.Cond):
            ct = self.check(e.cond, scope)
            tt = self.check(e.then, scope)
            ft = self.check(e.other, scope)
            if ct.name not in ("bool", "dyn"):
                raise _err(
                    f"found no matching overload for '_?_:_' applied to '({ct}, {tt}, {ft})'", e
                )
            if tt.name == "null" or ft.name == "null":
                other = ft if tt.name == "null" else tt
                if other.name not in _NULLABLE:
                    raise _err(
                        f"found no matching overload for '_?_:_' applied to '({ct}, {tt}, {ft})'",
                        e,
                    )
                return tt if tt == ft else types.DYN
            if not types.comparable_eq(tt, ft) or (
                tt.name in types.NUMERIC and ft.name in types.NUMERIC and tt != ft
            ):
                raise _err(
                    f"found no matching overload for '_?_:_' applied to '({ct}, {tt}, {ft})'", e
                )
            return types.join(tt, ft)
        if isinstance(e, ast.ListLit):
            elem: Ty | None = None
            for i, x in enumerate(e.elems):
                self.check(x, scope)
                shape = self._shape(x)
                if i in e.optional:
                    shape = self._opt_elem(x, shape)
                if e in self.exempt or self._in_format:
                    elem = shape if elem is None or _fits(elem, shape) == elem else types.DYN
                    continue
                elem = self._homogeneous(elem, x, shape)
            self.shapes[e] = types.list_of(elem or _FREE)
            return _concrete(self.shapes[e])
        if isinstance(e, ast.MapLit):
            kt: Ty | None = None
            vt: Ty | None = None
            for i, (k, v) in enumerate(e.entries):
                ktt = self.check(k, scope)
                if ktt.name not in types.MAP_KEYS:
                    raise _err(f"unsupported map key type: {ktt}", k)
                self.check(v, scope)
                vshape = self._shape(v)
                if i in e.optional:
                    vshape = self._opt_elem(v, vshape)
                kt = self._homogeneous(kt, k, self._shape(k))
                vt = self._homogeneous(vt, v, vshape)
            self.shapes[e] = types.map_of(kt or _FREE, vt or _FREE)
            return _concrete(self.shapes[e])
        if isinstance(e, ast.Comprehension):
            return self._comprehension(e, scope)
        if isinstance(e, ast.Call):
            return self._call(e, scope)
        raise _err(f"unsupported expression {type(e).__name__}", e)  # pragma: no cover

    def _select(self, e: ast.Select, scope: Mapping[str, Ty]) -> Ty:
        ot = self.check(e.operand, scope)
        optional = ot.name == types.OPTIONAL_NAME and not e.test_only
        if optional:  # selecting through an optional gives an optional
            ot = ot.params[0] if ot.params else types.DYN
        if ot.name == "dyn":
            result = types.DYN
        elif ot.name == "map":
            # any key type type-checks (cel-go); a non-string-keyed map has no such key
            result = ot.elem
        elif ot.name in types.STRUCT_FIELDS:
            fields = types.STRUCT_FIELDS[ot.name]
            if e.field not in fields:
                raise _err(f"undefined field '{e.field}'", e)
            result = fields[e.field]
        else:
            raise _err(f"type '{ot}' does not support field selection", e)
        if optional:
            return Ty(types.OPTIONAL_NAME, (result,))
        return types.BOOL if e.test_only else result

    def _index(self, e: ast.Index, scope: Mapping[str, Ty]) -> Ty:
        ot = self.check(e.operand, scope)
        it = self.check(e.index, scope)
        if ot.name == types.OPTIONAL_NAME:  # indexing through an optional gives an optional
            inner = ot.params[0] if ot.params else types.DYN
            return Ty(types.OPTIONAL_NAME, (self._index_type(e, inner, it),))
        shape = self.shapes.get(e.operand)
        if shape is not None and shape.params and shape.params[-1].name == "*":
            self.shapes[e] = _FREE  # an element of an empty literal: free too
        return self._index_type(e, ot, it)

    @staticmethod
    def _index_type(e: ast.Expr, ot: Ty, it: Ty) -> Ty:
        if ot.name == "dyn":
            return types.DYN
        if ot.name == "list" and it.name in ("int", "uint", "dyn"):
            return ot.elem
        if ot.name == "map" and (types.comparable_eq(ot.key, it)):
            return ot.elem
        raise _err(f"found no matching overload for '_[_]' applied to '({ot}, {it})'", e)

    def _binary(self, e: ast.Binary, scope: Mapping[str, Ty]) -> Ty:
        lt = self.check(e.left, scope)
        rt = self.check(e.right, scope)
        op = e.op
        ln, rn = lt.name, rt.name
        fail = _err(f"found no matching overload for '_{op}_' applied to '({lt}, {rt})'", e)
        if op in ("==", "!="):
            if not types.comparable_eq(lt, rt):
                raise fail
            return types.BOOL
        if op in ("<", "<=", ">", ">="):
            for n in (ln, rn):
                if n != "dyn" and n not in types.ORDERED:
                    raise fail
            if (
                ln != "dyn"
                and rn != "dyn"
                and ln != rn
                and not (ln in types.NUMERIC and rn in types.NUMERIC)
            ):
                raise fail
            return types.BOOL
        if op == "in":
            if rn == "dyn":
                return types.BOOL
            if rn == "list" and types.comparable_eq(lt, rt.elem):
                return types.BOOL
            if rn == "map" and types.comparable_eq(lt, rt.key):
                return types.BOOL
            raise fail
        if ln in TIME_TYPES or rn in TIME_TYPES:
            time_result = time_arith_type(op, ln, rn)
            if time_result is None:
                raise fail
            return time_result
        allowed = {
            "+": ("int", "uint", "double", "string", "bytes", "list"),
            "-": ("int", "uint", "double"),
            "*": ("int", "uint", "double"),
            "/": ("int", "uint", "double"),
            "%": ("int", "uint"),
        }[op]
        for n in (ln, rn):
            if n != "dyn" and n not in allowed:
                raise fail
        if ln == "dyn":
            return rt if rn != "list" else types.LIST_DYN
        if rn == "dyn":
            return lt if ln != "list" else types.LIST_DYN
        if ln != rn:
            raise fail
        if ln == "list" and not types.comparable_eq(lt, rt):
            raise fail  # list(A) + list(A): the element types must agree (cel-go)
        return types.join(lt, rt)

    def _comprehension(self, e: ast.Comprehension, scope: Mapping[str, Ty]) -> Ty:
        if e.macro == ast.BIND:
            if not self.bindings:
                raise _err("undeclared reference to 'cel.bind'", e)
            it = self.check(e.range, scope)
            assert e.transform is not None
            return self.check(e.transform, {**scope, e.var: it})
        rt = self.check(e.range, scope)
        if rt.name == "list":
            var_t, var2_t = (types.INT, rt.elem) if e.var2 is not None else (rt.elem, types.DYN)
        elif rt.name == "map":
            var_t, var2_t = rt.key, rt.elem
        elif rt.name == "dyn":
            var_t, var2_t = types.DYN, types.DYN
        else:
            raise _err(f"expression of type '{rt}' cannot be the range of a comprehension", e.range)
        inner = {**scope, e.var: var_t}
        if e.var2 is not None:
            inner[e.var2] = var2_t
        if e.pred is not None:
            pt = self.check(e.pred, inner)
            if pt.name not in ("bool", "dyn"):
                raise _err(
                    f"{e.macro.replace('map_filter', 'map')}() predicate must be bool, not {pt}",
                    e.pred,
                )
        tt = self.check(e.transform, inner) if e.transform is not None else None
        if e.macro in (ast.ALL, ast.EXISTS, ast.EXISTS_ONE):
            return types.BOOL
        if e.macro == ast.FILTER:
            return types.list_of(var_t)
        assert tt is not None
        if e.macro == ast.TRANSFORM_MAP:
            return types.map_of(var_t, tt)
        if e.macro == ast.TRANSFORM_MAP_ENTRY:
            if tt.name not in ("map", "dyn"):
                raise _err(f"transformMapEntry() transform must be a map, not {tt}", e.transform or e)
            return tt if tt.name == "map" else types.MAP_DYN
        return types.list_of(tt)

    def _call(self, e: ast.Call, scope: Mapping[str, Ty]) -> Ty:
        if e.name == "format":
            self.exempt.update(a for a in e.args if isinstance(a, ast.ListLit))
        self._in_format += e.name == "format"
        try:
            recv = self.check(e.target, scope) if e.target is not None else None
            args = tuple(self.check(a, scope) for a in e.args)
        finally:
            self._in_format -= e.name == "format"
        member = recv is not None
        fn = REGISTRY.get((e.name, member, len(args)))
        if fn is None:
            if e.name not in FUNCTION_NAMES:
                raise _err(f"undeclared reference to '{e.name}'", e)
            shape = f"{recv}.({_sig(args)})" if member else f"({_sig(args)})"
            raise _err(f"found no matching overload for '{e.name}' applied to '{shape}'", e)
        actual = ((recv,) if recv is not None else ()) + args
        results: list[Ty] = []
        for ov in fn.overloads:
            if _matches(ov, actual):
                results.append(ov.result(actual) if callable(ov.result) else ov.result)
        if not results:
            shape = f"{recv}.({_sig(args)})" if member else f"({_sig(args)})"
            raise _err(f"found no matching overload for '{e.name}' applied to '{shape}'", e)
        if (
            e.name == "format"
            and isinstance(e.target, ast.Const)
            and type(e.target.value) is str
            and len(e.args) == 1
            and isinstance(e.args[0], ast.ListLit)
        ):
            problem = validate_literal_format(
                e.target.value,
                [self.types[x].name for x in e.args[0].elems],
                [self._format_nested(x) for x in e.args[0].elems],
            )
            if problem is not None:
                raise _err(problem, e)
        first = results[0]
        if e.name == "optional.none":  # optional of a free type in homogeneous literals
            self.shapes[e] = Ty(types.OPTIONAL_NAME, (_FREE,))
        if e.name in ("sum", "min", "max") and e.target is not None and not args:
            recv_shape = self.shapes.get(e.target)
            if recv_shape is not None and recv_shape.params and recv_shape.params[0].name == "*":
                return types.INT  # [].sum(): cel-go picks the first overload, list(int) -> int
        if e.name in _STATIC_CHECKS:
            _STATIC_CHECKS[e.name](e, actual)
        return first if all(r == first for r in results) else types.DYN


def _optional_or(e: ast.Call, actual: tuple[Ty, ...]) -> None:
    """``opt.or(other)``: ``other`` is an optional of the same type."""
    recv, arg = actual
    if arg.name == "dyn":
        return
    if arg.name != types.OPTIONAL_NAME or not types.comparable_eq(recv, arg):
        raise _err(f"found no matching overload for 'or' applied to '{recv}.({arg})'", e)


def _optional_or_value(e: ast.Call, actual: tuple[Ty, ...]) -> None:
    """``opt.orValue(v)``: ``v`` has the type the optional holds."""
    recv, arg = actual
    inner = recv.params[0] if recv.params else types.DYN
    if not types.comparable_eq(inner, arg):
        raise _err(f"found no matching overload for 'orValue' applied to '{recv}.({arg})'", e)


def _optional_select(e: ast.Call, actual: tuple[Ty, ...]) -> None:
    recv = actual[0]
    if recv.name == types.OPTIONAL_NAME:
        recv = recv.params[0] if recv.params else types.DYN
    if recv.name not in ("dyn", "map") and recv.name not in types.STRUCT_FIELDS:
        raise _err(f"type '{recv}' does not support field selection", e)


def _optional_index(e: ast.Call, actual: tuple[Ty, ...]) -> None:
    recv, idx = actual
    if recv.name == types.OPTIONAL_NAME:
        recv = recv.params[0] if recv.params else types.DYN
    ok = (
        recv.name == "dyn"
        or (recv.name == "list" and idx.name in ("int", "dyn"))
        or (recv.name == "map" and types.comparable_eq(recv.key, idx))
    )
    if not ok:
        raise _err(f"found no matching overload for '_[?_]' applied to '({recv}, {idx})'", e)


def _flatten_check(e: ast.Call, actual: tuple[Ty, ...]) -> None:
    """``list.flatten()``: cel-go's overload takes a list of lists (``flatten(depth)`` any list)."""
    recv = actual[0]
    if len(actual) == 1 and recv.name == "list" and recv.elem.name not in ("list", "dyn"):
        raise _err(f"found no matching overload for 'flatten' applied to '{recv}.()'", e)


_SUMMABLE: Final = frozenset({"int", "uint", "double", "dyn", "google.protobuf.Duration"})
_ORDERABLE: Final = types.ORDERED | {"dyn", "google.protobuf.Duration", "google.protobuf.Timestamp"}


def _list_elem_check(allowed: frozenset[str]) -> Callable[[ast.Call, tuple[Ty, ...]], None]:
    """``list.sum()``/``min()``/``max()``: cel-go's overloads take lists of these only."""

    def check(e: ast.Call, actual: tuple[Ty, ...]) -> None:
        recv = actual[0]
        if recv.name == "list" and recv.elem.name not in allowed:
            raise _err(f"found no matching overload for '{e.name}' applied to '{recv}.()'", e)

    return check


def _list_search_check(e: ast.Call, actual: tuple[Ty, ...]) -> None:
    """``list.indexOf(x)`` / ``lastIndexOf(x)``: ``x`` has the element type."""
    recv = actual[0]
    if recv.name == "list" and len(actual) == 2 and not types.comparable_eq(recv.elem, actual[1]):
        raise _err(
            f"found no matching overload for '{e.name}' applied to '{recv}.({actual[1]})'", e
        )


_STATIC_CHECKS: Final[dict[str, Callable[[ast.Call, tuple[Ty, ...]], None]]] = {
    "sum": _list_elem_check(_SUMMABLE),
    "min": _list_elem_check(_ORDERABLE),
    "max": _list_elem_check(_ORDERABLE),
    "indexOf": _list_search_check,
    "lastIndexOf": _list_search_check,
    "or": _optional_or,
    "orValue": _optional_or_value,
    OPT_SELECT: _optional_select,
    OPT_INDEX: _optional_index,
    "flatten": _flatten_check,
}


def _matches(ov: Overload, actual: tuple[Ty, ...]) -> bool:
    return len(ov.params) == len(actual) and all(
        types.assignable(p, a) for p, a in zip(ov.params, actual, strict=True)
    )
