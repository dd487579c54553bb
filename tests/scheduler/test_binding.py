"""The binding cycle under API failures injected through the scheduler's port.

Assume after the API call: a share is committed only once PreBind's writes and
Bind were stored; Unreserve takes out exactly this cycle's shares and undoes on
the server only what this cycle wrote; an API error is an Error (backoff), a lost
race Unschedulable; an outcome that cannot be known is accounted as written
(fail closed) until the claim is read back.
"""

from __future__ import annotations

import pytest

from builders import Env, claim, dev, device_slice, meta_slice, nic_class, nic_params, pod
from dra_affinity.api.podclaims import is_reserved_for
from dra_affinity.scheduler.view import WriteFailed
from dra_affinity.sim.faults import Failure, Fault
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result

ETH1 = dev("node-1", "eth1")


def one_nic() -> Env:
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.add_pod("a", nic_params("subnet-X"))
    env.add_pod("b", nic_params("subnet-Y"))
    return env


def allocated(env: Env, key: str) -> bool:
    c = env.cluster.claim(key)
    return c is not None and c.status.allocation is not None


def assert_cache_matches_cluster(env: Env) -> None:
    """The cache holds exactly the cluster's allocations (no ghost lock, none missing)."""
    cached = sorted((d, sh.claim, sh.tentative) for d in env.scheduler.state.devices()
                    for sh in env.scheduler.state.shares(d))
    stored = sorted((r.device_id, f"{c.namespace}/{c.name}", False) for c in env.cluster.claims()
                    if c.status.allocation is not None for r in c.status.allocation.devices.results)
    assert cached == stored


@pytest.mark.parametrize(("fault", "result"), [
    (Fault.CONFLICT, Result.UNSCHEDULABLE),
    (Fault.INVALID, Result.ERROR),
    (Fault.SERVER_ERROR, Result.ERROR),
])
def test_prebind_failure_leaves_no_ghost_lock(fault: Fault, result: Result) -> None:
    """PreBind's claim write is refused: nothing is committed, the device stays Clean, and
    a pod of another subnet takes it. An API error is an Error, a lost race Unschedulable."""
    env = one_nic()
    a = env.schedule("a", fail=("claim", fault))
    assert a.result is result and [r.code for r in a.reasons] == [reasons.BIND_FAILED]
    assert "writing the claims of pod default/a" in a.message
    assert env.status(ETH1) == ("Clean", {})
    assert not env.scheduler.state.is_allocated(ETH1)
    assert not allocated(env, "default/a-nic")
    assert_cache_matches_cluster(env)
    assert env.schedule("b").result is Result.SCHEDULED
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-Y"})


@pytest.mark.parametrize("fault", [Fault.TIMEOUT, Fault.RESET])
@pytest.mark.parametrize("applied", [True, False])
def test_lost_prebind_answer_is_undone_on_the_server(fault: Fault, applied: bool) -> None:
    """PreBind's answer is lost, the write stored or not: Unreserve reads the claim and
    undoes what this attempt stored; cache and cluster agree; the pod is retried."""
    env = one_nic()
    env.view.fail("claim", "default/a-nic", Failure(fault, applied))
    a = env.scheduler.schedule("default/a")
    assert a.result is Result.ERROR
    assert not allocated(env, "default/a-nic")
    c = env.cluster.claim("default/a-nic")
    assert c is not None and not c.status.reserved_for
    assert env.status(ETH1) == ("Clean", {})
    assert_cache_matches_cluster(env)
    assert not env.scheduler.unresolved
    assert env.schedule("a").result is Result.SCHEDULED


@pytest.mark.parametrize("fault", [Fault.CONFLICT, Fault.INVALID, Fault.SERVER_ERROR])
def test_bind_failure_undoes_prebind(fault: Fault) -> None:
    env = one_nic()
    a = env.schedule("a", fail=("bind", fault))
    assert a.result is (Result.UNSCHEDULABLE if fault is Fault.CONFLICT else Result.ERROR)
    assert "binding pod default/a to node node-1 failed" in a.message
    assert not allocated(env, "default/a-nic")
    assert env.status(ETH1) == ("Clean", {})
    assert_cache_matches_cluster(env)


