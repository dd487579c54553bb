"""The scheduler's allocation cache: capacity and affinity locks per device.

``AllocatedState`` mirrors the Kubernetes allocator's ``AllocatedState``
(allocated devices, shared allocations, aggregated consumed capacity) and adds
KEP-5981's ``AffinityStates``. It is the single place where allocations are
added and removed, so capacity and locks can never disagree: every mutation
goes through its methods: :meth:`AllocatedState.add` / :meth:`AllocatedState.remove`
(also what preemption's AddPod/RemovePod (KEP-5690) call), :meth:`~AllocatedState.commit`
after a successful bind, and :meth:`~AllocatedState.rederive` /
:meth:`~AllocatedState.set_affinity` when reconciliation re-derives a device's lock
(a pool's extractors changed; a share recorded while its pool is incomplete).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from dra_affinity.api.quantity import Quantity
from dra_affinity.structured.affinity import (
    CLEAN,
    AffinityKeys,
    AffinityState,
    AffinityStatus,
    Lock,
    check_lock,
)

__all__ = [
    "CLEAN",
    "AffinityKeys",
    "AffinityState",
    "AffinityStatus",
    "AllocatedState",
    "ClaimKey",
    "DeviceID",
    "DeviceUsage",
    "Number",
    "Share",
    "clone_state",
]

Number = int | Fraction

DeviceID = str  # "<driver>/<pool>/<device>", as Kubernetes' DeviceID prints
ClaimKey = str  # "<namespace>/<name>"


LOCKED_STATES_MAX = 65536
# The change log keeps at least this many of the latest entries; older ones are
# dropped in blocks, so it never grows with the number of allocations ever made.
CHANGES_KEPT = 4096
_EMPTY: Mapping[str, Number] = {}


@dataclass(frozen=True)
class Share:
    """One allocation of one device to one claim request.

    ``keys`` is the request's effective affinity map when the device's pool
    declares sharing affinity and it was extracted; None means "unknown"
    (a legacy claim or a failed reconstruction).
    """

    claim: ClaimKey
    request: str
    share_id: str | None
    consumed: tuple[tuple[str, Quantity], ...]
    keys: AffinityKeys | None
    tentative: bool = False
    # True when the device's pool declared sharing affinity for this share,
    # so its keys participate in the lock.
    gated: bool = False
    # Values of preferred (soft) keys: never part of the lock (experiment).
    preferred: AffinityKeys | None = None


@dataclass
class DeviceUsage:
    shares: list[Share] = field(default_factory=list)
    consumed: dict[str, Number] = field(default_factory=dict)  # aggregated, exact
    exclusive: bool = False


class AllocatedState:
    """Allocated devices, consumed capacity and ``AffinityStates``.

    Locks: the first share with keys on a clean device sets ``LockedAffinity``;
    later shares must match (callers check before adding); removing the last
    share clears it. Unreconstructable is sticky until the device drains:
    the KEP filters such a device "until all claims on it drain".
    """

    def __init__(self) -> None:
        self.usage: dict[DeviceID, DeviceUsage] = {}
        self.affinity_states: dict[DeviceID, AffinityState] = {}
        # Bumped on every mutation; cheap invalidation for callers' caches.
        self.version = 0
        # Devices in mutation order: lets a node index find which nodes changed
        # since it last looked, without scanning every node. Only the latest entries
        # are kept (see :meth:`changes_since`); ``changes_base`` is the sequence
        # number of ``changes[0]``.
        self.changes: list[DeviceID] = []
        self.changes_base = 0
        # Per-device counters for cached "not viable" verdicts: any mutation; a change of
        # the affinity state (lock set, cleared, unknown); a release of capacity.
        self.device_version: dict[DeviceID, int] = {}
        self.lock_version: dict[DeviceID, int] = {}
        self.release_version: dict[DeviceID, int] = {}
        # One Locked state per distinct keys: it is immutable, so devices locked alike
        # share it instead of each holding a copy.
        self._locked: dict[AffinityKeys, AffinityState] = {}

    # -- reads ------------------------------------------------------------------
    def affinity(self, device: DeviceID) -> AffinityState:
        return self.affinity_states.get(device, CLEAN)

    def shares(self, device: DeviceID) -> list[Share]:
        u = self.usage.get(device)
        return u.shares if u else []

    def consumed(self, device: DeviceID) -> Mapping[str, Number]:
        u = self.usage.get(device)
        return u.consumed if u else _EMPTY

    def is_allocated(self, device: DeviceID) -> bool:
        u = self.usage.get(device)
        return bool(u and u.shares)

    def is_exclusively_allocated(self, device: DeviceID) -> bool:
        u = self.usage.get(device)
        return bool(u and u.exclusive and u.shares)

    def devices(self) -> Iterable[DeviceID]:
        return self.usage.keys()

    @property
    def change_seq(self) -> int:
        """Sequence number of the next change: a reader's mark for :meth:`changes_since`."""
        return self.changes_base + len(self.changes)

    def changes_since(self, seq: int) -> list[DeviceID] | None:
        """Devices changed since mark ``seq`` (with repeats, in order), or None when some
        of those changes were already dropped from the log: the reader must then start
        over from the current state."""
        i = seq - self.changes_base
        if i < 0:
            return None
        return self.changes[i:]

    # -- writes -----------------------------------------------------------------
    def _bump(self, device: DeviceID, lock_before: AffinityState | None, released: bool) -> None:
        self.version += 1
        changes = self.changes
        changes.append(device)
        if len(changes) >= 2 * CHANGES_KEPT:
            del changes[:CHANGES_KEPT]
            self.changes_base += CHANGES_KEPT
        self.device_version[device] = self.device_version.get(device, 0) + 1
        if self.affinity_states.get(device) is not lock_before:
            self.lock_version[device] = self.lock_version.get(device, 0) + 1
        if released:
            self.release_version[device] = self.release_version.get(device, 0) + 1

    def add(self, device: DeviceID, share: Share, *, exclusive: bool) -> None:
        """Record an allocation and fold its keys into the device's lock."""
        lock_before = self.affinity_states.get(device)
        u = self.usage.setdefault(device, DeviceUsage())
        u.shares.append(share)
        u.exclusive = u.exclusive or exclusive
        for name, amount in share.consumed:
            u.consumed[name] = u.consumed.get(name, 0) + amount.num
        if share.gated:
            self._fold(device, share, lock_before if lock_before is not None else CLEAN)
        self._bump(device, lock_before, released=False)

    def _fold(self, device: DeviceID, share: Share, st: AffinityState) -> None:
        """Fold a gated share's keys into the device's state ``st``: a clean device takes
        their lock, a matching lock stays, anything else becomes Unreconstructable."""
        status = st.status
        if status is AffinityStatus.UNRECONSTRUCTABLE:
            return
        if share.keys is None:
            self.affinity_states[device] = AffinityState(
                AffinityStatus.UNRECONSTRUCTABLE,
                None,
                f"claim {share.claim} (request {share.request}) has no reconstructable affinity",
            )
            return
        verdict = check_lock(st, share.keys)
        if verdict is Lock.CLEAN:
            self.affinity_states[device] = self._locked_state(share.keys)
        elif verdict is Lock.MISMATCH:
            # Callers never add a mismatching share knowingly; reaching here means
            # the data disagrees (restart over inconsistent claims): fail closed.
            self.affinity_states[device] = AffinityState(
                AffinityStatus.UNRECONSTRUCTABLE,
                None,
                f"claim {share.claim} extracts {dict(share.keys)} but the device is locked to "
                f"{dict(st.locked_affinity or ())}",
            )

    def _locked_state(self, keys: AffinityKeys) -> AffinityState:
        """The one Locked state for these keys (shared by every device locked alike)."""
        locked = self._locked.get(keys)
        if locked is None:
            if len(self._locked) >= LOCKED_STATES_MAX:
                self._locked.clear()
            locked = self._locked[keys] = AffinityState(AffinityStatus.LOCKED, keys)
        return locked

    def remove(self, device: DeviceID, claim: ClaimKey, request: str | None = None,
               *, tentative_only: bool = False) -> list[Share]:
        """Drop a claim's shares on a device; clears the lock when it drains."""
        u = self.usage.get(device)
        if not u:
            return []
        keep: list[Share] = []
        gone: list[Share] = []
        for s in u.shares:
            hit = s.claim == claim and (request is None or s.request == request)
            if hit and tentative_only and not s.tentative:
                hit = False
            (gone if hit else keep).append(s)
        if not gone:
            return []
        lock_before = self.affinity_states.get(device)
        u.shares = keep
        for s in gone:
            for name, amount in s.consumed:
                u.consumed[name] = u.consumed[name] - amount.num
        if not keep:
            del self.usage[device]
            self.affinity_states.pop(device, None)
        else:
            u.exclusive = any(not s.consumed and s.share_id is None for s in keep) and u.exclusive
            self._recompute_lock_after_removal(device, keep)
        self._bump(device, lock_before, released=True)
        return gone

    def _recompute_lock_after_removal(self, device: DeviceID, keep: list[Share]) -> None:
        st = self.affinity(device)
        if st.status is not AffinityStatus.LOCKED:
            return  # Unreconstructable stays until the device drains
        if not any(s.gated for s in keep):
            # Only ungated shares remain (pool lost its extractors): no lock to hold.
            self.affinity_states.pop(device, None)

    def commit(self, device: DeviceID, claim: ClaimKey) -> None:
        """Bind succeeded: the claim's tentative shares on the device become real."""
        u = self.usage.get(device)
        if not u:
            return
        u.shares = [
            Share(s.claim, s.request, s.share_id, s.consumed, s.keys, False, s.gated, s.preferred)
            if s.claim == claim and s.tentative
            else s
            for s in u.shares
        ]
        self.version += 1

    def rederive(self, device: DeviceID, shares: list[Share], state: AffinityState) -> None:
        """A device's shares with keys derived again (same claims, requests and amounts)
        and the affinity state they yield: reconciliation after an extractor change."""
        u = self.usage.get(device)
        if u is not None:
            u.shares = shares
        self.set_affinity(device, state)

    def set_affinity(self, device: DeviceID, state: AffinityState) -> None:
        """Used by reconciliation; Clean removes the entry (zero value)."""
        lock_before = self.affinity_states.get(device)
        if state.status is AffinityStatus.CLEAN:
            self.affinity_states.pop(device, None)
        else:
            self.affinity_states[device] = state
        self._bump(device, lock_before, released=True)


def clone_state(state: AllocatedState) -> AllocatedState:
    """An independent copy for what-if evaluation (preemption's victim selection runs
    Filter against a copy with candidate victims removed, never against the live cache)."""
    c = AllocatedState()
    c.usage = {d: DeviceUsage(list(u.shares), dict(u.consumed), u.exclusive)
               for d, u in state.usage.items()}
    c.affinity_states = dict(state.affinity_states)
    return c
