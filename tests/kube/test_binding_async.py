"""Binding cycles on worker threads, against the in-memory API server.

A slow API server is a gate in the API port (:class:`GatedApi`): chosen requests
wait until the test opens it, so a binding stays in flight for as long as a test
needs; failures are injected in :class:`FakeApi` as everywhere else. Nothing here
is timed: each test waits for a state, never for a duration.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from dra_affinity.kube.binder import Binder
from dra_affinity.kube.runner import Options, SchedulerProcess
from dra_affinity.kube.view import DELETE_PROTECTION

from .fakeapi import FakeApi
from .test_process import _devices, _node
from .world import build, claim, meta_slice, nic_slice, pod, sync

WAIT = 20.0  # seconds a test waits for a state before it fails


def wait_for(pred: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class GatedApi:
    """The fake API server behind gates: a request whose path ends with a held suffix
    waits until the gate opens (a slow server, or one answer that takes long)."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        self.gates: dict[tuple[str, str], threading.Event] = {}
        self.waiting: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def hold(self, method: str, suffix: str) -> threading.Event:
        gate = self.gates[(method, suffix)] = threading.Event()
        return gate

    def held(self, method: str, suffix: str) -> bool:
        with self._lock:
            return (method, suffix) in self.waiting

    def _pass(self, method: str, path: str) -> None:
        for (m, suffix), gate in list(self.gates.items()):
            if m == method and path.endswith(suffix):
                with self._lock:
                    self.waiting.add((m, suffix))
                gate.wait(WAIT)
                with self._lock:
                    self.waiting.discard((m, suffix))

    def request(self, method: str, path: str, **kw: Any) -> Any:
        self._pass(method, path)
        return self.api.request(method, path, **kw)

    def request_bytes(self, method: str, path: str, **kw: Any) -> bytes:
        self._pass(method, path)
        return self.api.request_bytes(method, path, **kw)

    def watch(self, path: str, query: Mapping[str, str], timeout: float) -> Iterator[dict[str, Any]]:
        return self.api.watch(path, query, timeout)


def _node_with(name: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, claim_name: str, cpu: str | None = None) -> dict[str, Any]:
    p = pod(name, claim_name)
    if cpu is not None:
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return p


def _process(fake: FakeApi, limit: int = 4) -> tuple[SchedulerProcess, GatedApi]:
    gated = GatedApi(fake)
    proc = SchedulerProcess(gated, Options(leader_elect=False, metrics_port=-1, initial_backoff=0.0,
                                           max_backoff=0.0, max_in_flight_bindings=limit))
    sync(fake, proc.view)
    proc.scheduler.start()
    proc.started.set()
    proc.binder.start()
    return proc, gated


def _next(proc: SchedulerProcess) -> str:
    with proc.core_lock:
        key = proc.queue.pop()
    assert key is not None
    return key


def _idle(proc: SchedulerProcess) -> None:
    wait_for(lambda: proc.binder.in_flight() == 0, "the bindings in flight to end")


def _no_leak(proc: SchedulerProcess) -> None:
    """Nothing of an ended binding cycle is left: claims in flight, assumed pods,
    tentative shares, and the core lock is free for another thread."""
    sched = proc.scheduler
    assert sched.cache.in_flight == {}
    assert sched.binding == {}
    tentative = [(d, s.claim) for d in sched.state.affinity_states for s in sched.state.shares(d)
                 if s.tentative]
    assert tentative == []
    got: list[bool] = []

    def take() -> None:  # an RLock held by no thread: another one takes it at once
        got.append(proc.core_lock.acquire(blocking=False))
        if got[-1]:
            proc.core_lock.release()

    t = threading.Thread(target=take)
    t.start()
    t.join()
    assert got == [True]


@pytest.fixture
def fake() -> FakeApi:
    a = FakeApi()
    build(a, nodes=("node-1",), nics=1, slots=4)
    return a


