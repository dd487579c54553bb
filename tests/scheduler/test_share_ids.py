"""Share IDs are stamped on the chosen node's placement only: Filter leaves them unset
on every node it evaluates, and the attempt's allocation carries the ID numbered after
the shares the device already held."""

from __future__ import annotations

from dra_affinity.features import Features
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import WorkloadSpec, device_class, pod_objects, slices
from dra_affinity.structured.allocator import share_id_for, with_share_ids
from dra_affinity.structured.model import NodeResult, PlannedShare, Result


def _cluster(nodes: int = 3) -> tuple[Cluster, Scheduler]:
    spec = WorkloadSpec(nodes=nodes, devices_per_node=2, slots=4, values=2, seed=1)
    cluster = Cluster()
    cluster.apply(device_class())
    for i in range(spec.nodes):
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features())
    sched.start()
    return cluster, sched


def _add_pod(cluster: Cluster, name: str, value: int) -> str:
    claim, pod = pod_objects(name, value)
    cluster.apply(claim)
    cluster.apply(pod)
    return f"default/{name}"


def test_filter_leaves_share_ids_unset_and_the_chosen_node_gets_them() -> None:
    cluster, sched = _cluster()
    first = _add_pod(cluster, "a", 0)
    second = _add_pod(cluster, "b", 0)
    # Filter alone, on every node: the placements carry no share ID.
    for node in sched.snapshot().nodes:
        res = sched.fits_on(sched.state, first, node)
        assert res.ok and res.shares
        assert all(s.share_id is None for s in res.shares if not s.exclusive)
    attempts = [sched.schedule(first), sched.schedule(second)]
    assert [a.result for a in attempts] == [Result.SCHEDULED, Result.SCHEDULED]
    for n, attempt in enumerate(attempts):
        (row,) = attempt.allocations
        claim = cluster.claim(row["claim"])
        assert claim is not None and claim.metadata.uid
        # The two pods share one device (same subnet, first fit): numbered 0 then 1.
        assert row["shareID"] == share_id_for(claim.metadata.uid, row["request"], row["device"], n)
    assert attempts[0].allocations[0]["device"] == attempts[1].allocations[0]["device"]


def test_with_share_ids_numbers_after_the_device_shares_and_each_other() -> None:
    cluster, sched = _cluster(nodes=1)
    key = _add_pod(cluster, "a", 0)
    node = sched.snapshot().nodes[0]
    res = sched.fits_on(sched.state, key, node)
    (share,) = res.shares
    twice = NodeResult(node, True, [share, share])
    pod = cluster.pod(key)
    assert pod is not None
    cyc = sched.prefilter(pod)
    (spec,) = cyc.to_allocate
    stamped = with_share_ids(twice, cyc.to_allocate, sched.state)
    dev = share.device.id
    assert [s.share_id for s in stamped.shares] == [
        share_id_for(spec.uid, share.request, dev, 0), share_id_for(spec.uid, share.request, dev, 1)]
    # Already stamped placements and exclusive ones are kept as they are.
    kept = PlannedShare(share.claim, share.request, share.device, "given", share.consumed,
                        share.keys, share.exclusive)
    assert with_share_ids(NodeResult(node, True, [kept]), cyc.to_allocate,
                          sched.state).shares[0].share_id == "given"
    assert sched.schedule(key).result is Result.SCHEDULED
    # A device already holding a share numbers the next placement after it.
    again = with_share_ids(NodeResult(node, True, [share]), cyc.to_allocate, sched.state)
    assert again.shares[0].share_id == share_id_for(spec.uid, share.request, dev, 1)
