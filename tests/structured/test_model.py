"""DeviceInfo: what the allocator reads of a device, built once per snapshot."""

from __future__ import annotations

from builders import device_slice, meta_slice, nic_class
from dra_affinity.sim.cluster import Cluster
from dra_affinity.structured.snapshot import Snapshot


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
