"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``).

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
from zero) to 1n, and binary-SI and decimal-SI values are capped at 2**63-1
in magnitude. ``str()`` is the Kubernetes canonical form ("1Gi", "500m",
"1536Mi", "1500", "1k"): the suffix family of the parsed text is kept and the
largest exponent that keeps the mantissa an integer is chosen.

The value is stored as an integer number of nano-units, so arithmetic,
comparison and hashing are exact; ``Quantity.parse("1k") == Quantity.parse("1000")``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Final, Literal, cast, final

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

_FORMATS: Final = frozenset({BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT})
_NANO: Final = 10**9
_MAX_ALLOWED: Final = 2**63 - 1
# Bound on decimal exponents. Kubernetes keeps an arbitrary-precision decimal
# with a separate scale; we materialize the value, so "1e999999999" would be
# a denial of service. No real quantity comes near this.
_MAX_EXPONENT: Final = 1000

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


def _split(s: str) -> tuple[bool, str, str, str]:
    """Split into (positive, numerator digits, denominator digits, suffix) like Kubernetes."""
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


def _interpret_suffix(s: str, suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        body = suffix[1:]
        digits = body[1:] if body[0] in "+-" else body
        if digits and all(c in _DIGITS for c in digits):
            exp = int(body)
            if abs(exp) > 2**31 - 1:
                raise ValueError(f"invalid quantity {s!r}: exponent out of range")
            return 10, exp, DECIMAL_EXPONENT
    raise ValueError(f"invalid quantity {s!r}: unable to parse quantity's suffix {suffix!r}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


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
        return Quantity(_ceil_div(frac.numerator * _NANO, frac.denominator), cast(Format, fmt))
    return None


@final
class Quantity:
    """An exact Kubernetes resource quantity. Immutable and hashable."""

    __slots__ = ("_format", "_nanos")
    _nanos: int
    _format: Format

    def __init__(self, nanos: int, fmt: Format = DECIMAL_SI) -> None:
        """Build from an integer count of nano-units (1 == 1e-9). Prefer :meth:`parse`."""
        if type(nanos) is not int:
            raise TypeError("Quantity nanos must be an int")
        if fmt not in (BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT):
            raise ValueError(f"unknown quantity format {fmt!r}")
        object.__setattr__(self, "_nanos", nanos)
        object.__setattr__(self, "_format", fmt)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    # -- construction ---------------------------------------------------

    @classmethod
    def parse(cls, s: str) -> Quantity:
        """Parse a Kubernetes quantity string; ``ValueError`` with a clear message if invalid."""
        if not isinstance(s, str):
            raise ValueError(f"invalid quantity {s!r}: not a string")
        if not s:
            raise ValueError("invalid quantity '': quantities must not be empty")
        positive, num, denom, suffix = _split(s)
        if len(num) + len(denom) > 400:
            raise ValueError(f"invalid quantity {s[:40]!r}...: too many digits")
        base, exp, fmt = _interpret_suffix(s, suffix)
        if fmt == DECIMAL_EXPONENT and exp + len(num) > _MAX_EXPONENT:
            raise ValueError(f"invalid quantity {s!r}: value too large")
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
        return cls(nanos if positive else -nanos, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """An integer quantity (like ``resource.NewQuantity``)."""
        return cls(int(value) * _NANO, fmt)

    @classmethod
    def from_milli(cls, value: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """A quantity of ``value`` thousandths (like ``resource.NewMilliQuantity``)."""
        return cls(int(value) * 10**6, fmt)

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
        return self._nanos % _NANO == 0 and -(2**63) <= self._nanos // _NANO <= _MAX_ALLOWED

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
            return Quantity(other * _NANO, DECIMAL_EXPONENT)
        return None

    def __add__(self, other: object) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        fmt = o._format if self._nanos == 0 else self._format
        return Quantity(self._nanos + o._nanos, fmt)

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
        return Quantity(self._nanos - o._nanos, fmt)

    def __neg__(self) -> Quantity:
        return Quantity(-self._nanos, self._format)

    def __abs__(self) -> Quantity:
        return Quantity(abs(self._nanos), self._format)

    def __mul__(self, other: object) -> Quantity:
        if type(other) is not int:
            return NotImplemented
        return Quantity(self._nanos * other, self._format)

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

    def __reduce__(self) -> tuple[type[Quantity], tuple[int, Format]]:
        return (Quantity, (self._nanos, self._format))
