"""``string.format()`` and ``strings.quote()`` of cel-go's ``ext.Strings`` at version 2 (Kubernetes 1.37).

Version 2 formats with cel-go's first formatter: clauses ``%s %d %f %e %b %o %x %X``
and ``%%``, an optional ``.precision`` for ``%f``/``%e``; numbers under ``%f``
and ``%e`` go through ``golang.org/x/text/message`` for ``en-US``, so ``%f``
groups thousands (``1,234,567.891000``; an exact negative zero loses its sign)
and ``%e`` writes ``1.234568\u00d710⁰⁶``: its precision is used as a *width* there
(a long-standing quirk), so the mantissa always has 6 decimals and only
``NaN``/``∞`` are padded. ``%s`` of a list or map formats members cel-go's way
(strings and bytes quoted as Go's ``%q``, doubles as ``%.6f``, map entries
sorted by their formatted key). Extra arguments are ignored at run time; a
literal format string with a literal argument list is checked when compiling
(argument count and clause types), as Kubernetes' validator does.

Bounds (deliberate differences): a precision above 100 is an error (cel-go's
version 5 default; version 2 has none, so ``'%.999999999f'`` would allocate a
gigabyte upstream), and the result is charged 0.1 per character on top of
cel-go's cost (``ceil(0.1 x format length)``), so ``format`` cannot build more
than the budget pays for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from . import types
from .errors import INVALID_ARGUMENT, CELEvalError
from .values import CelType, UInt, format_double, is_list, is_map, no_such_overload, type_name

MAX_PRECISION: Final = 100
MAX_RESULT_CHARS: Final = 10_000_000  # 0.1 per character: ten times any budget of 1e6
_TIMES: Final = "\u00d7"  # the multiplication sign x/text writes
_SUPERSCRIPT: Final = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class FormatError(ValueError):
    pass


# -- Go-compatible pieces ------------------------------------------------------------


def go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` (``%q``) of a valid UTF-8 string."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                        "\t": "\\t", "\v": "\\v"}[ch])  # fmt: skip
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif 0xD800 <= o <= 0xDFFF:
            out.append("\\ufffd")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def quote(s: Any) -> str:
    """``strings.quote``: CEL escapes for \\a \\b \\f \\n \\r \\t \\v \\\\ and \\", in double quotes."""
    if type(s) is not str:
        raise no_such_overload("strings.quote", s)
    table = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
             "\v": "\\v", "\\": "\\\\", '"': '\\"'}  # fmt: skip
    body = "".join(table.get(c, "\ufffd" if "\ud800" <= c <= "\udfff" else c) for c in s)
    return f'"{body}"'


def _group(digits: str) -> str:
    head = len(digits) % 3 or 3
    parts = [digits[:head]] + [digits[i : i + 3] for i in range(head, len(digits), 3)]
    return ",".join(parts)


def _localized_fixed(f: float, precision: int) -> str:
    if f != f:
        return "NaN"
    if math.isinf(f):
        return "∞" if f > 0 else "-∞"
    text = format(f, f".{precision}f")
    neg = text.startswith("-")
    if neg:
        text = text[1:]
    whole, dot, frac = text.partition(".")
    out = _group(whole) + (dot + frac if dot else "")
    if neg and f != 0.0:  # x/text drops the sign of an exact negative zero only
        out = "-" + out
    return out


def _localized_scientific(f: float, width: int) -> str:
    if f != f or math.isinf(f):
        text = "NaN" if f != f else ("∞" if f > 0 else "-∞")
        return text.rjust(width)
    mant, _, exp = format(f, ".6e").partition("e")
    if f == 0.0:
        mant = mant.lstrip("-")
    e = int(exp)
    sup = f"{abs(e):02d}".translate(_SUPERSCRIPT)
    return f"{mant}{_TIMES}10{'⁻' if e < 0 else ''}{sup}".rjust(width)


# -- values ---------------------------------------------------------------------------


def _kind(v: Any) -> str:
    return type_name(v)


def _as_string(v: Any) -> str:
    """cel-go's ``FormatString``: the value converted to a string."""
    from .library import REGISTRY

    t = type(v)
    if is_list(v) and t is not str:
        return _format_list(v)
    if is_map(v):
        return _format_map(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is float:
        return format_double(v)
    if t is CelType:
        return str(v.name)
    if t in (str, int, UInt, bytes) or type_name(v) in (
        "google.protobuf.Timestamp", "google.protobuf.Duration",
    ):
        try:
            out = REGISTRY[("string", False, 1)].impl(v)
        except CELEvalError as e:
            raise FormatError(f'could not convert argument "{e.message}" to string') from None
        return str(out)
    raise FormatError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
        f"types, durations, and timestamps, was given {_kind(v)}"
    )


