"""The adapter's writes under API failures, injected in the in-memory API server.

Each test drives one attempt against :class:`FakeApi` with a failure on one request
and checks the three places that must agree afterwards: the server's objects, the
scheduler's cache (with no informer echo to repair it), and the attempt's result.
"""

from __future__ import annotations

import pytest

from dra_affinity.kube.runner import SchedulerProcess
from dra_affinity.kube.view import DELETE_PROTECTION
from dra_affinity.structured.model import Result

from .fakeapi import FakeApi
from .test_process import _devices, _node, _process, _run
from .world import build, claim, pod, sync

ETH1 = "networking.example.com/node-1/eth1"
CLAIM_STATUS = "/resourceclaims/a-nic/status"
BINDING = "/pods/a/binding"


@pytest.fixture
def api() -> FakeApi:
    a = FakeApi()
    build(a)
    a.create("ResourceClaim", claim("a-nic", "x"))
    a.create("Pod", pod("a", "a-nic"))
    return a


def _attempt(proc: SchedulerProcess) -> Result:
    key = proc.queue.pop()
    assert key == "default/a"
    with proc.core_lock:
        return proc.scheduler.schedule(key).result


def _locked(proc: SchedulerProcess) -> list[str]:
    return sorted(d for d, st in proc.scheduler.state.affinity_states.items()
                  if st.status.label == "Locked")


def _clean_claim(api: FakeApi) -> None:
    c = api.get("ResourceClaim", "default/a-nic")
    assert c is not None
    assert not (c.get("status") or {}).get("allocation")
    assert not (c.get("status") or {}).get("reservedFor")
    assert DELETE_PROTECTION not in (c["metadata"].get("finalizers") or [])


@pytest.mark.parametrize("fault", ["server-error", "invalid"])
def test_refused_status_write_is_an_error_and_leaves_nothing(api: FakeApi, fault: str) -> None:
    proc = _process(api)
    api.fail("PATCH", CLAIM_STATUS, fault)
    assert _attempt(proc) is Result.ERROR
    _clean_claim(api)  # the finalizer this attempt added is taken off again
    assert _locked(proc) == []  # no ghost lock, and no informer echo was needed
    assert proc.scheduler.state.shares(ETH1) == []


def test_refused_status_write_sets_scheduler_error_condition(api: FakeApi) -> None:
    proc = _process(api)
    api.fail("PATCH", CLAIM_STATUS, "server-error")
    proc.schedule_one(proc.queue.pop() or "")
    p = api.get("Pod", "default/a")
    assert p is not None
    assert p["status"]["conditions"][0]["reason"] == "SchedulerError"
    assert "500 InternalError" in p["status"]["conditions"][0]["message"]
    # An error, not a filter's verdict: backoffQ, retried without waiting for an event.
    assert proc.queue.attempts("default/a") == 1 and proc.queue.where("default/a") == "backoff"
    _run(proc, api)  # retried: the next attempt succeeds
    assert _node(api, "default/a") == "node-1"


@pytest.mark.parametrize("fault", ["timeout", "reset"])
@pytest.mark.parametrize("applied", [True, False])
def test_lost_status_answer_is_undone_on_the_server(api: FakeApi, fault: str,
                                                    applied: bool) -> None:
    proc = _process(api)
    api.fail("PATCH", CLAIM_STATUS, fault, applied=applied)
    assert _attempt(proc) is Result.ERROR
    _clean_claim(api)
    assert _locked(proc) == []
    sync(api, proc.view)
    assert _locked(proc) == []


@pytest.mark.parametrize(("fault", "applied"), [("reset", True), ("timeout", True),
                                                ("conflict", False)])
def test_binding_whose_answer_was_lost_is_found_bound(api: FakeApi, fault: str,
                                                      applied: bool) -> None:
    """The binding was stored but its answer lost (or a retry met our own binding as a
    409): reading the pod back shows it bound to the node: success."""
    proc = _process(api)
    if fault == "conflict":  # an earlier binding of ours whose answer was lost
        p = api.get("Pod", "default/a")
        assert p is not None
        p["spec"]["nodeName"] = "node-1"
        api.on("POST", BINDING, lambda: api.update("Pod", p))  # then the binding meets a 409
    else:
        api.fail("POST", BINDING, fault, applied=applied)
    assert _attempt(proc) is Result.SCHEDULED
    assert _node(api, "default/a") == "node-1"
    assert _devices(api, "default/a-nic") == [ETH1]
    assert _locked(proc) == [ETH1]


