"""Consumable capacity (KEP-5075): how much of a device a request consumes.

A request names amounts per capacity; the device's ``requestPolicy`` turns that
into what is actually consumed (default when unset, rounded up to a valid
value or range step). Without a policy and without a request the whole
capacity is consumed, so a claim that does not ask for a share gets the device
to itself, as upstream does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from dra_affinity.api.quantity import Quantity
from dra_affinity.api.resource import DeviceCapacity


class CapacityRequestError(ValueError):
    """The request cannot be satisfied by this device's requestPolicy."""


def consumed_amount(name: str, cap: DeviceCapacity, requested: Quantity | None) -> Quantity:
    """What a request consumes of one capacity of a multi-allocatable device."""
    policy = cap.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            requested = policy.default
        else:
            return cap.value
    if requested.value < 0:
        raise CapacityRequestError(f"capacity {name}: negative request {requested}")
    if policy is None:
        return requested
    if policy.valid_values:
        for v in sorted(policy.valid_values):
            if v.value >= requested.value:
                return v
        raise CapacityRequestError(
            f"capacity {name}: request {requested} exceeds every valid value "
            f"({', '.join(str(v) for v in policy.valid_values)})"
        )
    rng = policy.valid_range
    if rng is not None:
        amount = requested.value
        if amount < rng.min.value:
            amount = rng.min.value
        if rng.step is not None and rng.step.value > 0:
            steps = (amount - rng.min.value) / rng.step.value
            whole = -(-steps.numerator // steps.denominator)  # ceil
            amount = rng.min.value + Fraction(whole) * rng.step.value
        if rng.max is not None and amount > rng.max.value:
            raise CapacityRequestError(
                f"capacity {name}: request {requested} is above the maximum {rng.max}"
            )
        return Quantity(amount, requested.format)
    return requested


def plan_consumption(
    capacity: Mapping[str, DeviceCapacity], requests: Mapping[str, Quantity]
) -> dict[str, Quantity]:
    """Consumed amount for every capacity of the device; raises CapacityRequestError."""
    for name in requests:
        if name not in capacity:
            raise CapacityRequestError(f"device has no capacity {name}")
    return {name: consumed_amount(name, cap, requests.get(name)) for name, cap in capacity.items()}


def fits(
    limits: Mapping[str, int | Fraction],
    used: Mapping[str, int | Fraction],
    extra: Iterable[tuple[str, Quantity]],
) -> str | None:
    """None when ``extra`` (capacity name, amount) fits beside ``used`` within the device's
    ``limits`` (``DeviceInfo.limits``; exact numbers); else the first name that overflows."""
    for name, amount in extra:
        if used.get(name, 0) + amount.num > limits[name]:
            return name
    return None
