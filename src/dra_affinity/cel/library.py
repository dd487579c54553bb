"""Named CEL functions: standard library, strings extension and the Kubernetes libraries.

Each :class:`Function` carries its static overloads (for the checker), its
implementation (which re-checks runtime types: values typed ``dyn`` reach it
unchecked) and its runtime cost, which mirrors cel-go's ``CostTracker`` and
the Kubernetes ``library.CostEstimator``. Operators (``+``, ``==``, ``[]``...)
are not here: the compiler specializes them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import re2

from dra_affinity.api.numbers import INT64_MAX, INT64_MIN, UINT64_MAX

from . import types
from .errors import INVALID_ARGUMENT, OVERFLOW, CELEvalError
from .lib_quantity import (
    Amount,
    add_amounts,
    amount_of,
    as_int64,
    negate,
    parse_amount,
    with_amount,
)
from .library_ext import EXT_FUNCTIONS
from .library_opt import OPT_FUNCTIONS, OPT_RESULT_COSTS
from .libs import LIB_FUNCTIONS, RESULT_COSTS, convert
from .quantity import Quantity, as_quantity
from .regex import RegexError, Shape, compiled, shape
from .semver import Semver
from .types import Ty
from .values import (
    UInt,
    cel_eq,
    cel_type_of,
    check_int,
    compare,
    format_double,
    is_list,
    is_map,
    length_of,
    no_such_overload,
    value_size,
)

STRING_TRAVERSAL_COST_FACTOR: Final = 0.1
REGEX_STRING_LENGTH_COST_FACTOR: Final = 0.25

ResultFn = Callable[[Sequence[Ty]], Ty]
CostFn = Callable[[tuple[object, ...]], int]  # receiver first; charged before the call


@dataclass(frozen=True, slots=True)
class Overload:
    params: tuple[Ty, ...]  # receiver first for member overloads
    result: Ty | ResultFn


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    member: bool
    arity: int  # arguments, not counting the receiver
    impl: Callable[..., object]
    overloads: tuple[Overload, ...]
    cost: CostFn | None = None  # None: cel-go's default cost of 1
    # Charged after the call, from the result: only where the result size is
    # not bounded by the charge made up front (findAll with an empty pattern).
    result_cost: Callable[[object], int] | None = None


def nso(name: str, *args: Any) -> NoReturn:
    raise no_such_overload(name, *args)


def str_cost(n: int) -> int:
    """cel-go's ``ceil(size * StringTraversalCostFactor)`` (float arithmetic, as in Go)."""
    return math.ceil(n * STRING_TRAVERSAL_COST_FACTOR)


def str_width(s: str) -> int:
    """Bytes per character of ``s`` in memory (1, 2 or 4: CPython's compact strings)."""
    if s.isascii():
        return 1
    top = max(s)
    return 1 if top < "\u0100" else 2 if top < "\U00010000" else 4


def build_cost(cel_cost: int, chars: int, *parts: str) -> int:
    """What building a string of ``chars`` characters from ``parts`` costs.

    cel-go's cost where that already pays 0.1 per byte of the result (any
    ASCII result of ``+``, ``join``, and every ``replace``/``split`` that at
    most doubles its input), else ceil(0.1 * bytes): a string never costs less
    than a tenth of the memory it takes. Charged before the string is built,
    so one the remaining budget cannot pay for is never built.
    """
    width = max(map(str_width, parts), default=1)
    size_cost = str_cost(chars * width)
    return cel_cost if cel_cost >= size_cost else size_cost


def traversal_cost(v: Any) -> int:
    """Kubernetes ``traversalCost``: the cost of walking a value as a data tree, except
    that an element of a list or map costs at least 1 (Kubernetes charges a string of
    fewer than 10 bytes 0, so ``max()`` of 1,600 short strings cost 2)."""
    t = type(v)
    if t is str:
        return int(len(v.encode("utf-8", "surrogatepass")) * STRING_TRAVERSAL_COST_FACTOR)
    if t is bytes:
        return int(len(v) * STRING_TRAVERSAL_COST_FACTOR)
    if is_list(v):
        return sum(max(1, traversal_cost(x)) for x in v)
    if is_map(v):
        return sum(max(1, traversal_cost(k) + traversal_cost(x)) for k, x in v.items())
    return 1


# -- regular expressions (Go's RE2 syntax and limits, run on RE2: see regex.py) ---


def regex_program(pattern: str) -> tuple[re2._Regexp, Shape]:
    """The compiled program and shape of a pattern; invalid patterns (Go's syntax and
    limits) raise ``CELEvalError(invalid_argument)``."""
    try:
        return compiled(pattern)
    except RegexError as e:
        raise CELEvalError(f"invalid regular expression {pattern!r}: {e}", INVALID_ARGUMENT) from None


