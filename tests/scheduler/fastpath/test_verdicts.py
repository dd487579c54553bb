"""Kept Filter verdicts (``FastPaths.verdict_cache``): on workloads where node scores rank
the feasible nodes (CPU and memory requests that differ, nodes of different sizes,
network-attached pools reached from several nodes), the scheduler chooses what the
reference chooses, with the same rejection messages; and each change that can make a
kept verdict wrong drops it (a test per change, each failing without its invalidation)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from dra_affinity.features import Features
from dra_affinity.observe.metrics import VERDICTS_COMPUTED, VERDICTS_REUSED
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.fastpath.verdicts import CycleVerdicts, VerdictCache
from dra_affinity.scheduler.filter import SCORING, feasible_nodes_to_find
from dra_affinity.scheduler.placement.scores import NodeScores, score_nodes
from dra_affinity.scheduler.scheduler import Attempt, Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import (
    DRIVER,
    EXTRACTORS,
    SLOTS,
    WorkloadSpec,
    device_class,
    node_name,
    pod_objects,
    slices,
)
from dra_affinity.structured.model import NodeResult, Result

ZONE = "topology.kubernetes.io/zone"
Outcome = tuple[str, str | None, tuple[str, ...], str]
VERDICTS_ONLY = FastPaths(False, False, False, True)


def node(i: int, cpu: str | None = "4", *, taints: list[dict[str, str]] | None = None,
         gen: int = 1) -> Node:
    """Node ``i`` (zone a or b) reporting ``cpu`` allocatable (None: no allocatable)."""
    status = {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "8"}} if cpu is not None else {}
    return Node.model_validate({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node_name(i), "labels": {ZONE: "ab"[i % 2]},
                     "annotations": {"gen": str(gen)}},
        "spec": {"taints": taints or []}, "status": status})


def requesting(pod: Pod, cpu: str, memory: str = "256Mi", port: int | None = None) -> Pod:
    """The pod with one container requesting ``cpu`` and ``memory`` (and a host port)."""
    container: dict[str, Any] = {"name": "app", "image": "x",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if port is not None:
        container["ports"] = [{"containerPort": 80, "hostPort": port}]
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={"containers": [container]})})


def network_pool(zone: str, devices: int = 2, slots: int = 3) -> list[ResourceSlice]:
    """A pool of NICs reached from every node of ``zone`` (a nodeSelector), with
    sharing affinity: a change to one of its devices concerns all those nodes."""
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}
    pool = {"name": f"net-{zone}", "generation": 1, "resourceSliceCount": 2}
    return [ResourceSlice.model_validate(m) for m in (
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"net-{zone}-meta"},
         "spec": {"driver": DRIVER, "nodeSelector": sel, "pool": pool,
                  "sharingAffinity": [{"name": n, "expression": e} for n, e in EXTRACTORS]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"net-{zone}-nics"},
         "spec": {"driver": DRIVER, "nodeSelector": sel, "pool": pool,
                  "devices": [{"name": f"net{d}", "allowMultipleAllocations": True,
                               "capacity": {SLOTS: {"value": str(slots)}}} for d in range(devices)]}})]


# ---------------------------------------------------------------- agreement
def run(paths: FastPaths, scoring: str, seed: int, steps: int = 160,
        nodes: int = 6) -> tuple[list[Outcome], Scheduler]:
    spec = WorkloadSpec(nodes=nodes, devices_per_node=2, slots=2, values=4, seed=seed)
    cluster = Cluster()
    cluster.apply(device_class())
    for i in range(spec.nodes):
        assert cluster.apply(node(i, "4" if i % 3 else "2")).applied
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    for zone in "ab":
        for s in network_pool(zone):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), scoring=scoring, fast_paths=paths)
    sched.start()
    rng = random.Random(seed)
    running: list[str] = []
    foreign: list[str] = []
    out: list[Outcome] = []
    for n in range(steps):
        roll = rng.random()
        if running and roll < 0.25:
            victim = running.pop(rng.randrange(len(running)))
            cluster.delete("Pod", f"default/{victim}")
            out.append(("delete", victim, (), ""))
            continue
        if roll < 0.33:
            # A pod another scheduler bound, without claims: only CPU and memory change.
            if foreign and rng.random() < 0.5:
                cluster.delete("Pod", f"default/{foreign.pop(rng.randrange(len(foreign)))}")
                continue
            name = f"f{n}"
            _, proto = pod_objects(name, 0)
            body = requesting(proto, rng.choice(["500m", "1"])).model_dump(by_alias=True, exclude_none=True)
            body["spec"] = {"nodeName": node_name(rng.randrange(spec.nodes)),
                            "containers": body["spec"]["containers"]}
            assert cluster.apply(Pod.model_validate(body)).applied
            foreign.append(name)
            continue
        if roll < 0.36:
            i = rng.randrange(spec.nodes)  # a Node resized, tainted or untainted
            taints = rng.choice([[], [], [{"key": "k", "effect": "NoSchedule"}],
                                 [{"key": "k", "effect": "PreferNoSchedule"}]])
            assert cluster.apply(node(i, rng.choice(["2", "3", "4"]), taints=taints, gen=n)).applied
            continue
        name = f"p{n}"
        claim, pod = pod_objects(name, rng.randrange(spec.values))
        pod = requesting(pod, rng.choice(["250m", "1"]), rng.choice(["256Mi", "2Gi"]))
        assert cluster.apply(claim).applied and cluster.apply(pod).applied
        a = sched.schedule(f"default/{name}")
        out.append((a.result.value, a.node, tuple(x["device"] for x in a.allocations), a.message))
        if a.result is Result.SCHEDULED:
            running.append(name)
    return out, sched


@pytest.mark.parametrize("paths", [VERDICTS_ONLY, FastPaths.all()], ids=["verdicts", "all"])
@pytest.mark.parametrize("scoring", SCORING)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_verdicts_choose_what_the_reference_chooses_when_node_scores_rank(
        paths: FastPaths, scoring: str, seed: int) -> None:
    slow, _ = run(FastPaths.none(), scoring, seed)
    fast, sched = run(paths, scoring, seed)
    assert fast == slow
    assert any(r[0] == "Unschedulable" for r in slow), "workload too easy to exercise failures"
    assert any(r[1] is not None and r[1] != node_name(0) and r[0] == "Scheduled" for r in slow)
    assert sched.verdicts is not None
    assert sched.verdicts.reused >= 50, "verdicts were hardly reused"
    assert sched.verdicts.stale == 0


@pytest.mark.parametrize("scoring", SCORING)
@pytest.mark.parametrize("seed", [1, 2])
def test_kept_verdicts_find_the_feasible_nodes_the_reference_stops_at(scoring: str, seed: int) -> None:
    """Past 100 nodes a cycle stops filtering once upstream's number of feasible nodes is
    found; the kept verdicts' scan counts them as columns and looks again only at the
    changed nodes before that point: the choices are the reference's, and nodes past it
    are left unlooked at (their verdicts are not computed)."""
    nodes = 130
    assert feasible_nodes_to_find(nodes) < nodes
    slow, _ = run(FastPaths.none(), scoring, seed, steps=200, nodes=nodes)
    fast, sched = run(VERDICTS_ONLY, scoring, seed, steps=200, nodes=nodes)
    assert fast == slow
    assert sched.verdicts is not None and sched.verdicts.stale == 0
    cycles = sum(1 for r in fast if r[0] != "delete")
    # Node after node would filter at least 100 nodes a cycle; kept, a few changed ones.
    assert sched.verdicts.computed < cycles * 10


@pytest.mark.parametrize("nodes", [6, 130])
def test_kept_raw_scores_score_as_the_plugins_do(monkeypatch: pytest.MonkeyPatch, nodes: int) -> None:
    """Scores from raw scores kept per node (recomputed when the node's generation
    moves) are the ones score_nodes gives, cycle after cycle, nodes changing between."""
    checked = 0

    def score(self: CycleVerdicts, feasible: list[NodeResult], device: Any) -> NodeScores | None:
        nonlocal checked
        got = kept_score(self, feasible, device)
        if got is not None:
            cache, cyc = self.verdicts.cache, self.cyc
            want = score_nodes(cache.placement_index(), cyc.pod, cyc.placement, cache.view.namespaces(),
                               cache.node_facts(), [r.node for r in feasible], device)
            assert got == want
            checked += 1
        return got

    kept_score = CycleVerdicts.score
    monkeypatch.setattr(CycleVerdicts, "score", score)
    for scoring in SCORING:
        run(VERDICTS_ONLY, scoring, 1, steps=200, nodes=nodes)
    assert checked > 100


def test_the_reference_runs_without_kept_verdicts() -> None:
    _, sched = run(FastPaths.none(), "firstfit", 1, steps=20)
    assert sched.verdicts is None


# ---------------------------------------------------------------- invalidation
class World:
    """Two nodes of equal size (node scores prefer the emptier one, ties to node-0),
    one NIC each, and one scheduler with only the kept verdicts on."""

    def __init__(self, *, slots: int = 2, published: dict[int, list[ResourceSlice]] | None = None,
                 first_node: Node | None = None, device_class: DeviceClass | None = None,
                 cpu: str | None = "4") -> None:
        self.cluster = Cluster()
        self.spec = WorkloadSpec(nodes=2, devices_per_node=1, slots=slots, values=2)
        self.cluster.apply(device_class or _nic_class())
        for i in range(2):
            assert self.cluster.apply(first_node if i == 0 and first_node is not None else node(i, cpu)).applied
            for s in (published or {}).get(i) or slices(self.spec, i):
                assert self.cluster.apply(s).applied
        self.sched = Scheduler(self.cluster, Features(), fast_paths=VERDICTS_ONLY)
        self.sched.start()

    @property
    def verdicts(self) -> VerdictCache:
        assert self.sched.verdicts is not None
        return self.sched.verdicts

    def schedule(self, name: str, value: int = 0, cpu: str = "1", port: int | None = None,
                 claims: bool = True) -> str | None:
        claim, pod = pod_objects(name, value)
        if claims:
            assert self.cluster.apply(claim).applied
        else:
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"resource_claims": []})})
        assert self.cluster.apply(requesting(pod, cpu, port=port)).applied
        return self.sched.schedule(f"default/{name}").node

    def foreign(self, name: str, on: int, cpu: str) -> None:
        _, proto = pod_objects(name, 0)
        body = requesting(proto, cpu).model_dump(by_alias=True, exclude_none=True)
        body["spec"] = {"nodeName": node_name(on), "containers": body["spec"]["containers"]}
        assert self.cluster.apply(Pod.model_validate(body)).applied

    def allocated(self, name: str, on: int, value: int) -> None:
        """A claim another scheduler allocated on node ``on``'s NIC (no pod here)."""
        claim, _ = pod_objects(name, value)
        status = {"allocation": {"devices": {"results": [{
            "request": "nic", "driver": DRIVER, "pool": node_name(on), "device": "nic0",
            "shareID": "00000001-0000-4000-8000-000000000000", "consumedCapacity": {SLOTS: "1"}}]}}}
        body = claim.model_dump(by_alias=True, exclude_none=True)
        body["status"] = status
        assert self.cluster.apply(ResourceClaim.model_validate(body)).applied


