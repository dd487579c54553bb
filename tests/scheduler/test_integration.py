"""KEP-5981 Test Plan, integration tests: restart, gates, pools, legacy migration, mutation."""

from __future__ import annotations

from typing import Any

from builders import (
    DRIVER,
    PKEY,
    SUBNET,
    Env,
    claim,
    dev,
    device_slice,
    meta_slice,
    nic_class,
    nic_params,
    pod,
    template,
)
from dra_affinity.observe.metrics import LOCKED, UNRECONSTRUCTABLE
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result

ETH1, ETH2 = dev("node-1", "eth1"), dev("node-1", "eth2")


def allocated(name: str, params: dict[str, Any] | None, device: str = "eth1", node: str = "node-1",
              n: int = 1) -> list[Any]:
    """A claim already allocated on a device, and its bound pod (the file's initial state)."""
    status = {"allocation": {"devices": {"results": [{
        "request": "nic", "driver": DRIVER, "pool": node, "device": device,
        "shareID": f"0000000{n}-0000-4000-8000-000000000000",
        "consumedCapacity": {f"{DRIVER}/slots": "1"}}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]}
    return [claim(f"{name}-nic", params, status=status), pod(name, node=node, uid=f"uid-{name}")]


def test_restart_reconstructs_locks() -> None:
    """Scheduler restart: AffinityStates reconstructed by re-running CEL on bound claims."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1"))
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-Y"))
    env.schedule("a")
    env.schedule("b")
    before = dict(env.scheduler.state.affinity_states)
    env.restart()
    assert env.scheduler.state.affinity_states == before
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    assert env.status(ETH2) == ("Locked", {"subnet": "subnet-Y"})
    env.add_pod("c", nic_params("subnet-Y"))
    assert [x["device"] for x in env.schedule("c").allocations] == [ETH2]


def test_restart_unreconstructable_cases() -> None:
    """Restart: devices with non-reconstructable claims (no keys, CEL failure) are Unreconstructable."""
    objs: list[Any] = [nic_class(), meta_slice("node-1", {"subnet": 'has(object.kind) && object.kind == "NICConfig" ? object.subnetID : ""'}),
                       device_slice("node-1", ["eth1", "eth2", "eth3"])]
    objs += allocated("nokeys", {"kind": "Other"}, "eth1", n=1)
    objs += allocated("celerr", {"kind": "NICConfig"}, "eth2", n=2)  # object.subnetID missing
    objs += allocated("good", nic_params("subnet-X"), "eth3", n=3)
    env = Env(*objs)
    assert env.status(ETH1)[0] == "Unreconstructable"
    assert env.status(ETH2)[0] == "Unreconstructable"
    assert env.status(dev("node-1", "eth3")) == ("Locked", {"subnet": "subnet-X"})
    assert env.metric(UNRECONSTRUCTABLE) == 2 and env.metric(LOCKED) == 1
    assert len(env.scheduler.recorder.logs) == 2


def test_restart_inconsistent_claims() -> None:
    """Restart with inconsistent reconstructable locks: Unreconstructable, warning logged,
    blocked until all claims drain."""
    objs: list[Any] = [nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"])]
    objs += allocated("a", nic_params("subnet-X"), n=1)
    objs += allocated("b", nic_params("subnet-Y"), n=2)
    env = Env(*objs)
    assert env.status(ETH1)[0] == "Unreconstructable"
    assert any("Unreconstructable" in log["message"] for log in env.scheduler.recorder.logs)
    env.add_pod("c", nic_params("subnet-X"))
    assert [r.code for r in env.schedule("c").reasons] == [reasons.AFFINITY_UNRECONSTRUCTABLE]
    env.cluster.delete("Pod", "default/a")
    assert env.status(ETH1)[0] == "Unreconstructable"  # sticky while a claim remains
    env.cluster.delete("Pod", "default/b")
    assert env.status(ETH1) == ("Clean", {})
    assert env.schedule("c").result is Result.SCHEDULED


def test_gate_off_skips_affinity_pools() -> None:
    """DRASharingAffinity disabled in the scheduler: pools declaring sharingAffinity are skipped,
    not treated as unconditionally shareable; pools without it are unaffected."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]),
              device_slice("node-2", ["eth1"], count=1), gates={"DRASharingAffinity": False})
    env.add_pod("a", nic_params("subnet-X"))
    a = env.schedule("a")
    assert a.result is Result.SCHEDULED and a.node == "node-2"
    env2 = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]),
               gates={"DRASharingAffinity": False})
    env2.add_pod("a", nic_params("subnet-X"))
    r = env2.schedule("a")
    assert r.result is Result.UNSCHEDULABLE
    assert [x.code for x in r.reasons] == [reasons.AFFINITY_FEATURE_DISABLED]