def regex_shape(pattern: str) -> Shape:
    """:func:`regex.shape`, with an invalid pattern as ``CELEvalError(invalid_argument)``."""
    try:
        return shape(pattern)
    except RegexError as e:
        raise CELEvalError(f"invalid regular expression {pattern!r}: {e}", INVALID_ARGUMENT) from None


def regex_size(pattern: str, s: Shape) -> int:
    """The regex size a match is charged by: cel-go's (the pattern's length), or Go's
    count of the pattern's instructions where that is larger (``a.{0,999}c`` is 2,000):
    a match that cannot use RE2's DFA steps every thread of the program over every byte,
    whatever the pattern's length (a class's UTF-8 instructions are one path per byte)."""
    return max(len(pattern), s.go_size)


def match_cost(text: str, pattern: str, s: Shape) -> int:
    """cel-go's ``matches`` cost, ``ceil(0.1 * (1 + size s)) * ceil(0.25 * size re)``, with
    :func:`regex_size` as the regex's size."""
    str_c = math.ceil((1.0 + len(text)) * STRING_TRAVERSAL_COST_FACTOR)
    return str_c * math.ceil(regex_size(pattern, s) * REGEX_STRING_LENGTH_COST_FACTOR)


def _match_args(name: str, s: Any, pattern: Any) -> None:
    if type(s) is not str or type(pattern) is not str:
        nso(name, s, pattern)


def run_matches(s: str, prog: re2._Regexp) -> bool:
    return prog.search(s.encode("utf-8", "surrogatepass")) is not None


def run_find(s: str, prog: re2._Regexp) -> str:
    m = prog.search(s.encode("utf-8", "surrogatepass"))
    return "" if m is None else bytes(m.group(0)).decode("utf-8", "surrogatepass")


def _matches(s: Any, pattern: Any) -> bool:
    _match_args("matches", s, pattern)
    return run_matches(s, regex_program(pattern)[0])


def _find(s: Any, pattern: Any) -> str:
    _match_args("find", s, pattern)
    return run_find(s, regex_program(pattern)[0])


def _rune_len(lead: int) -> int:
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _find_all(s: Any, pattern: Any, limit: Any = -1) -> list[str]:
    if type(s) is not str or type(pattern) is not str or type(limit) is not int:
        nso("findAll", s, pattern, limit)
    return run_find_all(s, regex_program(pattern)[0], limit)


def run_find_all(s: str, rx: re2._Regexp, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    enc = s.encode("utf-8", "surrogatepass")
    raw = getattr(rx, "_regexp", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if raw is None or anchor is None:  # pragma: no cover - other google-re2 layouts
        return _find_all_slow(enc, rx, limit)
    out: list[str] = []
    # Go's FindAllString on the UTF-8 text, matched in place (the public
    # wrapper decodes offsets per match, several times slower): successive
    # non-overlapping matches; an empty match where the previous match ended
    # is dropped; after an empty match, advance one rune.
    n = len(enc)
    pos = 0
    prev_end = -1
    while pos <= n and (limit < 0 or len(out) < limit):
        a, b = raw.Match(anchor, enc, pos, n)[0]
        if a < 0:
            break
        accept = True
        if b == pos:
            if a == prev_end:
                accept = False
            pos += _rune_len(enc[pos]) if pos < n else 1
        else:
            pos = b
        prev_end = b
        if accept:
            out.append(enc[a:b].decode("utf-8", "surrogatepass"))
    return out


def _find_all_slow(enc: bytes, rx: re2._Regexp, limit: int) -> list[str]:
    out: list[str] = []
    prev_end = -1
    for m in rx.finditer(enc):
        a, b = m.span()
        if a == b and a == prev_end:
            continue
        prev_end = b
        out.append(bytes(m.group(0)).decode("utf-8", "surrogatepass"))
        if 0 < limit <= len(out):
            break
    return out


FIND_ALL_MATCH_COST: Final = 10


# -- standard functions ---------------------------------------------------


def _size(x: Any) -> int:
    n = length_of(x)
    if n is None:
        nso("size", x)
    return n


def _contains(s: Any, sub: Any) -> bool:
    if type(s) is not str or type(sub) is not str:
        nso("contains", s, sub)
    return sub in s


def _starts_with(s: Any, p: Any) -> bool:
    if type(s) is not str or type(p) is not str:
        nso("startsWith", s, p)
    return s.startswith(p)


def _ends_with(s: Any, p: Any) -> bool:
    if type(s) is not str or type(p) is not str:
        nso("endsWith", s, p)
    return s.endswith(p)


_INT_RE: Final = re.compile(r"[+-]?[0-9]+\Z")
_UINT_RE: Final = re.compile(r"[0-9]+\Z")
# Go's strconv.ParseFloat syntax: decimal, hexadecimal with a binary exponent,
# [+-]inf / infinity and unsigned nan (any case); no spaces, no underscores.
_FLOAT_RE: Final = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity)\Z|nan\Z", re.IGNORECASE
)
_HEX_FLOAT_RE: Final = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+\Z"
)
_SPECIAL_FLOAT_RE: Final = re.compile(r"[+-]?(?:inf|infinity)\Z|nan\Z", re.IGNORECASE)