def _nic_class(expression: str | None = None) -> DeviceClass:
    cls = device_class()
    if expression is None:
        return cls
    body = cls.model_dump(by_alias=True, exclude_none=True)
    body["spec"]["selectors"] = [{"cel": {"expression": expression}}]
    return DeviceClass.model_validate(body)


def _nics(i: int, *, slots: int, generation: int, gen_attr: int = 1) -> list[ResourceSlice]:
    """Node ``i``'s NIC slice (no sharing affinity) at a pool generation."""
    return [ResourceSlice.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name(i)}-nics"},
        "spec": {"driver": DRIVER, "nodeName": node_name(i),
                 "pool": {"name": node_name(i), "generation": generation, "resourceSliceCount": 1},
                 "devices": [{"name": "nic0", "allowMultipleAllocations": True,
                              "attributes": {"gen": {"int": gen_attr}},
                              "capacity": {SLOTS: {"value": str(slots)}}}]}})]


def test_a_pod_removed_from_a_node_drops_its_verdicts() -> None:
    w = World()
    w.foreign("hog", 0, "4")  # node-0's whole CPU
    assert w.schedule("a") == node_name(1)  # Insufficient cpu on node-0: kept
    w.cluster.delete("Pod", "default/hog")  # only node-0's pods change
    assert w.schedule("b") == node_name(0)  # the emptier node
    assert w.verdicts.stale == 0


