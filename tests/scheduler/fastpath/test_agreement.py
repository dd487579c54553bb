"""The fast paths (node index, free-capacity/lock index, verdict caches, the extraction
cache by content) choose exactly what the reference path chooses (a full first-fit scan,
an extraction per cycle), on random workloads with churn, in every combination of
switches."""

from __future__ import annotations

import itertools
import random
from functools import cache

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.features import Features
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import WorkloadSpec, device_class, node_name, pod_objects, slices
from dra_affinity.structured.model import Result

#: (result, node, devices, message) per attempt: the message holds the rejection reasons.
Outcome = tuple[str, str | None, tuple[str, ...], str]


def prefer(pod: Pod, node: str, weight: int) -> Pod:
    """The pod with a preferred node affinity term for ``node`` (node scores rank then)."""
    term = {"weight": weight, "preference": {"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}}
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}})})


def run(spec: WorkloadSpec, *, paths: FastPaths, scoring: str, steps: int, seed: int,
        preferring: float = 0.0) -> list[Outcome]:
    cluster = Cluster()
    cluster.apply(device_class())
    for i in range(spec.nodes):
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), scoring=scoring, fast_paths=paths)
    sched.start()
    rng = random.Random(seed)
    running: list[str] = []
    out: list[Outcome] = []
    for n in range(steps):
        if running and rng.random() < 0.3:
            victim = running.pop(rng.randrange(len(running)))
            cluster.delete("Pod", f"default/{victim}")
            out.append(("delete", victim, (), ""))
            continue
        name = f"p{n}"
        claim, pod = pod_objects(name, rng.randrange(spec.values))
        if rng.random() < preferring:
            pod = prefer(pod, node_name(rng.randrange(spec.nodes)), rng.randint(1, 100))
        cluster.apply(claim)
        cluster.apply(pod)
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
@pytest.mark.parametrize("scoring", ["firstfit", "affinity"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fast_paths_agree_with_full_scan(paths: FastPaths, scoring: str, seed: int) -> None:
    spec = WorkloadSpec(nodes=6, devices_per_node=3, slots=3, values=5, seed=seed)
    slow = reference(scoring, seed)
    fast = run(spec, paths=paths, scoring=scoring, steps=150, seed=seed)
    assert tuple(fast) == slow
    assert any(r[0] == "Unschedulable" for r in slow), "workload too easy to exercise failures"


@pytest.mark.parametrize("scoring", ["firstfit", "affinity"])
def test_fast_paths_agree_with_full_scan_when_node_scores_rank(scoring: str) -> None:
    """A third of the pods prefer a node: node scores rank their feasible nodes (the
    indexes stand aside for them), the others take the indexes' path; every switch
    combination chooses what the reference chooses."""
    spec = WorkloadSpec(nodes=6, devices_per_node=3, slots=3, values=5, seed=4)
    slow = run(spec, paths=FastPaths.none(), scoring=scoring, steps=150, seed=4, preferring=0.35)
    fast = run(spec, paths=FastPaths.all(), scoring=scoring, steps=150, seed=4, preferring=0.35)
    assert fast == slow
    firstfit = run(spec, paths=FastPaths.none(), scoring=scoring, steps=150, seed=4)
    assert slow != firstfit, "the preferences changed no choice: node scores not exercised"