def _member(v: Any) -> str:
    """One list member or map value, formatted and quoted as cel-go's formatList does."""
    t = type(v)
    if t is int or t is UInt:
        return str(int(v))
    if t is float:
        text = "+Inf" if v == math.inf else "-Inf" if v == -math.inf else "NaN" if v != v else f"{v:.6f}"
        return go_quote(text) if (v != v or math.isinf(v)) else text
    if t is str:
        return go_quote(v)
    if t is bytes:
        return "b" + go_quote(_as_string(v))
    if type_name(v) == "google.protobuf.Timestamp":
        return f"timestamp({go_quote(_as_string(v))})"
    if type_name(v) == "google.protobuf.Duration":
        return f"duration({go_quote(_as_string(v))})"
    if t is bool or v is None or t is CelType or is_list(v) or is_map(v):
        return _as_string(v)
    raise FormatError(f"no formatting function for {_kind(v)}")


def _format_list(items: Sequence[Any]) -> str:
    return "[" + ", ".join(_member(x) for x in items) + "]"


def _format_map(m: Mapping[Any, Any]) -> str:
    pairs: list[tuple[str, str]] = []
    for k, v in m.items():
        tk = type(k)
        if tk is str:
            ks = go_quote(k)
        elif tk is bool:
            ks = "true" if k else "false"
        elif tk is int or tk is UInt:
            ks = str(int(k))
        else:
            raise FormatError(f"no formatting function for map key of type {_kind(k)}")
        pairs.append((ks, _member(v)))
    pairs.sort(key=lambda p: p[0])
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


def _double_arg(v: Any, clause: str) -> float:
    if type(v) is float:
        return float(v)
    if type(v) is str and v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    raise FormatError(
        f"{clause} clause can only be used on doubles, was given {_kind(v)}"
    )


def _clause(verb: str, precision: int | None, v: Any) -> str:
    t = type(v)
    if verb == "s":
        return _as_string(v)
    if verb == "d":
        if t is int or t is UInt:
            return str(int(v))
        raise FormatError(f"decimal clause can only be used on integers, was given {_kind(v)}")
    if verb == "f":
        return _localized_fixed(_double_arg(v, "fixed-point"), 6 if precision is None else precision)
    if verb == "e":
        width = 6 if precision is None else precision
        return _localized_scientific(_double_arg(v, "scientific"), width)
    if verb == "b":
        if t is int or t is UInt:
            n = int(v)
            return ("-" if n < 0 else "") + format(abs(n), "b")
        if t is bool:
            return "1" if v else "0"
        raise FormatError(f"only integers and bools can be formatted as binary, was given {_kind(v)}")
    if verb == "o":
        if t is int or t is UInt:
            n = int(v)
            return ("-" if n < 0 else "") + format(abs(n), "o")
        raise FormatError(f"octal clause can only be used on integers, was given {_kind(v)}")
    # x / X
    if t is int or t is UInt:
        n = int(v)
        out = ("-" if n < 0 else "") + format(abs(n), "x")
    elif t is str:
        out = v.encode("utf-8", "surrogatepass").hex()
    elif t is bytes:
        out = v.hex()
    else:
        raise FormatError(
            "only integers, byte buffers, and strings can be formatted as hex, "
            f"was given {_kind(v)}"
        )
    return out.upper() if verb == "X" else out


def _parse_clause(fmt: str, i: int) -> tuple[int, str, int | None]:
    """(index after the clause, verb, precision) for the clause whose '%' is at ``i``."""
    j = i + 1
    precision: int | None = None
    if fmt[j] == ".":
        j += 1
        start = j
        while True:
            if j >= len(fmt):
                raise FormatError(
                    "could not parse formatting clause: error while parsing precision: "
                    "could not find end of precision specifier"
                )
            if not ("0" <= fmt[j] <= "9"):
                break
            j += 1
        digits = fmt[start:j]
        if not digits:
            raise FormatError(
                "could not parse formatting clause: error while parsing precision: "
                "error while converting precision to integer"
            )
        if len(digits) > 6 or int(digits) > MAX_PRECISION:
            raise FormatError(
                f"could not parse formatting clause: precision {digits[:12]} exceeds "
                f"maximum allowed precision {MAX_PRECISION}"
            )
        precision = int(digits)
    verb = fmt[j]
    if verb not in "sdfebxXo":
        raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
    return j + 1, verb, precision


def format_string(fmt: Any, args: Any) -> str:
    """``fmt.format(args)``."""
    if type(fmt) is not str or not is_list(args) or type(args) is str:
        raise no_such_overload("format", fmt, args)
    items = list(args)
    out: list[str] = []
    size = 0
    i = 0
    arg = 0
    try:
        while i < len(fmt):
            c = fmt[i]
            if c != "%":
                j = fmt.find("%", i)
                j = len(fmt) if j < 0 else j
                out.append(fmt[i:j])
                size += j - i
                i = j
                continue
            if i + 1 < len(fmt) and fmt[i + 1] == "%":
                out.append("%")
                size += 1
                i += 2
                continue
            if arg >= len(items):
                raise FormatError(f"index {arg} out of range")
            if i + 1 >= len(fmt):
                raise FormatError("unexpected end of string")
            i, verb, precision = _parse_clause(fmt, i)
            try:
                piece = _clause(verb, precision, items[arg])
            except FormatError as e:
                raise FormatError(f"error during formatting: {e}") from None
            out.append(piece)
            size += len(piece)
            if size > MAX_RESULT_CHARS:
                raise FormatError(f"format result longer than {MAX_RESULT_CHARS} characters")
            arg += 1
    except FormatError as e:
        raise CELEvalError(str(e), INVALID_ARGUMENT) from None
    return "".join(out)


