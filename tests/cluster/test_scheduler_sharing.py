"""``dra-affinity scheduler`` on a real control plane: placement by sharing affinity.

Sharing affinity reaches the scheduler through the bridge annotation (no released API
server stores ``spec.sharingAffinity``). Every test has its own namespace, driver,
DeviceClass and nodes; the scheduler runs as a subprocess under its own name.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.validation.sharing_affinity import ANNOTATION_PATH
from kube.live import (
    EXTRACTORS,
    Live,
    World,
    assert_no_incompatible_colocation,
    deploy_docs,
    live,
    lock_table,
    locks,
    ns,
    sa_kubeconfig,
    schedulers,
    wait_until,
)

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns, schedulers)  # pytest finds fixtures by module attribute


def _bound(live: Live, ns: str, *pods: str, timeout: float = 60) -> None:
    wait_until(lambda: all(live.node_of(ns, p) for p in pods), timeout, f"pods {pods} bound")


def test_matching_keys_share_and_conflicting_keys_do_not(control_plane: Any, live: Live, ns: str,
                                                         schedulers: Any, tmp_path: Any) -> None:
    # Run as the deploy/ ServiceAccount: its RBAC must be enough on a 1.37 API server.
    for doc in deploy_docs("rbac.yaml", **{"dra-affinity-system": ns,
                                           "dra-affinity-scheduler": f"dra-affinity-{ns}"}):
        live.apply(doc)
    kubeconfig = sa_kubeconfig(live, control_plane.kubeconfig, tmp_path / "sa.kubeconfig", ns,
                               f"dra-affinity-{ns}")
    # One node: with two, LeastAllocated would spread a and b over both nodes.
    w = World(live, ns, nodes=1)
    name = f"dra-affinity-{ns}"
    for pod, subnet in [("a", "x"), ("b", "x"), ("c", "y")]:
        w.claim(f"{pod}-nic", subnet)
        w.pod(pod, claim=f"{pod}-nic", scheduler=name)
    sched = schedulers(kubeconfig=kubeconfig, lease_name=name)
    _bound(live, ns, "a", "b", "c")
    a, b, c = (live.devices_of(ns, p) for p in "abc")
    assert a == b and a != c
    for p in "abc":
        claim = live.claim(ns, f"{p}-nic")
        assert claim is not None
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [p]
    assert_no_incompatible_colocation(live, ns)
    table = lock_table(locks(control_plane.kubeconfig), w.driver)
    assert table[a[0]] == ("Locked", {"subnet": "x"})
    assert table[c[0]] == ("Locked", {"subnet": "y"})
    assert any(e["reason"] == "Scheduled" for e in live.events(ns, "a"))
    text = sched.metrics()
    assert "sharing_affinity_compatible_reuse_total 1.0" in text
    assert 'dra_affinity_scheduling_attempt_duration_seconds_count{result="Scheduled"}' in text


def test_templates_and_unschedulable_diagnostics(control_plane: Any, live: Live, ns: str,
                                                 schedulers: Any) -> None:
    """Claims from ResourceClaimTemplates (made by kube-controller-manager); a pod that
    fits nowhere gets PodScheduled=False with the KEP's reasons and a FailedScheduling event."""
    w = World(live, ns, nodes=1, nics=1, slots=2)
    name = f"dra-affinity-{ns}"
    w.template("subnet-x", "x")
    w.template("subnet-y", "y")
    schedulers()
    w.pod("t1", template="subnet-x", scheduler=name)
    w.pod("t2", template="subnet-x", scheduler=name)
    _bound(live, ns, "t1", "t2")
    assert live.devices_of(ns, "t1") == live.devices_of(ns, "t2") == [w.device(w.nodes[0], 1)]
    w.pod("t3", template="subnet-y", scheduler=name)

    def diagnosed() -> Any:
        p = live.pod(ns, "t3")
        conds = [c for c in (p or {}).get("status", {}).get("conditions") or []
                 if c["type"] == "PodScheduled" and c["status"] == "False"
                 and "nodes are available" in c["message"]]
        return conds and conds[0]

    cond = wait_until(diagnosed, 60, "PodScheduled=False on t3 with the nodes' reasons")
    assert cond["reason"] == "Unschedulable"
    assert "0/" in cond["message"] and "nodes are available" in cond["message"]
    assert live.node_of(ns, "t3") is None
    ev = wait_until(lambda: [e for e in live.events(ns, "t3") if e["reason"] == "FailedScheduling"],
                    30, "FailedScheduling event")
    assert ev[0]["type"] == "Warning"
    assert_no_incompatible_colocation(live, ns)


