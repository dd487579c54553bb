"""The fast paths choose what the full scan chooses when pods carry placement constraints
(hostname anti-affinity, zone spread, host ports, existing pods' anti-affinity) and nodes
limit their pod count: the node filters beside DRA change with pods bound anywhere, and
the indexes must neither skip a node that became feasible nor take a stale verdict."""

from __future__ import annotations

import itertools
import random
from functools import cache
from typing import Any

import pytest

from dra_affinity.api.core import Node, Pod
from dra_affinity.features import Features
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.filter import SCORING
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import WorkloadSpec, device_class, node_name, pod_objects, slices
from dra_affinity.structured.model import Result

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
Outcome = tuple[str, str | None, tuple[str, ...], str]


def constrained(p: Pod, kind: int) -> Pod:
    """The workload's pod with one of the placement shapes (0: none)."""
    labels = {"app": f"g{kind}"}
    spec: dict[str, Any] = {}
    if kind == 1:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST}]}}
    elif kind == 2:
        spec["topology_spread_constraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                                "whenUnsatisfiable": "DoNotSchedule",
                                                "labelSelector": {"matchLabels": labels}}]
    elif kind == 3:
        spec["containers"] = [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 9000}]}]
    elif kind == 4:  # keeps g1 off its zone once bound
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "g1"}}, "topologyKey": ZONE}]}}
    meta = p.metadata.model_copy(update={"labels": labels})
    return p.model_copy(update={"metadata": meta, "spec": p.spec.model_copy(update=spec)})


def run(spec: WorkloadSpec, *, paths: FastPaths, scoring: str, steps: int, seed: int) -> list[Outcome]:
    cluster = Cluster()
    cluster.apply(device_class())
    for i in range(spec.nodes):
        status = {"allocatable": {"pods": "3"}} if i % 2 else {}
        assert cluster.apply(Node.model_validate({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name(i), "labels": {ZONE: "abc"[i % 3]}}, "status": status})).applied
    for i in range(spec.nodes):
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), scoring=scoring, fast_paths=paths)
    sched.start()
    rng = random.Random(seed)
    running: list[str] = []
    out: list[Outcome] = []
    foreign: list[str] = []
    for n in range(steps):
        if running and rng.random() < 0.3:
            victim = running.pop(rng.randrange(len(running)))
            cluster.delete("Pod", f"default/{victim}")
            out.append(("delete", victim, (), ""))
            continue
        if rng.random() < 0.15:
            # A pod another scheduler bound, without claims: it takes a pod slot and may
            # keep g0 off its node; when it goes, no device changes.
            if foreign and rng.random() < 0.5:
                cluster.delete("Pod", f"default/{foreign.pop(rng.randrange(len(foreign)))}")
                continue
            name = f"f{n}"
            body: dict[str, Any] = {"nodeName": node_name(rng.randrange(spec.nodes)),
                                    "containers": [{"name": "c", "image": "x"}]}
            if rng.random() < 0.5:
                body["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "g0"}}, "topologyKey": HOST}]}}
            assert cluster.apply(Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                                                     "metadata": {"name": name}, "spec": body})).applied
            foreign.append(name)
            continue
        name = f"p{n}"
        claim, pod = pod_objects(name, rng.randrange(spec.values))
        kind = rng.choice([0, 0, 0, 1, 2, 3, 4])
        assert cluster.apply(claim).applied
        assert cluster.apply(constrained(pod, kind)).applied
        a = sched.schedule(f"default/{name}")
        out.append((a.result.value, a.node, tuple(x["device"] for x in a.allocations), a.message))
        if a.result is Result.SCHEDULED:
            running.append(name)
    return out


COMBINATIONS = [FastPaths(*bits) for bits in itertools.product((False, True), repeat=4)]


@cache
def reference(scoring: str, seed: int) -> tuple[Outcome, ...]:
    spec = WorkloadSpec(nodes=6, devices_per_node=3, slots=3, values=5, seed=seed)
    return tuple(run(spec, paths=FastPaths.none(), scoring=scoring, steps=150, seed=seed))


@pytest.mark.parametrize("paths", COMBINATIONS[1:], ids=lambda p: (
    f"free={int(p.free_index)},node={int(p.node_index)},content={int(p.extraction_cache)},"
    f"verdicts={int(p.verdict_cache)}"))
@pytest.mark.parametrize("scoring", SCORING)
@pytest.mark.parametrize("seed", [1, 2])
def test_fast_paths_agree_with_full_scan_under_placement_constraints(paths: FastPaths, scoring: str,
                                                                     seed: int) -> None:
    spec = WorkloadSpec(nodes=6, devices_per_node=3, slots=3, values=5, seed=seed)
    slow = reference(scoring, seed)
    fast = run(spec, paths=paths, scoring=scoring, steps=150, seed=seed)
    assert tuple(fast) == slow
    assert any(r[0] == "Unschedulable" for r in slow), "workload too easy to exercise failures"


def _foreign(cluster: Cluster, name: str, node: str, **spec: Any) -> None:
    assert cluster.apply(Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                             "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}],
                                                      **spec}})).applied


def _world(paths: FastPaths, pods_on_first: str | None) -> tuple[Cluster, Scheduler]:
    spec = WorkloadSpec(nodes=3, devices_per_node=2, slots=4, values=1, seed=1)
    cluster = Cluster()
    cluster.apply(device_class())
    for i in range(3):
        status = {"allocatable": {"pods": pods_on_first}} if i == 0 and pods_on_first else {}
        assert cluster.apply(Node.model_validate({"apiVersion": "v1", "kind": "Node", "status": status,
                                                  "metadata": {"name": node_name(i),
                                                               "labels": {ZONE: "aab"[i]}}})).applied
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), fast_paths=paths)
    sched.start()
    return cluster, sched


def _schedule(cluster: Cluster, sched: Scheduler, name: str) -> str | None:
    claim, pod = pod_objects(name, 0)
    assert cluster.apply(claim).applied and cluster.apply(constrained(pod, 0)).applied
    return sched.schedule(f"default/{name}").node


@pytest.mark.parametrize("paths", [FastPaths.none(), FastPaths(node_index=True)], ids=["reference", "node"])
def test_a_node_freed_by_a_pod_without_claims_is_tried_again(paths: FastPaths) -> None:
    cluster, sched = _world(paths, "1")
    _foreign(cluster, "other", node_name(0))  # node-0's only pod slot
    assert _schedule(cluster, sched, "a") == node_name(1)  # Too many pods on node-0
    cluster.delete("Pod", "default/other")  # no device changes: only the pod count does
    assert _schedule(cluster, sched, "b") == node_name(0)


@pytest.mark.parametrize("paths", [FastPaths.none(), FastPaths(node_index=True)], ids=["reference", "node"])
def test_a_node_freed_from_an_existing_pods_anti_affinity_is_tried_again(paths: FastPaths) -> None:
    cluster, sched = _world(paths, None)
    guard = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "g0"}}, "topologyKey": ZONE}]}}}
    _foreign(cluster, "guard", node_name(1), **guard)  # keeps g0 out of zone a: nodes 0 and 1
    assert _schedule(cluster, sched, "a") == node_name(2)
    cluster.delete("Pod", "default/guard")  # frees node 0 too, where nothing changed
    assert _schedule(cluster, sched, "b") == node_name(0)
