"""Restart and pool reconciliation: AffinityStates rebuilt from what the cluster holds.

The KEP keeps locks in the scheduler's memory only. On start, every allocated
claim is accounted again: for each result on a gated device, the pool's
extractors are re-run on the claim's configs and the keys folded into the
device's lock, exactly as Reserve would. A claim whose keys cannot be derived
(pool invalid for sharing affinity, request gone, extraction failing) makes the
device Unreconstructable: filtered until it drains (fail closed).

When a pool's extractors change while devices are in use, those devices are
re-derived the same way; a lock never silently changes value under running
pods: if the claims now extract other keys, the device is Unreconstructable.

A republish passes through a window where the pool is incomplete (a new
generation partly published, or slices deleted and recreated). Nothing is
decided in the window: a device's lock or quarantine is kept as it was, and
its shares keep their keys, because the slices that would say otherwise may
be the ones still missing (no device of an incomplete pool is allocated
meanwhile). A claim accounted during the window (a restart, or a claim
allocated elsewhere) is *pending*: its keys are derived when the pool is
complete again. Only then are the device's claims re-derived under the
published extractors and compared with what the device was: same keys stay
Locked, anything else is Unreconstructable until the device drains.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dra_affinity.api.keys import key_of
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.resource import DeviceClass, ResourceClaim, parse_device_id
from dra_affinity.cel import OutcomeKind
from dra_affinity.observe.events import Recorder
from dra_affinity.observe.metrics import EVALUATIONS, SchedulerMetrics
from dra_affinity.structured.affinity import (
    AffinityKeys,
    AffinityState,
    AffinityStatus,
    Lock,
    check_lock,
    gated,
)
from dra_affinity.structured.extraction import ExtractionMemo
from dra_affinity.structured.model import DeviceInfo, PoolInfo
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import Share

from .cache import ResultTuple, SchedulerCache
from .reserve import result_tuples


class Reconstructor:
    """Keeps the cache's allocations and locks equal to the cluster's allocated claims."""

    def __init__(self, cache: SchedulerCache, metrics: SchedulerMetrics, recorder: Recorder) -> None:
        self.cache = cache
        self.metrics = metrics
        self.recorder = recorder
        # Devices whose affinity is unknown only because their pool was incomplete when a
        # claim on them was accounted with no lock known before: Unreconstructable for
        # now, decided from the claims (not sticky) once the pool is complete.
        self.pending: set[str] = set()

    def rebuild(self) -> None:
        """Restart: drop the cache and account every allocated claim again."""
        cache = self.cache
        cache.reset()
        self.pending.clear()
        snap = cache.snapshot()
        for claim in cache.view.claims():
            if claim.status.allocation is not None:
                self.record_claim(claim, snap)
        # What the pools were at this start: the next slice change is compared with it,
        # so a pool that completes after a restart is seen to have changed.
        cache.reconciled_pools = dict(snap.pools)

    def sync_claim(self, old: TypedObject | None, new: TypedObject | None) -> None:
        """A claim changed in the cluster: apply the difference to the cache, unless a
        binding cycle is writing it (that cycle accounts it when it ends)."""
        obj = new if new is not None else old
        if obj is None:
            return
        key = key_of(obj)
        if key in self.cache.in_flight:
            return
        self.account(key, new if isinstance(new, ResourceClaim) else None)

    def account(self, key: str, claim: ResourceClaim | None) -> None:
        """Make the cache hold ``claim``'s allocation as given (None: the claim is gone)."""
        want = result_tuples(claim)
        have = self.cache.recorded.get(key, [])
        if want == have or sorted(want, key=str) == sorted(have, key=str):
            return  # (the first test is the common case: this scheduler's own write)
        self.forget_claim(key)
        if claim is not None and claim.status.allocation is not None:
            self.record_claim(claim, self.cache.snapshot())

    def forget_claim(self, key: str) -> None:
        state = self.cache.state
        for dev, _req, _sid in self.cache.recorded.pop(key, []):
            state.remove(dev, key)
            if not state.is_allocated(dev):
                self.pending.discard(dev)  # drained: clean, nothing left to decide

    # ------------------------------------------------------------------ accounting
    def derive_keys(self, claim: ResourceClaim, request: str, info: DeviceInfo,
                    memo: ExtractionMemo) -> tuple[AffinityKeys | None, str]:
        """Re-run extraction for a bound share; None (with why) when it cannot be known."""
        pi = info.pool_info
        if pi.incomplete_reason:
            return None, f"pool incomplete at reconstruction: {pi.incomplete_reason}"
        if pi.affinity_invalid_reason:
            return None, f"pool invalid: {pi.affinity_invalid_reason}"
        class_name = _request_class(claim, request)
        if class_name is None:
            return None, f"request {request} not found in claim"
        res = memo.evaluate(claim, request, class_name, pi)
        if res.kind is OutcomeKind.OK:
            return res.keys, ""
        return None, f"{res.kind.value}: {res.message}"

    def record_claim(self, claim: ResourceClaim, snap: Snapshot) -> None:
        """Account a bound claim's allocation (restart, or a claim allocated elsewhere)."""
        alloc = claim.status.allocation
        if alloc is None:
            return
        cache = self.cache
        state = cache.state
        enabled = cache.features.sharing_affinity
        key = key_of(claim)
        memo = ExtractionMemo({key: claim}, cache.view.classes())
        recorded: list[ResultTuple] = []
        for r in alloc.devices.results:
            did = r.device_id
            info = snap.devices.get(did)
            multi = info.multi if info is not None else r.share_id is not None
            consumed = tuple(sorted(r.consumed_capacity.items()))
            window = _window(did, info, snap) if enabled and multi else None
            if window is not None:
                self._record_pending(did, Share(key, r.request, r.share_id, consumed, None,
                                                tentative=False, gated=True), window)
                recorded.append((did, r.request, r.share_id))
                continue
            is_gated = info is not None and gated(info, enabled)
            keys = None
            why = ""
            if is_gated and info is not None:
                keys, why = self.derive_keys(claim, r.request, info, memo)
            share = Share(key, r.request, r.share_id, consumed, keys, tentative=False, gated=is_gated)
            before = state.affinity(did)
            state.add(did, share, exclusive=not multi)
            after = state.affinity(did)
            if is_gated and after.status is AffinityStatus.UNRECONSTRUCTABLE and (
                    before.status is not AffinityStatus.UNRECONSTRUCTABLE):
                self.recorder.warn(
                    f"device {did} marked Unreconstructable: "
                    f"{after.reason if keys is not None else why} "
                    f"(claim {key}, request {r.request})", device=did)
            recorded.append((did, r.request, r.share_id))
        self.metrics.pending[EVALUATIONS] += memo.evaluations
        cache.recorded[key] = recorded

    def _record_pending(self, did: str, share: Share, window: str) -> None:
        """Account a share on a device whose pool is incomplete: its keys cannot be known
        yet. A lock or quarantine the device has is kept (the share is re-derived with the
        others when the pool completes); a device with none is Unreconstructable for now,
        and decided from its claims once the pool is complete."""
        state = self.cache.state
        before = state.affinity(did)
        state.add(did, share, exclusive=False)  # folds keys None: Unreconstructable
        if before.status is AffinityStatus.CLEAN or did in self.pending:
            self.pending.add(did)
            state.set_affinity(did, AffinityState(
                AffinityStatus.UNRECONSTRUCTABLE, None,
                f"{window}: affinity is decided when the pool is complete"))
        else:
            state.set_affinity(did, before)

    # ------------------------------------------------------------------ pools
    def reconcile_pools(self) -> None:
        """Re-derive locks of in-use devices whose pool's extractors changed."""
        cache = self.cache
        # A pending device that drained is clean: nothing is left to decide for it.
        self.pending.intersection_update(cache.state.devices())
        old = cache.reconciled_pools
        snap = cache.snapshot()
        new = snap.pools
        cache.reconciled_pools = dict(new)
        changed = {pid for pid in set(old) | set(new)
                   if _affinity_sig(old.get(pid)) != _affinity_sig(new.get(pid))}
        if not changed:
            return
        classes = cache.view.classes()
        for did in sorted(cache.state.devices()):
            info = snap.devices.get(did)
            pid = info.pool_info.id if info is not None else _pool_of(did)
            if pid not in changed:
                continue
            if info is None or _window(did, info, snap) is not None:
                # Republish in progress (the pool is incomplete), or the device is not
                # published at all now: nothing is known, so nothing changes. The device
                # is not allocatable meanwhile; it is re-derived when its pool is
                # complete and publishes it again.
                continue
            self._reconcile_device(did, info, cache.view.claim, classes)

    def _reconcile_device(self, did: str, info: DeviceInfo,
                          claim_of: Callable[[str], ResourceClaim | None],
                          classes: Mapping[str, DeviceClass]) -> None:
        """Re-derive an in-use device of a complete pool whose extractors (or completeness)
        changed, and compare with what the device was before. Its claims are read one by
        one (a cluster's view types each when it is read: not every claim at once)."""
        state = self.cache.state
        shares = list(state.shares(did))
        # Pending devices are Unreconstructable by construction (nothing allocates on an
        # incomplete pool); one that is not any more is not pending.
        pending = did in self.pending and state.affinity(did).status is AffinityStatus.UNRECONSTRUCTABLE
        # A pending device had no known lock: its claims decide, as at a restart.
        current = AffinityState() if pending else state.affinity(did)
        is_gated = gated(info, self.cache.features.sharing_affinity)
        rebuilt: list[Share] = []
        derived: AffinityState
        if not is_gated:
            # The complete pool declares no sharingAffinity (or the gate is off): the
            # device is not gated, whatever it was locked to (the KEP's per-pool rollback).
            rebuilt = [Share(s.claim, s.request, s.share_id, s.consumed, None, s.tentative, False)
                       for s in shares]
            derived = AffinityState()
        else:
            if info.pool_info.affinity_invalid_reason:
                return  # gated devices are fail-closed meanwhile; re-derive once it is valid
            keysets: list[AffinityKeys | None] = []
            why = ""
            for s in shares:
                claim = claim_of(s.claim)
                k = None
                if claim is not None:
                    memo = ExtractionMemo({s.claim: claim}, classes)
                    k, w = self.derive_keys(claim, s.request, info, memo)
                    if k is None and not why:
                        why = f"claim {s.claim}: {w}"  # the first claim that cannot be derived
                    self.metrics.pending[EVALUATIONS] += memo.evaluations
                elif s.keys is not None:
                    k = s.keys  # tentative share of a cycle in flight: keep what Filter extracted
                keysets.append(k)
                rebuilt.append(Share(s.claim, s.request, s.share_id, s.consumed, k, s.tentative, True))
            derived = _derived_state(current, keysets, why)
        if derived.status is AffinityStatus.UNRECONSTRUCTABLE and \
                (pending or current.status is not AffinityStatus.UNRECONSTRUCTABLE):
            self.recorder.warn(f"device {did} marked Unreconstructable: {derived.reason}", device=did)
        self.pending.discard(did)
        state.rederive(did, rebuilt, derived)