def test_a_pod_assumed_on_a_node_drops_its_verdicts() -> None:
    w = World(cpu=None)  # no node scores: the first node that fits wins
    # Pods without claims: no device changes, only the pods counted on node-0 do.
    assert w.schedule("a", port=9000, claims=False) == node_name(0)
    assert w.schedule("b", port=9000, claims=False) == node_name(1)  # a holds node-0's port
    assert w.verdicts.stale == 0, "node-0's verdict from before a was assumed was used"


def test_a_node_changed_drops_its_verdicts() -> None:
    taint = [{"key": "k", "effect": "NoSchedule"}]
    w = World(first_node=node(0, taints=taint))
    assert w.schedule("a") == node_name(1)  # node-0 tainted: kept
    assert w.cluster.apply(node(0, gen=2)).applied  # the taint removed
    assert w.schedule("b") == node_name(0)
    assert w.verdicts.stale == 0


def test_a_slice_republished_drops_its_verdicts() -> None:
    w = World(slots=1, published={0: _nics(0, slots=1, generation=1)})
    assert w.schedule("x") == node_name(0)
    assert w.schedule("a") == node_name(1)  # node-0's one slot taken: kept
    for s in _nics(0, slots=2, generation=2):  # node-0's NIC republished with 2 slots
        assert w.cluster.apply(s).applied
    assert w.schedule("b") == node_name(0)  # one pod on each: the tie goes to node-0
    assert w.verdicts.stale == 0