def test_next_pod_is_scheduled_against_the_assumed_state_while_a_binding_is_in_flight() -> None:
    """a's binding waits on a slow server; b and c are scheduled meanwhile and see a on
    node-1: its CPU (NodeResourcesFit) and its NIC's lock (c's subnet differs)."""
    fake = FakeApi()
    build(fake, nodes=(), nics=1)
    for n, nics in (("node-1", 1), ("node-2", 2)):
        fake.create("Node", _node_with(n, "1"))
        fake.create("ResourceSlice", meta_slice(n))
        fake.create("ResourceSlice", nic_slice(n, nics, 4))
    fake.create("ResourceClaim", claim("a-nic", "x"))
    fake.create("ResourceClaim", claim("b-nic", "x"))
    fake.create("ResourceClaim", claim("c-nic", "y"))
    fake.create("Pod", _pod("a", "a-nic", cpu="600m"))
    fake.create("Pod", _pod("b", "b-nic", cpu="600m"))
    fake.create("Pod", _pod("c", "c-nic"))
    proc, gated = _process(fake)
    gate = gated.hold("POST", "/pods/a/binding")
    proc.schedule_one(_next(proc))  # a: reserved on node-1, its binding waits
    wait_for(lambda: gated.held("POST", "/pods/a/binding"), "a's binding on the wire")
    assert proc.binder.in_flight() == 1
    assert proc.queue.where("default/a") == "inFlight"
    proc.schedule_one(_next(proc))  # b: a's 600m of node-1's 1 CPU is taken
    wait_for(lambda: _node(fake, "default/b") is not None, "b bound")
    assert _node(fake, "default/b") == "node-2"
    proc.schedule_one(_next(proc))  # c (subnet y): node-1's NIC is locked to a's subnet x
    wait_for(lambda: _node(fake, "default/c") is not None, "c bound")
    # node-1's only NIC is locked to a's subnet x (assumed), node-2's eth1 to b's
    assert _devices(fake, "default/c-nic") == ["networking.example.com/node-2/eth2"]
    assert _node(fake, "default/a") is None  # still in flight all along
    gate.set()
    _idle(proc)
    assert _node(fake, "default/a") == "node-1"
    assert _devices(fake, "default/a-nic") == ["networking.example.com/node-1/eth1"]
    _no_leak(proc)
    proc.shutdown()


def test_a_pod_sharing_a_claim_in_flight_waits_for_its_binding(fake: FakeApi) -> None:
    """Two pods of one claim: while the first one's binding writes it, the second is not
    tried against a half-written claim; it backs off and then joins the reservation."""
    fake.create("ResourceClaim", claim("shared", "x"))
    fake.create("Pod", pod("a", "shared"))
    fake.create("Pod", pod("b", "shared"))
    proc, gated = _process(fake)
    gate = gated.hold("POST", "/pods/a/binding")
    proc.schedule_one(_next(proc))
    wait_for(lambda: gated.held("POST", "/pods/a/binding"), "a's binding on the wire")
    proc.schedule_one(_next(proc))  # b: its claim is in flight for a
    assert proc.queue.where("default/b") == "backoff"
    gate.set()
    _idle(proc)
    sync(fake, proc.view)
    proc.schedule_one(_next(proc))
    _idle(proc)
    assert (_node(fake, "default/a"), _node(fake, "default/b")) == ("node-1", "node-1")
    c = fake.get("ResourceClaim", "default/shared")
    assert c is not None
    assert sorted(r["name"] for r in c["status"]["reservedFor"]) == ["a", "b"]
    _no_leak(proc)
    proc.shutdown()


@pytest.mark.parametrize(("method", "suffix", "fault"), [
    ("POST", "/pods/a/binding", "server-error"),
    ("POST", "/pods/a/binding", "reset"),
    # PreBind's first write (the claim's finalizer) refused: nothing reached the server,
    # so no claim event tells b; the binding's own release must.
    ("PATCH", "/resourceclaims/a-nic", "server-error"),
])
def test_failed_binding_on_a_worker_runs_unreserve_and_requeues(fake: FakeApi, method: str,
                                                                suffix: str, fault: str) -> None:
    """a's binding fails on its worker: Unreserve undoes its claim on the server and its
    lock in the cache, a backs off; b, parked because a's lock held the only NIC,
    is moved by the release and takes the NIC."""
    fake.create("ResourceClaim", claim("a-nic", "x"))
    fake.create("ResourceClaim", claim("b-nic", "y"))
    fake.create("Pod", pod("a", "a-nic"))
    fake.create("Pod", pod("b", "b-nic"))
    proc, gated = _process(fake)
    gate = gated.hold(method, suffix)
    fake.fail(method, suffix, fault)
    proc.schedule_one(_next(proc))
    wait_for(lambda: gated.held(method, suffix), "a's write on the wire")
    proc.schedule_one(_next(proc))  # b: the NIC is locked to subnet x by a (assumed)
    assert proc.queue.where("default/b") == "unschedulable"
    gate.set()
    _idle(proc)
    c = fake.get("ResourceClaim", "default/a-nic")
    assert c is not None
    assert not (c.get("status") or {}).get("allocation")
    assert not (c.get("status") or {}).get("reservedFor")
    assert DELETE_PROTECTION not in (c["metadata"].get("finalizers") or [])
    assert proc.queue.where("default/a") == "backoff"
    assert proc.queue.where("default/b") in ("active", "backoff")  # moved by the release
    p = fake.get("Pod", "default/a")
    assert p is not None and p["status"]["conditions"][0]["reason"] == "SchedulerError"
    assert "default/a" not in proc.scheduler.cache.usage.pods
    _no_leak(proc)
    proc.schedule_one(_next(proc))  # b first (queued before a's retry)
    _idle(proc)
    assert _devices(fake, "default/b-nic") == ["networking.example.com/node-1/eth1"]
    proc.shutdown()