def _conversion_error(s: str, to: str) -> NoReturn:
    shown = s if len(s) <= 40 else s[:37] + "..."
    raise CELEvalError(
        f"type conversion error from 'string' to '{to}': {shown!r}", INVALID_ARGUMENT
    )


def _digits_value(s: str) -> int | None:
    """int(s) for a validated digit string, or None if it cannot fit 64 bits (avoids huge ints)."""
    body = s.lstrip("+-").lstrip("0")
    if len(body) > 20:
        return None
    return int(s)


def _to_int(x: Any) -> int:
    t = type(x)
    if t is int:
        return check_int(x)
    if t is UInt:
        v = x.value
        if v > INT64_MAX:
            raise CELEvalError("integer overflow", OVERFLOW)
        return v  # type: ignore[no-any-return]
    if t is float:
        f: float = x
        if f != f or f <= -(2.0**63) or f >= 2.0**63:
            raise CELEvalError("integer overflow", OVERFLOW)
        return int(f)
    if t is str:
        # strconv.ParseInt(s, 10, 64): syntax and range errors are one
        # conversion error in cel-go.
        s: str = x
        if not _INT_RE.match(s):
            _conversion_error(s, "int")
        v = _digits_value(s)
        if v is None or not INT64_MIN <= v <= INT64_MAX:
            _conversion_error(s, "int")
        return v
    out = convert("int", x)
    if out is not None:
        return out  # type: ignore[return-value]
    nso("int", x)


def _to_uint(x: Any) -> UInt:
    t = type(x)
    if t is UInt:
        return x  # type: ignore[no-any-return]
    if t is int:
        if x < 0:
            raise CELEvalError("unsigned integer overflow", OVERFLOW)
        return UInt(check_int(x))
    if t is float:
        f: float = x
        if f != f or f < 0 or f >= 2.0**64:
            raise CELEvalError("unsigned integer overflow", OVERFLOW)
        return UInt(int(f))
    if t is str:
        s: str = x
        if not _UINT_RE.match(s):
            _conversion_error(s, "uint")
        v = _digits_value(s)
        if v is None or v > UINT64_MAX:
            _conversion_error(s, "uint")
        return UInt(v)
    nso("uint", x)


def _to_double(x: Any) -> float:
    t = type(x)
    if t is float:
        return x  # type: ignore[no-any-return]
    if t is int:
        return float(check_int(x))
    if t is UInt:
        return float(x.value)
    if t is str:
        # strconv.ParseFloat(s, 64): a value beyond the largest double is a
        # range error (an error in cel-go), not +Inf; underflow gives 0.
        s: str = x
        if _FLOAT_RE.match(s):
            f = float(s)
        elif _HEX_FLOAT_RE.match(s):
            try:
                f = float.fromhex(s)
            except OverflowError:
                _conversion_error(s, "double")
        else:
            _conversion_error(s, "double")
        if math.isinf(f) and not _SPECIAL_FLOAT_RE.match(s):
            _conversion_error(s, "double")
        return f
    nso("double", x)


def _to_string(x: Any) -> str:
    t = type(x)
    if t is str:
        return x  # type: ignore[no-any-return]
    if t is bool:
        return "true" if x else "false"
    if t is int:
        # Data may hold integers beyond int64 (JSON); printing a huge one is
        # quadratic in Python and no CEL int can be that large.
        return str(check_int(x))
    if t is UInt:
        return str(x.value)
    if t is float:
        return format_double(x)
    if t is bytes:
        try:
            return str(x.decode("utf-8"))
        except UnicodeDecodeError:
            raise CELEvalError(
                "invalid UTF-8 in bytes, cannot convert to string", INVALID_ARGUMENT
            ) from None
    if isinstance(x, str):
        return str(x)
    out = convert("string", x)
    if out is not None:
        return out  # type: ignore[return-value]
    nso("string", x)


def _to_bytes(x: Any) -> bytes:
    if type(x) is bytes:
        return x
    if isinstance(x, str):
        return x.encode("utf-8", "surrogatepass")
    nso("bytes", x)


_BOOL_STRINGS: Final = {
    "1": True, "t": True, "T": True, "true": True, "TRUE": True, "True": True,
    "0": False, "f": False, "F": False, "false": False, "FALSE": False, "False": False,
}  # fmt: skip


