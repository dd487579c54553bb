"""Comprehension macros (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) as closures.

Each macro is charged exactly the steps of cel-go's macro expansion: for
``all`` the loop condition ``@not_strictly_false(__result__)`` (2), the step
``__result__ && p`` (1 for the accumulator read) plus the predicate; ``exists``
adds a ``!`` (3); ``map``/``filter`` build their result with ``__result__ +
[t]`` (accumulator read, list literal, concatenation: 12 per element kept),
plus one list literal up front. Errors inside ``all``/``exists`` are absorbed
as in cel-go.
"""

from __future__ import annotations

from typing import Any, Final

from . import ast as A
from .errors import NO_SUCH_OVERLOAD, CELCostExceeded, CELEvalError
from .library import nso
from .meter import LIST_CREATE_BASE_COST, Env, Fn, Meter, charge, exceeded
from .values import is_list, is_map, type_name

_MISSING: Final = object()


def range_items(v: Any) -> list[object] | tuple[object, ...]:
    """The elements a comprehension iterates: list elements, or map keys."""
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


def restore(env: Env, var: str, saved: object) -> None:
    """Put back the binding ``var`` had before the comprehension (or none)."""
    if saved is _MISSING:
        env.pop(var, None)
    else:
        env[var] = saved


def _bad_predicate(macro: str, v: object) -> CELEvalError:
    return CELEvalError(
        f"no such overload: {macro}() predicate returned {type_name(v)}", NO_SUCH_OVERLOAD
    )


def _quantifier(rng: Fn, var: str, p: Fn, macro: str) -> Fn:
    """``all`` (stops at the first false) and ``exists`` (stops at the first true)."""
    stop = macro == A.EXISTS
    cond_cost = 3 if stop else 2
    step = cond_cost + 1

    def quantifier(env: Env, m: Meter) -> object:
        items = range_items(rng(env, m))
        result = not stop
        err: CELEvalError | None = None
        saved = env.get(var, _MISSING)
        try:
            for x in items:
                if result is stop:
                    charge(m, cond_cost)
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
                    err = err or ex
                    continue
                if v is stop:
                    result = stop
                elif v is not (not stop) and err is None:
                    err = _bad_predicate(macro, v)
        finally:
            restore(env, var, saved)
        charge(m, 1)
        if result is stop:
            return stop
        if err is not None:
            raise err
        return not stop

    return quantifier


def _exists_one(rng: Fn, var: str, p: Fn) -> Fn:
    def exists_one(env: Env, m: Meter) -> object:
        items = range_items(rng(env, m))
        count = 0
        err: CELEvalError | None = None
        saved = env.get(var, _MISSING)
        try:
            for x in items:
                env[var] = x
                try:
                    v = p(env, m)
                except CELCostExceeded:
                    raise
                except CELEvalError as ex:
                    err = err or ex  # an erroring condition takes neither branch
                    continue
                if v is True:
                    count += 1
                    charge(m, 2)
                elif v is False:
                    charge(m, 1)
                elif err is None:
                    err = _bad_predicate(A.EXISTS_ONE, v)
        finally:
            restore(env, var, saved)
        charge(m, 2)
        if err is not None:
            raise err
        return count == 1

    return exists_one


def _collect(rng: Fn, var: str, p: Fn | None, t: Fn | None, macro: str) -> Fn:
    """``map(x, t)``, ``filter(x, p)`` and ``map(x, p, t)``: a list built element by element."""

    def collect(env: Env, m: Meter) -> object:
        items = range_items(rng(env, m))
        charge(m, LIST_CREATE_BASE_COST)
        out: list[object] = []
        saved = env.get(var, _MISSING)
        try:
            for x in items:
                env[var] = x
                if p is not None:
                    v = p(env, m)
                    if v is False:
                        charge(m, 1)
                        continue
                    if v is not True:
                        nso(f"{macro}() predicate", v)
                # __result__ + [t]: accumulator read, list literal, concatenation
                # (plus the predicate's branch when there is no transform)
                if t is None:
                    out.append(x)
                    charge(m, 13)
                else:
                    out.append(t(env, m))
                    charge(m, 12)
        finally:
            restore(env, var, saved)
        charge(m, 1)
        return out

    return collect


def compile_comprehension(e: A.Comprehension, rng: Fn, pred: Fn | None, transform: Fn | None) -> Fn:
    """The closure of one comprehension node, given its compiled parts."""
    if e.macro in (A.ALL, A.EXISTS):
        assert pred is not None
        return _quantifier(rng, e.var, pred, e.macro)
    if e.macro == A.EXISTS_ONE:
        assert pred is not None
        return _exists_one(rng, e.var, pred)
    return _collect(rng, e.var, pred, transform, e.macro)