def test_gate_enabled_after_claims_exist() -> None:
    """DRASharingAffinity toggled: enabling after claims exist does not disturb bound workloads;
    legacy in-use devices are conservatively filtered until clean."""
    objs: list[Any] = [nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1", "eth2"])]
    objs += allocated("legacy", None, "eth1", n=1)
    env = Env(*objs, gates={"DRASharingAffinity": False})
    env.restart({"DRASharingAffinity": True})
    assert env.status(ETH1)[0] == "Unreconstructable"
    assert env.cluster.pod("default/legacy").spec.node_name == "node-1"  # type: ignore[union-attr]
    assert env.cluster.claim("default/legacy-nic").status.allocation is not None  # type: ignore[union-attr]
    env.add_pod("new", nic_params("subnet-X"))
    assert [x["device"] for x in env.schedule("new").allocations] == [ETH2]


def test_legacy_device_migration() -> None:
    """Legacy Device Migration: 5 pods on a slice without sharingAffinity; the driver republishes
    with sharingAffinity; a 6th pod is filtered from those devices until the legacy claims drain."""
    env = Env(nic_class(), device_slice("node-1", ["eth1", "eth2"], count=1))
    for i in range(5):
        env.add_pod(f"l{i}", None)  # legacy: no extractable config
        assert env.schedule(f"l{i}").result is Result.SCHEDULED
    used = {s for s in (ETH1, ETH2) if env.scheduler.state.is_allocated(s)}
    assert used == {ETH1}  # first-fit packs them on eth1
    env.apply(meta_slice("node-1", count=2))
    env.apply(device_slice("node-1", ["eth1", "eth2"], count=2))
    assert env.status(ETH1)[0] == "Unreconstructable"
    assert env.status(ETH2) == ("Clean", {})
    env.add_pod("six", nic_params("subnet-X"))
    six = env.schedule("six")
    assert [x["device"] for x in six.allocations] == [ETH2]
    for i in range(5):
        env.cluster.delete("Pod", f"default/l{i}")
    assert env.status(ETH1) == ("Clean", {})


def test_duplicate_key_across_metadata_slices() -> None:
    """Duplicate key across metadata slices: pool invalid, fail closed; renamed -> schedules."""
    env = Env(nic_class(), meta_slice("node-1", name="meta-a", count=3),
              meta_slice("node-1", {"subnet": PKEY}, name="meta-b", count=3),
              device_slice("node-1", ["eth1"], count=3))
    env.add_pod("a", nic_params("subnet-X", pkey="0x1"))
    a = env.schedule("a")
    assert a.result is Result.UNSCHEDULABLE
    assert [r.code for r in a.reasons] == [reasons.AFFINITY_INVALID_POOL]
    assert "meta-a" in a.reasons[0].message and "meta-b" in a.reasons[0].message
    env.apply(meta_slice("node-1", {"pkey": PKEY}, name="meta-b", count=3))
    a = env.schedule("a")
    assert a.result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"pkey": "0x1", "subnet": "subnet-X"})


def test_pool_incomplete_fails_closed() -> None:
    """Devices in incomplete pools are ineligible for sharing-affinity decisions."""
    env = Env(nic_class(), meta_slice("node-1", count=3), device_slice("node-1", ["eth1"], count=3))
    env.add_pod("a", nic_params("subnet-X"))
    a = env.schedule("a")
    assert [r.code for r in a.reasons] == [reasons.AFFINITY_POOL_INCOMPLETE]


