"""A pod that fits nowhere, tried again (the unschedulable pool's flush): while its
signature and the nodes are unchanged, the retry reuses the kept rejections and the
rendered FitError message instead of filtering every node again, for the same pod
and for another pod of its signature when no reason names a claim. Every change that
can alter a rejection makes the retry filter again (a test per change, each failing
without its invalidation), and what a retry reports (result, message, reasons, the
KEP's counters) is what the reference reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from dra_affinity.features import Features
from dra_affinity.observe.metrics import VERDICTS_COMPUTED, VERDICTS_REUSED
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.fastpath.verdicts import VerdictCache
from dra_affinity.scheduler.scheduler import Attempt, Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.workload import (
    DRIVER,
    SLOTS,
    WorkloadSpec,
    device_class,
    node_name,
    pod_objects,
    slices,
)
from dra_affinity.structured.model import Result

VERDICTS_ONLY = FastPaths(False, False, False, True)
#: (fast paths, whether Nodes report allocatable): without, the indexes look first and
#: the kept scan after them stands for the reference's full pass; with, node scores rank
#: and the scan goes through the kept verdicts from the start.
PATHS = [(FastPaths.all(), None), (FastPaths.all(), "4"), (VERDICTS_ONLY, None)]
PATH_IDS = ["indexes-first", "node-scores", "verdicts-only"]
Outcome = tuple[str, str | None, str, tuple[tuple[str, str | None, str | None, str], ...]]


def node(i: int, cpu: str | None, taints: list[dict[str, str]] | None = None) -> Node:
    status = {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "8"}} if cpu is not None else {}
    return Node.model_validate({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(i)},
                                "spec": {"taints": taints or []}, "status": status})


def outcome(a: Attempt) -> Outcome:
    return (a.result.value, a.node, a.message,
            tuple((r.code, r.node, r.device, r.message) for r in a.reasons))


class World:
    """Two nodes, one NIC of ``slots`` slots each (sharing affinity published), and one
    scheduler with the given fast paths."""

    def __init__(self, paths: FastPaths, cpu: str | None, slots: int = 2) -> None:
        self.cpu = cpu
        self.cluster = Cluster()
        self.spec = WorkloadSpec(nodes=2, devices_per_node=1, slots=slots, values=2)
        assert self.cluster.apply(device_class()).applied
        for i in range(2):
            assert self.cluster.apply(node(i, cpu)).applied
            for s in slices(self.spec, i):
                assert self.cluster.apply(s).applied
        self.sched = Scheduler(self.cluster, Features(), fast_paths=paths)
        self.sched.start()
        self._shares = 0

    @property
    def verdicts(self) -> VerdictCache:
        assert self.sched.verdicts is not None
        return self.sched.verdicts

    def allocated(self, name: str, on: int, value: int) -> None:
        """A one-slot claim another scheduler allocated on node ``on``'s NIC (no pod)."""
        self._shares += 1
        claim, _ = pod_objects(name, value)
        body = claim.model_dump(by_alias=True, exclude_none=True)
        body["status"] = {"allocation": {"devices": {"results": [{
            "request": "nic", "driver": DRIVER, "pool": node_name(on), "device": "nic0",
            "shareID": f"{self._shares:08x}-0000-4000-8000-000000000000",
            "consumedCapacity": {SLOTS: "1"}}]}}}
        assert self.cluster.apply(ResourceClaim.model_validate(body)).applied

    def pending(self, name: str, value: int = 0) -> str:
        """A pod of one slot of subnet ``value`` and its own claim; its key."""
        claim, pod = pod_objects(name, value)
        if self.cpu is not None:
            container = {"name": "app", "image": "x", "resources": {"requests": {"cpu": "1"}}}
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"containers": [container]})})
        assert self.cluster.apply(claim).applied and self.cluster.apply(pod).applied
        return f"default/{name}"

    def full(self) -> None:
        """Every slot taken: node-0's NIC by subnet 0, node-1's by subnet 1."""
        for i in range(2):
            for s in range(self.spec.slots):
                self.allocated(f"x{i}{s}", i, i)

    def reference(self, key: str) -> Outcome:
        """What the reference (no fast path) reports for the pod now; it must not fit
        (a failed attempt writes nothing)."""
        ref = Scheduler(self.cluster, Features(), fast_paths=FastPaths.none())
        try:
            a = ref.schedule(key)
        finally:
            ref.stop()
        assert a.result is Result.UNSCHEDULABLE
        return outcome(a)


