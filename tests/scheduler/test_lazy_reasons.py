"""Reasons for rejected nodes are rendered only when the pod fails: a pod that passes
over full nodes to fit never pays for their messages, and a pod that fits nowhere gets
every node's reasons, as before."""

from __future__ import annotations

import pytest

from dra_affinity.features import Features
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import WorkloadSpec, device_class, pod_objects, slices
from dra_affinity.structured.allocator import NodeAllocator
from dra_affinity.structured.model import Reason, Result


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Nodes whose reasons were rendered."""
    seen: list[str] = []
    real = NodeAllocator._final_reasons

    def counting(self: NodeAllocator) -> list[Reason]:
        seen.append(self.node)
        return real(self)

    monkeypatch.setattr(NodeAllocator, "_final_reasons", counting)
    return seen


@pytest.mark.parametrize("paths", [FastPaths.none(), FastPaths()], ids=["reference", "shipped"])
def test_reasons_are_rendered_only_for_a_pod_that_fails(paths: FastPaths,
                                                        rendered: list[str]) -> None:
    spec = WorkloadSpec(nodes=4, devices_per_node=1, slots=1, values=8)
    cluster = Cluster()
    assert cluster.apply(device_class()).applied
    for i in range(spec.nodes):
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), fast_paths=paths)
    sched.start()
    # One slot per NIC, a subnet each: every pod passes over the full nodes before it.
    for n in range(spec.nodes):
        claim, pod = pod_objects(f"p{n}", n)
        assert cluster.apply(claim).applied and cluster.apply(pod).applied
        assert sched.schedule(f"default/p{n}").result is Result.SCHEDULED
    assert rendered == []
    claim, pod = pod_objects("late", 0)
    assert cluster.apply(claim).applied and cluster.apply(pod).applied
    a = sched.schedule("default/late")
    assert a.result is Result.UNSCHEDULABLE
    assert sorted(rendered) == sorted(cluster.nodes())
    assert {r.node for r in a.reasons} == set(cluster.nodes())
    assert a.message.startswith(f"0/{spec.nodes} nodes are available")