FORMAT_S_TYPES: Final = frozenset({
    "list", "map", "int", "uint", "double", "bool", "string", "bytes", "null", "type",
    "google.protobuf.Timestamp", "google.protobuf.Duration"})  # fmt: skip


def validate_literal_format(
    fmt: str, arg_types: Sequence[str], nested: Sequence[str | None] | None = None
) -> str | None:
    """Kubernetes' compile-time check of ``'literal'.format([literal list])``: the error, or None.

    ``arg_types`` are the static type names of the list's elements; ``nested[i]``, where
    given, the first type a ``%s`` clause cannot print inside argument i (a list or map
    literal: cel-go checks their elements too).
    """
    ok = {
        "s": FORMAT_S_TYPES,
        "d": {"int", "uint"}, "f": {"double", "string"}, "e": {"double", "string"},
        "b": {"int", "uint", "bool"}, "o": {"int", "uint"},
        "x": {"int", "uint", "string", "bytes"}, "X": {"int", "uint", "string", "bytes"},
    }  # fmt: skip
    names = {"s": "string", "d": "decimal", "f": "fixed-point", "e": "scientific",
             "b": "binary", "o": "octal", "x": "hex", "X": "hex"}  # fmt: skip
    i = 0
    requested = 0
    try:
        while i < len(fmt):
            if fmt[i] != "%":
                i += 1
                continue
            if i + 1 < len(fmt) and fmt[i + 1] == "%":
                i += 2
                continue
            requested += 1
            if i + 1 >= len(fmt):
                raise FormatError("unexpected end of string")
            if requested > len(arg_types):
                raise FormatError(f"index {requested - 1} out of range")
            i, verb, _precision = _parse_clause(fmt, i)
            t = arg_types[requested - 1]
            if t != "dyn" and t not in ok[verb]:
                raise FormatError(f"error during formatting: {names[verb]} clause cannot format {t}")
            inner = nested[requested - 1] if nested is not None and verb == "s" else None
            if inner is not None:
                raise FormatError(f"error during formatting: string clause cannot format {inner}")
    except FormatError as e:
        return str(e)
    if len(arg_types) > requested:
        return (f"too many arguments supplied to string.format "
                f"(expected {requested}, got {len(arg_types)})")  # fmt: skip
    return None


# -- costs ----------------------------------------------------------------------------


def _format_cost(args: tuple[object, ...]) -> int:
    fmt = args[0]
    return math.ceil(len(fmt) * 0.1) if type(fmt) is str else 1


def _format_result_cost(result: object) -> int:
    # Beyond cel-go: the result's memory, 0.1 per character.
    return math.ceil(len(result) * 0.1) if type(result) is str else 0


def _quote_cost(args: tuple[object, ...]) -> int:
    s = args[0]
    return math.ceil(len(s) * 0.1) if type(s) is str else 1


_S: Final = types.STRING

# (name, member, arity, impl, overloads as (result, *params), cost)
STRING_FUNCTIONS: Final = (
    ("format", True, 1, format_string, [(_S, _S, types.LIST_DYN)], _format_cost),
    ("strings.quote", False, 1, quote, [(_S, _S)], _quote_cost),
)
RESULT_COSTS: Final = {"format": _format_result_cost}


# The longest text one clause can produce from a scalar: %f of 1e308 at precision 100,
# grouped (309 digits, 102 commas, the fraction).
_SCALAR_CLAUSE_MAX: Final = 600


def estimate(name: str, sizes: list[int], data_bound: int = 0) -> tuple[int, int] | None:
    """Static (cost, result size) of a call, from its operands' size bounds.

    ``data_bound`` is the estimate's bound on data-derived strings (0 for the
    minimum estimate): a clause formats one argument, at most six characters of
    output per character of data (quoting) plus a scalar's longest text.
    """
    if name == "format":
        n0 = sizes[0] if sizes else 1
        clauses = n0 // 2 + 1
        out = n0 + (clauses * (6 * data_bound + _SCALAR_CLAUSE_MAX) if data_bound else 0)
        return math.ceil(n0 * 0.1) + math.ceil(out * 0.1), out
    if name == "strings.quote":
        n0 = sizes[0] if sizes else 1
        return math.ceil(n0 * 0.1), 2 * n0 + 2
    return None