def _to_bool(x: Any) -> bool:
    if type(x) is bool:
        return x
    if type(x) is str:
        try:
            return _BOOL_STRINGS[x]
        except KeyError:
            raise CELEvalError(f"cannot convert string {x!r} to bool", INVALID_ARGUMENT) from None
    nso("bool", x)


def _dyn(x: Any) -> object:
    return x


def _string_conversion_cost(args: tuple[object, ...]) -> int:
    return str_cost(len(args[0])) if type(args[0]) is bytes else 1


def _bytes_conversion_cost(args: tuple[object, ...]) -> int:
    return str_cost(len(args[0])) if type(args[0]) is str else 1


# -- strings extension ----------------------------------------------------

_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_LOWER: Final = {i: i + 32 for i in range(ord("A"), ord("Z") + 1)}
_UPPER: Final = {i + 32: i for i in range(ord("A"), ord("Z") + 1)}


def _out_of_range(i: int) -> NoReturn:
    raise CELEvalError(f"index out of range: {i}", INVALID_ARGUMENT)


def _char_at(s: Any, i: Any) -> str:
    if type(s) is not str or type(i) is not int:
        nso("charAt", s, i)
    if i < 0 or i > len(s):
        _out_of_range(i)
    return s[i : i + 1]


#: No offset argument (``null`` is an offset argument: a wrong one).
_NO_OFFSET: Final[Any] = object()


def _index_of(recv: Any, sub: Any, offset: Any = _NO_OFFSET) -> int:
    return _position("indexOf", recv, sub, offset, last=False)


def _last_index_of(recv: Any, sub: Any, offset: Any = _NO_OFFSET) -> int:
    return _position("lastIndexOf", recv, sub, offset, last=True)


def _position(name: str, recv: Any, sub: Any, offset: Any, *, last: bool) -> int:
    """``indexOf`` and ``lastIndexOf`` of a string (a substring, from an optional
    offset) or of a list (an element), with cel-go's argument checks."""
    if type(recv) is str:
        if type(sub) is not str or (offset is not _NO_OFFSET and type(offset) is not int):
            nso(name, recv, sub, *(() if offset is _NO_OFFSET else (offset,)))
        if offset is _NO_OFFSET:
            return recv.rfind(sub) if last else recv.find(sub)
        # cel-go: a negative offset is an error; the empty string matches at
        # the offset clamped to the end; past the end nothing else matches.
        if offset < 0:
            _out_of_range(offset)
        if sub == "":
            return min(int(offset), len(recv))
        if offset >= len(recv):
            return -1
        return recv.rfind(sub, 0, offset + len(sub)) if last else recv.find(sub, offset)
    if is_list(recv) and offset is _NO_OFFSET:
        items = list(recv)
        for i in range(len(items) - 1, -1, -1) if last else range(len(items)):
            if cel_eq(items[i], sub):
                return i
        return -1
    nso(name, recv, sub, *(() if offset is _NO_OFFSET else (offset,)))


def _lower_ascii(s: Any) -> str:
    if type(s) is not str:
        nso("lowerAscii", s)
    return s.translate(_LOWER)


def _upper_ascii(s: Any) -> str:
    if type(s) is not str:
        nso("upperAscii", s)
    return s.translate(_UPPER)


def _replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    if type(s) is not str or type(old) is not str or type(new) is not str or type(n) is not int:
        nso("replace", s, old, new, n)
    return s.replace(old, new, n if n >= 0 else -1)


def replace_growth(s: str, old: str, new: str, n: int = -1) -> int:
    """How many characters ``replace`` adds beyond len(s) (0 when it does not grow)."""
    if len(new) <= len(old):
        return 0
    count = (len(s) + 1) if old == "" else s.count(old)
    if n >= 0:
        count = min(count, n)
    return count * (len(new) - len(old))


def _split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    if type(s) is not str or type(sep) is not str or type(n) is not int:
        nso("split", s, sep, n)
    if n == 0:
        return []
    if sep == "":
        # Go explodes into runes; with a limit the last element keeps the rest.
        chars = list(s)
        if n > 0 and len(chars) > n:
            return [*chars[: n - 1], "".join(chars[n - 1 :])]
        return chars
    return s.split(sep, n - 1 if n > 0 else -1)


def _substring(s: Any, start: Any, end: Any = None) -> str:
    if type(s) is not str or type(start) is not int or (end is not None and type(end) is not int):
        nso("substring", s, start, *(() if end is None else (end,)))
    n = len(s)
    if end is None:
        if start < 0 or start > n:
            _out_of_range(start)
        return s[start:]
    if start > end:
        raise CELEvalError(f"invalid substring range. start: {start}, end: {end}", INVALID_ARGUMENT)
    if start < 0 or start > n:
        _out_of_range(start)
    if end < 0 or end > n:
        _out_of_range(end)
    return s[start:end]


