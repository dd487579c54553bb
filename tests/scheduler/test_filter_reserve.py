"""KEP-5981 Test Plan, unit tests for the DynamicResources plugin (Filter/Reserve/Unreserve).

Each test names the KEP bullet it covers and builds real objects.
"""

from __future__ import annotations

import pytest

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
)
from dra_affinity.observe.metrics import COMPATIBLE_REUSE, LOCK_CONFLICT, NO_KEYS
from dra_affinity.scheduler import reserve as reserve_module
from dra_affinity.scheduler.cycle import CycleState
from dra_affinity.sim.faults import Fault
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result
from dra_affinity.structured.state import Share

ETH1, ETH2 = dev("node-1", "eth1"), dev("node-1", "eth2")


def one_node(devices: list[str] | None = None, extractors: dict[str, str] | None = None,
             **kw: object) -> Env:
    return Env(nic_class(), meta_slice("node-1", extractors), device_slice("node-1", devices, **kw))  # type: ignore[arg-type]


def codes(attempt: object) -> list[str]:
    return [r.code for r in attempt.reasons]  # type: ignore[attr-defined]


def test_matching_lock_passes() -> None:
    """Filter: device with matching lock passes."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-X"))
    assert env.schedule("a").result is Result.SCHEDULED
    b = env.schedule("b")
    assert b.result is Result.SCHEDULED
    assert [x["device"] for x in b.allocations] == [ETH1]
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    assert env.metric(COMPATIBLE_REUSE) == 1


def test_conflicting_lock_excluded() -> None:
    """Filter: device with conflicting lock is excluded."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("c", nic_params("subnet-Y"))
    env.schedule("a")
    c = env.schedule("c")
    assert c.result is Result.UNSCHEDULABLE
    assert codes(c) == [reasons.AFFINITY_LOCK_MISMATCH]
    assert c.reasons[0].device == ETH1 and "subnet-X" in c.reasons[0].message
    assert env.metric(LOCK_CONFLICT) == 1
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})


def test_mismatch_goes_to_next_device() -> None:
    """Story 3: Pod C (subnet-Y) is allocated to eth2 instead."""
    env = one_node()
    for n, s in (("a", "subnet-X"), ("b", "subnet-X"), ("c", "subnet-Y")):
        env.add_pod(n, nic_params(s))
    assert [x["device"] for x in env.schedule("a").allocations] == [ETH1]
    assert [x["device"] for x in env.schedule("b").allocations] == [ETH1]
    c = env.schedule("c")
    assert [x["device"] for x in c.allocations] == [ETH2]
    assert env.status(ETH2) == ("Locked", {"subnet": "subnet-Y"})


def test_unlocked_device_with_capacity_passes() -> None:
    """Filter: unlocked device with sufficient capacity passes; first claim sets the lock."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    assert env.status(ETH1) == ("Clean", {})
    a = env.schedule("a")
    assert a.result is Result.SCHEDULED
    assert a.allocations[0]["consumedCapacity"] == {f"{DRIVER}/slots": "1"}
    assert a.allocations[0]["shareID"]


@pytest.mark.parametrize("params", [
    pytest.param(nic_params(subnet=""), id="empty-string"),
    pytest.param({"apiVersion": "other.example.com/v1", "kind": "Tuning", "qos": "gold"}, id="other-schema"),
    pytest.param(None, id="no-config"),
])
def test_no_keys_filtered(params: dict[str, object] | None) -> None:
    """Filter: extraction yields no non-empty keys for the claim -> device filtered out."""
    env = one_node(["eth1"])
    env.add_pod("a", params)
    a = env.schedule("a")
    assert a.result is Result.UNSCHEDULABLE
    assert codes(a) == [reasons.AFFINITY_NO_KEYS]
    assert env.metric(NO_KEYS) == 1
    assert env.status(ETH1) == ("Clean", {})


def test_extra_fields_ignored() -> None:
    """Filter: extra fields in opaque config beyond what CEL extracts are ignored."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X", qos="gold", mtu=9000))
    env.add_pod("b", nic_params("subnet-X", qos="bronze", vlanTag=100))
    env.schedule("a")
    assert env.schedule("b").result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})


