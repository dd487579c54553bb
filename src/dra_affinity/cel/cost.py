"""Static cost estimation.

The estimate mirrors the runtime charges of :mod:`.interpreter` node by node
and is an upper bound over branches and short-circuits (``&&``/``||`` count
both sides, ``?:`` the dearer branch, comprehensions every iteration), as
cel-go's ``checker.Cost`` max is. What varies is how large data from the
activation (``object``, ``device``) is assumed to be:

* ``min`` assumes every activation-derived string, bytes, list and map is
  empty: the cost the expression has regardless of the claim data (literals,
  fixed structure, comprehensions over literal lists);
* ``max`` bounds activation-derived strings by ``str_bound`` characters and
  lists/maps by ``coll_bound`` elements, which is as much as a JSON document
  of ``OPAQUE_PARAMETERS_MAX_LENGTH`` characters can hold.

Sizes of values built inside the expression (literals, concatenations,
``split``...) are tracked exactly or bounded from their operands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from . import ast, types
from .checker import TypeMap
from .library import (
    FIND_ALL_MATCH_COST,
    REGEX_STRING_LENGTH_COST_FACTOR,
    STRING_TRAVERSAL_COST_FACTOR,
    regex_size,
    semver_parse_cost,
    str_cost,
    str_width,
)
from .libs import estimate_call
from .meter import LIST_CREATE_BASE_COST, MAP_CREATE_BASE_COST
from .optionals import OPT_INDEX, OPT_SELECT
from .regex import GO_MAX_SIZE, Shape, compile_cost, parse_cost, shape
from .types import Ty

COST_CAP: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Sz:
    """Upper bound of a value's size() and of its elements' sizes."""

    n: int
    elem: Sz | None = None  # list elements, map values
    key: Sz | None = None  # map keys
    data: bool = False  # derived from the activation: elements are data too
    w: int = 4  # bytes per character in memory (known for literals; else the most)


SCALAR: Final = Sz(1)


def _join(a: Sz | None, b: Sz | None) -> Sz | None:
    if a is None or b is None:
        return a if b is None else b
    return Sz(
        max(a.n, b.n),
        _join(a.elem, b.elem),
        _join(a.key, b.key),
        a.data or b.data,
        max(a.w, b.w),
    )


def _regex_cost(s_n: int, re_n: int) -> int:
    return math.ceil((1.0 + s_n) * STRING_TRAVERSAL_COST_FACTOR) * math.ceil(
        re_n * REGEX_STRING_LENGTH_COST_FACTOR
    )


#: Estimated instructions of a pattern of unknown content: Go's size limit times the
#: largest class (only a bound: such a program's compile charge exceeds any budget).
_UNITS_BOUND: Final = GO_MAX_SIZE * 1300


class Estimator:
    def __init__(
        self, type_map: TypeMap, variables: frozenset[str], str_bound: int, coll_bound: int,
        precompiled: frozenset[ast.Expr] = frozenset(),
    ) -> None:
        """``precompiled``: the regex calls whose literal pattern was compiled with the
        expression (they cost only their matches)."""
        self.precompiled = precompiled
        self.types = type_map
        self.variables = variables
        self.str_bound = str_bound
        self.coll_bound = coll_bound
        self.data = Sz(str_bound, data=True)

    # -- size helpers ---------------------------------------------------

    def elem_of(self, sz: Sz) -> Sz:
        if sz.data:
            return self.data
        return sz.elem if sz.elem is not None else self.data

    def key_of(self, sz: Sz) -> Sz:
        if sz.data:
            return self.data
        return sz.key if sz.key is not None else self.data

    def count(self, sz: Sz) -> int:
        """Upper bound on the number of elements (iterations over the value)."""
        return min(sz.n, self.coll_bound) if sz.data else sz.n

    def nested(self, sz: Sz, depth: int = 0) -> int:
        """Upper bound on the summed sizes of the containers inside ``sz`` (deep equality)."""
        if sz.data:
            return self.coll_bound  # a JSON document holds no more elements in total
        inner = sz.elem if sz.elem is not None else sz.key
        if inner is None or depth > 8:
            return 0
        if inner.data:
            return self.coll_bound
        own = inner.n if (inner.elem is not None or inner.key is not None) else 0
        return self.count(sz) * (own + self.nested(inner, depth + 1))

    def traversal(self, sz: Sz, depth: int = 0) -> int:
        """Upper bound of Kubernetes' traversalCost for a value of this size."""
        if sz.data:
            # a JSON document holds at most coll_bound elements and str_bound bytes
            return self.coll_bound + int(self.str_bound * STRING_TRAVERSAL_COST_FACTOR * 4)
        inner = sz.elem
        if inner is None or depth > 8:
            return max(1, int(sz.n * 4 * STRING_TRAVERSAL_COST_FACTOR))
        per = self.traversal(inner, depth + 1)
        if sz.key is not None:
            per += self.traversal(sz.key, depth + 1)
        return self.count(sz) * per

    def ty(self, e: ast.Expr) -> Ty:
        return self.types.get(e, types.DYN)

    # -- estimation -----------------------------------------------------

    def estimate(self, e: ast.Expr, scope: Mapping[str, Sz]) -> tuple[int, Sz]:
        cost, sz = self._est(e, scope)
        return min(cost, COST_CAP), sz

    def _est(self, e: ast.Expr, scope: Mapping[str, Sz]) -> tuple[int, Sz]:
        if isinstance(e, ast.Const):
            v = e.value
            if type(v) is str:
                return 0, Sz(len(v), w=str_width(v))
            if type(v) is bytes:
                return 0, Sz(len(v), w=1)
            return 0, SCALAR
        if isinstance(e, ast.Ident):
            if e.name in scope:
                return 1, scope[e.name]
            if e.name in self.variables:
                return 1, self.data
            return 1, SCALAR
        if isinstance(e, ast.Select):
            c, sz = self._est(e.operand, scope)
            if e.test_only:
                return c, SCALAR  # the field test itself is free at run time
            return c + 1, self.elem_of(sz)
        if isinstance(e, ast.Index):
            c1, sz = self._est(e.operand, scope)
            c2, _ = self._est(e.index, scope)
            return c1 + c2 + 1, self.elem_of(sz)
        if isinstance(e, ast.Unary):
            c, _ = self._est(e.operand, scope)
            return c + 1, SCALAR
        if isinstance(e, ast.Binary):
            return self._binary(e, scope)
        if isinstance(e, (ast.And, ast.Or)):
            c1, _ = self._est(e.left, scope)
            c2, _ = self._est(e.right, scope)
            return c1 + c2, SCALAR
        if isinstance(e, ast.Cond):
            c0, _ = self._est(e.cond, scope)
            c1, s1 = self._est(e.then, scope)
            c2, s2 = self._est(e.other, scope)
            joined = _join(s1, s2)
            assert joined is not None
            return c0 + max(c1, c2), joined
        if isinstance(e, ast.ListLit):
            total = LIST_CREATE_BASE_COST
            elem: Sz | None = None
            for x in e.elems:
                c, s = self._est(x, scope)
                total += c
                elem = _join(elem, s)
            return total, Sz(len(e.elems), elem or SCALAR)
        if isinstance(e, ast.MapLit):
            total = MAP_CREATE_BASE_COST
            ks: Sz | None = None
            vs: Sz | None = None
            for k, v in e.entries:
                ck, sk = self._est(k, scope)
                cv, sv = self._est(v, scope)
                total += ck + cv
                ks = _join(ks, sk)
                vs = _join(vs, sv)
            return total, Sz(len(e.entries), vs or SCALAR, ks or SCALAR)
        if isinstance(e, ast.Comprehension):
            return self._comprehension(e, scope)
        if isinstance(e, ast.Call):
            return self._call(e, scope)
        raise TypeError(f"unknown node {type(e).__name__}")  # pragma: no cover

    def _binary(self, e: ast.Binary, scope: Mapping[str, Sz]) -> tuple[int, Sz]:
        c1, s1 = self._est(e.left, scope)
        c2, s2 = self._est(e.right, scope)
        base = c1 + c2
        op = e.op
        lt, rt = self.ty(e.left).name, self.ty(e.right).name
        if op == "+":
            if lt in ("int", "uint", "double") or rt in ("int", "uint", "double"):
                return base + 1, SCALAR
            total = Sz(
                s1.n + s2.n,
                _join(s1.elem, s2.elem) if not (s1.data or s2.data) else None,
                None,
                s1.data or s2.data,
                max(s1.w, s2.w),
            )
            op_cost = str_cost((s1.n + s2.n) * (1 if "bytes" in (lt, rt) else total.w))
            if "list" in (lt, rt) or "dyn" in (lt, rt):
                op_cost += 1  # list concatenation: 1 plus the copy
            return base + op_cost, total
        if op in ("-", "*", "/", "%"):
            return base + 1, SCALAR
        containers = ("list", "map", "dyn")
        if op in ("==", "!="):
            cost = str_cost(min(s1.n, s2.n))
            if lt in containers and rt in containers:
                cost += min(self.nested(s1), self.nested(s2))
            return base + cost, SCALAR
        if op in ("<", "<=", ">", ">="):
            sized = ("string", "bytes")
            if lt in sized and rt in sized:
                return base + str_cost(min(s1.n, s2.n)), SCALAR
            if "dyn" in (lt, rt):
                return base + max(1, str_cost(min(s1.n, s2.n))), SCALAR
            return base + 1, SCALAR
        # in
        if rt == "map":
            return base + 1, SCALAR
        cost = self.count(s2)
        if lt in containers:
            cost += self.count(s2) * (self.count(s1) + self.nested(s1))
        if rt == "dyn":
            cost = max(cost, 1)
        return base + cost, SCALAR

    def _comprehension(self, e: ast.Comprehension, scope: Mapping[str, Sz]) -> tuple[int, Sz]:
        cr, sr = self._est(e.range, scope)
        if e.macro == ast.BIND:  # cel.bind(v, init, expr): init once, then expr
            assert e.transform is not None
            ct, st = self._est(e.transform, {**scope, e.var: sr})
            return cr + ct, st
        n = self.count(sr)
        rt = self.ty(e.range).name
        if sr.data:
            var_sz = self.data
        elif rt == "map":
            var_sz = self.key_of(sr)
        elif rt == "list":
            var_sz = self.elem_of(sr)
        else:
            joined = _join(sr.elem, sr.key)
            var_sz = joined if joined is not None else self.data
        inner = {**scope, e.var: var_sz}
        if e.var2 is not None:
            if rt == "list" and not sr.data:
                inner[e.var] = SCALAR  # the index
            inner[e.var2] = self.data if sr.data else self.elem_of(sr)
        cp, _ = self._est(e.pred, inner) if e.pred is not None else (0, SCALAR)
        ct, st = self._est(e.transform, inner) if e.transform is not None else (0, SCALAR)
        macro = e.macro
        if macro == ast.ALL:
            return cr + 1 + n * (3 + cp), SCALAR
        if macro == ast.EXISTS:
            return cr + 1 + n * (4 + cp), SCALAR
        if macro == ast.EXISTS_ONE:
            return cr + 2 + n * (cp + 2), SCALAR
        if macro in (ast.TRANSFORM_MAP, ast.TRANSFORM_MAP_ENTRY):
            # {} then per element cel.@mapInsert(__result__, [k,] t): accumulator,
            # (key,) transform and the call; a filter costs itself when false
            per = cp + ct + (3 if macro == ast.TRANSFORM_MAP else 2)
            return cr + MAP_CREATE_BASE_COST + 1 + n * per, Sz(n, st, inner[e.var])
        fixed = cr + LIST_CREATE_BASE_COST + 1
        if macro == ast.MAP:
            return fixed + n * (ct + 12), Sz(n, st)
        if macro == ast.FILTER:
            return fixed + n * (cp + 13), Sz(n, var_sz)
        return fixed + n * (cp + 12 + ct), Sz(n, st)  # map(x, p, t)

    def _flattened_count(self, sz: Sz, depth: int) -> int:
        """Upper bound of the elements ``flatten(depth)`` returns for a list of size
        ``sz``: each level multiplies by the size of the lists it holds (a JSON
        document holds at most ``coll_bound`` elements however it is flattened)."""
        if sz.data:
            return self.count(sz)
        inner = sz.elem
        if depth <= 0 or inner is None or (inner.elem is None and not inner.data):
            return sz.n
        return min(sz.n * max(1, self._flattened_count(inner, depth - 1)), COST_CAP)

    def _regex(self, call: ast.Call, pattern: ast.Expr, text_n: int, pattern_n: int) -> int:
        """A regex call: its match (by the pattern's program where known) and, unless the
        pattern was compiled with the expression, reading and compiling it."""
        if isinstance(pattern, ast.Const) and type(pattern.value) is str:
            sh = shape(pattern.value)
            match = _regex_cost(text_n, regex_size(pattern.value, sh))
            if call in self.precompiled:
                return match
            return match + parse_cost(len(pattern.value)) + compile_cost(sh)
        if pattern_n == 0:  # known empty: what the constant "" costs compiled at run time
            sh = shape("")
            return _regex_cost(text_n, regex_size("", sh)) + compile_cost(sh)
        return (_regex_cost(text_n, max(pattern_n, GO_MAX_SIZE)) + parse_cost(pattern_n)
                + compile_cost(Shape(_UNITS_BOUND, GO_MAX_SIZE)))

    def _call(self, e: ast.Call, scope: Mapping[str, Sz]) -> tuple[int, Sz]:
        exprs = ((e.target,) if e.target is not None else ()) + e.args
        costs: list[int] = []
        sizes: list[Sz] = []
        for x in exprs:
            c, s = self._est(x, scope)
            costs.append(c)
            sizes.append(s)
        base = sum(costs)
        name = e.name
        n0 = sizes[0].n if sizes else 1
        t0 = self.ty(exprs[0]).name if exprs else "dyn"
        if name in ("contains",):
            return base + str_cost(n0) * str_cost(sizes[1].n), SCALAR
        if name in ("startsWith", "endsWith"):
            return base + str_cost(n0), SCALAR
        if name in ("matches", "find", "findAll"):
            cost = base + self._regex(e, exprs[1], n0, sizes[1].n)
            if name == "matches":
                return cost, SCALAR
            if name == "find":
                return cost, Sz(n0)
            return cost + FIND_ALL_MATCH_COST * (n0 + 1), Sz(n0 + 1, Sz(n0))  # plus each match
        if name == "dyn":
            return base + 1, sizes[0]
        if name == "string":
            size = {"int": 20, "uint": 20, "double": 32, "bool": 5}.get(t0, max(n0, 32))
            cost = str_cost(n0) if t0 in ("bytes", "dyn") else 1
            return base + max(cost, 1), Sz(size)
        if name == "bytes":
            cost = str_cost(n0) if t0 in ("string", "dyn") else 1
            return base + max(cost, 1), Sz(4 * n0)
        if name in ("indexOf", "lastIndexOf", "isSorted", "sum", "min", "max"):
            result = self.elem_of(sizes[0]) if name in ("sum", "min", "max") else SCALAR
            return base + self.traversal(sizes[0]), result
        if name in ("lowerAscii", "upperAscii", "trim", "substring"):
            return base + str_cost(n0), Sz(n0, w=sizes[0].w)
        if name == "replace":
            out = n0 + (n0 + 1) * sizes[2].n
            w = max(sizes[0].w, sizes[2].w)
            cost = max(math.ceil(n0 * 2 * STRING_TRAVERSAL_COST_FACTOR), str_cost(out * w))
            return base + cost, Sz(out, w=w)
        if name == "split":
            traverse = math.ceil(n0 * 2 * STRING_TRAVERSAL_COST_FACTOR)
            build = str_cost(n0 * sizes[0].w) + str_cost(n0 + 1)
            return base + max(traverse, build), Sz(n0 + 1, Sz(n0, w=sizes[0].w))
        if name == "join":
            count = self.count(sizes[0])
            elem = self.elem_of(sizes[0])
            sep = sizes[1] if len(sizes) > 1 else Sz(0, w=1)
            size = count * elem.n + max(count - 1, 0) * sep.n
            w = max(elem.w, sep.w)
            cost = max(math.ceil(size * 2 * STRING_TRAVERSAL_COST_FACTOR), str_cost(size * w))
            return base + cost, Sz(size, w=w)
        if name in ("quantity", "isQuantity"):
            return base + str_cost(n0), SCALAR
        if name in ("int", "uint", "double", "bool") and t0 in ("string", "dyn"):
            return base + max(1, str_cost(n0)), SCALAR
        if name in ("semver", "isSemver"):
            # a version's size: its pre-release identifiers, at most one per character
            return base + semver_parse_cost(n0, n0), Sz(n0) if name == "semver" else SCALAR
        if name in ("compareTo", "isLessThan", "isGreaterThan") and t0 in (types.SEMVER.name, "dyn"):
            return base + 1 + min(sizes[0].n, sizes[1].n), SCALAR
        if name == "charAt":
            return base + 1, Sz(1)
        ext = self._ext_call(e, exprs, sizes)
        if ext is not None:
            return base + ext[0], ext[1]
        opt = self._optional_call(name, sizes)
        if opt is not None:
            return base + opt[0], opt[1]
        lib = estimate_call(name, [s.n for s in sizes], self.str_bound)
        if lib is not None:
            return base + lib[0], Sz(lib[1])
        return base + 1, SCALAR

    def _optional_call(self, name: str, sizes: list[Sz]) -> tuple[int, Sz] | None:
        """Optional functions: an optional's size is the size of the value it holds."""
        if name in ("optional.of", "optional.ofNonZeroValue", "value"):
            return 1, sizes[0]
        if name in ("orValue", "or"):  # short-circuit, no call cost of their own
            joined = _join(sizes[0], sizes[1])
            return 0, joined if joined is not None else sizes[0]
        if name in (OPT_SELECT, OPT_INDEX):
            return 1, self.elem_of(sizes[0])
        return None

    def _ext_call(
        self, e: ast.Call, exprs: tuple[ast.Expr | None, ...], sizes: list[Sz]
    ) -> tuple[int, Sz] | None:
        """ext.Sets and ext.Lists calls (see :mod:`.library_ext` for the runtime rules)."""
        name = e.name
        created = 1 + LIST_CREATE_BASE_COST
        if name.startswith("sets."):
            factor = 2 if name == "sets.equivalent" else 1
            return 1 + factor * self.count(sizes[0]) * self.count(sizes[1]), SCALAR
        if name in ("slice", "reverse"):
            n = self.count(sizes[0])
            return n + created, Sz(n, self.elem_of(sizes[0]), data=sizes[0].data)
        if name == "lists.range":
            arg = exprs[0]
            if isinstance(arg, ast.Const) and type(arg.value) is int:
                n = max(arg.value, 0)
            else:
                n = COST_CAP if self.str_bound else 0  # an int from data: unbounded
            return n + created, Sz(n, SCALAR)
        if name in ("flatten", "distinct", "sort"):
            n = self.count(sizes[0])
            if name == "flatten":
                arg = exprs[1] if len(exprs) > 1 else None
                depth = arg.value if isinstance(arg, ast.Const) and type(arg.value) is int else 1
                if len(exprs) > 1 and not isinstance(arg, ast.Const):
                    depth = COST_CAP if self.str_bound else 1  # charged depth x size at run time
                # each flattened element is no larger than the element it came from
                outer = self.elem_of(sizes[0])
                out = self._flattened_count(sizes[0], depth)
                cost = min(max(max(depth, 1) * n, -(-max(out - n, 0) // 2)), COST_CAP) + created
                return cost, self.data if sizes[0].data else Sz(min(out, COST_CAP), outer)
            return int(2.1 * n * n) + created, Sz(n, self.elem_of(sizes[0]), data=sizes[0].data)
        return None
