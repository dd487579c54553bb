"""Compile a checked AST into Python closures that evaluate with a cost meter.

Each node becomes one closure ``f(env, meter) -> value``; compilation happens
once per expression and evaluation is plain function calls, no tree walking.
The operators themselves are metered functions from :mod:`.operators`,
comprehensions come from :mod:`.comprehensions`, and library functions are
metered here by one factory from their :class:`~.library.Function` rows
(cost rule charged before the call, result rule after it).

Cost is charged as cel-go's runtime ``CostTracker`` counts it: constants 0;
identifiers, field selections, index operations and ``has()`` 1; operators
and function calls 1 or a size-dependent amount; list literals 10, map
literals 30; ``&&``, ``||`` and ``?:`` nothing beyond their operands. The meter
raises :class:`CELCostExceeded` as soon as the running total passes the budget,
so evaluation stops deterministically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import re2

from . import ast
from .comprehensions import compile_comprehension
from .errors import (
    NO_SUCH_OVERLOAD,
    CELCompileError,
    CELCostExceeded,
    CELEvalError,
)
from .library import (
    REGEX_FUNCTIONS,
    REGISTRY,
    Function,
    match_cost,
    nso,
    regex_program,
    regex_shape,
    run_find,
    run_find_all,
    run_matches,
    str_cost,
)
from .library_opt import LAZY_OPTIONAL_CALLS
from .libs import LITERAL_CHECKED
from .meter import (
    LIST_CREATE_BASE_COST,
    MAP_CREATE_BASE_COST,
    Env,
    Fn,
    Meter,
    charge,
    exceeded,
    missing_key,
    no_var,
    select_field,
)
from .operators import BINARY, UNARY, BinaryOp, eq_op, index_value
from .optionals import CelOptional
from .regex import Shape, compile_cost, parse_cost
from .values import (
    TYPE_IDENTIFIERS,
    CelMap,
    ConstList,
    canon_key,
    cel_eq,
    is_list,
    map_insert,
    member_key,
    set_members,
)

__all__ = [
    "LIST_CREATE_BASE_COST",
    "MAP_CREATE_BASE_COST",
    "Compiler",
    "Env",
    "Fn",
    "Meter",
    "charge",
]


def metered_call(
    impl: Callable[..., object],
    cost: Callable[[tuple[object, ...]], int] | None,
    post: Callable[[object], int] | None,
    arg_fns: tuple[Fn, ...],
) -> Fn:
    """The closure of a library call: arguments, then ``cost`` (default 1), the call, ``post``.

    ``cost`` sees the argument values and is charged before the call, so a
    function whose result size it accounts for never builds a result the
    budget cannot pay for; ``post`` (rare) is charged from the result.
    """
    if len(arg_fns) == 1 and post is None:
        (a0,) = arg_fns

        def call1(env: Env, m: Meter) -> object:
            v = a0(env, m)
            c = m.cost + (1 if cost is None else cost((v,)))
            m.cost = c
            if c > m.limit:
                exceeded(m)
            return impl(v)

        return call1
    if len(arg_fns) == 2 and post is None:
        a0, a1 = arg_fns

        def call2(env: Env, m: Meter) -> object:
            v0 = a0(env, m)
            v1 = a1(env, m)
            charge(m, 1 if cost is None else cost((v0, v1)))
            return impl(v0, v1)

        return call2

    def call(env: Env, m: Meter) -> object:
        vals = tuple([f(env, m) for f in arg_fns])
        charge(m, 1 if cost is None else cost(vals))
        result = impl(*vals)
        if post is not None:
            charge(m, post(result))
        return result

    return call


class Compiler:
    """Turns a checked AST into closures. ``variables`` are the declared activation names."""

    def __init__(self, variables: frozenset[str]) -> None:
        self.variables = variables
        # What literal patterns may still be compiled now, and the calls that were.
        self.regex_units_left = LITERAL_REGEX_UNITS
        self.precompiled: set[ast.Expr] = set()

    def check_constants(self, e: ast.Expr) -> None:
        """Evaluate every conversion of a constant now, wherever it is (also in a branch
        that constants decide against): cel-go does so when it builds the program, and
        an error there fails compilation ("program instantiation failed")."""
        stack = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Call) and node.name in FOLDED_CONVERSIONS:
                self._fold(node)
            stack.extend(ast.children(node))

    def compile(self, e: ast.Expr, scope: frozenset[str] = frozenset()) -> Fn:
        if isinstance(e, (ast.ListLit, ast.MapLit, ast.And, ast.Or, ast.Cond, ast.Call)):
            folded = self._fold(e)
            if folded is not None:
                value, cost = folded

                # Constant structure is built once, at compile time, and charged
                # what cel-go charges for it at run time (0 for constant literals
                # and conversions, which its planner precomputes).
                def const_structure(env: Env, m: Meter) -> object:
                    charge(m, cost)
                    return value

                return const_structure
        method = getattr(self, "_c_" + type(e).__name__)
        fn: Fn = method(e, scope)
        return fn

    def _fold(self, e: ast.Expr) -> tuple[object, int] | None:
        """(value, runtime cost) of a constant sub-expression, or None.

        Literals of constants fold to read-only values (ConstList, frozen CelMap);
        ``&&``, ``||`` and ``?:`` fold when constants decide them, charging
        only the operands cel-go would evaluate.
        """
        if isinstance(e, ast.Const):
            return e.value, 0
        if isinstance(e, ast.Call):
            return self._fold_conversion(e)
        if isinstance(e, ast.ListLit):
            if e.optional:
                return None
            parts = [self._fold(x) for x in e.elems]
            if any(p is None for p in parts):
                return None
            done = [p for p in parts if p is not None]
            return ConstList(v for v, _ in done), sum(c for _, c in done)
        if isinstance(e, ast.MapLit):
            if e.optional:
                return None
            out = CelMap()
            cost = 0
            for k, v in e.entries:
                fk = self._fold(k)
                fv = self._fold(v)
                if fk is None or fv is None:
                    return None
                ck = canon_key(fk[0]) if type(fk[0]) is not float else None
                if ck is None or (ck not in out.canon and ck[0] != "s" and fk[0] in out):
                    return None  # left to fail at run time, as in cel-go
                if ck in out.canon:  # a repeated key takes the last value
                    out[out.canon[ck]] = fv[0]
                else:
                    out.canon[ck] = fk[0]
                    out[fk[0]] = fv[0]
                cost += fk[1] + fv[1]
            out.freeze()
            return out, cost
        if isinstance(e, (ast.And, ast.Or)):
            decisive = isinstance(e, ast.Or)  # the value that short-circuits
            left = self._fold(e.left)
            if left is None or type(left[0]) is not bool:
                return None
            if left[0] is decisive:
                return left
            right = self._fold(e.right)
            if right is None or type(right[0]) is not bool:
                return None
            return right[0], left[1] + right[1]
        if isinstance(e, ast.Cond):
            cond = self._fold(e.cond)
            if cond is None or type(cond[0]) is not bool:
                return None
            branch = self._fold(e.then if cond[0] else e.other)
            if branch is None:
                return None
            return branch[0], cond[1] + branch[1]
        return None

    def _fold_conversion(self, e: ast.Call) -> tuple[object, int] | None:
        """A type conversion of a constant, evaluated now (cost 0 at run time)."""
        if e.name not in FOLDED_CONVERSIONS or e.target is not None or len(e.args) != 1:
            return None
        if not isinstance(e.args[0], (ast.Const, ast.ListLit, ast.MapLit, ast.Call)):
            return None  # cel-go folds conversions of literals only (not of `c ? a : b`)
        arg = self._fold(e.args[0])
        if arg is None:
            return None
        fn = REGISTRY.get((e.name, False, 1))
        if fn is None:  # pragma: no cover - the checker resolved the call
            return None
        try:
            value = fn.impl(arg[0])
        except CELEvalError as err:
            raise CELCompileError(f"program instantiation failed: {err.message}", e.pos) from None
        if isinstance(value, list) and not isinstance(value, ConstList):
            value = ConstList(value)
        return value, arg[1]

    def _variable(self, e: ast.Expr, scope: frozenset[str]) -> str | None:
        """The name if ``e`` is a plain variable reference (not a type name)."""
        if isinstance(e, ast.Ident) and (e.name in scope or e.name in self.variables):
            return e.name
        return None

    # -- leaves ---------------------------------------------------------

    def _c_Const(self, e: ast.Const, scope: frozenset[str]) -> Fn:
        value = e.value

        def const(env: Env, m: Meter) -> object:
            return value

        return const

    def _c_Ident(self, e: ast.Ident, scope: frozenset[str]) -> Fn:
        if self._variable(e, scope) is None:
            tv = TYPE_IDENTIFIERS[e.name]

            def type_ident(env: Env, m: Meter) -> object:
                return tv  # a type name is a constant: free, as in cel-go

            return type_ident
        return self._path(e.name, ())

    # -- selection and indexing ------------------------------------------

    def _c_Select(self, e: ast.Select, scope: frozenset[str]) -> Fn:
        field = e.field
        if e.test_only:
            operand = self.compile(e.operand, scope)

            def has(env: Env, m: Meter) -> object:
                v = operand(env, m)
                # the field test itself is free (cel-go charges only the operand)
                if type(v) is dict or isinstance(v, Mapping):
                    try:
                        return field in v
                    except TypeError:  # a map whose keys cannot be compared with a string
                        return False
                if is_list(v):  # cel-go indexes a list with the field name: an error
                    raise CELEvalError(
                        "unsupported index type 'string' in list", NO_SUCH_OVERLOAD
                    )
                # cel-go: a field test on any other value answers false
                return False

            return has
        # Fuse a selection path rooted at a variable (object.a.b) into one closure.
        fields: list[str] = []
        node: ast.Expr = e
        while isinstance(node, ast.Select) and not node.test_only:
            fields.append(node.field)
            node = node.operand
        root = self._variable(node, scope)
        if root is not None:
            return self._path(root, tuple(reversed(fields)))
        operand = self.compile(e.operand, scope)

        def select(env: Env, m: Meter) -> object:
            v = operand(env, m)
            if type(v) is CelOptional:
                return _through_optional(select_field(v, field), m)
            charge(m, 1)
            return select_field(v, field)

        return select

    def _path(self, root: str, fields: tuple[str, ...]) -> Fn:
        """A variable and the fields selected from it: 1 per identifier and selection."""
        k = 1 + len(fields)

        def path(env: Env, m: Meter) -> object:
            c = m.cost + k
            m.cost = c
            if c > m.limit:
                exceeded(m)
            try:
                v = env[root]
            except KeyError:
                no_var(root)
            for f in fields:
                if type(v) is dict:
                    try:
                        v = v[f]
                    except KeyError:
                        missing_key(f)
                else:
                    v = select_field(v, f)
            return v

        return path

    def _c_Index(self, e: ast.Index, scope: frozenset[str]) -> Fn:
        operand = self.compile(e.operand, scope)
        idx = self.compile(e.index, scope)

        def index(env: Env, m: Meter) -> object:
            v = operand(env, m)
            k = idx(env, m)
            if type(v) is CelOptional:
                return _through_optional(index_value(v, k), m)
            charge(m, 1)
            if type(v) is dict and type(k) is str:
                try:
                    return v[k]
                except KeyError:
                    missing_key(k)
            return index_value(v, k)

        return index

    # -- operators ------------------------------------------------------

    def _c_Unary(self, e: ast.Unary, scope: frozenset[str]) -> Fn:
        operand = self.compile(e.operand, scope)
        op = UNARY[e.op]

        def unary(env: Env, m: Meter) -> object:
            v = operand(env, m)
            charge(m, 1)
            return op(v)

        return unary

    def _c_Binary(self, e: ast.Binary, scope: frozenset[str]) -> Fn:
        if e.op == "in":
            member = self._set_membership(e, scope)
            if member is not None:
                return member
        op = BINARY[e.op]
        left = self.compile(e.left, scope)
        if e.op == "==" and isinstance(e.right, ast.Const) and type(e.right.value) is str:
            return self._eq_str_const(left, e.right.value)
        lvar = self._variable(e.left, scope)
        rvar = self._variable(e.right, scope)
        if lvar is not None and (rvar is not None or isinstance(e.right, ast.Const)):
            return self._var_operands(op, lvar, rvar, e.right)
        if isinstance(e.right, ast.Const):
            rconst = e.right.value

            def expr_const(env: Env, m: Meter) -> object:
                return op(left(env, m), rconst, m)

            return expr_const
        right = self.compile(e.right, scope)

        def binary(env: Env, m: Meter) -> object:
            return op(left(env, m), right(env, m), m)

        return binary

    def _set_membership(self, e: ast.Binary, scope: frozenset[str]) -> Fn | None:
        """``x in [constant scalars]``: a hash lookup, free as in cel-go, whose planner
        turns it into a set membership test the cost tracker does not see (decided now
        when ``x`` is a constant too). The operand is still charged."""
        folded = self._fold(e.right)
        if folded is None or not isinstance(folded[0], list):
            return None
        members = set_members(folded[0])
        if members is None:
            return None
        if isinstance(e.left, ast.Const) and member_key(e.left.value) is not None:
            found = member_key(e.left.value) in members

            def constant_in(env: Env, m: Meter) -> object:
                return found

            return constant_in
        left = self.compile(e.left, scope)
        seq = folded[0]

        def set_membership(env: Env, m: Meter) -> object:
            a = left(env, m)
            k = member_key(a)
            if k is not None:
                return k in members
            if type(a) is float:  # NaN is a member of nothing
                return False
            return any(cel_eq(a, x) for x in seq)  # other kinds: never equal to a scalar

        return set_membership

    @staticmethod
    def _var_operands(op: BinaryOp, lname: str, rvar: str | None, right: ast.Expr) -> Fn:
        """Hot path (comprehension bodies such as `a + b >= 0`, `x % 2 == 0`): variables
        and a constant read directly; the identifiers' costs are charged together."""
        k = 1 if rvar is None else 2
        rname = "" if rvar is None else rvar
        rconst = right.value if isinstance(right, ast.Const) else None

        def var_operands(env: Env, m: Meter) -> object:
            c = m.cost + k
            m.cost = c
            if c > m.limit:
                exceeded(m)
            try:
                a = env[lname]
                b = rconst if k == 1 else env[rname]
            except KeyError as err:
                no_var(str(err.args[0]))
            return op(a, b, m)

        return var_operands

    @staticmethod
    def _eq_str_const(left: Fn, lit: str) -> Fn:
        """``x == "literal"``, the extractor idiom: cel-go's string equality cost inline."""
        lit_len = len(lit)

        def eq_str_const(env: Env, m: Meter) -> object:
            a = left(env, m)
            if type(a) is not str:
                return eq_op(a, lit, m)
            la = len(a)
            charge(m, str_cost(la if la < lit_len else lit_len))
            return a == lit

        return eq_str_const

    def _c_And(self, e: ast.And, scope: frozenset[str]) -> Fn:
        return self._logical(e.left, e.right, scope, decisive=False, op="_&&_")

    def _c_Or(self, e: ast.Or, scope: frozenset[str]) -> Fn:
        return self._logical(e.left, e.right, scope, decisive=True, op="_||_")

    def _logical(self, le: ast.Expr, re_: ast.Expr, scope: frozenset[str], *, decisive: bool,
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

    def _c_Cond(self, e: ast.Cond, scope: frozenset[str]) -> Fn:
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

    def _c_ListLit(self, e: ast.ListLit, scope: frozenset[str]) -> Fn:
        elems = tuple(self.compile(x, scope) for x in e.elems)
        if e.optional:
            optional = frozenset(e.optional)
            flagged = tuple((i in optional, f) for i, f in enumerate(elems))

            def list_lit_opt(env: Env, m: Meter) -> object:
                out = []
                for opt, f in flagged:
                    v = f(env, m)
                    if not opt:
                        out.append(v)
                    elif type(v) is not CelOptional:
                        nso("[?_]", v)
                    elif v.present:
                        out.append(v.value)
                charge(m, LIST_CREATE_BASE_COST)
                return out

            return list_lit_opt

        def list_lit(env: Env, m: Meter) -> object:
            out = [f(env, m) for f in elems]
            charge(m, LIST_CREATE_BASE_COST)
            return out

        return list_lit

    def _c_MapLit(self, e: ast.MapLit, scope: frozenset[str]) -> Fn:
        entries = tuple((self.compile(k, scope), self.compile(v, scope)) for k, v in e.entries)

        optional = frozenset(e.optional)
        if optional:
            flagged = tuple((i in optional, kf, vf) for i, (kf, vf) in enumerate(entries))

            def map_lit_opt(env: Env, m: Meter) -> object:
                out = CelMap()
                for opt, kf, vf in flagged:
                    k = kf(env, m)
                    v = vf(env, m)
                    if opt:
                        if type(v) is not CelOptional:
                            nso("{?_: _}", v)
                        if not v.present:
                            continue
                        v = v.value
                    map_insert(out, k, v)
                charge(m, MAP_CREATE_BASE_COST)
                return out

            return map_lit_opt

        def map_lit(env: Env, m: Meter) -> object:
            out = CelMap()
            for kf, vf in entries:
                k = kf(env, m)
                map_insert(out, k, vf(env, m))
            charge(m, MAP_CREATE_BASE_COST)
            return out

        return map_lit

    # -- comprehensions and calls ------------------------------------------

    def _c_Comprehension(self, e: ast.Comprehension, scope: frozenset[str]) -> Fn:
        rng = self.compile(e.range, scope)
        if e.macro == ast.BIND:
            assert e.transform is not None
            return _bind(e.var, rng, self.compile(e.transform, scope | {e.var}))
        inner = scope | {e.var} | ({e.var2} if e.var2 is not None else set())
        pred = self.compile(e.pred, inner) if e.pred is not None else None
        transform = self.compile(e.transform, inner) if e.transform is not None else None
        return compile_comprehension(e, rng, pred, transform)

    def _c_Call(self, e: ast.Call, scope: frozenset[str]) -> Fn:
        fn = REGISTRY[(e.name, e.target is not None, len(e.args))]
        if e.name in REGEX_FUNCTIONS:
            return self._regex_call(e, fn, scope)
        if e.name in LITERAL_CHECKED and e.target is None and isinstance(e.args[0], ast.Const):
            try:
                fn.impl(e.args[0].value)
            except CELEvalError as err:
                raise CELCompileError(err.message, e.args[0].pos) from None
        arg_exprs = ((e.target,) if e.target is not None else ()) + e.args
        arg_fns = tuple(self.compile(a, scope) for a in arg_exprs if a is not None)
        if e.target is not None and e.name in LAZY_OPTIONAL_CALLS and len(arg_fns) == 2:
            return _lazy_optional(e.name, fn.impl, arg_fns[0], arg_fns[1])
        return metered_call(fn.impl, fn.cost, fn.result_cost, arg_fns)


    def _regex_call(self, e: ast.Call, fn: Function, scope: frozenset[str]) -> Fn:
        """``matches``, ``find``, ``findAll``: a literal pattern is checked now (Go's syntax
        and limits; an invalid one is a compile error, as in cel-go) and compiled now while
        the expression's allowance lasts (:data:`LITERAL_REGEX_UNITS`), then costs only
        its matches, as in cel-go; any other pattern is metered by :func:`_pattern`."""
        pattern = e.args[-1] if e.name == "matches" else e.args[0]
        const: tuple[str, re2._Regexp, Shape] | None = None
        if isinstance(pattern, ast.Const) and type(pattern.value) is str:
            try:
                sh = regex_shape(pattern.value)
                if sh.units <= self.regex_units_left:
                    self.regex_units_left -= sh.units
                    const = (pattern.value, regex_program(pattern.value)[0], sh)
                    self.precompiled.add(e)
            except CELEvalError as err:
                raise CELCompileError(err.message, pattern.pos) from None
        arg_exprs = ((e.target,) if e.target is not None else ()) + e.args
        arg_fns = tuple(self.compile(a, scope) for a in arg_exprs if a is not None)
        return _metered_regex(e.name, arg_fns, const, fn.result_cost)


#: Estimated RE2 instructions of the literal patterns one expression may compile when
#: it is compiled (~25 ms at most); further literal patterns are compiled and charged
#: when evaluated, as computed ones are.
LITERAL_REGEX_UNITS: Final = 20_000

_REGEX_RUNS: Final[Mapping[str, Callable[..., object]]] = {
    "matches": run_matches, "find": run_find, "findAll": run_find_all}


def _pattern(m: Meter, pattern: str) -> tuple[re2._Regexp, Shape]:
    """A computed pattern's program, charged once per evaluation: checking it
    (:func:`regex.parse_cost`), then compiling it (:func:`regex.compile_cost`), both before the work,
    also when the pattern is invalid or its program is cached (so the cost is the same
    on every run). cel-go compiles such a pattern on every call and charges nothing."""
    seen = m.regexes
    if seen is None:
        seen = m.regexes = {}
    hit = seen.get(pattern)
    if hit is not None:
        return hit
    charge(m, parse_cost(len(pattern)))
    sh = regex_shape(pattern)
    charge(m, compile_cost(sh))
    hit = seen[pattern] = (regex_program(pattern)[0], sh)
    return hit


def _metered_regex(name: str, arg_fns: tuple[Fn, ...],
                   const: tuple[str, re2._Regexp, Shape] | None,
                   post: Callable[[object], int] | None) -> Fn:
    run = _REGEX_RUNS[name]

    def regex_call(env: Env, m: Meter) -> object:
        vals = [f(env, m) for f in arg_fns]
        text, pattern = vals[0], vals[1]
        if type(text) is not str or type(pattern) is not str or (
                len(vals) == 3 and type(vals[2]) is not int):
            nso(name, *vals)
        prog, sh = (const[1], const[2]) if const is not None else _pattern(m, pattern)
        charge(m, match_cost(text, pattern, sh))
        result = run(text, prog, *vals[2:])
        if post is not None:
            charge(m, post(result))
        return result

    return regex_call


def _lazy_optional(name: str, impl: Callable[..., object], recv: Fn, arg: Fn) -> Fn:
    """``opt.orValue(v)`` / ``opt.or(o)``: the argument is evaluated only when ``opt`` is
    none, and the call itself costs nothing (cel-go short-circuits both)."""

    def lazy_optional(env: Env, m: Meter) -> object:
        o = recv(env, m)
        if type(o) is CelOptional and o.present:
            return o if name == "or" else o.value
        return impl(o, arg(env, m))

    return lazy_optional


_UNBOUND: Final = object()


def _bind(var: str, init: Fn, body: Fn) -> Fn:
    """``cel.bind(var, init, body)``: ``init`` evaluated once, ``var`` visible in ``body``."""

    def bind(env: Env, m: Meter) -> object:
        value = init(env, m)
        saved = env.get(var, _UNBOUND)
        env[var] = value
        try:
            return body(env, m)
        finally:
            if saved is _UNBOUND:
                env.pop(var, None)
            else:
                env[var] = saved

    return bind


# Conversions cel-go's planner evaluates when an argument is constant (cel.OptOptimize).
FOLDED_CONVERSIONS: Final = frozenset(
    {"int", "uint", "double", "string", "bytes", "bool", "dyn", "type",
     "timestamp", "duration"}
)


def _through_optional(result: object, m: Meter) -> object:
    """A selection or index through an optional is charged only when it yields a value
    (cel-go)."""
    if type(result) is CelOptional and result.present:
        charge(m, 1)
    return result