@pytest.mark.parametrize(("paths", "cpu"), PATHS, ids=PATH_IDS)
def test_a_retry_reuses_the_kept_rejections_and_message(paths: FastPaths, cpu: str | None) -> None:
    w = World(paths, cpu)
    w.full()
    a, b = w.pending("a"), w.pending("b")
    first = w.sched.schedule(a)
    assert first.message == "0/2 nodes are available: 2 InsufficientCapacity."
    computed, reused = w.verdicts.computed, w.verdicts.reused
    again = w.sched.schedule(a)
    assert outcome(again) == outcome(first)
    assert w.verdicts.computed == computed, "the retry filtered nodes again"
    assert w.verdicts.reused == reused + 2, "each node's kept rejection once"
    # Another pod of the signature: the reasons name no claim, so they are its own too.
    other = w.sched.schedule(b)
    assert w.verdicts.computed == computed
    assert other.message == first.message and outcome(other) == w.reference(b)
    assert outcome(again) == w.reference(a)
    m = w.sched.metrics.pending
    assert (m[VERDICTS_COMPUTED], m[VERDICTS_REUSED]) == (computed, w.verdicts.reused)


@pytest.mark.parametrize(("paths", "cpu"), PATHS, ids=PATH_IDS)
def test_reasons_that_name_the_claim_are_the_pods_own(paths: FastPaths, cpu: str | None) -> None:
    w = World(paths, cpu)
    w.allocated("x00", 0, 1)  # node-0's NIC locked to subnet 1, a slot left
    for s in range(2):
        w.allocated(f"x1{s}", 1, 1)  # node-1's NIC full
    a, b, c = w.pending("a"), w.pending("b"), w.pending("c")
    first = w.sched.schedule(a)
    assert "AffinityLockMismatch" in first.message and "claim default/a-nic" in first.message
    computed = w.verdicts.computed
    assert outcome(w.sched.schedule(a)) == outcome(first)
    assert w.verdicts.computed == computed
    # b's lock mismatch on node-0 names its claim: node-0 is filtered once more, for
    # claims under placeholder keys, and each pod's text made from that; node-1's
    # InsufficientCapacity names none and is shared as it is.
    other = w.sched.schedule(b)
    assert w.verdicts.computed == computed + 1
    assert "claim default/b-nic" in other.message and "default/a-nic" not in other.message
    assert outcome(other) == w.reference(b)
    assert outcome(w.sched.schedule(b)) == outcome(other)
    third = w.sched.schedule(c)
    assert "claim default/c-nic" in third.message and outcome(third) == w.reference(c)
    assert outcome(w.sched.schedule(a)) == outcome(first) == w.reference(a)
    assert w.verdicts.computed == computed + 1


def _taint_node_0(w: World) -> None:
    assert w.cluster.apply(node(0, w.cpu, [{"key": "k", "effect": "NoSchedule"}])).applied


def _free_node_0(w: World) -> None:
    for s in range(w.spec.slots):
        w.cluster.delete("ResourceClaim", f"default/x0{s}-nic")


def _republish_node_0(w: World) -> None:
    for published in slices(w.spec, 0):  # the pool at generation 2, its NIC with 3 slots
        body = published.model_dump(by_alias=True, exclude_none=True)
        body["spec"]["pool"]["generation"] = 2
        for d in body["spec"].get("devices", ()):
            d["capacity"][SLOTS]["value"] = "3"
        assert w.cluster.apply(ResourceSlice.model_validate(body)).applied


def _narrow_the_class(w: World) -> None:
    body = device_class().model_dump(by_alias=True, exclude_none=True)
    body["spec"]["selectors"] = [{"cel": {"expression": 'device.driver == "other.example.com"'}}]
    assert w.cluster.apply(DeviceClass.model_validate(body)).applied