def test_leadership_lost_mid_binding_stops_the_workers_writes(fake: FakeApi) -> None:
    """The fence closes while a's claim write is on the wire: that write lands (it was
    sent while leading), the binding and every Unreserve write are refused before they
    are sent, and the claim is kept as written (its outcome unknown to this replica)."""
    fake.create("ResourceClaim", claim("a-nic", "x"))
    fake.create("Pod", pod("a", "a-nic"))
    proc, gated = _process(fake)
    leading = threading.Event()
    leading.set()
    proc.view.may_write = leading.is_set
    gate = gated.hold("PATCH", "/resourceclaims/a-nic/status")
    proc.schedule_one(_next(proc))
    wait_for(lambda: gated.held("PATCH", "/resourceclaims/a-nic/status"), "a's claim write")
    leading.clear()
    sent = len(fake.requests)
    gate.set()
    _idle(proc)
    writes = [(m, p) for m, p in fake.requests[sent:] if m != "GET"]
    assert writes == [("PATCH", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/"
                                "a-nic/status")]
    assert _node(fake, "default/a") is None
    assert "default/a-nic" in proc.scheduler.unresolved  # accounted as written until read
    proc.shutdown()


def test_a_threaded_run_with_failures_leaves_cache_and_server_agreeing() -> None:
    """The whole process with its threads (reflectors, loop, two binding workers) and
    every third binding failing once: every pod ends bound, each claim's devices on the
    server are the ones the cache holds, and no binding state is left."""
    fake = FakeApi()
    build(fake, nodes=("node-1", "node-2"), nics=2, slots=4)
    names = [f"p{i}" for i in range(9)]
    for i, n in enumerate(names):
        fake.create("ResourceClaim", claim(f"{n}-nic", "xyz"[i % 3]))
        fake.create("Pod", pod(n, f"{n}-nic"))
        if i % 3 == 0:
            fake.fail("POST", f"/pods/{n}/binding", "server-error")
    proc = SchedulerProcess(fake, Options(leader_elect=False, metrics_port=-1, initial_backoff=0.0,
                                          max_backoff=0.0, max_in_flight_bindings=2))
    runner = threading.Thread(target=proc.run, kwargs={"install_signals": False})
    runner.start()
    try:
        wait_for(lambda: all(_node(fake, f"default/{n}") for n in names), "every pod bound")
    finally:
        proc.stopping.set()
        runner.join(WAIT)
    assert not runner.is_alive()
    assert len([f for f in fake.injected if f[2] == "server-error"]) == 3
    with proc.core_lock:
        cached = {k: sorted(d for d, _r, _s in v) for k, v in proc.scheduler.cache.recorded.items()}
    on_server = {f"default/{n}-nic": _devices(fake, f"default/{n}-nic") for n in names}
    assert cached == on_server
    _no_leak(proc)


def test_binder_keeps_at_most_its_limit_in_flight() -> None:
    """Two workers: a third binding waits in submit until one of the two ends."""
    release = {i: threading.Event() for i in range(3)}
    started: list[int] = []
    binder: Binder[int] = Binder(2, lambda i: (started.append(i), release[i].wait(WAIT)))
    binder.start()
    binder.submit(0)
    binder.submit(1)
    wait_for(lambda: sorted(started) == [0, 1], "two bindings running")
    third = threading.Thread(target=binder.submit, args=(2,))
    third.start()
    third.join(0.2)
    assert third.is_alive() and binder.in_flight() == 2 and 2 not in started
    release[1].set()
    third.join(WAIT)
    assert not third.is_alive()
    wait_for(lambda: 2 in started, "the third binding to start")
    assert binder.in_flight() == 2
    release[0].set()
    release[2].set()
    wait_for(lambda: binder.in_flight() == 0, "every binding to end")
    assert binder.stop(WAIT)


def test_binder_without_workers_binds_on_the_callers_thread() -> None:
    threads: list[str] = []
    binder: Binder[int] = Binder(0, lambda _i: threads.append(threading.current_thread().name))
    binder.start()
    binder.submit(1)
    assert threads == [threading.current_thread().name]
    with pytest.raises(ValueError, match="need >= 0"):
        Binder(-1, lambda _i: None)


def test_a_failing_binding_does_not_take_its_worker_down(caplog: pytest.LogCaptureFixture) -> None:
    done: list[int] = []

    def run(i: int) -> None:
        if i == 0:
            raise RuntimeError("a bug")
        done.append(i)

    binder: Binder[int] = Binder(1, run)
    binder.start()
    binder.submit(0)
    binder.submit(1)
    wait_for(lambda: done == [1], "the next binding on the same worker")
    assert binder.in_flight() == 0 and binder.stop(WAIT)
    assert "binding cycle failed" in caplog.text