def test_rollback_never_clears_what_another_writer_made() -> None:
    """The pod joins a claim another pod allocated (and holds): its Bind fails; Unreserve
    removes only this pod's reservation, never the allocation it did not make."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.apply(claim("shared", nic_params("subnet-X")))
    env.apply(pod("a", ["shared"]))
    env.apply(pod("b", ["shared"]))
    assert env.schedule("a").result is Result.SCHEDULED
    env.view.fail("bind", "default/b", Failure(Fault.CONFLICT))
    assert env.schedule("b").result is Result.UNSCHEDULABLE
    c = env.cluster.claim("default/shared")
    a = env.cluster.pod("default/a")
    b = env.cluster.pod("default/b")
    assert c is not None and a is not None and b is not None
    assert c.status.allocation is not None
    assert is_reserved_for(c, a) and not is_reserved_for(c, b)
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    assert_cache_matches_cluster(env)


@pytest.mark.parametrize("applied", [True, False])
def test_lost_bind_answer_keeps_the_claims(applied: bool) -> None:
    """Bind's answer is lost: the pod may be bound, so nothing is undone (clearing its
    claims could leave a bound pod without its devices). Bound or not, the cache holds
    the allocation; an unbound pod's next attempt uses it."""
    env = one_nic()
    env.view.fail("bind", "default/a", Failure(Fault.TIMEOUT, applied))
    a = env.scheduler.schedule("default/a")
    assert a.result is Result.ERROR and "may be bound" in a.message
    assert allocated(env, "default/a-nic")
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})
    assert_cache_matches_cluster(env)
    assert env.schedule("b").result is Result.UNSCHEDULABLE  # eth1 is locked to subnet-X
    again = env.schedule("a")
    assert again.result is Result.SCHEDULED and [x["device"] for x in again.allocations] == [ETH1]
    assert_cache_matches_cluster(env)


def test_failed_undo_keeps_the_allocation_until_read_back() -> None:
    """Bind fails and Unreserve's undo fails too: the server may still hold the
    allocation, so the cache keeps it (eth1 cannot be locked to another subnet). Once the
    claim can be read back, the cache follows the server."""
    env = one_nic()
    env.view.fail("bind", "default/a", Failure(Fault.CONFLICT))
    env.view.fail("unreserve", "default/a-nic", Failure(Fault.TIMEOUT, applied=True))
    env.view.fail("read", "default/a-nic", Failure(Fault.SERVER_ERROR), times=2)
    a = env.scheduler.schedule("default/a")
    assert a.result is Result.UNSCHEDULABLE and "until the API server can be read back" in a.message
    assert "default/a-nic are kept as written, with their devices and locks" in a.message
    assert not allocated(env, "default/a-nic")  # the undo was stored, its answer lost
    assert env.scheduler.unresolved == {"default/a-nic": None}
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-X"})  # held as written
    # The read-back fails twice (the pod with the unknown claim is not tried meanwhile) ...
    retry = env.scheduler.schedule("default/a")
    assert retry.result is Result.ERROR and "not known yet" in retry.message
    assert env.schedule("b").result is Result.UNSCHEDULABLE
    # ... then succeeds: the claim is not allocated, eth1 is free again.
    assert env.schedule("b").result is Result.SCHEDULED
    assert not env.scheduler.unresolved
    assert env.status(ETH1) == ("Locked", {"subnet": "subnet-Y"})
    assert_cache_matches_cluster(env)


def test_failed_undo_of_a_stored_allocation_is_accounted() -> None:
    """The undo is refused (nothing cleared): the claim stays allocated and reserved for the
    unbound pod; the cache holds it, and the pod's next attempt uses it."""
    env = one_nic()
    env.view.fail("bind", "default/a", Failure(Fault.SERVER_ERROR))
    env.view.fail("unreserve", "default/a-nic", Failure(Fault.SERVER_ERROR))
    assert env.scheduler.schedule("default/a").result is Result.ERROR
    assert allocated(env, "default/a-nic")
    assert env.schedule("b").result is Result.UNSCHEDULABLE
    assert env.schedule("a").result is Result.SCHEDULED
    assert_cache_matches_cluster(env)


def test_statefulset_pod_recreated_with_the_same_name() -> None:
    """A claim still reserved for a deleted pod of the same name (another UID): the new
    pod is not that consumer; it is added to reservedFor by its own UID before binding."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.apply(claim("data", nic_params("subnet-X"), status={
        "allocation": {"devices": {"results": [{
            "request": "nic", "driver": "networking.example.com", "pool": "node-1",
            "device": "eth1", "shareID": "00000001-0000-4000-8000-000000000000",
            "consumedCapacity": {"networking.example.com/slots": "1"}}]}},
        "reservedFor": [{"resource": "pods", "name": "web-0", "uid": "uid-of-the-old-web-0"}]}))
    env.apply(pod("web-0", ["data"], uid="uid-of-the-new-web-0"))
    env.restart()
    assert env.schedule("web-0").result is Result.SCHEDULED
    c = env.cluster.claim("default/data")
    new = env.cluster.pod("default/web-0")
    assert c is not None and new is not None
    assert is_reserved_for(c, new)
    assert [r.uid for r in c.status.reserved_for] == ["uid-of-the-old-web-0", "uid-of-the-new-web-0"]


def test_unresolved_read_failure_is_an_api_error() -> None:
    """The port's read-back raises WriteFailed when the cluster cannot be reached."""
    env = one_nic()
    env.view.fail("read", "default/a-nic", Failure(Fault.RESET))
    with pytest.raises(WriteFailed):
        env.view.read_claim("default/a-nic")