def _hog_node_1(w: World) -> None:
    """A pod another scheduler bound to node-1, taking its whole CPU."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "namespace": "default"},
                            "spec": {"nodeName": node_name(1), "containers": [
                                {"name": "app", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}}
    assert w.cluster.apply(Pod.model_validate(body)).applied


# (change, what the pod meets after it: a node, or None for a message the reference
# renders). Each starts from full nodes, after a first attempt and a retry that reused.
CHANGES: dict[str, tuple[Callable[[World], None], str | None]] = {
    "node tainted": (_taint_node_0, None),
    "claims deallocated": (_free_node_0, node_name(0)),
    "slice republished": (_republish_node_0, node_name(0)),
    "class narrowed": (_narrow_the_class, None),
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize(("paths", "cpu"), PATHS, ids=PATH_IDS)
def test_a_change_makes_the_retry_filter_again(change: str, paths: FastPaths, cpu: str | None) -> None:
    w = World(paths, cpu)
    w.full()
    a = w.pending("a")
    first = w.sched.schedule(a)
    assert first.result is Result.UNSCHEDULABLE
    computed = w.verdicts.computed
    assert outcome(w.sched.schedule(a)) == outcome(first) and w.verdicts.computed == computed
    do, fits_on = CHANGES[change]
    do(w)
    if fits_on is None:
        expected = w.reference(a)
        assert expected != outcome(first)
        assert outcome(w.sched.schedule(a)) == expected
        assert w.verdicts.computed > computed
    else:  # (the indexes may find it before any kept verdict is read)
        assert w.sched.schedule(a).node == fits_on
    assert w.verdicts.stale == 0


@pytest.mark.parametrize(("paths", "cpu"), [p for p in PATHS if p[1] is not None])
def test_a_pod_bound_elsewhere_makes_the_retry_filter_again(paths: FastPaths, cpu: str) -> None:
    w = World(paths, cpu)
    w.full()
    a = w.pending("a")
    first = w.sched.schedule(a)
    computed = w.verdicts.computed
    assert outcome(w.sched.schedule(a)) == outcome(first) and w.verdicts.computed == computed
    _hog_node_1(w)  # node-1's CPU taken: its first reason is now Insufficient cpu
    expected = w.reference(a)
    assert "Insufficient cpu" in expected[2] and expected != outcome(first)
    assert outcome(w.sched.schedule(a)) == expected
    assert w.verdicts.computed > computed


@pytest.mark.parametrize(("paths", "cpu"), PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("change", ["claim allocated", "lock released"])
def test_a_claim_or_lock_change_makes_the_retry_filter_again(change: str, paths: FastPaths,
                                                               cpu: str | None) -> None:
    w = World(paths, cpu)
    w.allocated("x00", 0, 1)  # node-0's NIC locked to subnet 1, a slot left
    for s in range(2):
        w.allocated(f"x1{s}", 1, 1)
    a = w.pending("a")
    first = w.sched.schedule(a)
    assert "AffinityLockMismatch" in first.message
    computed = w.verdicts.computed
    assert outcome(w.sched.schedule(a)) == outcome(first) and w.verdicts.computed == computed
    if change == "claim allocated":
        w.allocated("x01", 0, 1)  # node-0's last slot: InsufficientCapacity, no mismatch
        again = w.sched.schedule(a)
        assert again.message == "0/2 nodes are available: 2 InsufficientCapacity."
        assert outcome(again) == w.reference(a)
        assert w.verdicts.computed > computed
    else:
        w.cluster.delete("ResourceClaim", "default/x00-nic")  # node-0's lock goes with it
        assert w.sched.schedule(a).node == node_name(0)
    assert w.verdicts.stale == 0


@pytest.mark.parametrize(("paths", "cpu"), PATHS, ids=PATH_IDS)
def test_retries_count_lock_conflicts_as_the_reference_does(paths: FastPaths, cpu: str | None) -> None:
    def run(paths: FastPaths) -> list[tuple[Outcome, int, int]]:
        w = World(paths, cpu)
        w.allocated("x00", 0, 1)
        for s in range(2):
            w.allocated(f"x1{s}", 1, 1)
        keys = [w.pending("a"), w.pending("b")]
        out = []
        for k in [*keys, *keys, keys[0]]:
            a = outcome(w.sched.schedule(k))
            m = w.sched.metrics.values()
            out.append((a, m["sharing_affinity_lock_conflict_total"], m["sharing_affinity_no_keys_extracted_total"]))
        return out

    fast, slow = run(paths), run(FastPaths.none())
    assert fast == slow
    assert [n for _, n, _ in slow] == [1, 2, 3, 4, 5], "one conflict an attempt (node-0's NIC)"


@pytest.mark.parametrize(("paths", "cpu"), PATHS, ids=PATH_IDS)
def test_a_pod_of_two_claims_gets_each_key_in_its_place(paths: FastPaths, cpu: str | None) -> None:
    w = World(paths, cpu)
    w.allocated("x00", 0, 1)  # node-0's NIC locked to subnet 1, a slot left
    for s in range(2):
        w.allocated(f"x1{s}", 1, 1)

    def two(name: str) -> str:
        first, pod = pod_objects(name, 0)
        second, _ = pod_objects(f"{name}-2", 0)
        ref = pod.spec.resource_claims[0]
        refs = [ref, ref.model_copy(update={"name": "nic-2", "resource_claim_name": second.metadata.name})]
        pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"resource_claims": refs})})
        for obj in (first, second, pod):
            assert w.cluster.apply(obj).applied
        return f"default/{name}"

    keys = [two(n) for n in ("a", "b", "c")]
    seen = [outcome(w.sched.schedule(k)) for k in keys]
    computed = w.verdicts.computed
    assert [outcome(w.sched.schedule(k)) for k in keys] == seen
    assert w.verdicts.computed == computed
    assert seen == [w.reference(k) for k in keys]
    assert "claim default/c-nic" in seen[2][2] and "default/a-nic" not in seen[2][2]
