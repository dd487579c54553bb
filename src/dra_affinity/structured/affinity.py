"""KEP-5981's rule, written once: the pool gate, and "clean, or locked to equal keys".

Every place that decides whether a device may take a request's affinity keys
asks here: the allocator's device check (Filter), Reserve's re-check, the lock
fold of :class:`~dra_affinity.structured.state.AllocatedState` (bind and
reconstruction), the free-capacity index, and affinity-aware ranking. So the
rule cannot drift between the reference path and the fast paths.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from dra_affinity.features import name_of
from dra_affinity.structured import reasons
from dra_affinity.structured.model import DeviceInfo

AffinityKeys = tuple[tuple[str, str], ...]  # sorted (key, value) pairs: hashable, comparable


class AffinityStatus(enum.IntEnum):
    """KEP-5981 ``AffinityStatus``. The zero value is Clean, so absence means Clean."""

    CLEAN = 0
    LOCKED = 1
    UNRECONSTRUCTABLE = 2

    @property
    def label(self) -> str:
        return ("Clean", "Locked", "Unreconstructable")[self.value]


@dataclass(frozen=True)
class AffinityState:
    status: AffinityStatus = AffinityStatus.CLEAN
    # Set only when Locked (KEP: nil for Clean and Unreconstructable).
    locked_affinity: AffinityKeys | None = None
    reason: str = ""  # why Unreconstructable, for diagnostics

    def lock_dict(self) -> dict[str, str]:
        return dict(self.locked_affinity or ())


CLEAN = AffinityState()


class Lock(enum.IntEnum):
    """How a device's affinity state meets a request's keys."""

    CLEAN = 0  # no lock: the request sets it
    MATCH = 1  # locked to equal keys: the request joins (compatible reuse)
    MISMATCH = 2  # locked to other keys
    UNKNOWN = 3  # Unreconstructable: filtered until the device drains


def check_lock(state: AffinityState, keys: AffinityKeys, pending: AffinityKeys | None = None) -> Lock:
    """The lock rule: a device admits keys when it is clean or locked to equal keys.

    ``pending``: keys the same attempt already picked the device for (another request
    of the pod, an earlier pod of a batch); a clean device is as good as locked to them.
    Keys are compared by identity first: extraction results and locks share one tuple
    per distinct key set, so equal keys are usually the same object."""
    status = state.status
    if status is AffinityStatus.CLEAN:
        if pending is None:
            return Lock.CLEAN
        lock: AffinityKeys | None = pending
    elif status is AffinityStatus.LOCKED:
        lock = state.locked_affinity
    else:
        return Lock.UNKNOWN
    return Lock.MATCH if lock is keys or lock == keys else Lock.MISMATCH


def admitted_keys(state: AffinityState) -> AffinityKeys | None:
    """The keys a device in ``state`` admits, as :func:`check_lock` decides: ``()`` when
    it is clean (any keys), its lock's keys when locked, None when Unreconstructable
    (none). For indexes that group devices by what they admit."""
    status = state.status
    if status is AffinityStatus.CLEAN:
        return ()
    if status is AffinityStatus.LOCKED:
        return state.locked_affinity
    return None


PoolGate = tuple[str, Callable[[], str]]


def pool_gate(d: DeviceInfo, affinity_enabled: bool) -> PoolGate | None:
    """Why the device's pool rules it out before any per-device check, or None.

    Fail closed: an invalid pool is never allocated from; a pool declaring sharing
    affinity is not allocated from by a scheduler with the feature off (it cannot
    honour the locks); no device of an incomplete pool is allocated from, whatever
    its kind (Kubernetes >= 1.35: the missing slices may move devices or counters,
    and for sharing affinity the missing slice may be the metadata slice, so the
    extractors are unknown); a gated device of a pool whose affinity metadata is
    invalid is not allocated from.

    An incomplete pool is reported as ``AffinityPoolIncomplete`` for a
    multi-allocatable device with the feature on (the device sharing affinity
    would gate), as ``PoolIncomplete`` otherwise."""
    pi = d.pool_info
    if pi.sound and (affinity_enabled or not pi.declares_sharing_affinity):
        return None  # the common case: none of the reasons below applies
    if pi.invalid_reason:
        return reasons.POOL_INVALID, lambda: f"pool {pi.driver}/{pi.name} is invalid: {pi.invalid_reason}"
    if pi.declares_sharing_affinity and not affinity_enabled:
        return reasons.AFFINITY_FEATURE_DISABLED, lambda: (
            f"device {d.id}: pool {pi.driver}/{pi.name} declares sharingAffinity but "
            f"the {name_of('sharing_affinity')} feature gate is disabled in the scheduler")
    if pi.incomplete_reason:
        code = reasons.AFFINITY_POOL_INCOMPLETE if d.multi and affinity_enabled else reasons.POOL_INCOMPLETE
        return code, lambda: f"device {d.id}: {pi.incomplete_reason}"
    if d.gated and pi.affinity_invalid_reason:
        return reasons.AFFINITY_INVALID_POOL, lambda: (
            f"device {d.id}: pool {pi.driver}/{pi.name} is invalid for sharing "
            f"affinity: {pi.affinity_invalid_reason}")
    return None


def gated(d: DeviceInfo, affinity_enabled: bool) -> bool:
    """Sharing affinity applies to this device: multi-allocatable, in a pool with
    extractors, with the feature on."""
    return d.gated and affinity_enabled


def unknown_message(d: DeviceInfo, state: AffinityState) -> str:
    base = f"device {d.id} has unknown affinity state due to legacy or invalid active claims"
    return f"{base} ({state.reason})" if state.reason else base
