"""Comprehension macros (``all``, ``exists``, ``exists_one``, ``map``, ``filter`` and the
two-variable ``all``, ``exists``, ``existsOne``, ``transformList``, ``transformMap``,
``transformMapEntry``) as closures.

Each macro is charged exactly the steps of cel-go's macro expansion: for
``all`` the loop condition ``@not_strictly_false(__result__)`` (2), the step
``__result__ && p`` (1 for the accumulator read) plus the predicate; ``exists``
adds a ``!`` (3); ``map``/``filter`` build their result with ``__result__ +
[t]`` (accumulator read, list literal, concatenation: 12 per element kept),
plus one list literal up front. Errors inside ``all``/``exists`` are absorbed
as in cel-go.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from . import ast
from .errors import NO_SUCH_OVERLOAD, CELCostExceeded, CELEvalError
from .library import nso
from .meter import Env, Fn, Meter, charge, exceeded
from .values import CelMap, is_list, is_map, map_insert, type_name

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


def range_pairs(v: Any) -> list[tuple[object, object]]:
    """What a two-variable comprehension iterates: (index, element) or (key, value)."""
    t = type(v)
    if t is dict or is_map(v):
        return list(v.items())
    if t is not str and is_list(v):
        return list(enumerate(v))
    raise CELEvalError(
        f"expression of type '{type_name(v)}' cannot be the range of a comprehension",
        NO_SUCH_OVERLOAD,
    )


def save(env: Env, var: str, var2: str | None) -> tuple[object, object]:
    """The bindings the comprehension variables shadow (restored by :func:`restore`)."""
    return env.get(var, _MISSING), (env.get(var2, _MISSING) if var2 is not None else _MISSING)


def bind(env: Env, var: str, var2: str | None, item: Any) -> None:
    """Bind the variable(s) to one item of :func:`items_of`: an element or key, or an
    (index, element) / (key, value) pair for two variables."""
    if var2 is None:
        env[var] = item
    else:
        env[var], env[var2] = item


def restore(env: Env, var: str, var2: str | None, saved: tuple[object, object]) -> None:
    """Put back the bindings the variables had before the comprehension (or none)."""
    for name, old in ((var, saved[0]), (var2, saved[1])):
        if name is None:
            continue
        if old is _MISSING:
            env.pop(name, None)
        else:
            env[name] = old


def items_of(rng: Fn, var2: str | None, env: Env, m: Meter) -> Sequence[Any]:
    v = rng(env, m)
    return range_items(v) if var2 is None else range_pairs(v)


def _bad_predicate(macro: str, v: object) -> CELEvalError:
    return CELEvalError(
        f"no such overload: {macro}() predicate returned {type_name(v)}", NO_SUCH_OVERLOAD
    )


def _quantifier(rng: Fn, var: str, var2: str | None, p: Fn, macro: str) -> Fn:
    """``all`` (stops at the first false) and ``exists`` (stops at the first true)."""
    stop = macro == ast.EXISTS
    cond_cost = 3 if stop else 2
    step = cond_cost + 1

    def quantifier(env: Env, m: Meter) -> object:
        items = items_of(rng, var2, env, m)
        result = not stop
        err: CELEvalError | None = None
        saved = save(env, var, var2)
        try:
            for x in items:
                if result is stop:
                    charge(m, cond_cost)
                    break
                c = m.cost + step
                m.cost = c
                if c > m.limit:
                    exceeded(m)
                bind(env, var, var2, x)
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
            restore(env, var, var2, saved)
        charge(m, 1)
        if result is stop:
            return stop
        if err is not None:
            raise err
        return not stop

    return quantifier


def _exists_one(rng: Fn, var: str, var2: str | None, p: Fn) -> Fn:
    def exists_one(env: Env, m: Meter) -> object:
        items = items_of(rng, var2, env, m)
        count = 0
        err: CELEvalError | None = None
        saved = save(env, var, var2)
        try:
            for x in items:
                bind(env, var, var2, x)
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
                    pass  # the false branch reads the accumulator: free in cel-go
                elif err is None:
                    err = _bad_predicate(ast.EXISTS_ONE, v)
        finally:
            restore(env, var, var2, saved)
        charge(m, 2)
        if err is not None:
            raise err
        return count == 1

    return exists_one


def _keeps(p: Fn, env: Env, m: Meter, what: str) -> bool:
    """A filter's verdict on the bound item; a false one costs only the filter itself
    (cel-go), and anything but a bool is no such overload."""
    v = p(env, m)
    if v is True:
        return True
    if v is not False:
        nso(what, v)
    return False


def _collect(rng: Fn, var: str, var2: str | None, p: Fn | None, t: Fn | None, macro: str) -> Fn:
    """``map(x, t)``, ``filter(x, p)`` and ``map(x, p, t)``: a list built element by element."""

    def collect(env: Env, m: Meter) -> object:
        items = items_of(rng, var2, env, m)
        # the accumulator's initial [] is a constant literal: free, as in cel-go
        out: list[object] = []
        saved = save(env, var, var2)
        try:
            for x in items:
                bind(env, var, var2, x)
                if p is not None and not _keeps(p, env, m, f"{macro}() predicate"):
                    continue
                # __result__ + [t]: accumulator read, list literal, concatenation
                # (plus the predicate's branch when there is no transform)
                if t is None:
                    out.append(x)
                    charge(m, 13)
                else:
                    out.append(t(env, m))
                    charge(m, 12)
        finally:
            restore(env, var, var2, saved)
        charge(m, 1)
        return out

    return collect


def _collect_map(rng: Fn, var: str, var2: str, p: Fn | None, t: Fn, macro: str) -> Fn:
    """``transformMap`` (key -> t) and ``transformMapEntry`` (t is a map of entries to add)."""
    entry = macro == ast.TRANSFORM_MAP_ENTRY
    step = 2 if entry else 3  # cel.@mapInsert(__result__, [key,] t): accumulator, (key,) call

    def collect_map(env: Env, m: Meter) -> object:
        items = items_of(rng, var2, env, m)
        out = CelMap()  # the accumulator's initial {}: a constant literal, free
        saved = save(env, var, var2)
        try:
            for x in items:
                bind(env, var, var2, x)
                if p is not None and not _keeps(p, env, m, f"{macro}() filter"):
                    continue
                value = t(env, m)
                charge(m, step)
                if not entry:
                    map_insert(out, env[var], value, repeated_ok=False)
                elif is_map(value):
                    for k, mv in value.items():  # type: ignore[attr-defined]
                        map_insert(out, k, mv, repeated_ok=False)
                else:
                    nso(f"{macro}() transform", value)
        finally:
            restore(env, var, var2, saved)
        charge(m, 1)
        return out

    return collect_map


def compile_comprehension(e: ast.Comprehension, rng: Fn, pred: Fn | None, transform: Fn | None) -> Fn:
    """The closure of one comprehension node, given its compiled parts."""
    if e.macro in (ast.ALL, ast.EXISTS):
        assert pred is not None
        return _quantifier(rng, e.var, e.var2, pred, e.macro)
    if e.macro == ast.EXISTS_ONE:
        assert pred is not None
        return _exists_one(rng, e.var, e.var2, pred)
    if e.macro in (ast.TRANSFORM_MAP, ast.TRANSFORM_MAP_ENTRY):
        assert e.var2 is not None and transform is not None
        return _collect_map(rng, e.var, e.var2, pred, transform, e.macro)
    return _collect(rng, e.var, e.var2, pred, transform, e.macro)
