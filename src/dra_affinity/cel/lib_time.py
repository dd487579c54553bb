"""Standard CEL timestamps and durations (``google.protobuf.Timestamp``/``Duration``), as cel-go.

* ``timestamp(string)`` parses RFC 3339 like Go's ``time.Parse(time.RFC3339, s)``
  (fraction of any length, truncated to nanoseconds; ``Z`` or ``±hh:mm``, kept
  as the value's offset); ``timestamp(int)`` is Unix seconds in UTC. Timestamps
  are limited to years 1..9999 (``0001-01-01T00:00:00Z`` ..
  ``9999-12-31T23:59:59.999999999Z``): parsing or arithmetic outside is an
  ``overflow`` error.
* ``duration(string)`` parses like Go's ``time.ParseDuration`` (``1h30m``,
  ``-1.5s``, ``300ms``, ``2us``/``µs``, ``7ns``); a duration is an int64 count of
  nanoseconds (about ±292 years), arithmetic beyond it is an ``overflow`` error.
* ``string(ts)`` is RFC 3339 with trimmed nanoseconds in the value's offset;
  ``string(d)`` is seconds with a ``s`` suffix (``5400s``, ``1.5s``);
  ``int(ts)`` Unix seconds, ``int(d)`` nanoseconds.
* Accessors (``getFullYear``, ``getMonth`` 0-based, ``getDayOfYear`` 0-based,
  ``getDate`` 1-based, ``getDayOfMonth`` 0-based, ``getDayOfWeek`` 0 = Sunday,
  ``getHours``, ``getMinutes``, ``getSeconds``, ``getMilliseconds``) read the
  timestamp in UTC (Kubernetes sets ``cel.DefaultUTCTimeZone``) or in the
  given zone: an IANA name (Python's ``zoneinfo``, the system time zone
  database Go reads too) or a fixed ``[+-]hh:mm`` offset. On a duration,
  ``getHours``/``getMinutes``/``getSeconds``/``getMilliseconds`` are totals.

Costs are cel-go's: 1 per call, operator or accessor. Beyond cel-go, a string
argument of ``timestamp()``/``duration()`` longer than 100 characters (never a
valid value in practice) also costs 0.1 per further character, so parsing is
never cheaper than its work.
"""

from __future__ import annotations

import functools
import math
import zoneinfo
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from dra_affinity.api.numbers import INT64_MAX, INT64_MIN

from . import types
from .errors import INVALID_ARGUMENT, OVERFLOW, CELEvalError
from .values import no_such_overload

TIMESTAMP_TYPE: Final = types.Ty("google.protobuf.Timestamp")
DURATION_TYPE: Final = types.Ty("google.protobuf.Duration")

MIN_UNIX: Final = -62135596800  # 0001-01-01T00:00:00Z
MAX_UNIX: Final = 253402300799  # 9999-12-31T23:59:59Z
_NS: Final = 1_000_000_000
_DAY: Final = 86400


class Timestamp:
    """An instant (Unix seconds, nanoseconds) and the UTC offset it was written with."""

    __slots__ = ("nsec", "offset", "sec")
    sec: int
    nsec: int  # 0 <= nsec < 1e9
    offset: int  # seconds east of UTC, for string(); accessors use UTC or an explicit zone

    def __init__(self, sec: int, nsec: int = 0, offset: int = 0) -> None:
        object.__setattr__(self, "sec", sec)
        object.__setattr__(self, "nsec", nsec)
        object.__setattr__(self, "offset", offset)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Timestamp is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is Timestamp and (self.sec, self.nsec) == (other.sec, other.nsec)

    def __lt__(self, other: Timestamp) -> bool:
        return (self.sec, self.nsec) < (other.sec, other.nsec)

    def __hash__(self) -> int:
        return hash(("timestamp", self.sec, self.nsec))

    def __repr__(self) -> str:
        return f"Timestamp({self.rfc3339()!r})"

    def __str__(self) -> str:
        return self.rfc3339()

    def rfc3339(self) -> str:
        """Go's ``Format(time.RFC3339Nano)`` in the value's own offset (``string(ts)``)."""
        y, mo, d, h, mi, s = _civil(self.sec + self.offset)
        frac = f".{self.nsec:09d}".rstrip("0") if self.nsec else ""
        if self.offset == 0:
            zone = "Z"
        else:
            sign = "-" if self.offset < 0 else "+"
            m = abs(self.offset) // 60
            zone = f"{sign}{m // 60:02d}:{m % 60:02d}"
        return f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{frac}{zone}"

    def go_string(self) -> str:
        """Go's ``Time.String()`` (``2006-01-02 15:04:05.999999999 -0700 MST``), for comparisons."""
        y, mo, d, h, mi, s = _civil(self.sec + self.offset)
        frac = f".{self.nsec:09d}".rstrip("0") if self.nsec else ""
        sign = "-" if self.offset < 0 else "+"
        m = abs(self.offset) // 60
        off = f"{sign}{m // 60:02d}{m % 60:02d}"
        name = "UTC" if self.offset == 0 else off
        return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}{frac} {off} {name}"


