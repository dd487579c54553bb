"""Inputs and outputs of the per-node allocator.

Everything here is plain data built once per cluster snapshot (devices,
pools) or per scheduling cycle (claims): the allocator itself is a pure
function over these, with no I/O and no clock.
"""

from __future__ import annotations

import enum
import functools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dra_affinity.api.quantity import Quantity
from dra_affinity.api.resource import Device, DeviceCapacity
from dra_affinity.cel import Extractor

PoolID = tuple[str, str]


@dataclass(frozen=True)
class PoolInfo:
    """What the allocator needs to know about a pool (gathered once per snapshot)."""

    driver: str
    name: str
    generation: int
    declares_sharing_affinity: bool
    extractors: tuple[Extractor, ...]
    metadata_slices: tuple[str, ...]
    incomplete_reason: str | None = None
    invalid_reason: str | None = None
    affinity_invalid_reason: str | None = None
    # (slice, message) of each cross-slice problem (Pool.affinity_problems).
    affinity_problems: tuple[tuple[str, str], ...] = ()
    # Experiment: extractors the pool marks preferred (not in ``extractors``).
    preferred_extractors: tuple[Extractor, ...] = ()
    # No reason of its own rules the pool out (read by the pool gate for every device
    # on every pass, where three separate reads would be).
    sound: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sound", not (self.incomplete_reason or self.invalid_reason
                                               or self.affinity_invalid_reason))

    @property
    def id(self) -> PoolID:
        return (self.driver, self.name)

    @functools.cached_property
    def extractor_set(self) -> tuple[tuple[str, str], ...]:
        """Identity of the extractor set: memo key for extraction results (computed once)."""
        return tuple((e.name, e.expression) for e in self.extractors)

    @functools.cached_property
    def extraction_token(self) -> str:
        """(driver, extractor set) as one string: a memo key part whose hash Python caches,
        where the tuple's would be recomputed on every lookup. Interned: the pools of
        one driver share one extractor set, so their tokens are one object, compared by
        identity in the memo's keys."""
        return sys.intern(repr((self.driver, self.extractor_set)))


@dataclass(frozen=True, eq=False)
class DeviceInfo:
    """One device as the allocator sees it. Identity is by ``id``."""

    id: str
    driver: str
    pool: str
    name: str
    slice_name: str
    device: Device
    pool_info: PoolInfo
    order: int  # first-fit position in the snapshot
    activation: Mapping[str, Any] = field(repr=False)
    # Derived once: these are read for every device on every Filter pass.
    multi: bool = field(init=False, repr=False)
    capacity: Mapping[str, DeviceCapacity] = field(init=False, repr=False)
    # Each capacity's value as a number (``capacity[name].value.num``), read by every
    # capacity check without going through the API objects.
    limits: Mapping[str, int | Fraction] = field(init=False, repr=False)
    # Sharing affinity applies: a multi-allocatable device in a pool with extractors.
    gated: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        multi = bool(self.device.allow_multiple_allocations)
        object.__setattr__(self, "multi", multi)
        object.__setattr__(self, "capacity", self.device.capacity)
        object.__setattr__(self, "limits", _shared_limits(
            tuple((n, c.value.num) for n, c in self.device.capacity.items())))
        object.__setattr__(self, "gated", multi and self.pool_info.declares_sharing_affinity)

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceInfo) and other.id == self.id


# Devices published alike have equal capacities: one read-only map serves them all.
_LIMITS: dict[tuple[tuple[str, int | Fraction], ...], Mapping[str, int | Fraction]] = {}
_LIMITS_MAX = 4096


def _shared_limits(items: tuple[tuple[str, int | Fraction], ...]) -> Mapping[str, int | Fraction]:
    """The one map for these capacity values (bounded: starts afresh when full)."""
    hit = _LIMITS.get(items)
    if hit is None:
        if len(_LIMITS) >= _LIMITS_MAX:
            _LIMITS.clear()
        hit = _LIMITS[items] = dict(items)
    return hit


class Result(enum.Enum):
    """Outcome of one scheduling attempt (SCENARIO.md ``result``)."""

    SCHEDULED = "Scheduled"
    UNSCHEDULABLE = "Unschedulable"
    UNRESOLVABLE = "UnschedulableAndUnresolvable"
    ERROR = "Error"


@dataclass(frozen=True)
class Reason:
    """Why a device or node was not viable (or why scheduling stopped)."""

    code: str
    message: str
    node: str | None = None
    device: str | None = None
    # The kube-scheduler filter plugin that rejected the node, and the short texts its
    # FitError counts ("0/6 nodes are available: 3 node(s) didn't match ..."); empty
    # for DRA's reasons, which count under their code.
    plugin: str = ""
    fit: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "node": self.node, "device": self.device, "message": self.message}


class Abort(Exception):
    """Stops the whole scheduling attempt for the pod (not just this device)."""

    def __init__(self, result: Result, reason: Reason) -> None:
        super().__init__(reason.message)
        self.result = result
        self.reason = reason


@dataclass(frozen=True)
class PlannedShare:
    """One device picked for one (sub)request of a claim on this node."""

    claim: str
    request: str  # "req" or "req/sub" as written into the allocation result
    device: DeviceInfo
    share_id: str | None
    consumed: tuple[tuple[str, Quantity], ...]
    keys: tuple[tuple[str, str], ...] | None  # effective affinity map; None when not gated
    exclusive: bool
    reused_lock: bool = False  # joined an existing matching lock (metrics)
    preferred: tuple[tuple[str, str], ...] | None = None  # soft keys (experiment)


class NodeResult:
    """A node's verdict. Reasons are rendered on first access: a node that is
    skipped over on the way to a feasible one never pays for its messages."""

    __slots__ = ("_reason_fn", "_reasons", "codes", "node", "ok", "shares")

    def __init__(self, node: str, ok: bool, shares: list[PlannedShare] | None = None,
                 reasons: list[Reason] | Callable[[], list[Reason]] | None = None,
                 codes: list[str] | None = None) -> None:
        self.codes = codes if codes is not None else []  # reason codes, without rendering
        self.node = node
        self.ok = ok
        self.shares = shares if shares is not None else []
        self._reasons: list[Reason] | None = None
        self._reason_fn: Callable[[], list[Reason]] | None = None
        if callable(reasons):
            self._reason_fn = reasons
        else:
            self._reasons = list(reasons or [])

    @property
    def reasons(self) -> list[Reason]:
        if self._reasons is None:
            assert self._reason_fn is not None
            self._reasons = self._reason_fn()
            self._reason_fn = None
        return self._reasons