def test_a_class_changed_drops_the_verdicts() -> None:
    domain = DRIVER
    w = World(published={i: _nics(i, slots=2, generation=1, gen_attr=i + 1) for i in range(2)},
              device_class=_nic_class(f'device.attributes["{domain}"].gen >= 2'))
    assert w.schedule("a") == node_name(1)  # node-0's NIC does not match the class: kept
    assert w.cluster.apply(_nic_class(f'device.attributes["{domain}"].gen >= 1')).applied
    assert w.schedule("b") == node_name(0)
    assert w.verdicts.stale == 0


def test_a_claim_deallocated_drops_the_verdicts_of_its_node() -> None:
    w = World(slots=1)
    w.allocated("other", 0, 0)  # node-0's one slot, no pod
    assert w.schedule("a") == node_name(1)  # node-0 full: kept
    w.cluster.delete("ResourceClaim", "default/other-nic")  # only node-0's NIC changes
    assert w.schedule("b") == node_name(0)
    assert w.verdicts.stale == 0


def test_changes_dropped_from_the_state_log_move_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    from dra_affinity.structured import state

    w = World(slots=1)
    w.allocated("other", 0, 0)  # node-0's one slot, no pod
    assert w.schedule("a") == node_name(1)  # node-0 full: kept
    monkeypatch.setattr(state, "CHANGES_KEPT", 1)  # the log keeps almost nothing
    w.cluster.delete("ResourceClaim", "default/other-nic")  # node-0's NIC freed ...
    w.allocated("again", 0, 0)
    w.cluster.delete("ResourceClaim", "default/again-nic")  # ... and more, past the log
    assert w.schedule("b") == node_name(0)
    assert w.verdicts.stale == 0, "node-0's verdict from before the dropped changes was used"


def test_a_lock_released_drops_the_verdicts_of_its_node() -> None:
    w = World(slots=4)
    w.allocated("other", 0, 1)  # node-0's NIC locked to value 1, room left
    assert w.schedule("a", value=0) == node_name(1)  # lock mismatch on node-0: kept
    w.cluster.delete("ResourceClaim", "default/other-nic")  # the lock goes with it
    assert w.schedule("b", value=0) == node_name(0)
    assert w.verdicts.stale == 0


def test_a_network_attached_device_changed_drops_the_verdicts_of_every_node_reaching_it() -> None:
    cluster = Cluster()
    cluster.apply(device_class())
    for i in range(3):
        assert cluster.apply(node(i)).applied  # zones a, b, a
    for s in network_pool("a", devices=1, slots=1):
        assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), fast_paths=VERDICTS_ONLY)
    sched.start()

    def schedule(name: str) -> str | None:
        claim, pod = pod_objects(name, 0)
        assert cluster.apply(claim).applied and cluster.apply(requesting(pod, "1")).applied
        return sched.schedule(f"default/{name}").node

    assert schedule("x") == node_name(0)  # the pool's one slot, reached from nodes 0 and 2
    assert schedule("a") is None  # kept: no room on nodes 0 and 2, no NIC on node 1
    hog = requesting(pod_objects("hog", 0)[1], "4").model_dump(by_alias=True, exclude_none=True)
    hog["spec"] = {"nodeName": node_name(0), "containers": hog["spec"]["containers"]}
    assert cluster.apply(Pod.model_validate(hog)).applied  # node-0's whole CPU
    cluster.delete("Pod", "default/x")  # frees the slot: node-2's only change
    assert schedule("b") == node_name(2)
    assert sched.verdicts is not None and sched.verdicts.reused > 0
    assert sched.verdicts.stale == 0


