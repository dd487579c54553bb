"""Opt-in experiments from the KEP's Future Enhancements: NeverSetLock claims and
preferred (soft) keys. Both are off by default and leave the alpha behaviour untouched."""

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
)
from dra_affinity.api.resource import ResourceSlice
from dra_affinity.structured import reasons
from dra_affinity.structured.experiments import (
    PREFERRED_KEYS_ANNOTATION,
    SHARING_STRATEGY_ANNOTATION,
)
from dra_affinity.structured.model import Result

ETH0, ETH1 = dev("node-1", "eth0"), dev("node-1", "eth1")


def follower(env: Env, name: str, subnet: str) -> None:
    c = claim(f"{name}-nic", nic_params(subnet))
    c.metadata.annotations[SHARING_STRATEGY_ANNOTATION] = "NeverSetLock"
    env.apply(c)
    env.apply(pod(name))


def test_never_set_lock_waits_for_a_leader() -> None:
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth0", "eth1"]),
              gates={"DRASharingAffinityNeverSetLock": True})
    follower(env, "f", "X")
    f = env.schedule("f")
    assert f.result is Result.UNSCHEDULABLE
    assert {r.code for r in f.reasons} == {reasons.AFFINITY_NEVER_SET_LOCK}
    env.add_pod("leader", nic_params("X"))
    assert [a["device"] for a in env.schedule("leader").allocations] == [ETH0]
    assert [a["device"] for a in env.schedule("f").allocations] == [ETH0]


def test_never_set_lock_ignored_when_gate_off() -> None:
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth0"]))
    follower(env, "f", "X")
    assert env.schedule("f").result is Result.SCHEDULED


def soft_meta(annotate: bool = True) -> ResourceSlice:
    s = meta_slice("node-1", {"subnet": SUBNET, "pkey": PKEY})
    if annotate:
        s.metadata.annotations[PREFERRED_KEYS_ANNOTATION] = "pkey"
    return s


def run_soft(gates: dict[str, bool]) -> tuple[Env, Any]:
    env = Env(nic_class(), soft_meta(), device_slice("node-1", ["eth0", "eth1"]), gates=gates)
    env.add_pod("a", nic_params("X", pkey="0x1"))
    env.add_pod("b", nic_params("X", pkey="0x2"))
    env.add_pod("c", nic_params("X", pkey="0x1"))
    env.schedule("a")
    return env, env.schedule("b")


def test_preferred_key_mismatch_is_not_filtered_and_not_locked() -> None:
    env, b = run_soft({"DRASharingAffinityPreferredKeys": True})
    # eth0 holds pkey 0x1: b (0x2) prefers the clean eth1, a mismatch is only deprioritised
    assert [x["device"] for x in b.allocations] == [ETH1]
    assert env.status(ETH0) == ("Locked", {"subnet": "X"})  # pkey is not part of the lock
    c = env.schedule("c")
    assert [x["device"] for x in c.allocations] == [ETH0]


def test_preferred_mismatch_still_fits_when_nothing_better() -> None:
    env = Env(nic_class(), soft_meta(), device_slice("node-1", ["eth0"]),
              gates={"DRASharingAffinityPreferredKeys": True})
    env.add_pod("a", nic_params("X", pkey="0x1"))
    env.add_pod("b", nic_params("X", pkey="0x2"))
    env.schedule("a")
    assert [x["device"] for x in env.schedule("b").allocations] == [ETH0]


def test_preferred_annotation_ignored_when_gate_off() -> None:
    env, b = run_soft({})
    # both keys are required: b mismatches the pkey lock on eth0 and goes to eth1
    assert [x["device"] for x in b.allocations] == [ETH1]
    assert env.status(ETH0) == ("Locked", {"pkey": "0x1", "subnet": "X"})
    assert DRIVER
