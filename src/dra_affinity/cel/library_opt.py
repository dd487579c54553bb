"""The functions of cel-go's ``cel.OptionalTypes`` library, in the rows ``library`` registers.

``optional.of(x)``, ``optional.none()``, ``optional.ofNonZeroValue(x)``,
``opt.value()``, ``opt.hasValue()``, ``opt.orValue(v)``, ``opt.or(opt2)`` and the
two optional operators ``x.?f`` (``_?._``) and ``x[?k]`` (``_[?_]``). ``orValue``
and ``or`` evaluate their argument only when the receiver is none; the compiler
(:mod:`.interpreter`) gives them that short-circuit, the implementations here are
the eager fallbacks. Every call costs 1, as cel-go's default call cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from . import types
from .errors import INVALID_ARGUMENT, NO_SUCH_OVERLOAD, CELEvalError
from .optionals import OPT_INDEX, OPT_NONE, OPT_SELECT, CelOptional, of
from .types import Ty
from .values import (
    UInt,
    check_qualifier,
    is_list,
    is_map,
    list_position,
    map_lookup,
    no_such_overload,
)


def optional_of(t: Ty) -> Ty:
    return Ty(types.OPTIONAL_NAME, (t,))


def opt_inner(t: Ty) -> Ty:
    """The type an optional of static type ``t`` holds (``dyn`` when unknown)."""
    if t.name == types.OPTIONAL_NAME and t.params:
        return t.params[0]
    return types.DYN


def _opt(name: str, v: Any) -> CelOptional:
    if type(v) is not CelOptional:
        raise no_such_overload(name, v)
    return v


def opt_value(v: Any) -> object:
    o = _opt("value", v)
    if not o.present:
        raise CELEvalError("optional.none() dereference", INVALID_ARGUMENT)
    return o.value


def opt_has_value(v: Any) -> bool:
    return _opt("hasValue", v).present


def opt_or_value(v: Any, default: Any) -> object:
    o = _opt("orValue", v)
    return o.value if o.present else default


def opt_or(v: Any, other: Any) -> object:
    o = _opt("or", v)
    return o if o.present else _opt("or", other)


def _none() -> CelOptional:
    return OPT_NONE


def is_zero_value(v: Any) -> bool:
    """CEL's zero value of the value's type (0, 0u, 0.0, '', b'', false, [], {}, null)."""
    t = type(v)
    if v is None or t is bool:
        return v is None or v is False
    if t is int or t is float:
        return bool(v == 0)
    if t is UInt:
        return bool(v.value == 0)
    if t is str or t is bytes:
        return len(v) == 0
    if is_list(v) or is_map(v):
        return len(v) == 0
    if t is CelOptional:
        return not v.present
    return False


def _of_non_zero(v: Any) -> CelOptional:
    return OPT_NONE if is_zero_value(v) else of(v)


def opt_select(v: Any, field: Any) -> CelOptional:
    """``v.?field``: the field if ``v`` (or the value ``v`` holds) is a map that has it."""
    if type(v) is CelOptional:
        if not v.present:
            return OPT_NONE
        v = v.value
    if type(v) is dict:
        return of(v[field]) if field in v else OPT_NONE
    if isinstance(v, Mapping):
        found, r = map_lookup(v, field)
        return of(r) if found else OPT_NONE
    if is_list(v):  # cel-go indexes a list with the field name: an error
        raise CELEvalError("unsupported index type 'string' in list", NO_SUCH_OVERLOAD)
    return OPT_NONE  # cel-go: a presence test on another value answers "absent"


def opt_index(v: Any, k: Any) -> CelOptional:
    """``v[?k]``: the element or entry if present, else none."""
    if type(v) is CelOptional:
        if not v.present:
            return OPT_NONE
        v = v.value
    if is_list(v):
        i = list_position(k)
        seq: Sequence[object] = v
        return of(seq[i]) if 0 <= i < len(seq) else OPT_NONE
    if is_map(v):
        found, r = map_lookup(v, k)
        if found:
            return of(r)
        check_qualifier(k)
        return OPT_NONE
    return OPT_NONE  # cel-go: a presence test on a value it cannot index answers "absent"


# -- static result types ----------------------------------------------------------


def _of_result(arg_types: Sequence[Ty]) -> Ty:
    return optional_of(arg_types[0])


def _inner_result(arg_types: Sequence[Ty]) -> Ty:
    return opt_inner(arg_types[0])


def _same(arg_types: Sequence[Ty]) -> Ty:
    return arg_types[0]


def _select_result(arg_types: Sequence[Ty]) -> Ty:
    recv = opt_inner(arg_types[0]) if arg_types[0].name == types.OPTIONAL_NAME else arg_types[0]
    if recv.name == "map":
        return optional_of(recv.elem)
    return optional_of(types.DYN)


def _index_result(arg_types: Sequence[Ty]) -> Ty:
    recv = opt_inner(arg_types[0]) if arg_types[0].name == types.OPTIONAL_NAME else arg_types[0]
    return optional_of(recv.elem if recv.name in ("list", "map") else types.DYN)


def _free(_args: tuple[object, ...]) -> int:
    return 0


def _present_cost(result: object) -> int:
    return 1 if type(result) is CelOptional and result.present else 0


_OPT_DYN: Final = optional_of(types.DYN)
_A: Final = types.DYN

# (name, member, arity, impl, overloads as (result, *params), cost); library.py
# registers these rows like the extension libraries' (cost None: cel-go's 1).
OPT_FUNCTIONS: Final = (
    ("optional.of", False, 1, of, [(_of_result, _A)], None),
    ("optional.ofNonZeroValue", False, 1, _of_non_zero, [(_of_result, _A)], None),
    ("optional.none", False, 0, _none, [(_OPT_DYN,)], None),
    ("value", True, 0, opt_value, [(_inner_result, _OPT_DYN)], None),
    ("hasValue", True, 0, opt_has_value, [(types.BOOL, _OPT_DYN)], None),
    ("orValue", True, 1, opt_or_value, [(_inner_result, _OPT_DYN, _A)], None),
    ("or", True, 1, opt_or, [(_same, _OPT_DYN, _OPT_DYN)], None),
    (OPT_SELECT, False, 2, opt_select, [(_select_result, _A, types.STRING)], _free),
    (OPT_INDEX, False, 2, opt_index, [(_index_result, _A, _A)], _free),
)
# x.?f and x[?k] cost 1 only when they yield a value (cel-go charges an attribute's
# qualifiers as they resolve): charged from the result by library.py.
OPT_RESULT_COSTS: Final = {OPT_SELECT: _present_cost, OPT_INDEX: _present_cost}
# Calls whose argument is evaluated only when the receiver is none.
LAZY_OPTIONAL_CALLS: Final = frozenset({"orValue", "or"})