def test_signatures_are_bounded() -> None:
    from dra_affinity.scheduler.fastpath import verdicts

    w = World()
    for n in range(verdicts.MAX_SIGNATURES + 5):
        w.schedule(f"p{n}", cpu=f"{n + 1}m")  # a signature each (most fail: 8 pods a node)
    assert w.verdicts.signatures == verdicts.MAX_SIGNATURES


def test_a_pod_tried_again_reuses_its_own_reasons_until_a_node_changes() -> None:
    w = World(slots=2)
    w.foreign("hog", 1, "4")  # node-1's whole CPU
    assert w.schedule("x", value=1) == node_name(0)  # node-0's NIC locked to value 1
    claim, pod = pod_objects("a", 0)
    assert w.cluster.apply(claim).applied and w.cluster.apply(requesting(pod, "1")).applied
    first = w.sched.schedule("default/a")
    assert first.result is Result.UNSCHEDULABLE and "AffinityLockMismatch" in first.message
    computed = w.verdicts.computed
    again = w.sched.schedule("default/a")
    assert again.message == first.message
    assert w.verdicts.computed == computed, "the pod's own reasons were computed again"
    w.allocated("other", 0, 1)  # node-0's NIC now full: its reason changes
    third = w.sched.schedule("default/a")
    assert third.result is Result.UNSCHEDULABLE
    assert "InsufficientCapacity" in third.message and "AffinityLockMismatch" not in third.message
    w.cluster.delete("Pod", "default/hog")  # node-1 changes: it fits
    assert w.sched.schedule("default/a").node == node_name(1)
    assert w.verdicts.stale == 0


# ---------------------------------------------------------------- metrics
def _verdict_series(sched: Scheduler) -> dict[str, tuple[str, float]]:
    """The verdict series of the scheduler's exposition text: type and value by sample."""
    out: dict[str, tuple[str, float]] = {}
    for family in text_string_to_metric_families(sched.metrics.exposition()):
        for s in family.samples:
            if "verdict" in s.name:
                labels = "".join(f'{{{k}="{v}"}}' for k, v in sorted(s.labels.items()))
                out[s.name + labels] = (family.type, s.value)
    return out


def _expected(v: VerdictCache) -> dict[str, tuple[str, float]]:
    return {'dra_affinity_filter_verdicts_total{outcome="reused"}': ("counter", v.reused),
            'dra_affinity_filter_verdicts_total{outcome="computed"}': ("counter", v.computed),
            "dra_affinity_filter_stale_verdicts_total": ("counter", v.stale),
            "dra_affinity_filter_verdict_signatures": ("gauge", v.signatures)}


def _two_nics(w: World, name: str) -> Attempt:
    """A pod with two claims (its whole result per node is kept, not its devices')."""
    first, pod = pod_objects(name, 0)
    second, _ = pod_objects(f"{name}-2", 0)
    ref = pod.spec.resource_claims[0]
    refs = [ref, ref.model_copy(update={"name": "nic-2", "resource_claim_name": second.metadata.name})]
    pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"resource_claims": refs})})
    for obj in (first, second, requesting(pod, "1")):
        assert w.cluster.apply(obj).applied
    return w.sched.schedule(f"default/{name}")


def test_the_metrics_count_the_verdicts_once_a_cycle_and_once_each() -> None:
    w = World(slots=2)
    w.foreign("hog", 1, "4")  # node-1's whole CPU
    assert w.schedule("x", value=1) == node_name(0)  # node-0's NIC locked to value 1
    claim, pod = pod_objects("a", 0)
    assert w.cluster.apply(claim).applied and w.cluster.apply(requesting(pod, "1")).applied
    for _ in range(2):  # fits nowhere; tried again, it reuses its own reasons
        assert w.sched.schedule("default/a").result is Result.UNSCHEDULABLE
    v, m = w.verdicts, w.sched.metrics
    assert v.reused > 0 and v.computed > 0
    # Tallied as each cycle ended, folded into the counters when read.
    assert m.pending[VERDICTS_REUSED] == v.reused
    assert m.pending[VERDICTS_COMPUTED] == v.computed
    assert _verdict_series(w.sched) == _expected(v)
    w.cluster.delete("Pod", "default/hog")  # node-1 fits now
    assert w.sched.schedule("default/a").node == node_name(1)
    assert _verdict_series(w.sched) == _expected(v), "read twice, counted twice"
    assert v.stale == 0


