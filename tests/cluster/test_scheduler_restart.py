"""Restarts on a real control plane: kill -9 mid-stream, leader failover, SIGTERM."""

from __future__ import annotations

from typing import Any

import pytest

from kube.live import (
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

SUBNETS = ["x", "y", "z", "w"]


def _all_bound(live: Live, ns: str, pods: list[str]) -> bool:
    return all(live.node_of(ns, p) for p in pods)


def test_kill9_mid_stream_then_restart(control_plane: Any, live: Live, ns: str,
                                       schedulers: Any) -> None:
    w = World(live, ns, nodes=2, nics=2, slots=4)
    name = f"dra-affinity-{ns}"
    pods = [f"p{i}" for i in range(16)]
    for i, p in enumerate(pods):
        w.claim(f"{p}-nic", SUBNETS[i % 4])
    first = schedulers(identity="r1")
    for p in pods:
        w.pod(p, claim=f"{p}-nic", scheduler=name)
    # kill -9 while the stream is being scheduled: some bound, some not
    wait_until(lambda: sum(1 for p in pods if live.node_of(ns, p)) >= 4, 60, "some pods bound")
    first.kill9()
    before = lock_table(locks(control_plane.kubeconfig), w.driver)
    assert_no_incompatible_colocation(live, ns)
    # The Lease of the killed process expires (4 s); the restarted one takes it.
    second = schedulers(identity="r2")
    wait_until(lambda: _all_bound(live, ns, pods), 120, "every pod bound after the restart")
    # The first may have bound them all before the kill: the second still has to lead.
    wait_until(second.leading, 60, "the restarted replica leading")
    after = lock_table(locks(control_plane.kubeconfig), w.driver)
    for dev, (status, lock) in before.items():
        if status == "Locked":
            assert after[dev] == (status, lock), dev  # no lock lost or changed by the restart
    assert_no_incompatible_colocation(live, ns)
    # 16 one-slot pods of 4 subnets on 4 NICs of 4 slots: every NIC ends up full, one subnet each
    assert sorted(s for s, _ in after.values()) == ["Locked"] * 4
    assert sorted(lock["subnet"] for _, lock in after.values()) == sorted(SUBNETS)


def test_leader_failover_between_two_replicas(control_plane: Any, live: Live, ns: str,
                                              schedulers: Any) -> None:
    w = World(live, ns, nodes=1, nics=2)
    name = f"dra-affinity-{ns}"
    a = schedulers(identity="replica-a")
    wait_until(a.leading, 60, "replica-a leading")
    b = schedulers(identity="replica-b")
    wait_until(lambda: any(r.get("msg") == "starting" for r in b.records()), 30, "b up")
    w.claim("p1-nic", "x")
    w.pod("p1", claim="p1-nic", scheduler=name)
    wait_until(lambda: live.node_of(ns, "p1"), 60, "p1 bound by the leader")
    assert not b.leading()
    lease = live.get("Lease", "coordination.k8s.io/v1", "dra-affinity-scheduler", ns)
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"
    a.kill9()
    w.claim("p2-nic", "x")
    w.claim("p3-nic", "y")
    w.pod("p2", claim="p2-nic", scheduler=name)
    w.pod("p3", claim="p3-nic", scheduler=name)
    wait_until(lambda: live.node_of(ns, "p2") and live.node_of(ns, "p3"), 90,
               "p2, p3 bound by the new leader")
    assert b.leading()
    lease = live.get("Lease", "coordination.k8s.io/v1", "dra-affinity-scheduler", ns)
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] >= 1
    # b rebuilt a's lock from the cluster: p2 (x) joined p1's NIC, p3 (y) took the other
    assert live.devices_of(ns, "p2") == live.devices_of(ns, "p1")
    assert live.devices_of(ns, "p3") != live.devices_of(ns, "p1")
    assert_no_incompatible_colocation(live, ns)


def test_sigterm_releases_the_lease_and_exits_zero(control_plane: Any, live: Live, ns: str,
                                                   schedulers: Any) -> None:
    World(live, ns, nodes=1, nics=1)
    a = schedulers(identity="replica-a")
    wait_until(a.leading, 60, "replica-a leading")
    assert a.terminate() == 0
    # released: no holder, so the next replica takes it without waiting for it to expire
    lease = live.get("Lease", "coordination.k8s.io/v1", "dra-affinity-scheduler", ns)
    assert lease is not None and lease["spec"]["holderIdentity"] == ""
    b = schedulers(identity="replica-b")
    wait_until(b.leading, 30, "replica-b leading")
    assert any(r.get("msg") == "stopped" for r in a.records())