def _trim(s: Any) -> str:
    if type(s) is not str:
        nso("trim", s)
    return s.strip(_GO_SPACE)


def _join(lst: Any, sep: Any = "") -> str:
    if not is_list(lst) or type(sep) is not str:
        nso("join", lst, sep)
    items = list(lst)
    for x in items:
        if type(x) is not str:
            nso("join", lst, sep)
    return sep.join(items)


# -- Kubernetes lists library ---------------------------------------------


def _is_sorted(lst: Any) -> bool:
    if not is_list(lst):
        nso("isSorted", lst)
    items = list(lst)
    for a, b in itertools.pairwise(items):
        c = compare(a, b)
        if c is not None and c > 0:  # NaN is unordered: not out of order (as Kubernetes)
            return False
    return True


def _sum(lst: Any) -> object:
    if not is_list(lst):
        nso("sum", lst)
    items = list(lst)
    if not items:
        return 0
    first = items[0]
    t = type(first)
    if t is int:
        total = 0
        for x in items:
            if type(x) is not int:
                nso("sum", lst)
            total = check_int(total + x)
        return total
    if t is float:
        f = 0.0
        for x in items:
            if type(x) is not float:
                nso("sum", lst)
            f += x
        return f
    if t is UInt:
        u = 0
        for x in items:
            if type(x) is not UInt:
                nso("sum", lst)
            u += x.value
            if u > UINT64_MAX:
                raise CELEvalError("unsigned integer overflow", OVERFLOW)
        return UInt(u)
    nso("sum", lst)


def _extreme(name: str, lst: Any, want: int) -> object:
    if not is_list(lst):
        nso(name, lst)
    items = list(lst)
    if not items:
        raise CELEvalError(f"{name} called on empty list", INVALID_ARGUMENT)
    best = items[0]
    compare(best, best)  # validates that the kind is ordered
    for x in items[1:]:
        if compare(x, best) == want:
            best = x
    return best


def _min(lst: Any) -> object:
    return _extreme("min", lst, -1)


def _max(lst: Any) -> object:
    return _extreme("max", lst, 1)


def _traversal_cost_fn(args: tuple[object, ...]) -> int:
    return traversal_cost(args[0])


# -- Kubernetes quantity and semver libraries -----------------------------


def _quantity(s: Any) -> Quantity:
    if type(s) is not str:
        nso("quantity", s)
    try:
        return with_amount(Quantity.parse(s), parse_amount(s))
    except ValueError as e:
        raise CELEvalError(str(e), INVALID_ARGUMENT) from None


def _is_quantity(s: Any) -> bool:
    if type(s) is not str:
        nso("isQuantity", s)
    try:
        Quantity.parse(s)
    except ValueError:
        return False
    return True


def _semver(s: Any, normalize: Any = False) -> Semver:
    if type(s) is not str or type(normalize) is not bool:
        nso("semver", s, normalize)
    try:
        return Semver.parse(s, normalize)
    except ValueError as e:
        raise CELEvalError(str(e), INVALID_ARGUMENT) from None


def _is_semver(s: Any, normalize: Any = False) -> bool:
    if type(s) is not str or type(normalize) is not bool:
        nso("isSemver", s, normalize)
    return Semver.is_valid(s, normalize)


def _ordered_pair(name: str, a: Any, b: Any) -> int:
    if type(a) is Semver and type(b) is Semver:
        return a.compare(b)
    qa = as_quantity(a)
    qb = as_quantity(b)
    if qa is not None and qb is not None:
        return qa.compare(qb)
    nso(name, a, b)


def _is_less_than(a: Any, b: Any) -> bool:
    return _ordered_pair("isLessThan", a, b) < 0


def _is_greater_than(a: Any, b: Any) -> bool:
    return _ordered_pair("isGreaterThan", a, b) > 0


def _compare_to(a: Any, b: Any) -> int:
    return _ordered_pair("compareTo", a, b)


def _q_operand(name: str, a: Any, b: Any) -> tuple[Quantity, Quantity | int]:
    qa = as_quantity(a)
    if qa is not None:
        if type(b) is int:
            return qa, b
        qb = as_quantity(b)
        if qb is not None:
            return qa, qb
    nso(name, a, b)


def _q_amount(q: Quantity | int) -> Amount:
    # An int operand is resource.NewQuantity(i, DecimalSI): an int64Amount of scale 0.
    return (q, 0) if type(q) is int else amount_of(q)  # type: ignore[arg-type]


def _q_add(a: Any, b: Any) -> Quantity:
    qa, qb = _q_operand("add", a, b)
    return with_amount(qa + qb, add_amounts(amount_of(qa), _q_amount(qb)))


