"""Lock and quarantine state across a driver's republish of a pool.

A republish goes through a window where the pool is incomplete: a new
generation partly published (metadata first or devices first), or a slice
deleted and created again. A device that keeps bound claims is never reset to
Clean by the window; once the pool is complete, its claims are re-derived under
the published extractors: the same keys stay Locked, anything else (key added,
removed, renamed, value changed) is Unreconstructable until the device drains.

Each case is a timeline on the embedded cluster: (name, steps, expected state of
eth1 during the window, after completion).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result

ETH1 = dev("node-1", "eth1")
RENAMED = {"net": SUBNET}
VALUE_CHANGED = {"subnet": SUBNET.replace("object.subnetID", 'object.subnetID + "-v2"')}
TWO_KEYS = {"subnet": SUBNET, "pkey": PKEY}

State = tuple[str, dict[str, str]]
LOCKED_X: State = ("Locked", {"subnet": "subnet-X"})
UNRECONSTRUCTABLE: State = ("Unreconstructable", {})


def locked_env(extractors: dict[str, str] | None = None, pkey: str | None = None) -> Env:
    """eth1 Locked by pod a (and b) with subnet-X; the pool has one meta and one device slice."""
    env = Env(nic_class(), meta_slice("node-1", extractors), device_slice("node-1", ["eth1"]))
    for name in ("a", "b"):
        env.add_pod(name, nic_params("subnet-X", pkey=pkey))
        assert env.schedule(name).result is Result.SCHEDULED
    return env


def bump_meta_first(new: dict[str, str] | None) -> Callable[[Env], list[Callable[[], None]]]:
    """Generation 2: the metadata slice first (window), then the device slice."""
    def steps(env: Env) -> list[Callable[[], None]]:
        return [lambda: env.apply(meta_slice("node-1", new, generation=2)),
                lambda: env.apply(device_slice("node-1", ["eth1"], generation=2))]
    return steps


def bump_devices_first(new: dict[str, str] | None) -> Callable[[Env], list[Callable[[], None]]]:
    """Generation 2: the device slice first (window), then the metadata slice."""
    def steps(env: Env) -> list[Callable[[], None]]:
        return [lambda: env.apply(device_slice("node-1", ["eth1"], generation=2)),
                lambda: env.apply(meta_slice("node-1", new, generation=2))]
    return steps


def delete_and_recreate(new: dict[str, str] | None) -> Callable[[Env], list[Callable[[], None]]]:
    """Same generation: the metadata slice deleted (window), then created again."""
    def steps(env: Env) -> list[Callable[[], None]]:
        return [lambda: env.cluster.delete("ResourceSlice", "node-1-meta"),
                lambda: env.apply(meta_slice("node-1", new))]
    return steps


@dataclass(frozen=True)
class Republish:
    name: str
    steps: Callable[[Env], list[Callable[[], None]]]
    during: State
    after: State
    extractors: dict[str, str] | None = None  # before the republish
    pkey: str | None = None  # the claims' ibPKey


CASES = [
    Republish("same-keys-meta-first", bump_meta_first(None), LOCKED_X, LOCKED_X),
    Republish("same-keys-devices-first", bump_devices_first(None), LOCKED_X, LOCKED_X),
    Republish("same-keys-delete-recreate", delete_and_recreate(None), LOCKED_X, LOCKED_X),
    Republish("renamed-meta-first", bump_meta_first(RENAMED), LOCKED_X, UNRECONSTRUCTABLE),
    Republish("renamed-devices-first", bump_devices_first(RENAMED), LOCKED_X, UNRECONSTRUCTABLE),
    Republish("renamed-delete-recreate", delete_and_recreate(RENAMED), LOCKED_X, UNRECONSTRUCTABLE),
    Republish("value-changed", bump_devices_first(VALUE_CHANGED), LOCKED_X, UNRECONSTRUCTABLE),
    Republish("key-added", bump_meta_first(TWO_KEYS), LOCKED_X, UNRECONSTRUCTABLE, pkey="0x1"),
    Republish("key-removed", bump_devices_first(None), ("Locked", {"subnet": "subnet-X", "pkey": "0x1"}),
              UNRECONSTRUCTABLE, extractors=TWO_KEYS, pkey="0x1"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_republish_keeps_state_and_rederives(case: Republish) -> None:
    env = locked_env(case.extractors, case.pkey)
    window, complete = case.steps(env)
    window()
    assert env.status(ETH1) == case.during, "the incomplete window must not change the device"
    complete()
    assert env.status(ETH1) == case.after
    # Unreconstructable stays while any claim remains, then the device drains clean.
    if case.after == UNRECONSTRUCTABLE:
        env.cluster.delete("Pod", "default/a")
        assert env.status(ETH1) == UNRECONSTRUCTABLE
        env.cluster.delete("Pod", "default/b")
        assert env.status(ETH1) == ("Clean", {})


def test_unreconstructable_survives_a_same_key_republish() -> None:
    """Quarantine is sticky: a republish with the very same extractors does not lift it."""
    env = locked_env()
    env.apply(meta_slice("node-1", RENAMED))  # in place, no window: b and a now extract "net"
    assert env.status(ETH1) == UNRECONSTRUCTABLE
    for step in bump_devices_first(RENAMED)(env):
        step()
        assert env.status(ETH1) == UNRECONSTRUCTABLE
    env.add_pod("c", nic_params("subnet-X"))
    assert [r.code for r in env.schedule("c").reasons] == [reasons.AFFINITY_UNRECONSTRUCTABLE]


def test_window_devices_are_not_allocated() -> None:
    """During the window the pool is incomplete: no device of it is allocated."""
    env = locked_env()
    env.apply(device_slice("node-1", ["eth1"], generation=2))
    env.add_pod("c", nic_params("subnet-X"))
    c = env.schedule("c")
    assert c.result is Result.UNSCHEDULABLE
    assert {r.code for r in c.reasons} == {reasons.AFFINITY_POOL_INCOMPLETE}


def test_restart_in_window_decides_when_complete() -> None:
    """A scheduler started during the window knows no lock: the device is
    Unreconstructable for now (not sticky), and its claims decide once the pool is
    complete: consistent claims lock it again."""
    env = locked_env()
    env.apply(device_slice("node-1", ["eth1"], generation=2))
    env.restart()
    assert env.status(ETH1)[0] == "Unreconstructable"
    env.apply(meta_slice("node-1", generation=2))
    assert env.status(ETH1) == LOCKED_X
    env.add_pod("c", nic_params("subnet-X"))
    assert env.schedule("c").result is Result.SCHEDULED


def test_restart_in_window_renamed_key_is_a_restart() -> None:
    """No memory survives a restart (no new persistence): claims that consistently
    extract the renamed key lock the device to it, as a restart after the republish would."""
    env = locked_env()
    env.apply(device_slice("node-1", ["eth1"], generation=2))
    env.restart()
    env.apply(meta_slice("node-1", RENAMED, generation=2))
    assert env.status(ETH1) == ("Locked", {"net": "subnet-X"})


def test_claim_allocated_elsewhere_in_window_is_checked_on_completion() -> None:
    """A claim that arrives allocated during the window (another scheduler) is pending:
    once the pool is complete it is compared with the lock; other keys quarantine."""
    env = locked_env()
    env.apply(device_slice("node-1", ["eth1"], generation=2))
    status = {"allocation": {"devices": {"results": [{
        "request": "nic", "driver": DRIVER, "pool": "node-1", "device": "eth1",
        "shareID": "00000000-0000-4000-8000-000000000001",
        "consumedCapacity": {f"{DRIVER}/slots": "1"}}]}},
        "reservedFor": [{"resource": "pods", "name": "x", "uid": "uid-x"}]}
    env.apply(claim("x-nic", nic_params("subnet-Y"), status=status))
    env.apply(pod("x", node="node-1"))
    assert env.status(ETH1) == LOCKED_X  # kept through the window
    env.apply(meta_slice("node-1", generation=2))
    assert env.status(ETH1) == UNRECONSTRUCTABLE


def test_pool_completed_without_sharing_affinity_is_not_gated() -> None:
    """Republishing the pool without sharingAffinity is the KEP's per-pool rollback:
    once complete, its devices are not gated, so there is no lock to keep."""
    env = locked_env()
    env.apply(device_slice("node-1", ["eth1"], generation=2, count=1))
    assert env.status(ETH1) == ("Clean", {})
    env.add_pod("c", nic_params("subnet-Y"))
    assert env.schedule("c").result is Result.SCHEDULED


def test_pending_device_that_drains_in_window_is_clean() -> None:
    env = locked_env()
    env.apply(device_slice("node-1", ["eth1"], generation=2))
    env.restart()
    env.cluster.delete("Pod", "default/a")
    env.cluster.delete("Pod", "default/b")
    assert env.status(ETH1) == ("Clean", {})
    env.apply(meta_slice("node-1", RENAMED, generation=2))
    assert env.status(ETH1) == ("Clean", {})

