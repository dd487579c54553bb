"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``).

Capacity in DRA is written as quantities ("16", "1Gi", "500m"). Consumable
capacity (KEP-5075) adds and compares them, so the value is kept exact as a
:class:`fractions.Fraction`; floats would make "0.1 + 0.2" over-commit.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import total_ordering
from typing import Any, Literal

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_BY_EXP = {v: k for k, v in _BINARY.items()}

# Same grammar as apimachinery: <sign><digits>[.<digits>]<suffix>, suffix one of
# the binary or decimal SI suffixes, or a decimal exponent e/E<int>.
_QUANTITY_RE = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)
# apimachinery rejects absurd exponents; the same bound keeps Fraction math cheap.
_MAX_EXPONENT = 64
_MAX_LENGTH = 128


@total_ordering
class Quantity:
    """An exact Kubernetes quantity with the format it was written in."""

    __slots__ = ("_hash", "_str", "format", "num", "value")

    value: Fraction
    format: Format
    # The value as an int when whole (the common case), else the Fraction:
    # int arithmetic is far cheaper than Fraction's in the allocator's hot path.
    num: int | Fraction

    def __init__(self, value: Fraction | int, fmt: Format = "DecimalSI") -> None:
        self.value = Fraction(value)
        self.format = fmt
        self.num = self.value.numerator if self.value.denominator == 1 else self.value
        self._hash = hash(self.value)
        self._str: str | None = None

    @classmethod
    def parse(cls, text: str | int | float) -> Quantity:
        """Parse a quantity as Kubernetes does; raises ``ValueError`` naming the input."""
        if isinstance(text, bool):
            raise ValueError(f"quantities must be strings or numbers, not {text!r}")
        if isinstance(text, int | float):
            if isinstance(text, float) and (text != text or text in (float("inf"),
                                                                     float("-inf"))):
                raise ValueError(f"quantity {text!r} is not a finite number")
            q = cls(Fraction(repr(text)) if isinstance(text, float) else Fraction(text),
                    "DecimalSI")
            # A number must be a quantity that could have been written as text: its
            # canonical form has to parse back (the text rules bound length and exponent).
            try:
                cls.parse(q.canonical())
            except ValueError:
                raise ValueError(f"quantity {text!r} is out of range") from None
            return q
        if not isinstance(text, str):
            raise ValueError(f"quantities must be strings or numbers, not {type(text).__name__}")
        s = text.strip()
        if not s or len(s) > _MAX_LENGTH:
            raise ValueError(f"quantity {text!r} is empty or too long")
        m = _QUANTITY_RE.match(s)
        if m is None:
            raise ValueError(
                f"quantities must match the regular expression "
                f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
            )
        num = Fraction(m.group("num"))
        suffix = m.group("suffix") or ""
        fmt: Format
        if suffix in _BINARY:
            value = num * (1024 ** _BINARY[suffix])
            fmt = "BinarySI"
        elif suffix in _DECIMAL:
            value = num * (Fraction(10) ** _DECIMAL[suffix])
            fmt = "DecimalSI"
        else:
            exp = int(suffix[1:])
            if abs(exp) > _MAX_EXPONENT:
                raise ValueError(f"quantity {text!r} has an exponent out of range")
            value = num * (Fraction(10) ** exp)
            fmt = "DecimalExponent"
        return cls(value, fmt)

    # -- arithmetic used by consumable capacity ---------------------------------
    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.format)

    def __mul__(self, n: int) -> Quantity:
        return Quantity(self.value * n, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.value, self.format)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return self._hash

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_zero(self) -> bool:
        return self.value == 0

    # -- printing ----------------------------------------------------------------
    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"

    def canonical(self) -> str:
        """Canonical form as the API server stores it ("1024Mi" -> "1Gi", "1000m" -> "1")."""
        if self._str is None:
            self._str = self._canonical()
        return self._str

    def _canonical(self) -> str:
        v = self.value
        if v == 0:
            return "0"
        sign = "-" if v < 0 else ""
        a = abs(v)
        if self.format == "BinarySI" and a.denominator == 1 and a >= 1024:
            n = a.numerator
            exp = 0
            while exp < 6 and n % 1024 == 0:
                n //= 1024
                exp += 1
            if exp:
                return f"{sign}{n}{_BINARY_BY_EXP[exp]}"
        if self.format == "BinarySI" and a.denominator == 1:
            return f"{sign}{a.numerator}"
        # Decimal: smallest mantissa that is an integer, exponent a multiple of 3;
        # like apimachinery, precision below nano is rounded up.
        exp = -9
        scaled = a * Fraction(10) ** 9
        if scaled.denominator != 1:
            scaled = Fraction(-(-scaled.numerator // scaled.denominator))
        n = scaled.numerator
        while exp < 18 and n % 1000 == 0:
            n //= 1000
            exp += 3
        if self.format == "DecimalExponent":
            return f"{sign}{n}" if exp == 0 else f"{sign}{n}e{exp}"
        return f"{sign}{n}{_DECIMAL_BY_EXP[exp]}"

    def as_integer(self) -> int | None:
        """The value as an int when it is whole, else None."""
        return self.value.numerator if self.value.denominator == 1 else None

    # -- pydantic integration ----------------------------------------------------
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        def validate(v: Any) -> Quantity:
            if isinstance(v, Quantity):
                return v
            return cls.parse(v)

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda q: q.canonical(), when_used="always"
            ),
            json_schema_input_schema=core_schema.str_schema(),
        )


def q(text: str | int) -> Quantity:
    """Short constructor for code and tests."""
    return Quantity.parse(text)
