"""The library modules (``lib_*.py``) as the engine sees them: one place that registers them.

Each library module defines its value types, its functions (as
``(name, member, arity, impl, overloads, cost)`` rows, the format of
:data:`.library_ext.EXT_FUNCTIONS`), conversions of its values by the standard
``string()``/``int()``/... functions and the static cost of its calls. This
module collects them so the shared engine modules each need one hook only.
An ``impl`` of ``None`` adds overloads to an existing function (``string``,
``int``) whose implementation reaches the library through the conversion
tables here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from . import lib_lists, lib_net, lib_strings, lib_time, lib_url, types
from .values import register_value_type

register_value_type(lib_net.IP, lib_net.IP_TYPE.name)
register_value_type(lib_net.CIDR, lib_net.CIDR_TYPE.name)
register_value_type(lib_url.URL, lib_url.URL_TYPE.name)
register_value_type(lib_time.Timestamp, lib_time.TIMESTAMP_TYPE.name, ordered=True)
register_value_type(lib_time.Duration, lib_time.DURATION_TYPE.name, ordered=True)

_S: Final = types.STRING

LIB_FUNCTIONS: Final[tuple[tuple[Any, ...], ...]] = (
    *lib_net.NET_FUNCTIONS,
    *lib_url.URL_FUNCTIONS,
    *lib_time.TIME_FUNCTIONS,
    *lib_strings.STRING_FUNCTIONS,
    *lib_lists.LIST_FUNCTIONS,
    ("string", False, 1, None, [(_S, lib_net.IP_TYPE), (_S, lib_net.CIDR_TYPE),
                                (_S, lib_time.TIMESTAMP_TYPE), (_S, lib_time.DURATION_TYPE)], None),
    ("int", False, 1, None, [(types.INT, lib_time.TIMESTAMP_TYPE), (types.INT, lib_time.DURATION_TYPE)], None),
)

# Standard conversion functions on library values: function name -> type -> converter.
CONVERSIONS: Final[Mapping[str, Mapping[type, Callable[[Any], object]]]] = {
    "string": {lib_net.IP: lib_net.to_string, lib_net.CIDR: lib_net.to_string,
               lib_time.Timestamp: lib_time.to_string, lib_time.Duration: lib_time.to_string},
    "int": {lib_time.Timestamp: lib_time.to_int, lib_time.Duration: lib_time.to_int},
}

# Namespaces of global library functions (`ip.isCanonical(s)`).
LIB_NAMESPACES: Final = frozenset({"ip", "strings"})

# Functions whose result is charged after the call, by its size (name -> cost).
RESULT_COSTS: Final = lib_strings.RESULT_COSTS

# The checker's compile-time check of 'literal'.format([literal list]).
validate_literal_format = lib_strings.validate_literal_format
FORMAT_S_TYPES = lib_strings.FORMAT_S_TYPES

_ESTIMATORS: Final = (lib_net.estimate, lib_url.estimate, lib_time.estimate, lib_lists.estimate)

# Global functions whose literal argument is checked when compiling, as Kubernetes'
# AST validators do (cel.ValidateTimestampLiterals, cel.ValidateDurationLiterals).
LITERAL_CHECKED: Final = frozenset({"timestamp", "duration"})

# Static types of the time library, for the checker's operators.
TIME_TYPES: Final = frozenset({lib_time.TIMESTAMP_TYPE.name, lib_time.DURATION_TYPE.name})
time_arith_type = lib_time.arith_type
time_arith = lib_time.arith
TIME_NO_MATCH = lib_time.NO_MATCH



def estimate_call(name: str, sizes: list[int], data_bound: int = 0) -> tuple[int, int] | None:
    """Static (cost, result size) of a library call, or None if no library module owns it.

    ``data_bound``: the estimate's bound on data-derived strings (0 for the minimum).
    """
    fmt = lib_strings.estimate(name, sizes, data_bound)
    if fmt is not None:
        return fmt
    for est in _ESTIMATORS:
        r = est(name, sizes)
        if r is not None:
            return r
    return None


def convert(function: str, x: object) -> object | None:
    """``function(x)`` for a library value ``x`` (``string(ip)``), or None if none applies."""
    conv = CONVERSIONS.get(function, {}).get(type(x))
    return None if conv is None else conv(x)