class Duration:
    """A signed count of nanoseconds within int64, as Go's ``time.Duration``."""

    __slots__ = ("ns",)
    ns: int

    def __init__(self, ns: int) -> None:
        object.__setattr__(self, "ns", ns)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Duration is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is Duration and self.ns == other.ns

    def __lt__(self, other: Duration) -> bool:
        return self.ns < other.ns

    def __hash__(self) -> int:
        return hash(("duration", self.ns))

    def __repr__(self) -> str:
        return f"Duration({self.go_string()!r})"

    def __str__(self) -> str:
        return self.seconds_text()

    def seconds_text(self) -> str:
        """cel-go's ``string(d)``: ``FormatFloat(d.Seconds(), 'f', -1, 64) + "s"``."""
        text = format(Decimal(repr(_go_seconds(self.ns))), "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text + "s"

    def go_string(self) -> str:
        """Go's ``Duration.String()`` (``1h30m0s``, ``1.5ms``), for comparisons."""
        u = abs(self.ns)
        sign = "-" if self.ns < 0 else ""
        if u < _NS:
            if u == 0:
                return "0s"
            if u < 1000:
                return f"{sign}{u}ns"
            if u < 1_000_000:
                return f"{sign}{_frac(u, 3)}\u00b5s"
            return f"{sign}{_frac(u, 6)}ms"
        secs = _frac(u % (60 * _NS), 9)
        minutes = u // (60 * _NS)
        out = f"{secs}s"
        if minutes:
            out = f"{minutes % 60}m{out}"
            if minutes // 60:
                out = f"{minutes // 60}h{out}"
        return sign + out


def _frac(v: int, prec: int) -> str:
    whole, rest = divmod(v, 10**prec)
    digits = f"{rest:0{prec}d}".rstrip("0") if prec else ""
    return f"{whole}.{digits}" if digits else str(whole)


def _go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _go_seconds(ns: int) -> float:
    sec = _go_div(ns, _NS)
    return float(sec) + float(ns - sec * _NS) / 1e9


# -- calendar (proleptic Gregorian, any year) -------------------------------------------


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def _civil(local: int) -> tuple[int, int, int, int, int, int]:
    days, rem = divmod(local, _DAY)
    y, m, d = _civil_from_days(days)
    return y, m, d, rem // 3600, rem // 60 % 60, rem % 60


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


# -- parsing ---------------------------------------------------------------------------


def _digits(s: str, lo: int, hi: int) -> int | None:
    if not s.isascii() or not s.isdigit():
        return None
    v = int(s)
    return v if lo <= v <= hi else None


def parse_timestamp(s: str) -> Timestamp:
    """Go's RFC 3339 parse; ValueError if the text is not one or is outside years 1..9999."""
    bad = ValueError(f"cannot parse {s[:40]!r} as an RFC 3339 timestamp")
    if len(s) < 19:
        raise bad
    year = _digits(s[0:4], 0, 9999)
    month = _digits(s[5:7], 1, 12)
    if year is None or month is None:
        raise bad
    day = _digits(s[8:10], 1, _days_in(month, year))
    hour = _digits(s[11:13], 0, 23)
    minute = _digits(s[14:16], 0, 59)
    sec = _digits(s[17:19], 0, 59)
    if day is None or hour is None or minute is None or sec is None:
        raise bad
    if not (s[4] == "-" and s[7] == "-" and s[10] == "T" and s[13] == ":" and s[16] == ":"):
        raise bad
    rest = s[19:]
    nsec = 0
    if len(rest) >= 2 and rest[0] == "." and rest[1].isascii() and rest[1].isdigit():
        n = 2
        while n < len(rest) and rest[n].isascii() and rest[n].isdigit():
            n += 1
        nsec = int(rest[1 : min(n, 10)].ljust(9, "0"))
        rest = rest[n:]
    offset = 0
    if rest != "Z":
        if len(rest) != 6 or rest[0] not in "+-" or rest[3] != ":":
            raise bad
        oh = _digits(rest[1:3], 0, 23)
        om = _digits(rest[4:6], 0, 59)
        if oh is None or om is None:
            raise bad
        offset = (oh * 60 + om) * 60 * (-1 if rest[0] == "-" else 1)
    unix = _days_from_civil(year, month, day) * _DAY + hour * 3600 + minute * 60 + sec - offset
    if not MIN_UNIX <= unix <= MAX_UNIX:
        raise OverflowError("timestamp overflow")
    return Timestamp(unix, nsec, offset)


_UNITS: Final = {
    "ns": 1, "us": 1000, "\u00b5s": 1000, "\u03bcs": 1000, "ms": 1_000_000,
    "s": _NS, "m": 60 * _NS, "h": 3600 * _NS,
}  # fmt: skip
_LIMIT: Final = 1 << 63


def parse_duration(text: str) -> int:
    """Go's ``time.ParseDuration``: nanoseconds, or ValueError. Outcomes are remembered
    (4,096 strings, errors too): a parse takes about 1 us per part in Python, and a
    comprehension may parse one string many times."""
    got = _remembered_duration(text)
    if isinstance(got, str):
        raise ValueError(got)
    return got


def _duration_outcome(text: str) -> int | str:
    try:
        return _parse_duration(text)
    except ValueError as e:
        return str(e)


_remembered_duration: Final = functools.lru_cache(maxsize=4096)(_duration_outcome)


def _parse_duration(text: str) -> int:
    bad = ValueError(f"invalid duration {text[:40]!r}")
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise bad
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise bad
        i = 0
        v = 0
        while i < len(s) and "0" <= s[i] <= "9":
            if v > _LIMIT // 10:
                raise bad
            v = v * 10 + ord(s[i]) - 48
            if v > _LIMIT:
                raise bad
            i += 1
        pre = i > 0
        s = s[i:]
        f, scale, post = 0, 1.0, False
        if s and s[0] == ".":
            s = s[1:]
            i = 0
            over = False
            while i < len(s) and "0" <= s[i] <= "9":
                if not over:
                    if f > (_LIMIT - 1) // 10:
                        over = True
                    else:
                        y = f * 10 + ord(s[i]) - 48
                        if y > _LIMIT:
                            over = True
                        else:
                            f = y
                            scale *= 10
                i += 1
            post = i > 0
            s = s[i:]
        if not pre and not post:
            raise bad
        i = 0
        while i < len(s) and not (s[i] == "." or "0" <= s[i] <= "9"):
            i += 1
        if i == 0:
            raise bad
        unit = _UNITS.get(s[:i])
        s = s[i:]
        if unit is None:
            raise bad
        if v > _LIMIT // unit:
            raise bad
        v *= unit
        if f > 0:
            v += int(float(f) * (float(unit) / scale))
            if v > _LIMIT:
                raise bad
        total += v
        if total > _LIMIT:
            raise bad
    if neg:
        return -total
    if total > _LIMIT - 1:
        raise bad
    return total


# -- functions -------------------------------------------------------------------------


def _overflow(what: str = "timestamp") -> CELEvalError:
    return CELEvalError(f"{what} overflow", OVERFLOW)


def timestamp(x: Any) -> Timestamp:
    t = type(x)
    if t is Timestamp:
        return x  # type: ignore[no-any-return]
    if t is str:
        try:
            return parse_timestamp(x)
        except OverflowError:
            raise _overflow() from None
        except ValueError as e:
            raise CELEvalError(
                f"type conversion error from 'string' to 'google.protobuf.Timestamp': {e}",
                INVALID_ARGUMENT,
            ) from None
    if t is int:
        if not MIN_UNIX <= x <= MAX_UNIX:
            raise _overflow()
        return Timestamp(x)
    raise no_such_overload("timestamp", x)


def duration(x: Any) -> Duration:
    t = type(x)
    if t is Duration:
        return x  # type: ignore[no-any-return]
    if t is str:
        try:
            return Duration(parse_duration(x))
        except ValueError as e:
            raise CELEvalError(
                f"type conversion error from 'string' to 'google.protobuf.Duration': {e}",
                INVALID_ARGUMENT,
            ) from None
    raise no_such_overload("duration", x)


def _dur(ns: int) -> Duration:
    if not INT64_MIN <= ns <= INT64_MAX:
        raise _overflow("duration")
    return Duration(ns)


def _add(t: Timestamp, ns: int) -> Timestamp:
    # cel-go adds whole seconds and nanoseconds separately (Go's division truncates).
    sec2 = _go_div(ns, _NS)
    nsec = t.nsec + (ns - sec2 * _NS)
    sec = t.sec + sec2
    carry, nsec = divmod(nsec, _NS)
    sec += carry
    if not MIN_UNIX <= sec <= MAX_UNIX:
        raise _overflow()
    return Timestamp(sec, nsec, t.offset)


NO_MATCH: Final = object()


def arith(op: str, a: Any, b: Any) -> object:
    """``a op b`` for timestamps and durations (``+``, ``-``), or NO_MATCH if they are not."""
    ta, tb = type(a), type(b)
    if op == "+":
        if ta is Duration and tb is Duration:
            return _dur(a.ns + b.ns)
        if ta is Timestamp and tb is Duration:
            return _add(a, b.ns)
        if ta is Duration and tb is Timestamp:
            return _add(b, a.ns)
    elif op == "-":
        if ta is Duration and tb is Duration:
            return _dur(a.ns - b.ns)
        if ta is Timestamp and tb is Duration:
            if b.ns == INT64_MIN:
                raise _overflow("duration")
            return _add(a, -b.ns)
        if ta is Timestamp and tb is Timestamp:
            return _dur((a.sec - b.sec) * _NS + (a.nsec - b.nsec))
    return NO_MATCH


def arith_type(op: str, left: str, right: str) -> types.Ty | None:
    """Static result type of ``left op right`` when a time type is involved (None: no overload)."""
    ts, du, dyn = TIMESTAMP_TYPE.name, DURATION_TYPE.name, "dyn"
    rows = {
        ("+", du, du): DURATION_TYPE, ("+", ts, du): TIMESTAMP_TYPE, ("+", du, ts): TIMESTAMP_TYPE,
        ("-", du, du): DURATION_TYPE, ("-", ts, du): TIMESTAMP_TYPE, ("-", ts, ts): DURATION_TYPE,
    }  # fmt: skip
    if left == dyn or right == dyn:
        known = right if left == dyn else left
        results = {r for (o, x, y), r in rows.items()
                   if o == op and (x == known or y == known)}  # fmt: skip
        if not results:
            return None
        return results.pop() if len(results) == 1 else types.DYN
    return rows.get((op, left, right))


# -- accessors -------------------------------------------------------------------------


def _zone_offset(t: Timestamp, tz: str) -> int:
    """Seconds east of UTC of zone ``tz`` at the instant ``t`` (cel-go's timeZone rules)."""
    ind = tz.find(":")
    if ind == -1:
        if tz in ("", "UTC", "Local"):
            return 0
        try:
            zone = zoneinfo.ZoneInfo(tz)
        except (ValueError, OSError, zoneinfo.ZoneInfoNotFoundError):
            raise CELEvalError(f"unknown time zone {tz[:60]!r}", INVALID_ARGUMENT) from None
        try:
            off = datetime.fromtimestamp(t.sec, UTC).astimezone(zone).utcoffset()
        except (OverflowError, ValueError, OSError):
            off = datetime(9999 if t.sec > 0 else 1, 6, 1, tzinfo=zone).utcoffset()
        return int(off.total_seconds()) if off is not None else 0
    # As Kubernetes' cel-go evaluates it: minutes are not range-checked ('+05:75').
    hr = _go_atoi(tz[:ind])
    mins = _go_atoi(tz[ind + 1 :])
    if hr is None or mins is None:
        raise CELEvalError(f"invalid time zone offset {tz[:60]!r}", INVALID_ARGUMENT)
    offset = hr * 60 - mins if tz[0] == "-" else hr * 60 + mins
    return offset * 60


def _go_atoi(s: str) -> int | None:
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or not body.isascii() or not body.isdigit() or len(body) > 18:
        return None
    return int(s)


def _fields(name: str, t: Any, tz: Any) -> tuple[int, int]:
    """(local seconds, days since the epoch) of a timestamp, in UTC or zone ``tz``."""
    if type(t) is not Timestamp or (tz is not None and type(tz) is not str):
        raise no_such_overload(name, t, *(() if tz is None else (tz,)))
    local = t.sec + (0 if tz is None else _zone_offset(t, tz))
    return local, local // _DAY


def _accessor(name: str, on_ts: Any, on_dur: Any = None) -> Any:
    def get(t: Any, tz: Any = None) -> int:
        if type(t) is Duration and tz is None and on_dur is not None:
            return int(on_dur(t.ns))
        local, days = _fields(name, t, tz)
        return int(on_ts(t, local, days))

    get.__name__ = name
    return get


def _year(_t: Timestamp, local: int, _d: int) -> int:
    return _civil(local)[0]


def _month(_t: Timestamp, local: int, _d: int) -> int:
    return _civil(local)[1] - 1


def _day_of_year(_t: Timestamp, local: int, days: int) -> int:
    return days - _days_from_civil(_civil(local)[0], 1, 1)


def _date(_t: Timestamp, local: int, _d: int) -> int:
    return _civil(local)[2]


def _day_of_month(_t: Timestamp, local: int, _d: int) -> int:
    return _civil(local)[2] - 1


def _day_of_week(_t: Timestamp, _l: int, days: int) -> int:
    return (days + 4) % 7  # 1970-01-01 was a Thursday


def _hours(_t: Timestamp, local: int, _d: int) -> int:
    return local % _DAY // 3600


def _minutes(_t: Timestamp, local: int, _d: int) -> int:
    return local % 3600 // 60


def _seconds(_t: Timestamp, local: int, _d: int) -> int:
    return local % 60


def _millis(t: Timestamp, _l: int, _d: int) -> int:
    return t.nsec // 1_000_000


def _total(unit: int) -> Any:
    # Go: float64(d / unit) + float64(d % unit) / unit, truncated to int64.
    def total(ns: int) -> int:
        q = _go_div(ns, unit)
        return math.trunc(float(q) + float(ns - q * unit) / float(unit))

    return total


_ACCESSORS: Final = (
    ("getFullYear", _year, None),
    ("getMonth", _month, None),
    ("getDayOfYear", _day_of_year, None),
    ("getDate", _date, None),
    ("getDayOfMonth", _day_of_month, None),
    ("getDayOfWeek", _day_of_week, None),
    ("getHours", _hours, _total(3600 * _NS)),
    ("getMinutes", _minutes, _total(60 * _NS)),
    ("getSeconds", _seconds, _total(_NS)),
    ("getMilliseconds", _millis, lambda ns: _go_div(ns, 1_000_000)),
)


def to_int(x: Any) -> int:
    """``int(ts)``: Unix seconds; ``int(d)``: nanoseconds."""
    return x.sec if type(x) is Timestamp else x.ns


def to_string(x: Any) -> str:
    return x.rfc3339() if type(x) is Timestamp else x.seconds_text()


#: Units per character of a timestamp or duration parsed from a string: the parse reads
#: each character in Python, about 0.3 us per character of a duration made of many
#: parts (``"1ns" * 33``), where Kubernetes charges 1 whatever the length; at 2 a
#: unit stays within 3 times what a comprehension's unit costs
#: (benchmarks/cel_unit_cost.py).
PARSE_COST_PER_CHAR: Final = 2


def parse_cost(length: int) -> int:
    """``timestamp(s)`` / ``duration(s)`` of a string of ``length`` characters."""
    return 1 + math.ceil(length * PARSE_COST_PER_CHAR)


def _parse_cost(args: tuple[object, ...]) -> int:
    s = args[0]
    return parse_cost(len(s)) if type(s) is str else 1


def _one(_args: tuple[object, ...]) -> int:
    return 1


_S, _I, _TS, _DU = types.STRING, types.INT, TIMESTAMP_TYPE, DURATION_TYPE


def _accessor_rows() -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for name, on_ts, on_dur in _ACCESSORS:
        impl = _accessor(name, on_ts, on_dur)
        zero = [(_I, _TS)] + ([(_I, _DU)] if on_dur is not None else [])
        rows.append((name, True, 0, impl, zero, _one))
        rows.append((name, True, 1, impl, [(_I, _TS, _S)], _one))
    return rows


# (name, member, arity, impl, overloads as (result, *params), cost)
TIME_FUNCTIONS: Final = (
    ("timestamp", False, 1, timestamp, [(_TS, _S), (_TS, _I), (_TS, _TS)], _parse_cost),
    ("duration", False, 1, duration, [(_DU, _S), (_DU, _DU)], _parse_cost),
    *_accessor_rows(),
)


def estimate(name: str, sizes: list[int]) -> tuple[int, int] | None:
    """Static (cost, result size) of a call, from its operands' size bounds."""
    if name in ("timestamp", "duration"):
        return parse_cost(sizes[0] if sizes else 1), 1
    if name in {a[0] for a in _ACCESSORS}:
        return 1, 1
    return None