def _q_sub(a: Any, b: Any) -> Quantity:
    qa, qb = _q_operand("sub", a, b)
    bm = _q_amount(qb)
    amount = add_amounts(amount_of(qa), negate(bm))
    if amount is not None and bm is not None and bm[0] == INT64_MIN:
        # Quantity.Sub negates the int64 amount, which wraps for MinInt64: when the
        # int64 path succeeds, Kubernetes has added the operand instead.
        return with_amount(qa + qb, amount)
    return with_amount(qa - qb, amount)


def _q_of(name: str, q: Any) -> Quantity:
    qq = as_quantity(q)
    if qq is None:
        nso(name, q)
    return qq


def _q_as_integer(q: Any) -> int:
    # Quantity.AsInt64, from Kubernetes' representation of the value.
    v = as_int64(amount_of(_q_of("asInteger", q)))
    if v is None:
        raise CELEvalError("cannot convert value to integer", OVERFLOW)
    return v


def _q_as_float(q: Any) -> float:
    return _q_of("asApproximateFloat", q).as_approximate_float()


def _q_is_integer(q: Any) -> bool:
    return as_int64(amount_of(_q_of("isInteger", q))) is not None


def _q_sign(q: Any) -> int:
    return _q_of("sign", q).sign()


def _semver_part(name: str) -> Callable[[object], int]:
    def part(v: Any) -> int:
        if type(v) is not Semver:
            nso(name, v)
        value: int = getattr(v, name)
        # blang/semver stores uint64; Kubernetes converts with int64(...).
        return value - 2**64 if value > INT64_MAX else value

    return part


def _str_len_cost(args: tuple[object, ...]) -> int:
    return str_cost(value_size(args[0]))


def _contains_cost(args: tuple[object, ...]) -> int:
    return str_cost(value_size(args[0])) * str_cost(value_size(args[1]))


def _replace_split_cost(args: tuple[object, ...]) -> int:
    return math.ceil(value_size(args[0]) * 2 * STRING_TRAVERSAL_COST_FACTOR)


def _replace_cost(args: tuple[object, ...]) -> int:
    # Kubernetes' cost (traversal plus construction, by the input's size), or
    # the size of the result where that is larger: 'a'*n .replace('', long)
    # would otherwise build n*len(long) characters for a cost of 0.2 n.
    cost = _replace_split_cost(args)
    s, old, new = args[0], args[1], args[2]
    n = args[3] if len(args) > 3 else -1
    if type(s) is str and type(old) is str and type(new) is str and type(n) is int:
        return build_cost(cost, len(s) + replace_growth(s, old, new, n), s, new)
    return cost


def _split_cost(args: tuple[object, ...]) -> int:
    # Kubernetes' cost, or the result's characters plus 0.1 per element.
    cost = _replace_split_cost(args)
    s, sep = args[0], args[1]
    n = args[2] if len(args) > 2 else -1
    if type(s) is str and type(sep) is str and type(n) is int:
        parts = len(s) if sep == "" else s.count(sep) + 1
        if n >= 0:
            parts = min(parts, n)
        return max(cost, build_cost(0, len(s), s) + str_cost(parts))
    return cost


def _join_cost(args: tuple[object, ...]) -> int:
    # Kubernetes charges by the size of the result, which is known up front;
    # at least 0.1 per byte of it.
    lst: Any = args[0]
    if not is_list(lst):
        return 1
    items = list(lst)
    sep: Any = args[1] if len(args) > 1 else ""
    if type(sep) is not str or any(type(x) is not str for x in items):
        return 1  # the call fails with no such overload
    size = sum(map(len, items)) + len(sep) * max(len(items) - 1, 0)
    return build_cost(math.ceil(size * 2 * STRING_TRAVERSAL_COST_FACTOR), size, sep, *items)


def _one(_args: tuple[object, ...]) -> int:
    return 1


def _number_parse_cost(args: tuple[object, ...]) -> int:
    """``int``, ``uint``, ``double``, ``bool`` of a string: 1 (Kubernetes), or 0.1 per
    character where that is more (the parse reads every digit: 10,000 of them took
    40 us for 1 unit); strings of up to 10 characters cost exactly cel-go's 1."""
    s = args[0]
    return max(1, str_cost(len(s))) if type(s) is str else 1


def semver_parse_cost(length: int, parts: int) -> int:
    """``semver``/``isSemver`` of a string of ``length`` characters holding ``parts``
    dot-separated identifiers. Kubernetes charges 1; the parse reads every character
    and builds an identifier per part (a 10 KiB pre-release of 4,900 parts takes
    about 1.5 ms), so we charge 1, 0.1 per character and 2 per part."""
    return 1 + str_cost(length) + 2 * parts


def _semver_cost(args: tuple[object, ...]) -> int:
    s = args[0]
    return semver_parse_cost(len(s), s.count(".")) if type(s) is str else 1


