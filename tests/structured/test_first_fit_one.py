"""The allocator's one-device quick path returns exactly what the allocator returns
(same device, share ID, consumption, keys, lock reuse) whenever it answers at all."""

from __future__ import annotations

import random

import pytest

from builders import device_slice, meta_slice, nic_class
from dra_affinity.features import Features
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import WorkloadSpec, device_class, pod_objects, slices
from dra_affinity.structured.allocator import NodeAllocator, first_fit_one
from dra_affinity.structured.model import NodeResult, PlannedShare, Result
from dra_affinity.structured.snapshot import Snapshot


def _share(s: PlannedShare) -> tuple[object, ...]:
    return (s.claim, s.request, s.device.id, s.share_id, s.consumed, s.keys, s.exclusive,
            s.reused_lock, s.preferred)


def _result(r: NodeResult) -> tuple[object, ...]:
    return (r.node, r.ok, [_share(s) for s in r.shares])


@pytest.mark.parametrize("affinity", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_quick_path_matches_the_allocator(affinity: bool, seed: int) -> None:
    spec = WorkloadSpec(nodes=5, devices_per_node=3, slots=2, values=4, seed=seed, affinity=affinity)
    cluster = Cluster()
    assert cluster.apply(device_class()).applied
    for i in range(spec.nodes):
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), fast_paths=FastPaths.none())
    sched.start()
    rng = random.Random(seed)
    running: list[str] = []
    answered = declined = 0
    for n in range(120):
        if running and rng.random() < 0.3:
            cluster.delete("Pod", f"default/{running.pop(rng.randrange(len(running)))}")
            continue
        name = f"p{n}"
        claim, pod = pod_objects(name, rng.randrange(spec.values))
        assert cluster.apply(claim).applied and cluster.apply(pod).applied
        stored = cluster.pod(f"default/{name}")
        assert stored is not None
        cyc = sched.prefilter(stored)
        assert cyc.single is not None
        snap = sched.snapshot()
        c, alt = cyc.single
        for node in snap.nodes:
            devices = snap.by_node[node]
            # every suffix too: the quick path must also agree when its first device is
            # not the node's first
            for start in range(len(devices)):
                devs = devices[start:]
                quick = first_fit_one(node, devs, sched.state, c, alt,
                                      affinity_enabled=True, extract=cyc.memo,
                                      selector_matches=sched.cache.selector_matches,
                                      plan_cache=snap.plan_cache)
                full = NodeAllocator(node, devs, sched.state, affinity_enabled=True,
                                     extract=cyc.memo, selector_matches=sched.cache.selector_matches,
                                     plan_cache=snap.plan_cache).allocate(cyc.to_allocate)
                if quick is None:
                    declined += 1
                    continue
                answered += 1
                assert full.ok and _result(quick) == _result(full)
        a = sched.schedule(f"default/{name}")
        if a.result is Result.SCHEDULED:
            running.append(name)
    # Both outcomes were exercised: answers, and declines left to the allocator.
    assert answered > 100 and declined > 100


def test_device_limits_are_its_capacity_values_shared_by_devices_published_alike() -> None:
    cluster = Cluster()
    for obj in (nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1", "eth2"]),
                meta_slice("node-2"), device_slice("node-2", ["eth1"], slots="1500m")):
        assert cluster.apply(obj).applied
    snap = Snapshot.build(cluster.slices(), ["node-1", "node-2"], {})
    devs = {d.id: d for d in snap.devices.values()}
    one, two, other = (devs[f"{d}"] for d in sorted(devs))
    for d in (one, two, other):
        assert dict(d.limits) == {n: c.value.num for n, c in d.capacity.items()}
    assert one.limits is two.limits  # one map for devices published alike
    assert other.limits is not one.limits
    assert next(iter(other.limits.values())) == 1.5
