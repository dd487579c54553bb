"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``): one type for the API and CEL.

Capacity in DRA is written as quantities ("16", "1Gi", "500m"); consumable
capacity adds and compares them, and CEL's quantity library parses and
compares them too. Both use this one exact type, so "0.1 + 0.2" never
over-commits and a selector sees the same value the allocator does.

:class:`Quantity` parses the Kubernetes quantity grammar exactly::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

and follows the Kubernetes rules for the value: values are exact (no binary
floating point anywhere), a non-zero value finer than 1n is rounded up (away
from zero) to 1n, binary-SI values are capped at 2**63-1 in magnitude, and a
decimal exponent is read as an int64 (else "unable to parse quantity's
suffix") and then truncated to int32 as ``ParseQuantity`` does
(``1e4294967296`` is 1). ``str()`` is the Kubernetes canonical form ("1Gi",
"500m", "1536Mi", "1500", "1k"): the suffix family of the parsed text is kept
and the largest exponent that keeps the mantissa an integer is chosen.

The value is stored as an integer number of nano-units, so arithmetic,
comparison and hashing are exact; ``Quantity.parse("1k") == Quantity.parse("1000")``.
Kubernetes keeps an arbitrary-precision decimal with a lazy scale; a value
is materialized here, so two bounds apply that Kubernetes does not have:
at most ``MAX_DIGITS`` digits, and a magnitude below ``10**MAX_DECIMAL_EXPONENT``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Final, Literal, cast, final

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from dra_affinity.api.numbers import INT64_MAX, INT64_MIN

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

_FORMATS: Final = frozenset({BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT})
_NANO: Final = 10**9
_MAX_ALLOWED: Final = INT64_MAX  # upstream's maxAllowed: BinarySI values clamp to it
# Bounds of the exact representation (Kubernetes has none: it keeps a lazily
# scaled decimal). Materializing "1e999999999" would be a denial of service;
# no real quantity comes near either bound.
MAX_DECIMAL_EXPONENT: Final = 1000
MAX_DIGITS: Final = 400

_DECIMAL_SUFFIXES: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXP: Final = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXP: Final = {v // 10: k for k, v in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")
_FORMAT_MSG: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def split_quantity(s: str) -> tuple[bool, str, str, str]:
    """Split into (positive, numerator digits, denominator digits, suffix) like Kubernetes'
    ``parseQuantityString`` (also what :mod:`dra_affinity.cel.lib_quantity` reads a
    quantity's representation from)."""
    positive = True
    pos = 0
    end = len(s)
    if pos < end and s[0] in "+-":
        positive = s[0] == "+"
        pos += 1
    while pos < end and s[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    num = s[start:pos] or "0"
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        start = pos
        while pos < end and s[pos] in _DIGITS:
            pos += 1
        denom = s[start:pos]
    suffix_start = pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(f"invalid quantity {s!r}: {_FORMAT_MSG}")
    return positive, num, denom, s[suffix_start:]


def interpret_suffix(s: str, suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        body = suffix[1:]
        digits = body[1:] if body[0] in "+-" else body
        if digits and all(c in _DIGITS for c in digits) and len(digits) <= 40:
            exp = int(body)
            if INT64_MIN <= exp <= INT64_MAX:
                # strconv.ParseInt(..., 64), then int32(...): Go truncates.
                exp = (exp + 2**31) % 2**32 - 2**31
                return 10, exp, DECIMAL_EXPONENT
    raise ValueError(f"invalid quantity {s!r}: unable to parse quantity's suffix {suffix!r}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _nanos_of(value: Fraction) -> int:
    """Nano-units of an exact value, rounded away from zero as Kubernetes rounds up to 1n."""
    n = _ceil_div(abs(value.numerator) * _NANO, value.denominator)
    return n if value >= 0 else -n


def as_quantity(v: object) -> Quantity | None:
    """``v`` as a :class:`Quantity`, accepting other exact quantity types.

    Objects with an exact ``value`` (``Fraction`` or ``int``) and a Kubernetes
    ``format`` attribute are converted, so callers may bind their own quantity
    type into a CEL activation. Anything else gives ``None``.
    """
    if type(v) is Quantity:
        return v
    value = getattr(v, "value", None)
    fmt = getattr(v, "format", None)
    if isinstance(value, (Fraction, int)) and not isinstance(value, bool) and fmt in _FORMATS:
        frac = Fraction(value)
        return Quantity.from_nanos(_nanos_of(frac), cast(Format, fmt))
    return None


#: Texts of quantities by (nano-units, format), at most _TEXTS_MAX of them.
_TEXTS: dict[tuple[int, str], str] = {}
_TEXTS_MAX = 4096


@final
class Quantity:
    """An exact Kubernetes resource quantity. Immutable and hashable."""

    # `_amount` is set only by the CEL quantity library (Kubernetes' internal
    # representation, see dra_affinity.cel.lib_quantity); unset elsewhere.
    __slots__ = ("_amount", "_format", "_nanos", "num")
    _nanos: int
    _format: Format
    # The value as an int when whole (the common case), else the Fraction:
    # int arithmetic is far cheaper than Fraction's in the allocator's hot path.
    num: int | Fraction

    def __init__(self, value: Fraction | int = 0, fmt: Format = DECIMAL_SI) -> None:
        """An exact ``value`` (rounded up to whole nano-units, away from zero) in format ``fmt``."""
        if isinstance(value, bool) or not isinstance(value, (int, Fraction)):
            raise TypeError(f"Quantity value must be an int or Fraction, not {type(value).__name__}")
        self._set(_nanos_of(Fraction(value)) if type(value) is not int else value * _NANO, fmt)

    def _set(self, nanos: int, fmt: Format) -> None:
        if fmt not in _FORMATS:
            raise ValueError(f"unknown quantity format {fmt!r}")
        object.__setattr__(self, "_nanos", nanos)
        object.__setattr__(self, "_format", fmt)
        object.__setattr__(
            self, "num", nanos // _NANO if nanos % _NANO == 0 else Fraction(nanos, _NANO)
        )

    @classmethod
    def from_nanos(cls, nanos: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """Build from an integer count of nano-units (1 == 1e-9)."""
        if type(nanos) is not int:
            raise TypeError("Quantity nanos must be an int")
        q = object.__new__(cls)
        q._set(nanos, fmt)
        return q

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    # -- construction ---------------------------------------------------

    @classmethod
    def parse(cls, s: str | int | float) -> Quantity:
        """Parse like ``ParseQuantity``; ``ValueError`` naming the text if invalid.

        Strings follow the Kubernetes grammar strictly (no surrounding
        space: the API decoder trims it, see :meth:`__get_pydantic_core_schema__`).
        Ints and finite floats (as JSON/YAML numbers) are accepted for API use.
        """
        if isinstance(s, bool):
            raise ValueError(f"quantities must be strings or numbers, not {s!r}")
        if isinstance(s, int):
            return cls(s)
        if isinstance(s, float):
            if s != s or s in (float("inf"), float("-inf")):
                raise ValueError(f"quantity {s!r} is not a finite number")
            return cls(Fraction(repr(s)))
        if not isinstance(s, str):
            raise ValueError(f"quantities must be strings or numbers, not {type(s).__name__}")
        if not s:
            raise ValueError("invalid quantity '': quantities must not be empty")
        positive, num, denom, suffix = split_quantity(s)
        if len(num) + len(denom) > MAX_DIGITS:
            raise ValueError(f"invalid quantity {s[:40]!r}...: more than {MAX_DIGITS} digits")
        base, exp, fmt = interpret_suffix(s, suffix)
        # The value is below 10**magnitude (and 0 when there are no significant digits).
        magnitude = exp + (len(num) if num != "0" else len(denom.lstrip("0")) - len(denom))
        if (num != "0" or denom.strip("0")) and magnitude > MAX_DECIMAL_EXPONENT:
            raise ValueError(
                f"invalid quantity {s[:60]!r}: value too large (10**{MAX_DECIMAL_EXPONENT} or more)"
            )
        value = Fraction(int(num + denom), 10 ** len(denom))
        if base == 10:
            if exp >= 0:
                value *= 10**exp
            elif -exp > len(num) + len(denom) + 20:
                # Far below 1n: keep the value tiny without building 10**huge.
                value = Fraction(1, 10**12) if value else Fraction(0)
            else:
                value /= 10 ** (-exp)
        else:
            value *= 2**exp
        # Kubernetes rounds non-zero values up to the smallest representable
        # amount (1n) so that "a little" never becomes nothing.
        nanos = _ceil_div(value.numerator * _NANO, value.denominator)
        if fmt == BINARY_SI and nanos > _MAX_ALLOWED * _NANO:
            nanos = _MAX_ALLOWED * _NANO
        return cls.from_nanos(nanos if positive else -nanos, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """An integer quantity (like ``resource.NewQuantity``)."""
        return cls.from_nanos(int(value) * _NANO, fmt)

    @classmethod
    def from_milli(cls, value: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """A quantity of ``value`` thousandths (like ``resource.NewMilliQuantity``)."""
        return cls.from_nanos(int(value) * 10**6, fmt)

    # -- accessors ------------------------------------------------------

    @property
    def nanos(self) -> int:
        """The exact value in units of 1e-9."""
        return self._nanos

    @property
    def format(self) -> Format:
        """The suffix family used by :meth:`__str__`."""
        return self._format

    @property
    def value(self) -> Fraction:
        """The exact value."""
        return Fraction(self._nanos, _NANO)

    def sign(self) -> int:
        return (self._nanos > 0) - (self._nanos < 0)

    def is_zero(self) -> bool:
        return self._nanos == 0

    def is_integer(self) -> bool:
        """True when the value is an integer within int64 (Kubernetes ``AsInt64`` succeeds)."""
        return self._nanos % _NANO == 0 and INT64_MIN <= self._nanos // _NANO <= INT64_MAX

    def as_int(self) -> int:
        """The value as int64; ``ValueError`` if it is fractional or out of range."""
        if not self.is_integer():
            raise ValueError("cannot convert value to integer")
        return self._nanos // _NANO

    def ceil_int(self) -> int:
        """The value rounded up to an integer (Kubernetes ``Value()``)."""
        return _ceil_div(self._nanos, _NANO)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (Kubernetes ``MilliValue()``)."""
        return _ceil_div(self._nanos, 10**6)

    def as_approximate_float(self) -> float:
        try:
            return self._nanos / _NANO
        except OverflowError:
            return float("inf") if self._nanos > 0 else float("-inf")

    def compare(self, other: Quantity) -> int:
        """-1, 0 or 1."""
        return (self._nanos > other._nanos) - (self._nanos < other._nanos)

    # -- arithmetic (format follows Kubernetes: the receiver's, or the operand's if the receiver is zero)

    def _coerce(self, other: object) -> Quantity | None:
        if type(other) is Quantity:
            return other
        if type(other) is int:
            return Quantity.from_nanos(other * _NANO, DECIMAL_EXPONENT)
        return None

    def __add__(self, other: object) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        fmt = o._format if self._nanos == 0 else self._format
        return Quantity.from_nanos(self._nanos + o._nanos, fmt)

    def __radd__(self, other: object) -> Quantity:
        if type(other) is int and other == 0:  # lets sum() work
            return self
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o + self

    def __sub__(self, other: object) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        fmt = o._format if self._nanos == 0 else self._format
        return Quantity.from_nanos(self._nanos - o._nanos, fmt)

    def __neg__(self) -> Quantity:
        return Quantity.from_nanos(-self._nanos, self._format)

    def __abs__(self) -> Quantity:
        return Quantity.from_nanos(abs(self._nanos), self._format)

    def __mul__(self, other: object) -> Quantity:
        if type(other) is not int:
            return NotImplemented
        return Quantity.from_nanos(self._nanos * other, self._format)

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return self._nanos != 0

    # -- comparison -----------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return self._nanos == other._nanos

    def __hash__(self) -> int:
        return hash(("Quantity", self._nanos))

    def __lt__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return self._nanos < other._nanos

    def __le__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return self._nanos <= other._nanos

    def __gt__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return self._nanos > other._nanos

    def __ge__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return self._nanos >= other._nanos

    # -- formatting -----------------------------------------------------

    def __str__(self) -> str:
        # A program prints few distinct quantities many times (PreBind writes every
        # allocation's consumed capacity): the text is worked out once per value.
        key = (self._nanos, self._format)
        text = _TEXTS.get(key)
        if text is None:
            if len(_TEXTS) >= _TEXTS_MAX:
                _TEXTS.clear()
            text = _TEXTS[key] = self._text()
        return text

    def _text(self) -> str:
        """:meth:`__str__`, worked out."""
        n = self._nanos
        if n == 0:
            return "0"
        fmt = self._format
        if fmt == BINARY_SI:
            # Small or fractional binary values print as decimal SI so no
            # precision is lost, exactly like Kubernetes.
            if abs(n) < 1024 * _NANO or n % _NANO != 0:
                fmt = DECIMAL_SI
            else:
                mant = n // _NANO
                exp = 0
                while exp < 6 and mant % 1024 == 0:
                    mant //= 1024
                    exp += 1
                return f"{mant}{_BINARY_BY_EXP[exp] if exp else ''}"
        mant, exp = n, -9
        while mant % 10 == 0:
            mant //= 10
            exp += 1
        shift = exp % 3
        if shift:
            mant *= 10**shift
            exp -= shift
        if fmt == DECIMAL_EXPONENT:
            return f"{mant}" if exp == 0 else f"{mant}e{exp}"
        if exp > 18:
            mant *= 10 ** (exp - 18)
            exp = 18
        return f"{mant}{_DECIMAL_BY_EXP[exp]}"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __reduce__(self) -> tuple[Any, tuple[int, Format]]:
        return (Quantity.from_nanos, (self._nanos, self._format))

    def canonical(self) -> str:
        """Canonical form as the API server stores it ("1024Mi" -> "1Gi", "1000m" -> "1")."""
        return str(self)

    def as_integer(self) -> int | None:
        """The value as an int when it is whole, else None."""
        n = self.num
        return n if type(n) is int else None

    # -- pydantic integration ---------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        def validate(v: Any) -> Quantity:
            if isinstance(v, Quantity):
                return v
            # The Kubernetes JSON decoder trims surrounding space before parsing.
            return cls.parse(v.strip() if isinstance(v, str) else v)

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda q: q.canonical(), when_used="always"
            ),
            json_schema_input_schema=core_schema.str_schema(),
        )


def q(text: str | int) -> Quantity:
    """Short constructor for code and tests."""
    return Quantity.parse(text.strip() if isinstance(text, str) else text)