def _ordering_cost(args: tuple[object, ...]) -> int:
    """``compareTo``, ``isLessThan``, ``isGreaterThan``: 1 (Kubernetes), plus for two
    versions 1 per pre-release identifier compared."""
    a, b = args[0], args[1]
    if type(a) is Semver and type(b) is Semver:
        return 1 + min(len(a.pre), len(b.pre))
    return 1


# -- signatures -------------------------------------------------------------


def _elem_result(arg_types: Sequence[Ty]) -> Ty:
    return arg_types[0].elem


S, I, B, D, U = types.STRING, types.INT, types.BOOL, types.DOUBLE, types.UINT  # noqa: E741
Q, V, DYN = types.QUANTITY, types.SEMVER, types.DYN
LIST, MAP, LSTR = types.LIST_DYN, types.MAP_DYN, types.LIST_STRING


def _ov(result: Ty | ResultFn, *params: Ty) -> Overload:
    return Overload(tuple(params), result)


def _fn(
    name: str,
    member: bool,
    arity: int,
    impl: Callable[..., object],
    overloads: Sequence[Overload],
    cost: CostFn | None = None,
    result_cost: Callable[[object], int] | None = None,
) -> Function:
    return Function(name, member, arity, impl, tuple(overloads), cost, result_cost)


def _result_count(result: object) -> int:
    # Beyond Kubernetes: each match costs Python work that the regex cost does
    # not cover (an empty pattern has a regex cost of 0 yet matches everywhere).
    return FIND_ALL_MATCH_COST * len(result) if isinstance(result, list) else 0


_SIZE_OVS: Final = [_ov(I, S), _ov(I, types.BYTES), _ov(I, LIST), _ov(I, MAP)]

