"""Lock lifecycle on a real control plane: release through kube-controller-manager, the
rollout of sharingAffinity onto a pool in use, and a failed bind leaving no ghost lock."""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.kube.api import ApiError
from kube.live import (
    EXTRACTORS,
    Live,
    World,
    assert_no_incompatible_colocation,
    live,
    lock_table,
    locks,
    ns,
    schedulers,
    wait_until,
)

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns, schedulers)  # pytest finds fixtures by module attribute


def _bound(live: Live, ns: str, *pods: str, timeout: float = 60) -> None:
    wait_until(lambda: all(live.node_of(ns, p) for p in pods), timeout, f"pods {pods} bound")


def _deallocated(live: Live, ns: str, claim: str) -> bool:
    c = live.claim(ns, claim)
    return c is None or not (c.get("status") or {}).get("allocation")


def test_last_pod_deleted_clears_the_lock(control_plane: Any, live: Live, ns: str,
                                          schedulers: Any) -> None:
    w = World(live, ns, nodes=1, nics=1)
    name = f"dra-affinity-{ns}"
    schedulers()
    for pod, subnet in [("a", "x"), ("b", "x")]:
        w.claim(f"{pod}-nic", subnet)
        w.pod(pod, claim=f"{pod}-nic", scheduler=name)
    _bound(live, ns, "a", "b")
    dev = w.device(w.nodes[0], 1)
    w.claim("c-nic", "y")
    w.pod("c", claim="c-nic", scheduler=name)  # the only NIC is locked to x: c waits
    wait_until(lambda: [e for e in live.events(ns, "c") if e["reason"] == "FailedScheduling"],
               60, "c unschedulable")
    live.delete_pod(ns, "a")
    wait_until(lambda: _deallocated(live, ns, "a-nic"), 60, "a-nic deallocated by the controller")
    assert lock_table(locks(control_plane.kubeconfig), w.driver)[dev] == ("Locked", {"subnet": "x"})
    assert live.node_of(ns, "c") is None  # b still holds the lock
    live.delete_pod(ns, "b")
    wait_until(lambda: _deallocated(live, ns, "b-nic"), 60, "b-nic deallocated")
    _bound(live, ns, "c")  # the lock was cleared; a different value takes the device
    assert live.devices_of(ns, "c") == [dev]
    assert lock_table(locks(control_plane.kubeconfig), w.driver)[dev] == ("Locked", {"subnet": "y"})


def test_rollout_quarantines_legacy_devices_until_drained(control_plane: Any, live: Live, ns: str,
                                                          schedulers: Any) -> None:
    """Legacy pods share a NIC with no sharingAffinity; the pool is republished with it: the
    NIC (mixed subnets) is Unreconstructable until both legacy pods are gone."""
    w = World(live, ns, nodes=1, nics=2, annotation=False)
    name = f"dra-affinity-{ns}"
    sched = schedulers()
    for pod, subnet in [("l1", "x"), ("l2", "y")]:
        w.claim(f"{pod}-nic", subnet)
        w.pod(pod, claim=f"{pod}-nic", scheduler=name)
    _bound(live, ns, "l1", "l2")
    eth1, eth2 = w.device(w.nodes[0], 1), w.device(w.nodes[0], 2)
    assert live.devices_of(ns, "l1") == live.devices_of(ns, "l2") == [eth1]  # permissive sharing
    w.set_extractors(w.nodes[0], EXTRACTORS)
    wait_until(lambda: lock_table(locks(control_plane.kubeconfig), w.driver).get(eth1, ("",))[0]
               == "Unreconstructable", 60, "eth1 quarantined")
    w.claim("n1-nic", "x")
    w.pod("n1", claim="n1-nic", scheduler=name)
    _bound(live, ns, "n1")
    assert live.devices_of(ns, "n1") == [eth2]  # not onto the quarantined NIC
    live.delete_pod(ns, "l1")
    wait_until(lambda: _deallocated(live, ns, "l1-nic"), 60, "l1-nic deallocated")
    # The running scheduler keeps the NIC quarantined until it drains completely ...
    wait_until(lambda: "sharing_affinity_unreconstructable_devices 1.0" in sched.metrics(), 30,
               "the running scheduler still quarantining eth1")
    # ... while a scheduler starting now would rebuild it from the one claim left.
    assert lock_table(locks(control_plane.kubeconfig), w.driver)[eth1] == ("Locked", {"subnet": "y"})
    live.delete_pod(ns, "l2")
    wait_until(lambda: _deallocated(live, ns, "l2-nic"), 60, "l2-nic deallocated")
    w.claim("n2-nic", "z")
    w.pod("n2", claim="n2-nic", scheduler=name)
    _bound(live, ns, "n2")
    assert live.devices_of(ns, "n2") == [eth1]  # drained: usable again, now locked to z
    table = lock_table(locks(control_plane.kubeconfig), w.driver)
    assert table[eth1] == ("Locked", {"subnet": "z"})
    assert table[eth2] == ("Locked", {"subnet": "x"})
    assert_no_incompatible_colocation(live, ns)