def _window(did: str, info: DeviceInfo | None, snap: Snapshot) -> str | None:
    """Why the device's pool is in a republish window (incomplete), or None."""
    pi = info.pool_info if info is not None else snap.pools.get(_pool_of(did))
    return pi.incomplete_reason if pi is not None else None


def _pool_of(did: str) -> tuple[str, str]:
    driver, pool, _ = parse_device_id(did)
    return driver, pool


def _derived_state(current: AffinityState, keysets: list[AffinityKeys | None], why: str) -> AffinityState:
    """The device's state under the pool's new extractors (never a silent re-lock)."""
    if any(k is None for k in keysets):
        derived = AffinityState(AffinityStatus.UNRECONSTRUCTABLE, None,
                                f"an active claim yields no affinity under the new extractors ({why})")
    elif len(set(keysets)) > 1:
        derived = AffinityState(AffinityStatus.UNRECONSTRUCTABLE, None,
                                "active claims extract different affinity values")
    else:
        derived = AffinityState(AffinityStatus.LOCKED, keysets[0])
    if current.status is AffinityStatus.UNRECONSTRUCTABLE:
        return current  # sticky until the device drains
    if derived.locked_affinity is not None and \
            check_lock(current, derived.locked_affinity) is Lock.MISMATCH:
        return AffinityState(
            AffinityStatus.UNRECONSTRUCTABLE, None,
            f"sharingAffinity changed with active claims: claims now extract "
            f"{dict(derived.locked_affinity or ())}, lock was {current.lock_dict()}")
    return derived


def _request_class(claim: ResourceClaim, request: str) -> str | None:
    parent, _, sub = request.partition("/")
    for r in claim.spec.devices.requests:
        if r.name != parent:
            continue
        if sub:
            for s in r.first_available:
                if s.name == sub:
                    return s.device_class_name
            return None
        return r.exactly.device_class_name if r.exactly is not None else None
    return None


def _affinity_sig(p: PoolInfo | None) -> Any:
    if p is None:
        return None
    return (p.declares_sharing_affinity, p.extractor_set, bool(p.incomplete_reason),
            bool(p.affinity_invalid_reason), bool(p.invalid_reason))