_CORE_FUNCTIONS: Final[tuple[Function, ...]] = (
    # standard library
    _fn("size", False, 1, _size, _SIZE_OVS),
    _fn("size", True, 0, _size, _SIZE_OVS),
    _fn("contains", True, 1, _contains, [_ov(B, S, S)], _contains_cost),
    _fn("startsWith", True, 1, _starts_with, [_ov(B, S, S)], _str_len_cost),
    _fn("endsWith", True, 1, _ends_with, [_ov(B, S, S)], _str_len_cost),
    _fn("matches", True, 1, _matches, [_ov(B, S, S)]),
    _fn("matches", False, 2, _matches, [_ov(B, S, S)]),
    _fn("int", False, 1, _to_int, [_ov(I, I), _ov(I, U), _ov(I, D), _ov(I, S)], _number_parse_cost),
    _fn("uint", False, 1, _to_uint, [_ov(U, U), _ov(U, I), _ov(U, D), _ov(U, S)], _number_parse_cost),
    _fn("double", False, 1, _to_double, [_ov(D, D), _ov(D, I), _ov(D, U), _ov(D, S)], _number_parse_cost),
    _fn(
        "string",
        False,
        1,
        _to_string,
        [_ov(S, S), _ov(S, I), _ov(S, U), _ov(S, D), _ov(S, B), _ov(S, types.BYTES)],
        _string_conversion_cost,
    ),
    _fn(
        "bytes",
        False,
        1,
        _to_bytes,
        [_ov(types.BYTES, types.BYTES), _ov(types.BYTES, S)],
        _bytes_conversion_cost,
    ),
    _fn("bool", False, 1, _to_bool, [_ov(B, B), _ov(B, S)], _number_parse_cost),
    _fn("dyn", False, 1, _dyn, [_ov(DYN, DYN)]),
    _fn("type", False, 1, cel_type_of, [_ov(types.TYPE, DYN)]),
    # strings extension
    _fn("charAt", True, 1, _char_at, [_ov(S, S, I)]),
    _fn("indexOf", True, 1, _index_of, [_ov(I, S, S), _ov(I, LIST, DYN)], _traversal_cost_fn),
    _fn("indexOf", True, 2, _index_of, [_ov(I, S, S, I)], _traversal_cost_fn),
    _fn(
        "lastIndexOf",
        True,
        1,
        _last_index_of,
        [_ov(I, S, S), _ov(I, LIST, DYN)],
        _traversal_cost_fn,
    ),
    _fn("lastIndexOf", True, 2, _last_index_of, [_ov(I, S, S, I)], _traversal_cost_fn),
    _fn("lowerAscii", True, 0, _lower_ascii, [_ov(S, S)], _str_len_cost),
    _fn("upperAscii", True, 0, _upper_ascii, [_ov(S, S)], _str_len_cost),
    _fn("replace", True, 2, _replace, [_ov(S, S, S, S)], _replace_cost),
    _fn("replace", True, 3, _replace, [_ov(S, S, S, S, I)], _replace_cost),
    _fn("split", True, 1, _split, [_ov(LSTR, S, S)], _split_cost),
    _fn("split", True, 2, _split, [_ov(LSTR, S, S, I)], _split_cost),
    _fn("substring", True, 1, _substring, [_ov(S, S, I)], _str_len_cost),
    _fn("substring", True, 2, _substring, [_ov(S, S, I, I)], _str_len_cost),
    _fn("trim", True, 0, _trim, [_ov(S, S)], _str_len_cost),
    _fn("join", True, 0, _join, [_ov(S, LSTR)], _join_cost),
    _fn("join", True, 1, _join, [_ov(S, LSTR, S)], _join_cost),
    # Kubernetes regex library
    _fn("find", True, 1, _find, [_ov(S, S, S)]),
    _fn("findAll", True, 1, _find_all, [_ov(LSTR, S, S)], None, _result_count),
    _fn("findAll", True, 2, _find_all, [_ov(LSTR, S, S, I)], None, _result_count),
    # Kubernetes lists library
    _fn("isSorted", True, 0, _is_sorted, [_ov(B, LIST)], _traversal_cost_fn),
    _fn("sum", True, 0, _sum, [_ov(_elem_result, LIST)], _traversal_cost_fn),
    _fn("min", True, 0, _min, [_ov(_elem_result, LIST)], _traversal_cost_fn),
    _fn("max", True, 0, _max, [_ov(_elem_result, LIST)], _traversal_cost_fn),
    # Kubernetes quantity library
    _fn("quantity", False, 1, _quantity, [_ov(Q, S)], _str_len_cost),
    _fn("isQuantity", False, 1, _is_quantity, [_ov(B, S)], _str_len_cost),
    _fn("isLessThan", True, 1, _is_less_than, [_ov(B, Q, Q), _ov(B, V, V)], _ordering_cost),
    _fn("isGreaterThan", True, 1, _is_greater_than, [_ov(B, Q, Q), _ov(B, V, V)], _ordering_cost),
    _fn("compareTo", True, 1, _compare_to, [_ov(I, Q, Q), _ov(I, V, V)], _ordering_cost),
    _fn("add", True, 1, _q_add, [_ov(Q, Q, Q), _ov(Q, Q, I)], _one),
    _fn("sub", True, 1, _q_sub, [_ov(Q, Q, Q), _ov(Q, Q, I)], _one),
    _fn("asInteger", True, 0, _q_as_integer, [_ov(I, Q)], _one),
    _fn("asApproximateFloat", True, 0, _q_as_float, [_ov(D, Q)], _one),
    _fn("isInteger", True, 0, _q_is_integer, [_ov(B, Q)], _one),
    _fn("sign", True, 0, _q_sign, [_ov(I, Q)], _one),
    _fn("sign", False, 1, _q_sign, [_ov(I, Q)], _one),
    # Kubernetes semver library
    _fn("semver", False, 1, _semver, [_ov(V, S)], _semver_cost),
    _fn("semver", False, 2, _semver, [_ov(V, S, B)], _semver_cost),
    _fn("isSemver", False, 1, _is_semver, [_ov(B, S)], _semver_cost),
    _fn("isSemver", False, 2, _is_semver, [_ov(B, S, B)], _semver_cost),
    _fn("major", True, 0, _semver_part("major"), [_ov(I, V)]),
    _fn("minor", True, 0, _semver_part("minor"), [_ov(I, V)]),
    _fn("patch", True, 0, _semver_part("patch"), [_ov(I, V)]),
)

FUNCTIONS: Final[tuple[Function, ...]] = _CORE_FUNCTIONS + tuple(
    _fn(
        name, member, arity, impl, [_ov(r, *ps) for r, *ps in ovs], cost,
        RESULT_COSTS.get(name) or OPT_RESULT_COSTS.get(name),
    )
    for name, member, arity, impl, ovs, cost in EXT_FUNCTIONS + LIB_FUNCTIONS + OPT_FUNCTIONS
    if impl is not None
)


def _registry() -> dict[tuple[str, bool, int], Function]:
    reg = {(f.name, f.member, f.arity): f for f in FUNCTIONS}
    # Rows without an implementation add overloads to an existing function.
    for name, member, arity, impl, ovs, _cost in LIB_FUNCTIONS:
        if impl is None:
            f = reg[(name, member, arity)]
            extra = tuple(_ov(r, *ps) for r, *ps in ovs)
            reg[(name, member, arity)] = dataclasses.replace(f, overloads=f.overloads + extra)
    return reg


REGISTRY: Final[Mapping[tuple[str, bool, int], Function]] = _registry()
FUNCTION_NAMES: Final = frozenset(f.name for f in FUNCTIONS)
# Functions whose second operand (first argument) is a regular expression.
#: The regular-expression functions: the compiler meters them itself (the pattern's
#: compile and its match), so their ``cost`` above is unused.
REGEX_FUNCTIONS: Final = frozenset({"matches", "find", "findAll"})