def test_slice_mutation_with_active_claims() -> None:
    """sharingAffinity mutation with active claims: renamed key -> Unreconstructable after
    reconciliation; filtered until the claims drain."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.add_pod("a", nic_params("subnet-X"))
    env.schedule("a")
    env.apply(meta_slice("node-1", {"net": SUBNET}))
    assert env.status(ETH1)[0] == "Unreconstructable"
    env.add_pod("b", nic_params("subnet-X"))
    assert [r.code for r in env.schedule("b").reasons] == [reasons.AFFINITY_UNRECONSTRUCTABLE]
    env.cluster.delete("Pod", "default/a")
    assert env.schedule("b").result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"net": "subnet-X"})


def test_new_extractor_with_active_claims() -> None:
    """A new extractor the active claims cannot satisfy -> Unreconstructable."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.add_pod("a", nic_params("subnet-X"))
    env.schedule("a")
    env.apply(meta_slice("node-1", {"subnet": SUBNET, "pkey": PKEY}))
    assert env.status(ETH1)[0] == "Unreconstructable"


def test_malformed_opaque_config_is_deterministic() -> None:
    """Invalid opaque config at scheduling time (no apiVersion/kind): deterministic outcome,
    no crash; a has()-guarded extractor filters the device instead."""
    guarded = {"subnet": 'has(object.apiVersion) && object.apiVersion == "networking.example.com/v1" ? object.subnetID : ""'}
    env = Env(nic_class(), meta_slice("node-1", guarded), device_slice("node-1", ["eth1"]))
    env.add_pod("a", {"subnetID": "x"})
    r1 = env.schedule("a")
    assert r1.result is Result.UNSCHEDULABLE and [r.code for r in r1.reasons] == [reasons.AFFINITY_NO_KEYS]
    env2 = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env2.add_pod("a", {"subnetID": "x"})
    r2 = env2.schedule("a")
    assert r2.result is Result.ERROR and [r.code for r in r2.reasons] == [reasons.AFFINITY_CEL_ERROR]
    assert env2.schedule("a").result is Result.ERROR  # same answer again


def test_driver_backstop_permissive() -> None:
    """Driver Backstop: no sharingAffinity -> incompatible claims share (driver rejects later)."""
    env = Env(nic_class(), device_slice("node-1", ["eth1"], count=1))
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-Y"))
    assert env.schedule("a").result is Result.SCHEDULED
    b = env.schedule("b")  # the driver would refuse it at NodePrepareResources
    assert b.result is Result.SCHEDULED and [x["device"] for x in b.allocations] == [ETH1]


def test_class_config_in_scope() -> None:
    """DeviceClass opaque configs are in scope for requests using the class."""
    env = Env(nic_class(config=[nic_params("subnet-C")]), meta_slice("node-1"),
              device_slice("node-1", ["eth1"]))
    env.add_pod("a", None)
    assert env.schedule("a").result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-C"})


def test_template_claims_and_delete() -> None:
    """Pods with claim templates get <pod>-<name> claims; deleting the pod deallocates."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]),
              template("nic-x", nic_params("subnet-X")))
    env.apply(pod("a", [], templates={"nic": "nic-x"}))
    a = env.schedule("a")
    assert a.result is Result.SCHEDULED
    assert a.allocations[0]["claim"] == "default/a-nic"
    env.cluster.delete("Pod", "default/a")
    assert env.cluster.claim("default/a-nic") is None
    assert env.status(ETH1) == ("Clean", {})


def test_cost_exceeded_does_not_stall() -> None:
    """CEL cost budget: a pathological expression is an extraction failure, and the scheduler
    stays responsive to other scheduling work."""
    bad = {"subnet": 'object.l.all(a, object.l.all(b, object.l.all(c, a + b + c >= 0))) ? "x" : ""'}
    env = Env(nic_class(), meta_slice("node-1", bad), device_slice("node-1", ["eth1"]),
              device_slice("node-2", ["eth1"], count=1))
    env.add_pod("slow", nic_params("x", l=list(range(400))))
    env.add_pod("other", None, node_selector={"kubernetes.io/hostname": "node-2"})
    assert env.schedule("slow").reasons[0].code == reasons.AFFINITY_COST_EXCEEDED
    assert any(e.reason == "FailedScheduling" for e in env.scheduler.recorder.events)
    other = env.schedule("other")
    assert other.result is Result.SCHEDULED and other.node == "node-2"
