"""The embedded cluster's reads and the scheduler's writes."""

from __future__ import annotations

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.resource import DeviceClass
from dra_affinity.scheduler.view import WriteConflict
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import device_class, pod_objects


def test_classes_follow_every_class_change() -> None:
    cluster = Cluster()
    assert cluster.classes() == {}
    assert cluster.apply(device_class()).applied
    first = cluster.classes()
    assert list(first) == ["shared-nic"] and cluster.classes() is first  # read once
    changed = device_class().model_copy(update={"metadata": device_class().metadata.model_copy(
        update={"labels": {"tier": "fast"}})})
    assert cluster.apply(changed).applied
    got = cluster.classes()["shared-nic"]
    assert isinstance(got, DeviceClass) and got.metadata.labels == {"tier": "fast"}
    other = device_class().model_copy(update={"metadata": device_class().metadata.model_copy(
        update={"name": "other-nic"})})
    assert cluster.apply(other).applied
    assert sorted(cluster.classes()) == ["other-nic", "shared-nic"]
    cluster.delete("DeviceClass", "shared-nic")
    assert list(cluster.classes()) == ["other-nic"]


def test_bind_pod_stores_node_and_version_and_leaves_the_read_object() -> None:
    cluster = Cluster()
    claim, pod = pod_objects("p", 1)
    assert cluster.apply(claim).applied and cluster.apply(pod).applied
    seen: list[tuple[str | None, str | None]] = []

    class Listener:
        def on_change(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None:
            assert kind == "Pod" and isinstance(old, Pod) and isinstance(new, Pod)
            seen.append((old.spec.node_name, new.spec.node_name))

    read = cluster.pod("default/p")
    assert read is not None
    before = read.model_dump()
    cluster.subscribe(Listener())
    cluster.bind_pod(read, "node-00001")
    bound = cluster.pod("default/p")
    assert bound is not None and bound.spec.node_name == "node-00001"
    assert int(bound.metadata.resource_version or 0) > int(read.metadata.resource_version or 0)
    assert read.model_dump() == before  # what the caller read is not changed
    assert bound.model_dump(exclude={"spec": {"node_name"}, "metadata": {"resource_version"}}) == \
        read.model_dump(exclude={"spec": {"node_name"}, "metadata": {"resource_version"}})
    assert seen == [(None, "node-00001")]
    with pytest.raises(WriteConflict, match="already assigned"):
        cluster.bind_pod(read, "node-00002")


def test_claim_status_write_checks_the_version_it_was_read_at() -> None:
    cluster = Cluster()
    claim, _pod = pod_objects("p", 1)
    assert cluster.apply(claim).applied
    read = cluster.claim("default/p-nic")
    assert read is not None
    stored = cluster.write_claim_status(read)
    assert stored.metadata.resource_version != read.metadata.resource_version
    assert cluster.claim("default/p-nic") is stored
    with pytest.raises(WriteConflict, match="changed since it was read"):
        cluster.write_claim_status(read)