def test_a_stale_verdict_is_counted_and_the_cycle_still_decides_right() -> None:
    w = World()
    assert _two_nics(w, "a").node == node_name(0)  # both fit, the tie to node-0: node-1's kept
    assert w.verdicts.signatures == 1
    # A missed invalidation: node-1's pods change and its generation does not move.
    w.verdicts.close()
    w.foreign("hog", 1, "4")  # node-1's whole CPU
    # node-0's NIC is full: the kept verdict says node-1 fits, node-1's fresh one disagrees.
    c = _two_nics(w, "c")
    assert c.node is None
    assert c.message == "0/2 nodes are available: 1 Insufficient cpu, 1 InsufficientCapacity."
    assert w.verdicts.stale == 1
    assert _verdict_series(w.sched) == _expected(w.verdicts)
    assert _verdict_series(w.sched)["dra_affinity_filter_stale_verdicts_total"] == ("counter", 1)
    # The kept verdicts were dropped with it.
    assert _verdict_series(w.sched)["dra_affinity_filter_verdict_signatures"] == ("gauge", 0)


def test_the_signatures_gauge_follows_the_kept_signatures() -> None:
    w = World()
    for n in range(3):
        w.schedule(f"p{n}", cpu=f"{n + 1}m")  # a signature each
        assert _verdict_series(w.sched)["dra_affinity_filter_verdict_signatures"] == ("gauge", n + 1)


def test_without_kept_verdicts_the_series_are_there_at_zero() -> None:
    _, sched = run(FastPaths.none(), "firstfit", 1, steps=20)
    assert sched.verdicts is None
    assert set(_verdict_series(sched).values()) == {("counter", 0), ("gauge", 0)}


# ---------------------------------------------------------------- node filters per placement
def test_pods_that_differ_only_in_their_claims_share_the_node_filters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One template per subnet gives one signature per subnet; the node filters read
    none of the claims, so a node unchanged since any of them was judged is not judged
    again."""
    import dra_affinity.scheduler.fastpath.verdicts as verdicts

    judged: list[str] = []
    real = verdicts.node_rejection

    def spy(cache: Any, cyc: Any, node: str, labels: Any) -> Any:
        judged.append(node)
        return real(cache, cyc, node, labels)

    monkeypatch.setattr(verdicts, "node_rejection", spy)
    w = World()
    assert w.schedule("a", value=0) == node_name(0)
    assert sorted(judged) == [node_name(0), node_name(1)]
    judged.clear()
    assert w.schedule("b", value=1) is not None  # another subnet: its own signature
    assert judged == [node_name(0)], "only the node a landed on is judged again"
    judged.clear()
    assert w.schedule("c", value=1, cpu="2") is not None  # another placement: its own
    assert sorted(judged) == [node_name(0), node_name(1)]
    assert w.verdicts.stale == 0


def test_a_node_filled_by_a_pod_of_other_claims_is_judged_again() -> None:
    """The node filters' pass is kept per node generation: a pod of another subnet that
    took node-0's CPU makes node-0 fail for the next one."""
    w = World(cpu="1")
    assert w.schedule("a", value=0, cpu="1") == node_name(0)
    assert w.schedule("b", value=1, cpu="1") == node_name(1)  # node-0: Insufficient cpu
    assert w.schedule("c", value=0, cpu="1") is None
    assert w.verdicts.stale == 0


def test_content_numbers_dropped_when_full_take_what_was_kept_under_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Device contents are numbered once per device version; when the numbers run out
    they start over, and verdicts kept under the old numbers must not answer for new
    contents: the choices stay the reference's."""
    import dra_affinity.scheduler.fastpath.verdicts as verdicts

    monkeypatch.setattr(verdicts, "MAX_CONTENT_IDS", 3)
    slow, _ = run(FastPaths.none(), "affinity", 2, steps=120)
    fast, sched = run(VERDICTS_ONLY, "affinity", 2, steps=120)
    assert fast == slow
    assert sched.verdicts is not None and sched.verdicts.stale == 0