def test_invalid_annotation_fails_closed(control_plane: Any, live: Live, ns: str,
                                         schedulers: Any) -> None:
    """An annotation that does not validate makes the pool invalid: nothing is placed on it,
    the pod says why, and a Warning event names the slice."""
    w = World(live, ns, nodes=1, nics=1, annotation=False)
    w.set_extractors(w.nodes[0], [{"name": "Bad_Name", "expression": "1"}])
    name = f"dra-affinity-{ns}"
    w.claim("a-nic", "x")
    w.pod("a", claim="a-nic", scheduler=name)
    schedulers()

    def diagnosed() -> Any:
        p = live.pod(ns, "a")
        return [c for c in (p or {}).get("status", {}).get("conditions") or []
                if c["type"] == "PodScheduled" and c["status"] == "False"]

    cond = wait_until(diagnosed, 60, "PodScheduled=False")[0]
    assert "AffinityInvalidPool" in cond["message"]
    assert f"{ANNOTATION_PATH}[0].name" in cond["message"], cond["message"]  # the real problem
    assert live.node_of(ns, "a") is None
    slice_events = wait_until(
        lambda: [e for e in live.events("default", f"{w.nodes[0]}-meta")
                 if e["reason"] == "SharingAffinityInvalid"], 30, "slice event")
    assert "Bad_Name" in slice_events[0]["message"]
    # Fixing the annotation makes the pool usable: the pod is placed on the next attempt.
    w.set_extractors(w.nodes[0], [{"name": "subnet", "expression":
                                   'object.kind == "NICConfig" ? object.subnetID : ""'}])
    _bound(live, ns, "a")


def test_key_declared_by_two_metadata_slices_warns_on_the_slice(
        control_plane: Any, live: Live, ns: str, schedulers: Any) -> None:
    """Each slice passes the API server's admission alone; the pool does not: its NICs are
    not used, and the slice that repeats the key gets a SharingAffinityInvalid Warning."""
    w = World(live, ns, nodes=1, nics=1)
    node = w.nodes[0]
    second = w.meta_slice(node, EXTRACTORS)
    second["metadata"]["name"] = f"{node}-meta2"
    for doc in (w.meta_slice(node, EXTRACTORS), w.nic_slice(node, 1, 4), second):
        doc["spec"]["pool"]["resourceSliceCount"] = 3
        live.apply(doc)
    schedulers()
    events = wait_until(
        lambda: [e for e in live.events("default", f"{node}-meta2")
                 if e["reason"] == "SharingAffinityInvalid"], 60, "the slice's Warning")
    assert events[0]["type"] == "Warning"
    assert (f"duplicate sharingAffinity key 'subnet' in slices {node}-meta and {node}-meta2"
            in events[0]["message"])
    assert not [e for e in live.events("default", f"{node}-meta")
                if e["reason"] == "SharingAffinityInvalid"]
    w.claim("a-nic", "x")
    w.pod("a", claim="a-nic", scheduler=f"dra-affinity-{ns}")

    def diagnosed() -> Any:
        p = live.pod(ns, "a")
        return [c for c in (p or {}).get("status", {}).get("conditions") or []
                if c["type"] == "PodScheduled" and c["status"] == "False"]

    assert "AffinityInvalidPool" in wait_until(diagnosed, 60, "PodScheduled=False")[0]["message"]
