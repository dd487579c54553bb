"""A leader frozen past its Lease while pods wait in its backoff, on a real control plane.

The leader reaches the API server through the fault proxy, which answers 500 to every
write of it: its pods' attempts end in errors, so they sit in its backoff queue. It is
frozen (SIGSTOP) past its Lease; the other replica takes the Lease and places those
pods; the network heals, and the old leader is woken (SIGCONT) with the pods' retries
due and its caches stale. It must stop at once: no write after its renew deadline (its
write log against its renewals), and nothing the new leader stored undone: each pod
bound with its claim allocated and reserved for it by UID, the NIC locked to the
pods' subnet only.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
from faultproxy import FaultProxy

from kube.live import (
    Live,
    SchedulerProc,
    World,
    assert_no_incompatible_colocation,
    fence_violations,
    live,
    lock_table,
    locks,
    ns,
    schedulers,
    wait_until,
)

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns, schedulers)  # pytest finds fixtures by module attribute

WAITING = [f"b{i}" for i in range(4)]
LEASE_DURATION = 4.0  # SchedulerProc's --lease-duration


def _holder(live: Live, ns: str) -> str | None:
    lease = live.get("Lease", "coordination.k8s.io/v1", "dra-affinity-scheduler", ns)
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def _failed(proc: SchedulerProc, pods: list[str]) -> bool:
    seen = {r.get("pod", "").rpartition("/")[2] for r in proc.records() if r.get("msg") == "error"}
    return all(p in seen for p in pods)


def test_woken_ex_leader_neither_writes_nor_undoes_the_new_leaders_work(
        control_plane: Any, live: Live, ns: str, schedulers: Any, tmp_path: Any,
        request: pytest.FixtureRequest) -> None:
    plane = control_plane.plane
    proxy = FaultProxy(("127.0.0.1", plane.ports["kube-apiserver"]), plane.pki, rate=1.0,
                       seed=1, kinds=["500"]).start()
    request.addfinalizer(proxy.stop)
    w = World(live, ns, nodes=1, nics=1, slots=len(WAITING))
    name = f"dra-affinity-{ns}"
    extra = ["--log-level", "debug"]
    old = schedulers(identity="r1", kubeconfig=proxy.kubeconfig(tmp_path / "proxy.kubeconfig"),
                     extra=extra)
    wait_until(old.leading, 60, "r1 leading")
    new = schedulers(identity="r2", extra=extra)
    for p in WAITING:
        w.claim(f"{p}-nic", "y")
        w.pod(p, claim=f"{p}-nic", scheduler=name)
    wait_until(lambda: _failed(old, WAITING), 60, "the pods in r1's backoff (writes refused)")

    assert old.proc is not None
    old.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: _holder(live, ns) == "r2", 4 * LEASE_DURATION, "r2 holding the Lease")
        wait_until(lambda: all(live.node_of(ns, p) for p in WAITING), 60, "the pods bound by r2")
        proxy.rate = 0.0  # the network heals: a write of r1 would now be stored
    finally:
        old.proc.send_signal(signal.SIGCONT)
    assert old.proc.wait(30) == 1  # it steps down and exits
    assert any(r.get("msg", "").startswith("leadership lost") for r in old.records())

    assert fence_violations(old) == []
    assert fence_violations(new) == []
    dev = w.device(w.nodes[0], 1)
    for p in WAITING:
        pod = live.pod(ns, p)
        claim = live.claim(ns, f"{p}-nic")
        assert pod is not None and claim is not None
        assert live.devices_of(ns, p) == [dev], claim
        assert [r["uid"] for r in claim["status"].get("reservedFor") or []] == \
            [pod["metadata"]["uid"]]
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    assert_no_incompatible_colocation(live, ns)
    assert lock_table(locks(control_plane.kubeconfig), w.driver)[dev] == ("Locked", {"subnet": "y"})
    assert proxy.injected["500"] >= len(WAITING)
