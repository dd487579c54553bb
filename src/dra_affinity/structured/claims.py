"""Claims as the allocator reads them: requests, their alternatives, constraints.

Built once per scheduling cycle from a ResourceClaim and its DeviceClasses (by the
scheduler's PreFilter); plain data, so the allocator never reads API objects. Slotted
and not frozen: a frozen dataclass sets each field through ``object.__setattr__``, and
these are built for every claim of every cycle; nothing changes them once built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dra_affinity.api.quantity import Quantity


@dataclass(slots=True)
class RequestSpec:
    """One way to satisfy a request: the request itself or one subrequest."""

    name: str  # "req" or "req/sub" (as written into allocation results)
    parent: str
    class_name: str
    selectors: tuple[str, ...]  # class selectors first, then the request's
    all_devices: bool  # allocationMode All
    count: int
    capacity: Mapping[str, Quantity]
    # Derived once (read for every device and cycle): the capacity requests as a
    # hashable key, and whether any of them asks for a positive amount.
    capacity_key: tuple[tuple[str, Quantity], ...] = field(init=False, repr=False, compare=False)
    needs_capacity: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.capacity_key = tuple(sorted(self.capacity.items()))
        self.needs_capacity = any(q.num > 0 for q in self.capacity.values())


@dataclass(slots=True)
class ClaimRequest:
    name: str
    alternatives: tuple[RequestSpec, ...]


@dataclass(frozen=True)
class Constraint:
    """A claim's device constraint over some of its requests (or all, when empty).

    ``matchAttribute``: every device picked for the covered requests has the
    attribute, all with the same typed value. ``distinctAttribute`` (KEP-5075): every
    such device has it, with pairwise different values, so two covered requests never
    share one multi-allocatable device."""

    requests: tuple[str, ...]
    attribute: str  # fully qualified
    distinct: bool = False

    @property
    def field(self) -> str:
        return "distinctAttribute" if self.distinct else "matchAttribute"


@dataclass(slots=True)
class ClaimSpec:
    """A claim to allocate, reduced to what the allocator needs."""

    key: str  # namespace/name
    uid: str
    requests: tuple[ClaimRequest, ...]
    constraints: tuple[Constraint, ...] = ()
