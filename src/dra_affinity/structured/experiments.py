"""Experiments beyond the KEP's alpha (KEP-5981 "Future Enhancements"), off the stable path.

The stable allocator knows only the :class:`Hooks` protocol, and is handed no
hooks unless an experiment's gate is on. Two experiments:

* **NeverSetLock** (the KEP's ``SharingStrategy``, here an annotation on the
  claim): such a claim may only join a device already locked to its keys; it
  never takes a clean one, so it never decides what a device is locked to.
* **Preferred keys**: a metadata slice marks some extractors preferred (an
  annotation listing their names). Preferred extractors filter nothing and are
  not part of the lock; devices whose holders have other preferred values are
  tried after the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dra_affinity.structured import reasons
from dra_affinity.structured.affinity import AffinityKeys, PoolGate
from dra_affinity.structured.model import DeviceInfo, PoolInfo
from dra_affinity.structured.pools import Pool

if TYPE_CHECKING:
    from dra_affinity.cel import Extractor
    from dra_affinity.structured.claims import ClaimSpec, RequestSpec
    from dra_affinity.structured.state import AllocatedState

# Claim annotation choosing a sharing strategy (no API field exists for it).
SHARING_STRATEGY_ANNOTATION = "sharing.dra-affinity.io/strategy"
NEVER_SET_LOCK = "NeverSetLock"
# Metadata-slice annotation: comma-separated names of preferred (soft) keys.
PREFERRED_KEYS_ANNOTATION = "sharing.dra-affinity.io/preferred-keys"


class Hooks(Protocol):
    """What an experiment may add to the allocator's device check."""

    def veto_clean(self, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec,
                   keys: AffinityKeys) -> PoolGate | None:
        """A reason not to take a clean (unlocked) gated device, or None."""
        ...

    def soft_keys(self, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> AffinityKeys | None:
        """Values recorded beside the share that never enter the lock, or None."""
        ...


PreferredFn = Callable[["ClaimSpec", "RequestSpec", PoolInfo], "AffinityKeys | None"]


@dataclass(frozen=True)
class ExperimentHooks:
    """The experiments that are on for one scheduling cycle."""

    never_set_lock_claims: frozenset[str] = frozenset()
    preferred: PreferredFn | None = None

    def veto_clean(self, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec,
                   keys: AffinityKeys) -> PoolGate | None:
        if claim.key not in self.never_set_lock_claims:
            return None
        return reasons.AFFINITY_NEVER_SET_LOCK, lambda: (
            f"device {d.id} is clean and claim {claim.key} is NeverSetLock: "
            f"it may only join a device already locked to {dict(keys)}")

    def soft_keys(self, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> AffinityKeys | None:
        if self.preferred is None or not d.multi or not d.pool_info.preferred_extractors:
            return None
        return self.preferred(claim, alt, d.pool_info)


def is_never_set_lock(annotations: dict[str, str]) -> bool:
    return annotations.get(SHARING_STRATEGY_ANNOTATION) == NEVER_SET_LOCK


def split_preferred(p: Pool) -> tuple[tuple[Extractor, ...], tuple[Extractor, ...]]:
    """(required, preferred) extractors of a pool, by its metadata slices' annotation."""
    soft: set[str] = set()
    for s in p.slices:
        if s.spec.sharing_affinity:
            raw = s.metadata.annotations.get(PREFERRED_KEYS_ANNOTATION, "")
            soft |= {k.strip() for k in raw.split(",") if k.strip()}
    return (tuple(e for e in p.extractors if e.name not in soft),
            tuple(e for e in p.extractors if e.name in soft))


def preferred_order(devices: Sequence[DeviceInfo], want: Callable[[DeviceInfo], AffinityKeys | None],
                    state: AllocatedState) -> list[DeviceInfo]:
    """Stable: devices whose holders have other preferred values move behind the rest."""

    def mismatch(d: DeviceInfo) -> int:
        if not d.pool_info.preferred_extractors:
            return 0
        w = want(d)
        if w is None:
            return 0
        return int(any(s.preferred is not None and s.preferred != w for s in state.shares(d.id)))

    return sorted(devices, key=mismatch)