def test_conflicting_configs_are_claim_error() -> None:
    """Filter: multiple opaque configs with conflicting same-key values -> claim authoring error."""
    env = one_node()
    env.add_pod("a", nic_params("subnet-X"), nic_params("subnet-Y"))
    a = env.schedule("a")
    assert a.result is Result.UNRESOLVABLE
    assert codes(a) == [reasons.AFFINITY_SELF_INCONSISTENT]
    assert env.status(ETH1) == ("Clean", {}) and env.status(ETH2) == ("Clean", {})


def test_same_value_twice_is_consistent() -> None:
    """Two in-scope configs agreeing on a key are not an error."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"), nic_params("subnet-X"))
    assert env.schedule("a").result is Result.SCHEDULED


@pytest.mark.parametrize("expr, params, code", [
    pytest.param("object.subnet", nic_params("subnet-X"), reasons.AFFINITY_CEL_ERROR, id="missing-field"),
    pytest.param("object.mtu", nic_params("subnet-X", mtu=9000), reasons.AFFINITY_CEL_ERROR, id="non-string"),
    pytest.param('object.l.all(a, object.l.all(b, object.l.all(c, a + b + c >= 0))) ? "x" : ""',
                 nic_params("subnet-X", l=list(range(300))), reasons.AFFINITY_COST_EXCEEDED, id="cost"),
])
def test_cel_error_aborts(expr: str, params: dict[str, object], code: str) -> None:
    """Filter: CEL evaluation error (missing field, non-string return, cost budget exhausted) ->
    scheduling aborts with a fatal error, no silent empty lock, no per-device Event spam."""
    env = one_node(["eth1", "eth2", "eth3"], {"subnet": expr})
    env.add_pod("a", params)
    a = env.schedule("a")
    assert a.result is Result.ERROR
    assert codes(a) == [code]  # one reason, not one per device
    for d in ("eth1", "eth2", "eth3"):
        assert env.status(dev("node-1", d)) == ("Clean", {})
    events = [e for e in env.scheduler.recorder.events if e.object == "Pod default/a"]
    assert len(events) == 1 and events[0].type == "Warning"


def test_unreconstructable_excluded() -> None:
    """Filter: device with Status == Unreconstructable is excluded for new scheduling."""
    env = one_node(["eth1", "eth2"], {"subnet": SUBNET})
    # a legacy claim already allocated on eth1 whose config yields no keys
    legacy = claim("legacy-nic", {"apiVersion": "networking.example.com/v1", "kind": "NICConfig"},
                   status={"allocation": {"devices": {"results": [{
                       "request": "nic", "driver": DRIVER, "pool": "node-1", "device": "eth1",
                       "shareID": "11111111-1111-4111-8111-111111111111",
                       "consumedCapacity": {f"{DRIVER}/slots": "1"}}]}},
                       "reservedFor": [{"resource": "pods", "name": "legacy", "uid": "u1"}]})
    env.apply(legacy)
    env.apply(pod("legacy", ["legacy-nic"], node="node-1"))
    env.restart()
    assert env.status(ETH1)[0] == "Unreconstructable"
    env.add_pod("a", nic_params("subnet-X"))
    a = env.schedule("a")
    assert [x["device"] for x in a.allocations] == [ETH2]


def test_first_fit_no_preference() -> None:
    """First-fit: a clean device first in slice order wins over a compatible locked one."""
    env = one_node(["eth1", "eth2"])
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("y", nic_params("subnet-Y"))
    env.add_pod("b", nic_params("subnet-X"))
    env.schedule("y")  # eth1 locked to Y
    env.schedule("a")  # eth2 locked to X
    env.cluster.delete("Pod", "default/y")  # eth1 clean again, first in order
    assert env.status(ETH1) == ("Clean", {})
    b = env.schedule("b")
    assert [x["device"] for x in b.allocations] == [ETH1]


def test_reserve_conflict_on_concurrent_cycles() -> None:
    """Reserve: second claim with conflicting values fails; same values co-allocate."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-Y"))
    env.add_pod("c", nic_params("subnet-X"))
    out = env.scheduler.schedule_concurrently(["default/a", "default/b", "default/c"])
    assert [o.result for o in out] == [Result.SCHEDULED, Result.UNSCHEDULABLE, Result.SCHEDULED]
    assert codes(out[1]) == [reasons.RESERVE_CONFLICT]
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    assert sorted(s.claim for s in env.scheduler.state.shares(ETH1)) == ["default/a-nic", "default/c-nic"]


