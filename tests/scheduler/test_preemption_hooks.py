"""Composition with DRA preemption (KEP-5690): AddPod/RemovePod mutate lock state
alongside capacity on a what-if copy of the cache."""

from __future__ import annotations

from builders import Env, dev, device_slice, meta_slice, nic_class, nic_params
from dra_affinity.structured import reasons
from dra_affinity.structured.state import AffinityStatus, clone_state

ETH1 = dev("node-1", "eth1")


def test_removing_the_lock_holder_turns_the_device_clean() -> None:
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.add_pod("low", nic_params("subnet-X"))
    env.add_pod("high", nic_params("subnet-Y"))
    env.schedule("low")
    s = env.scheduler
    assert [r.code for r in s.fits_on(s.state, "default/high", "node-1").reasons] == [
        reasons.AFFINITY_LOCK_MISMATCH]
    what_if = clone_state(s.state)
    s.remove_pod(what_if, "default/low")
    assert what_if.affinity(ETH1).status is AffinityStatus.CLEAN
    assert not what_if.is_allocated(ETH1)
    assert s.fits_on(what_if, "default/high", "node-1").ok  # the victim set would suffice
    # the live cache is untouched
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    # AddPod restores capacity and lock together (reprieve)
    s.add_pod(what_if, "default/low")
    assert what_if.affinity(ETH1).locked_affinity == (("subnet", "subnet-X"),)
    assert dict(what_if.consumed(ETH1)) == dict(s.state.consumed(ETH1))


def test_removing_one_of_two_holders_keeps_the_lock() -> None:
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-X"))
    env.add_pod("y", nic_params("subnet-Y"))
    env.schedule("a")
    env.schedule("b")
    s = env.scheduler
    what_if = clone_state(s.state)
    s.remove_pod(what_if, "default/a")
    assert what_if.affinity(ETH1).status is AffinityStatus.LOCKED
    assert not s.fits_on(what_if, "default/y", "node-1").ok
    s.remove_pod(what_if, "default/b")
    assert s.fits_on(what_if, "default/y", "node-1").ok