def test_unreadable_binding_outcome_keeps_the_claims(api: FakeApi) -> None:
    """No answer to the binding and the pod cannot be read back: it may be bound, so its
    claims are not cleared; the cache holds them; the pod's next attempt completes."""
    proc = _process(api)
    api.fail("POST", BINDING, "timeout", applied=False)
    api.fail("GET", "/pods/a", "reset")
    assert _attempt(proc) is Result.ERROR
    assert _devices(api, "default/a-nic") == [ETH1]
    assert _locked(proc) == [ETH1]
    proc.queue.failed("default/a")  # back into the queue, as after any failed attempt
    _run(proc, api)
    assert _node(api, "default/a") == "node-1"
    assert _devices(api, "default/a-nic") == [ETH1]


def test_refused_undo_keeps_the_allocation_in_the_cache(api: FakeApi) -> None:
    """Bind refused, and the undo's status write refused too: the server still holds the
    allocation, so does the cache (no device freed that the server holds)."""
    proc = _process(api)
    api.fail("POST", BINDING, "server-error")
    api.fail("PATCH", CLAIM_STATUS, "server-error", after=1)  # PreBind's passes, the undo's not
    assert _attempt(proc) is Result.ERROR
    assert _devices(api, "default/a-nic") == [ETH1]  # the undo did not happen
    assert _locked(proc) == [ETH1]  # and the cache says so


def test_stale_replica_never_clears_an_allocation_it_did_not_make(api: FakeApi) -> None:
    """Two schedulers on one cluster, the second with a stale cache (an ex-leader
    waking up): the first allocates, reserves and binds the pod; the second, still
    seeing it pending, tries the same placement. Its attempt fails and must leave the
    first one's claim, reservation, finalizer and binding as they are."""
    stale = _process(api)
    fresh = _process(api)
    _run(fresh, api)
    assert _node(api, "default/a") == "node-1"
    before = api.get("ResourceClaim", "default/a-nic")
    result = _attempt(stale)  # its informers have not seen any of it
    assert result is not Result.SCHEDULED
    after = api.get("ResourceClaim", "default/a-nic")
    assert after is not None and before is not None
    assert after["status"] == before["status"]
    assert DELETE_PROTECTION in after["metadata"]["finalizers"]
    assert _node(api, "default/a") == "node-1"


@pytest.mark.parametrize("fault", ["conflict", "server-error"])
def test_failed_bind_of_a_pod_joining_a_claim_undoes_only_its_reservation(
        api: FakeApi, fault: str) -> None:
    """A pod joins a claim that another attempt allocated and another pod holds; its Bind
    is refused. Unreserve takes out its own reservation only: the allocation, the other
    pod's reservation and the finalizer, which it did not write, stay."""
    api.create("Pod", pod("b", "a-nic"))
    proc = _process(api)
    assert _attempt(proc) is Result.SCHEDULED  # a allocates a-nic
    sync(api, proc.view)
    before = api.get("ResourceClaim", "default/a-nic")
    assert before is not None
    api.fail("POST", "/pods/b/binding", fault)
    key = proc.queue.pop()
    assert key == "default/b"
    with proc.core_lock:
        assert proc.scheduler.schedule(key).result is not Result.SCHEDULED
    after = api.get("ResourceClaim", "default/a-nic")
    assert after is not None
    assert after["status"]["allocation"] == before["status"]["allocation"]
    assert [r["uid"] for r in after["status"]["reservedFor"]] == ["uid-pod-a"]
    assert DELETE_PROTECTION in after["metadata"]["finalizers"]
    assert _node(api, "default/a") == "node-1" and _node(api, "default/b") is None
    assert _locked(proc) == [ETH1]