def test_bind_failure_leaves_no_ghost_lock(control_plane: Any, live: Live, ns: str,
                                           schedulers: Any) -> None:
    """An admission policy rejects the binding of one pod: PreBind wrote its claim, Bind
    fails, Unreserve clears the allocation; the NIC stays free for another subnet."""
    w = World(live, ns, nodes=1, nics=1)
    name = f"dra-affinity-{ns}"
    policy = f"{ns}-no-bind"
    live.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                 "metadata": {"name": policy},
                 "spec": {"failurePolicy": "Fail",
                          "matchConstraints": {
                              "namespaceSelector": {"matchLabels": {
                                  "kubernetes.io/metadata.name": ns}},
                              "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                 "operations": ["CREATE"],
                                                 "resources": ["pods/binding"]}]},
                          "validations": [{"expression": "!object.metadata.name.startsWith('doomed')",
                                           "message": "binding of doomed is refused"}]}})
    live.create({"apiVersion": "admissionregistration.k8s.io/v1",
                 "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": policy},
                 "spec": {"policyName": policy, "validationActions": ["Deny"]}})
    # The policy takes effect once the API server has loaded it: probe with throwaway pods
    # (never scheduled) until binding one of them is refused.
    probes = iter(range(1000))

    def refused() -> bool:
        probe = f"doomed-probe-{next(probes)}"
        live.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": probe, "namespace": ns},
                     "spec": {"schedulerName": "nobody",
                              "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
        try:
            live.api.request("POST", f"/api/v1/namespaces/{ns}/pods/{probe}/binding", body={
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": probe, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": w.nodes[0]}})
        except ApiError as e:
            return "binding of doomed is refused" in str(e)
        return False

    wait_until(refused, 60, "the binding policy in force")
    w.claim("doomed-nic", "x")
    schedulers()
    w.pod("doomed", claim="doomed-nic", scheduler=name)
    wait_until(lambda: [e for e in live.events(ns, "doomed") if e["reason"] == "FailedScheduling"
                        and "binding" in e["message"]], 90, "a failed bind of doomed")
    assert live.node_of(ns, "doomed") is None
    live.delete_pod(ns, "doomed")
    wait_until(lambda: _deallocated(live, ns, "doomed-nic"), 60, "doomed-nic without allocation")
    c = live.claim(ns, "doomed-nic")
    assert c is not None and not (c.get("status") or {}).get("reservedFor")
    w.claim("other-nic", "y")
    w.pod("other", claim="other-nic", scheduler=name)
    _bound(live, ns, "other")
    assert live.devices_of(ns, "other") == [w.device(w.nodes[0], 1)]
    assert lock_table(locks(control_plane.kubeconfig), w.driver)[w.device(w.nodes[0], 1)] == (
        "Locked", {"subnet": "y"})
