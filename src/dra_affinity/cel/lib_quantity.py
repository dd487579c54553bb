"""Kubernetes' internal quantity representation, for ``isInteger()`` and ``asInteger()``.

``resource.Quantity`` holds either a scaled int64 (``int64Amount``: value and
a power-of-ten scale) or an arbitrary-precision ``inf.Dec``, and
``Quantity.AsInt64`` (which the CEL library's ``isInteger``/``asInteger`` call)
answers from that representation, not from the value: ``1.5Gi`` (a binary
suffix with a fraction takes the decimal path) or ``1.0`` (scale -1) are not
"integers" there even though their values are whole. Our :class:`Quantity`
stores the exact value only, so this module recomputes the representation the
way ``ParseQuantity`` chooses it and tracks it through ``add``/``sub`` as
``Quantity.Add``/``Sub`` do. A quantity that did not come from CEL (a device
capacity) is taken as parsed from its canonical text.
"""

from __future__ import annotations

from typing import Final

from dra_affinity.api.numbers import INT64_MAX, INT64_MIN
from dra_affinity.api.quantity import (
    interpret_suffix,
    split_quantity,
)

from .quantity import BINARY_SI, Quantity

# An int64Amount as (value, scale); None stands for the inf.Dec representation.
Amount = tuple[int, int] | None

_MAX_INT64_FACTORS: Final = 18
_NANO: Final = -9
_UNSET: Final = object()


def _fits(v: int) -> bool:
    return INT64_MIN <= v <= INT64_MAX


def parse_amount(text: str) -> Amount:
    """The representation ``ParseQuantity(text)`` builds (``text`` must be a valid quantity)."""
    if text == "0":
        return (0, 0)
    positive, num, denom, suffix = split_quantity(text)
    _base, exponent, fmt = interpret_suffix(text, suffix)
    mantissa = 1
    if fmt == BINARY_SI:
        scale = 0
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - (exponent * 3) // 10 - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            value = int(num + denom)  # at most 18 digits: fits int64
            result = value * mantissa
            if _fits(result):
                return (result if positive else -result, scale)
    return None


def amount_of(q: Quantity) -> Amount:
    """The representation of ``q``: recorded by CEL, else that of its canonical text."""
    a = getattr(q, "_amount", _UNSET)
    if a is _UNSET:
        return parse_amount(str(q))
    return a  # type: ignore[return-value]


def with_amount(q: Quantity, amount: Amount) -> Quantity:
    """Record ``amount`` as ``q``'s Kubernetes representation (``q`` is freshly built)."""
    object.__setattr__(q, "_amount", amount)
    return q


def _scale_up(value: int, by: int) -> int | None:
    """positiveScaleInt64: value x 10^by, or None on int64 overflow."""
    if value == 0:
        return 0
    if by > 18:
        return None
    r = value * 10**by
    return r if _fits(r) else None


def add_amounts(a: Amount, b: Amount) -> Amount:
    """``int64Amount.Add`` (None once either side, or the result, needs ``inf.Dec``)."""
    if a is None or b is None:
        return None
    (av, asc), (bv, bsc) = a, b
    if bv == 0:
        return a
    if av == 0:
        return b
    if asc == bsc:
        s = av + bv
        return (s, asc) if _fits(s) else None
    if asc > bsc:
        c = _scale_up(av, asc - bsc)
        if c is None or not _fits(c + bv):
            return None
        return (c + bv, bsc)
    c = _scale_up(bv, bsc - asc)
    if c is None or not _fits(av + c):
        return None
    return (av + c, asc)


def negate(a: Amount) -> Amount:
    """``int64Amount{-value, scale}`` (Go wraps -MinInt64 to itself)."""
    if a is None:
        return None
    v, s = a
    return (v if v == INT64_MIN else -v, s)


def as_int64(a: Amount) -> int | None:
    """``Quantity.AsInt64``: the value when the representation is a whole int64, else None."""
    if a is None:
        return None
    v, s = a
    if s == 0:
        return v
    if s < 0:
        return None
    return _scale_up(v, s)
