"""Affinity-aware scoring (--scoring affinity): each preference-order case, and that
first-fit stays exactly the KEP's alpha behaviour."""

from __future__ import annotations

import pytest

from builders import (
    DRIVER,
    SUBNET,
    Env,
    claim,
    dev,
    device_slice,
    meta_slice,
    nic_class,
    nic_params,
    pod,
)
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.structured.model import Result


def make(scoring: str, *objs: object, index: bool = False) -> Env:
    env = Env(*objs)
    env.scheduler.stop()
    env.scheduler = Scheduler(env.cluster, env.gates, scoring=scoring, fast_paths=FastPaths() if index else FastPaths(free_index=False, node_index=False))
    env.scheduler.start()
    return env


def two_devices(scoring: str, index: bool = False) -> Env:
    return make(scoring, nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth0", "eth1"]),
                index=index)


@pytest.mark.parametrize("index", [False, True])
def test_within_node_locked_compatible_first(index: bool) -> None:
    """Within a node: a device already locked to a compatible value beats a clean one."""
    env = two_devices("affinity", index)
    for n, s in (("y", "Y"), ("x", "X"), ("x2", "X")):
        env.add_pod(n, nic_params(s))
    env.schedule("y")  # eth0 <- Y
    env.schedule("x")  # eth1 <- X
    env.cluster.delete("Pod", "default/y")  # eth0 clean again, first in slice order
    x2 = env.schedule("x2")
    assert [a["device"] for a in x2.allocations] == [dev("node-1", "eth1")]


@pytest.mark.parametrize("index", [False, True])
def test_firstfit_unchanged(index: bool) -> None:
    """First-fit keeps the alpha behaviour: the clean device first in slice order wins."""
    env = two_devices("firstfit", index)
    for n, s in (("y", "Y"), ("x", "X"), ("x2", "X")):
        env.add_pod(n, nic_params(s))
    env.schedule("y")
    env.schedule("x")
    env.cluster.delete("Pod", "default/y")
    x2 = env.schedule("x2")
    assert [a["device"] for a in x2.allocations] == [dev("node-1", "eth0")]


def test_clean_before_unknown() -> None:
    """Clean devices are preferred over unknown-affinity ones (which are not viable at all)."""
    legacy = claim("legacy-nic", {"kind": "Other"}, status={
        "allocation": {"devices": {"results": [{
            "request": "nic", "driver": DRIVER, "pool": "node-1", "device": "eth0",
            "shareID": "00000001-0000-4000-8000-000000000000",
            "consumedCapacity": {f"{DRIVER}/slots": "1"}}]}},
        "reservedFor": [{"resource": "pods", "name": "legacy", "uid": "u"}]})
    env = make("affinity", nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth0", "eth1"]),
               legacy, pod("legacy", ["legacy-nic"], node="node-1"))
    assert env.status(dev("node-1", "eth0"))[0] == "Unreconstructable"
    env.add_pod("a", nic_params("X"))
    assert [a["device"] for a in env.schedule("a").allocations] == [dev("node-1", "eth1")]


@pytest.mark.parametrize("index", [False, True])
def test_across_nodes_consolidates(index: bool) -> None:
    """Across nodes: a node with a compatibly-locked device beats an earlier node with a clean one."""
    env = make("affinity", nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth0"]),
               meta_slice("node-2"), device_slice("node-2", ["eth0"]), index=index)
    for n, s in (("y", "Y"), ("x", "X"), ("x2", "X")):
        env.add_pod(n, nic_params(s))
    env.schedule("y")  # node-1/eth0 <- Y
    x = env.schedule("x")  # node-2/eth0 <- X
    assert x.node == "node-2"
    env.cluster.delete("Pod", "default/y")
    x2 = env.schedule("x2")
    assert x2.node == "node-2"
    assert env.scheduler.metrics.values()["sharing_affinity_compatible_reuse_total"] == 1


def test_ties_fall_back_to_node_order() -> None:
    """No compatible lock anywhere: the first feasible node in order wins (deterministic)."""
    env = make("affinity", nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth0"]),
               meta_slice("node-2"), device_slice("node-2", ["eth0"]))
    env.add_pod("a", nic_params("A"))
    assert env.schedule("a").node == "node-1"


def test_affinity_scoring_never_breaks_locks() -> None:
    """Scoring only orders viable devices: a mismatching lock is still excluded."""
    env = make("affinity", nic_class(), meta_slice("node-1", {"subnet": SUBNET}),
               device_slice("node-1", ["eth0"]))
    env.add_pod("a", nic_params("A"))
    env.add_pod("b", nic_params("B"))
    env.schedule("a")
    assert env.schedule("b").result is Result.UNSCHEDULABLE
