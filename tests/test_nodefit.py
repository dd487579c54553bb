"""The non-DRA node filters (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.api.core import Node, Pod
from dra_affinity.kube.projection import slim_pod
from dra_affinity.scheduler.nodefit import (
    NO_PLACEMENT,
    NodeUsage,
    PlacementError,
    check_node,
    node_facts,
    placement_of,
    pod_requests,
    same_but_node,
    untolerated,
)
from dra_affinity.structured import reasons


def pod(name: str = "p", node: str | None = None, phase: str | None = None, **spec: Any) -> Pod:
    data: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    if node:
        data["spec"]["nodeName"] = node
    if phase:
        data["status"] = {"phase": phase}
    return Pod.model_validate(data)


def node(name: str = "n1", *, taints: list[dict[str, str]] | None = None, unschedulable: bool = False,
         allocatable: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Node:
    data: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": name, "labels": labels or {}},
                            "spec": {"taints": taints or [], "unschedulable": unschedulable}}
    if allocatable is not None:
        data["status"] = {"allocatable": allocatable}
    return Node.model_validate(data)


def container(**requests: str) -> dict[str, Any]:
    return {"name": "c", "image": "x", "resources": {"requests": requests}}


def verdict(p: Pod, n: Node, used: dict[str, int] | None = None) -> str | None:
    labels = {**n.metadata.labels, "kubernetes.io/hostname": n.name}
    got = check_node(placement_of(p), node_facts(n), labels, used or {})
    return None if got is None else got[0]


# ------------------------------------------------------------------ taints and tolerations
@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [
    ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
     {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
    ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),  # no effect: any
    ({"key": "k", "value": "v", "effect": "NoExecute"}, {"key": "k", "value": "v", "effect": "NoSchedule"},
     False),
    ({"key": "k", "value": "other"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
    ({"key": "k", "operator": "Exists"}, {"key": "k", "value": "anything", "effect": "NoSchedule"}, True),
    ({"operator": "Exists"}, {"key": "any", "value": "v", "effect": "NoExecute"}, True),  # tolerates all
    ({"key": "j", "operator": "Exists"}, {"key": "k", "effect": "NoSchedule"}, False),
    ({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"}, True),  # empty value = empty
])
def test_toleration_matching(toleration: dict[str, str], taint: dict[str, str], tolerated: bool) -> None:
    p = pod(tolerations=[toleration])
    n = node(taints=[taint])
    assert verdict(p, n) == (None if tolerated else reasons.TAINT_NOT_TOLERATED)


def test_prefer_no_schedule_taints_do_not_filter() -> None:
    assert verdict(pod(), node(taints=[{"key": "k", "effect": "PreferNoSchedule"}])) is None


def test_every_scheduling_taint_must_be_tolerated() -> None:
    taints = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]
    assert verdict(pod(tolerations=[{"key": "a", "operator": "Exists"}]), node(taints=taints)) \
        == reasons.TAINT_NOT_TOLERATED
    both = [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    assert verdict(pod(tolerations=both), node(taints=taints)) is None
    placement = placement_of(pod(tolerations=both[:1]))
    assert untolerated(taints, placement.tolerations) == taints[1]


def test_message_names_the_taint() -> None:
    got = check_node(NO_PLACEMENT, node_facts(node(taints=[{"key": "gpu", "value": "yes",
                                                            "effect": "NoSchedule"}])), {}, {})
    assert got is not None and "gpu=yes:NoSchedule" in got[1]


def test_unschedulable_node_unless_tolerated() -> None:
    n = node(unschedulable=True)
    assert verdict(pod(), n) == reasons.NODE_UNSCHEDULABLE
    tol = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert verdict(pod(tolerations=[tol]), n) is None


# ------------------------------------------------------------------ node affinity
def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


def test_required_node_affinity_terms_or_expressions_and() -> None:
    zone_a = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                   {"key": "gpu", "operator": "DoesNotExist"}]}
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}
    p = pod(affinity=affinity(zone_a, by_name))
    assert verdict(p, node("n1", labels={"zone": "a"})) is None
    assert verdict(p, node("n1", labels={"zone": "a", "gpu": "1"})) == reasons.NODE_AFFINITY_MISMATCH
    assert verdict(p, node("n1", labels={"zone": "b"})) == reasons.NODE_AFFINITY_MISMATCH
    assert verdict(p, node("n9", labels={"zone": "b"})) is None


def test_preferred_node_affinity_does_not_filter() -> None:
    p = pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}]}})
    placement = placement_of(p)
    assert placement.terms.soft and len(placement.terms.preferred_nodes) == 1
    assert verdict(p, node()) is None


# ------------------------------------------------------------------ resources
def test_requests_sum_containers_and_take_the_init_peak() -> None:
    p = pod(containers=[container(cpu="500m", memory="1Gi"), container(cpu="250m")],
            initContainers=[{"name": "i", "image": "x",
                             "resources": {"requests": {"cpu": "2", "memory": "128Mi"}}}])
    assert pod_requests(p) == {"cpu": 2000, "memory": 1 << 30}


def test_sidecars_run_with_the_app_and_later_init_containers() -> None:
    sidecar = {"name": "s", "image": "x", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": "1"}}}
    init = {"name": "i", "image": "x", "resources": {"requests": {"cpu": "1500m"}}}
    p = pod(containers=[container(cpu="1")], initContainers=[sidecar, init])
    # apps + sidecars = 2000m; the init container runs beside the sidecar: 2500m.
    assert pod_requests(p) == {"cpu": 2500}


def test_limits_stand_in_for_missing_requests_and_overhead_adds() -> None:
    res = {"limits": {"memory": "2Gi", "cpu": "2"}, "requests": {"cpu": "1"}}
    p = pod(containers=[{"name": "c", "image": "x", "resources": res}], overhead={"memory": "100Mi"})
    assert pod_requests(p) == {"cpu": 1000, "memory": (2 << 30) + 100 * (1 << 20)}


def test_pod_level_resources_replace_cpu_and_memory() -> None:
    p = pod(containers=[container(cpu="100m", **{"example.com/fpga": "1"})],
            resources={"requests": {"cpu": "3"}})
    assert pod_requests(p) == {"cpu": 3000, "example.com/fpga": 1}


@pytest.mark.parametrize(("extra", "want"), [
    ({}, {}),  # no container says resources: nothing asked
    ({"containers": [{"name": "c", "image": "x", "resources": {}}]}, {}),
    ({"containers": [{"name": "c", "image": "x"}, container(cpu="1")]}, {"cpu": 1000}),
    ({"overhead": {"cpu": "10m"}}, {"cpu": 10}),
    ({"resources": {"requests": {"memory": "1Mi"}}}, {"memory": 1 << 20}),
    ({"initContainers": [{"name": "i", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
     {"cpu": 1000}),
])
def test_requests_of_pods_that_ask_for_little_or_nothing(extra: dict[str, Any],
                                                         want: dict[str, int]) -> None:
    assert pod_requests(pod(**extra)) == want


def test_resource_fit() -> None:
    n = node(allocatable={"cpu": "4", "memory": "8Gi", "pods": "3"})
    p = pod(containers=[container(cpu="2", memory="1Gi")])
    assert verdict(p, n) is None
    assert verdict(p, n, {"cpu": 2000, "pods": 1}) is None  # exactly fits
    assert verdict(p, n, {"cpu": 2001, "pods": 1}) == reasons.INSUFFICIENT_NODE_RESOURCES
    assert verdict(pod(), n, {"pods": 3}) == reasons.INSUFFICIENT_NODE_RESOURCES  # too many pods
    fpga = pod(containers=[container(**{"example.com/fpga": "1"})])
    assert verdict(fpga, n) == reasons.INSUFFICIENT_NODE_RESOURCES  # not on this node at all


def test_node_without_allocatable_is_not_resource_checked() -> None:
    assert verdict(pod(containers=[container(cpu="64")]), node()) is None


def test_insufficient_message_lists_resources() -> None:
    n = node_facts(node(allocatable={"cpu": "1", "memory": "1Gi", "pods": "10"}))
    got = check_node(placement_of(pod(containers=[container(cpu="2", memory="2Gi")])), n, {}, {})
    assert got is not None
    assert got[:2] == (reasons.INSUFFICIENT_NODE_RESOURCES, "node n1: insufficient cpu, memory")
    assert got.plugin == "NodeResourcesFit"
    assert got.reasons == ("Insufficient cpu", "Insufficient memory")


# ------------------------------------------------------------------ usage
def test_node_usage_follows_pod_events() -> None:
    u = NodeUsage()
    a = pod("a", node="n1", containers=[container(cpu="1")])
    u.update("default/a", pod("a", containers=[container(cpu="1")]))  # pending: nothing
    assert u.on("n1") == {}
    u.update("default/a", a)
    u.update("default/b", pod("b", node="n1", containers=[container(cpu="500m")]))
    assert u.on("n1") == {"cpu": 1500, "pods": 2}
    u.update("default/a", a)  # a resync counts once
    assert u.on("n1") == {"cpu": 1500, "pods": 2}
    u.update("default/a", pod("a", node="n1", phase="Succeeded", containers=[container(cpu="1")]))
    assert u.on("n1") == {"cpu": 500, "pods": 1}
    u.update("default/b", None)
    assert u.on("n1") == {} and len(u) == 0 and not u.requested


class Heard:
    """A PodListener that counts what it hears."""

    def __init__(self) -> None:
        self.added = self.removed = 0

    def pod_added(self, pod: object) -> None:
        self.added += 1

    def pod_removed(self, pod: object) -> None:
        self.removed += 1


def test_assumed_pod_confirmed_where_assumed_keeps_its_record() -> None:
    u = NodeUsage()
    heard = Heard()
    u.listeners.append(heard)
    pending = pod("a", containers=[container(cpu="1")])
    u.assume("default/a", pending, "n1")
    record, version = u.pods["default/a"], u.version
    bound = pending.model_copy(update={
        "spec": pending.spec.model_copy(update={"node_name": "n1"}),
        "metadata": pending.metadata.model_copy(update={"resource_version": "7"})})
    u.update("default/a", bound)
    assert u.pods["default/a"] is record and u.version == version
    assert (heard.added, heard.removed) == (1, 0)
    assert u.on("n1") == {"cpu": 1000, "pods": 1} and not u.assumed
    # Confirmed once: a later event that changes nothing recorded is no change either.
    u.update("default/a", bound)
    assert u.pods["default/a"] is record and u.version == version
    assert (heard.added, heard.removed) == (1, 0)


def _bound_raw(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "default", "labels": {"app": "a"},
                         "resourceVersion": "7", "uid": "u1"},
            "spec": {"nodeName": "n1", "schedulerName": "dra-affinity",
                     "containers": [{**container(cpu="1"), "image": "pause",
                                     "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                     "tolerations": [{"operator": "Exists"}], "dnsPolicy": "ClusterFirst"},
            "status": {"phase": "Pending", **status}}


@pytest.mark.parametrize("later", [
    _bound_raw(conditions=[{"type": "PodScheduled", "status": "True"}]),
    slim_pod(_bound_raw(conditions=[{"type": "PodScheduled", "status": "True"}])),
    slim_pod(_bound_raw(phase="Running", podIP="10.0.0.7")),
], ids=["status", "slim", "running"])
def test_a_bound_pod_whose_record_would_not_change_keeps_it_and_tells_no_one(
        later: dict[str, Any]) -> None:
    """Kubelets write a bound pod's status often, and the informer keeps bound pods as
    a slim projection: neither changes what the node counts, so listeners (which drop
    what they derived from the node) are not told."""
    u = NodeUsage()
    heard = Heard()
    u.listeners.append(heard)
    u.update("default/a", Pod.model_validate(_bound_raw()))
    record, version = u.pods["default/a"], u.version
    u.update("default/a", Pod.model_validate(later))
    assert u.pods["default/a"] is record and u.version == version
    assert (heard.added, heard.removed) == (1, 0)


@pytest.mark.parametrize("change", [
    {"metadata": {"name": "a", "namespace": "default", "labels": {"app": "b"}}},
    {"metadata": {"name": "a", "namespace": "default", "labels": {"app": "a"},
                  "deletionTimestamp": "2026-01-01T00:00:00Z"}},
    {"status": {"phase": "Succeeded"}},
    {"spec": {**_bound_raw()["spec"], "nodeName": "n2"}},
], ids=["labels", "deleting", "terminal", "moved"])
def test_a_bound_pod_whose_record_changes_is_recorded_again(change: dict[str, Any]) -> None:
    u = NodeUsage()
    heard = Heard()
    u.listeners.append(heard)
    u.update("default/a", Pod.model_validate(_bound_raw()))
    u.update("default/a", Pod.model_validate({**_bound_raw(), **change}))
    fresh = NodeUsage()
    fresh.update("default/a", Pod.model_validate({**_bound_raw(), **change}))
    assert (u.requested, u.pods, u.ports) == (fresh.requested, fresh.pods, fresh.ports)
    assert heard.removed == 1


@pytest.mark.parametrize("bound", [
    pod("a", node="n2", containers=[container(cpu="1")]),  # bound elsewhere
    pod("a", node="n1", containers=[container(cpu="2")]),  # the spec changed
    pod("a", node="n1", phase="Succeeded", containers=[container(cpu="1")]),
    Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "a", "namespace": "default", "labels": {"tier": "x"}},
        "spec": {"nodeName": "n1", "containers": [container(cpu="1")]}}),
    None,  # deleted
    pod("a", containers=[container(cpu="1")]),  # not bound: the binding failed
])
def test_assumed_pod_that_changed_is_recorded_again(bound: Pod | None) -> None:
    u = NodeUsage()
    u.assume("default/a", pod("a", containers=[container(cpu="1")]), "n1")
    u.update("default/a", bound)
    fresh = NodeUsage()
    fresh.update("default/a", bound)
    assert (u.requested, u.pods.keys()) == (fresh.requested, fresh.pods.keys())
    assert not u.assumed


@pytest.mark.parametrize("assumed", [
    pod("a", containers=[container(cpu="1", memory="1Gi")]),
    pod("a", containers=[{**container(cpu="250m"), "ports": [{"containerPort": 80, "hostPort": 8080}]}],
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}),
    pod("a", containers=[container()]),
])
def test_assume_with_the_cycles_placement_records_what_parsing_the_pod_records(assumed: Pod) -> None:
    """Reserve hands the placement the cycle parsed; the record is the one the pod
    itself gives (requests, ports, affinity terms), so nothing a filter reads differs."""
    parsed, reparsed = NodeUsage(), NodeUsage()
    parsed.assume("default/a", assumed, "n1", placement_of(assumed))
    reparsed.assume("default/a", assumed, "n1")
    assert parsed.pods == reparsed.pods
    assert (parsed.requested, parsed.nonzero, parsed.ports, parsed.with_affinity.keys()) == \
        (reparsed.requested, reparsed.nonzero, reparsed.ports, reparsed.with_affinity.keys())


def test_same_but_node_reads_what_a_record_reads() -> None:
    a = pod("a", containers=[container(cpu="1")])
    bound = pod("a", node="n1", containers=[container(cpu="1")])
    assert same_but_node(a, bound) and same_but_node(a, a)
    assert not same_but_node(a, pod("a", node="n1", containers=[container(cpu="1")],
                                    tolerations=[{"operator": "Exists"}]))
    deleting = bound.model_copy(update={"metadata": bound.metadata.model_copy(
        update={"deletion_timestamp": "2026-01-01T00:00:00Z"})})
    assert not same_but_node(a, deleting)
    other_ns = bound.model_copy(update={"metadata": bound.metadata.model_copy(
        update={"namespace": "other"})})
    assert not same_but_node(a, other_ns)


# ------------------------------------------------------------------ malformed input
@pytest.mark.parametrize(("spec", "field"), [
    ({"tolerations": [{"key": "k", "operator": "Gte"}]}, "spec.tolerations[0].operator"),
    ({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}, "spec.tolerations[0].value"),
    ({"tolerations": [{"operator": "Equal", "value": "v"}]}, "spec.tolerations[0].operator"),
    ({"tolerations": [{"key": 3}]}, "spec.tolerations[0].key"),
    ({"tolerations": [{"key": "k", "effect": "Sometimes"}]}, "spec.tolerations[0].effect"),
    ({"containers": [container(cpu="lots")]}, "spec.containers[0].resources.requests.cpu"),
    ({"containers": [container(cpu="-1")]}, "spec.containers[0].resources.requests.cpu"),
    ({"containers": [{"name": "c", "resources": []}]}, "spec.containers[0].resources"),
    ({"affinity": {"nodeAffinity": []}}, "spec.affinity.nodeAffinity"),
    ({"affinity": affinity({"matchExpressions": [{"key": "k"}]})},
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0"
     ".matchExpressions.0.operator"),
    ({"overhead": {"cpu": "x"}}, "spec.overhead.cpu"),
    ({"containers": [{"name": "c", "resources": {"limits": {"memory": "1Q"}}}]},
     "spec.containers[0].resources.limits.memory"),
    ({"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]},
     "spec.containers[0].resources.requests"),
])
def test_malformed_placement_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(PlacementError) as e:
        placement_of(pod(**spec))
    assert e.value.field == field
    assert str(e.value).startswith(field + ": ")


def test_unparsable_allocatable_counts_as_zero() -> None:
    n = node(allocatable={"cpu": "many", "pods": "10"})
    assert node_facts(n).allocatable == {"cpu": 0, "pods": 10}
    assert verdict(pod(containers=[container(cpu="1m")]), n) == reasons.INSUFFICIENT_NODE_RESOURCES
