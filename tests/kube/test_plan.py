"""``plan``: a pool's republish judged on the live state, nothing written (in-memory API server)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.kube.plan import plan_republish

from .fakeapi import FakeApi
from .test_process import _process, _run
from .world import DRIVER, EXTRACTORS, build, claim, meta_slice, nic_slice, pod

SUBNET = EXTRACTORS[0]["expression"]


def _claim(name: str, subnet: str, vlan: str) -> dict[str, Any]:
    c = claim(name, subnet)
    c["spec"]["devices"]["config"][0]["opaque"]["parameters"]["vlanID"] = vlan
    return c


@pytest.fixture
def api() -> FakeApi:
    """node-1: eth1 held by a and b (subnet x, vlans 1 and 2), eth2 by c (subnet y)."""
    a = FakeApi()
    build(a)
    for name, subnet, vlan in [("a", "x", "1"), ("b", "x", "2"), ("c", "y", "1")]:
        a.create("ResourceClaim", _claim(f"{name}-nic", subnet, vlan))
        p = pod(name, f"{name}-nic")
        p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
        a.create("Pod", p)
    _run(_process(a), a)
    # pending: subnet z, only on node-1, where both NICs are locked to other subnets
    a.create("ResourceClaim", _claim("z-nic", "z", "1"))
    p = pod("z", "z-nic")
    p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
    a.create("Pod", p)
    return a


def _republish(extractors: Any) -> list[dict[str, Any]]:
    out = [meta_slice("node-1", annotation=extractors), nic_slice("node-1")]
    for s in out:
        s["spec"]["pool"]["generation"] = 2
    return out


def _by_device(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["device"].rsplit("/", 1)[1]: d for d in report["devices"]}


def _writes(api: FakeApi, since: int) -> list[tuple[str, str]]:
    return [r for r in api.requests[since:] if r[0] != "GET"]


def test_a_rename_keeps_every_lock(api: FakeApi) -> None:
    since = len(api.requests)
    report = plan_republish(api, _republish([{"name": "net", "expression": SUBNET}]))
    assert report["pools"] == [{"driver": DRIVER, "pool": "node-1", "change": "replaced"}]
    devices = _by_device(report)
    assert devices["eth1"]["before"] == {"status": "Locked", "lock": {"subnet": "x"}}
    assert devices["eth1"]["after"] == {"status": "Locked", "lock": {"net": "x"}}
    assert devices["eth1"]["holders"] == ["default/a-nic", "default/b-nic"]
    assert report["affected"] == 0 and report["quarantined"] == []
    assert report["pods"] == {"startFitting": [], "stopFitting": []}
    assert _writes(api, since) == []


def test_a_value_change_affects_the_devices_in_use(api: FakeApi) -> None:
    changed = 'object.kind == "NICConfig" ? object.subnetID + "-v2" : ""'
    report = plan_republish(api, _republish([{"name": "subnet", "expression": changed}]))
    devices = _by_device(report)
    assert devices["eth2"]["after"] == {"status": "Locked", "lock": {"subnet": "y-v2"}}
    assert devices["eth2"]["affected"] and report["affected"] == 2


def test_an_added_key_the_holders_disagree_on_quarantines_the_device(api: FakeApi) -> None:
    vlan = 'object.kind == "NICConfig" ? object.vlanID : ""'
    report = plan_republish(api, _republish([{"name": "subnet", "expression": SUBNET},
                                             {"name": "vlan", "expression": vlan}]))
    devices = _by_device(report)
    eth1 = devices["eth1"]["after"]
    assert eth1["status"] == "Unreconstructable" and "vlan" in eth1["reason"]
    # eth2's only holder agrees with itself: stricter, not broken
    assert devices["eth2"]["after"] == {"status": "Locked", "lock": {"subnet": "y", "vlan": "1"}}
    assert not devices["eth2"]["affected"]
    assert report["quarantined"] == [{"device": f"{DRIVER}/node-1/eth1",
                                      "until": ["default/a-nic", "default/b-nic"]}]
    assert report["affected"] == 1


def test_dropping_sharing_affinity_lets_the_pending_pod_fit(api: FakeApi) -> None:
    unrestricted = _republish(None)
    report = plan_republish(api, unrestricted)
    assert report["pods"] == {"startFitting": ["default/z"], "stopFitting": []}
    assert all(d["after"]["status"] == "Clean" and d["affected"] for d in report["devices"])


def test_a_removed_pool_removes_devices_in_use(api: FakeApi) -> None:
    report = plan_republish(api, [], [(DRIVER, "node-1")])
    assert report["pools"] == [{"driver": DRIVER, "pool": "node-1", "change": "removed"}]
    assert {d: e["after"]["status"] for d, e in _by_device(report).items()} == {
        "eth1": "Removed", "eth2": "Removed"}
    assert report["affected"] == 2


def test_a_pod_that_stops_fitting_and_a_namespace_filter(api: FakeApi) -> None:
    api.create("ResourceClaim", _claim("y-nic", "y", "1"))
    p = pod("y2", "y-nic")
    p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
    api.create("Pod", p)  # fits eth2 (subnet y) now
    report = plan_republish(api, [], [(DRIVER, "node-1")])
    assert report["pods"]["stopFitting"] == ["default/y2"]
    narrowed = plan_republish(api, [], [(DRIVER, "node-1")], namespace="other")
    assert narrowed["devices"] == [] and narrowed["pods"]["stopFitting"] == []