def _filtered(env: Env, name: str) -> CycleState:
    """PreFilter and Filter for one pod, stopping before Reserve."""
    sched = env.scheduler
    cyc = sched.prefilter(env.cluster.pod(f"default/{name}"))  # type: ignore[arg-type]
    sched._filter(cyc, sched.state)
    assert cyc.chosen is not None
    return cyc


def test_reserve_skips_the_recheck_only_when_nothing_changed_since_filter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reserve re-derives nothing when the snapshot and the state are as Filter saw them."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    cyc = _filtered(env, "a")
    calls: list[str] = []
    real = reserve_module._recheck
    monkeypatch.setattr(reserve_module, "_recheck", lambda *a: calls.append("recheck") or real(*a))
    assert reserve_module.reserve(env.scheduler.state, env.scheduler.snapshot(), cyc) is None
    assert calls == []
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    # Without Filter's mark (a caller that built the choice itself), it re-checks.
    env.add_pod("b", nic_params("subnet-X"))
    cyc = _filtered(env, "b")
    cyc.filtered_on = None
    assert reserve_module.reserve(env.scheduler.state, env.scheduler.snapshot(), cyc) is None
    assert calls == ["recheck"]


def test_reserve_rechecks_a_lock_set_since_filter() -> None:
    """A state change between Filter and Reserve (here another claim's share, added
    directly) makes Reserve re-check: the stale choice conflicts and records nothing."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    cyc = _filtered(env, "a")
    state = env.scheduler.state
    assert cyc.chosen is not None
    planned = cyc.chosen.shares[0]
    state.add(ETH1, Share("default/other", "nic", "id-1", planned.consumed, (("subnet", "subnet-Y"),),
                          gated=True), exclusive=False)
    conflict = reserve_module.reserve(state, env.scheduler.snapshot(), cyc)
    assert conflict is not None and conflict.code == reasons.RESERVE_CONFLICT
    assert [s.claim for s in state.shares(ETH1)] == ["default/other"]


def test_reserve_rechecks_after_the_snapshot_changed() -> None:
    """A slice change after Filter (the device is gone) is seen by Reserve."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    cyc = _filtered(env, "a")
    env.apply(meta_slice("node-1", generation=2))
    env.apply(device_slice("node-1", ["eth2"], generation=2))
    conflict = reserve_module.reserve(env.scheduler.state, env.scheduler.snapshot(), cyc)
    assert conflict is not None and "disappeared" in conflict.message
    assert not env.scheduler.state.is_allocated(ETH1)


def test_unreserve_rolls_back() -> None:
    """Unreserve: tentative lock is rolled back (Ghost Lock)."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-Y"))
    a = env.schedule("a", fail=("bind", Fault.CONFLICT))
    assert a.result is Result.UNSCHEDULABLE and codes(a) == [reasons.BIND_FAILED]
    assert env.status(ETH1) == ("Clean", {})
    assert not env.scheduler.state.is_allocated(ETH1)
    assert env.cluster.claim("default/a-nic").status.allocation is None  # type: ignore[union-attr]
    b = env.schedule("b")
    assert b.result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-Y"})


def test_unreserve_keeps_lock_of_other_holders() -> None:
    """Unreserve removes the lock only if no other bound claim is on the device."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-X"))
    env.schedule("a")
    env.schedule("b", fail=("bind", Fault.CONFLICT))
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    assert [s.claim for s in env.scheduler.state.shares(ETH1)] == ["default/a-nic"]


def test_permissive_without_sharing_affinity() -> None:
    """Compatibility matrix: a slice without sharingAffinity is unaffected (Legacy/Basic,
    Permissive Sharing): claims with or without matching configs share; config not evaluated."""
    env = Env(nic_class(), device_slice("node-1", ["eth1"], count=1))
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-Y"))
    env.add_pod("c", None)
    for n in "abc":
        assert [x["device"] for x in env.schedule(n).allocations] == [ETH1]
    assert env.status(ETH1) == ("Clean", {})
    assert env.metric("sharing_affinity_extractor_evaluations_total") == 0


