"""Which devices a lock listing shows (``dra-affinity locks``, the simulator's report).

One rule for the offline and the live listing: every device of a pool that declares
sharing affinity (clean ones too: they are what a new lock can take), and every
allocated device, in slice order; then allocated devices no slice publishes any more
(a slice removed while its devices were in use), sorted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_affinity.api.resource import device_id

if TYPE_CHECKING:
    from dra_affinity.scheduler.scheduler import Scheduler


def listed_devices(scheduler: Scheduler) -> list[str]:
    """The device IDs to list, in the order above."""
    state = scheduler.state
    pools = scheduler.snapshot().pools
    ids: list[str] = []
    seen: set[str] = set()
    for s in scheduler.view.slices():
        pool = pools.get((s.spec.driver, s.spec.pool.name))
        declares = pool is not None and pool.declares_sharing_affinity
        for d in s.spec.devices:
            did = device_id(s.spec.driver, s.spec.pool.name, d.name)
            if did not in seen and (declares or state.is_allocated(did)):
                ids.append(did)
                seen.add(did)
    for did in sorted(state.devices()):
        if did not in seen and state.is_allocated(did):
            ids.append(did)
            seen.add(did)
    return ids