def test_partial_key_filtered() -> None:
    """Strict Gating / Partial Key: subnet resolves, pkey does not -> filtered."""
    env = one_node(["eth1"], {"subnet": SUBNET, "pkey": PKEY})
    env.add_pod("a", nic_params("subnet-a", pkey=""))
    env.add_pod("b", nic_params("subnet-a", pkey="0x8001"))
    a = env.schedule("a")
    assert a.result is Result.UNSCHEDULABLE and codes(a) == [reasons.AFFINITY_NO_KEYS]
    assert "pkey" in a.reasons[0].message
    assert env.schedule("b").result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"pkey": "0x8001", "subnet": "subnet-a"})


def test_multi_key_all_must_match() -> None:
    """Multi-key example: same subnet but another pkey is not viable."""
    env = one_node(["eth1"], {"subnet": SUBNET, "pkey": PKEY})
    env.add_pod("a", nic_params("subnet-a", pkey="0x8001"))
    env.add_pod("b", nic_params("subnet-a", pkey="0x8002"))
    env.schedule("a")
    b = env.schedule("b")
    assert codes(b) == [reasons.AFFINITY_LOCK_MISMATCH]


def test_multi_request_scoping() -> None:
    """Multi-request scoping / no cross-talk: mgmt-nic and data-nic lock two devices independently."""
    env = one_node(["eth1", "eth2"])
    reqs = [{"name": n, "exactly": {"deviceClassName": "shared-nic",
                                     "capacity": {"requests": {f"{DRIVER}/slots": "1"}}}}
            for n in ("mgmt-nic", "data-nic")]
    cfg = [{"requests": ["mgmt-nic"], "opaque": {"driver": DRIVER, "parameters": nic_params("A")}},
           {"requests": ["data-nic"], "opaque": {"driver": DRIVER, "parameters": nic_params("B")}}]
    env.apply(claim("m-nic", requests=reqs, config=cfg))
    env.apply(pod("m"))
    m = env.schedule("m")
    assert m.result is Result.SCHEDULED
    assert [(x["request"], x["device"]) for x in m.allocations] == [("mgmt-nic", ETH1), ("data-nic", ETH2)]
    assert env.status(ETH1) == ("Locked", {"subnet": "A"})
    assert env.status(ETH2) == ("Locked", {"subnet": "B"})


def test_two_requests_same_device_must_agree() -> None:
    """Two requests of one pod landing on one device must agree (single-device topology)."""
    env = one_node(["eth1"])
    reqs = [{"name": n, "exactly": {"deviceClassName": "shared-nic",
                                     "capacity": {"requests": {f"{DRIVER}/slots": "1"}}}}
            for n in ("r1", "r2")]
    cfg = [{"requests": ["r1"], "opaque": {"driver": DRIVER, "parameters": nic_params("A")}},
           {"requests": ["r2"], "opaque": {"driver": DRIVER, "parameters": nic_params("B")}}]
    env.apply(claim("m-nic", requests=reqs, config=cfg))
    env.apply(pod("m"))
    m = env.schedule("m")
    assert m.result is Result.UNSCHEDULABLE
    assert reasons.AFFINITY_LOCK_MISMATCH in codes(m)


def test_capacity_interaction() -> None:
    """Interaction with consumable capacity: the 17th pod on a 16-slot device does not fit."""
    env = one_node(["eth1"])
    for i in range(17):
        env.add_pod(f"p{i}", nic_params("subnet-X"))
    for i in range(16):
        assert env.schedule(f"p{i}").result is Result.SCHEDULED
    last = env.schedule("p16")
    assert last.result is Result.UNSCHEDULABLE and codes(last) == [reasons.INSUFFICIENT_CAPACITY]


def test_lock_cleared_when_last_claim_leaves() -> None:
    """Affinity lock clearing when all claims release a device."""
    env = one_node(["eth1"])
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-X"))
    env.add_pod("c", nic_params("subnet-Y"))
    env.schedule("a")
    env.schedule("b")
    env.cluster.delete("Pod", "default/a")
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    env.cluster.delete("Pod", "default/b")
    assert env.status(ETH1) == ("Clean", {})
    assert env.schedule("c").result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-Y"})




def test_exclusive_device_not_gated() -> None:
    """Devices without allowMultipleAllocations are exclusive and not affinity-gated."""
    env = one_node(["eth1"], multi=False)
    env.add_pod("a", None)
    env.add_pod("b", None)
    a = env.schedule("a")
    assert a.result is Result.SCHEDULED and a.allocations[0]["shareID"] is None
    b = env.schedule("b")
    assert codes(b) == [reasons.DEVICE_ALLOCATED]
