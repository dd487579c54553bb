"""Lease election with client-go's semantics: expiry on the candidate's own monotonic
clock from its last observed change of the Lease, request timeouts below the retry
period, and fencing (no write after the renew deadline)."""

from __future__ import annotations

import datetime
import logging
import time

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.kube.events import EventRecorder
from dra_affinity.kube.leader import LeaderElector
from dra_affinity.kube.view import KubeView, LeadershipLost
from dra_affinity.scheduler.view import WriteFailed

from .fakeapi import FakeApi
from .world import pod

LEASE = "kube-system/dra-affinity-scheduler"


class Clock:
    """A wall clock and a monotonic clock that advance together (unless told apart)."""

    def __init__(self) -> None:
        self.wall = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        self.mono = 1000.0

    def now(self) -> datetime.datetime:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += datetime.timedelta(seconds=seconds)
        self.mono += seconds


def _elector(api: FakeApi, who: str, clock: Clock) -> LeaderElector:
    return LeaderElector(api, namespace="kube-system", name="dra-affinity-scheduler", identity=who,
                         lease_duration=15, renew_deadline=10, retry_period=2, now=clock.now,
                         monotonic=clock.monotonic)


def _lease(api: FakeApi) -> dict:
    lease = api.get("Lease", LEASE)
    assert lease is not None
    return lease["spec"]


def test_first_candidate_creates_and_renews() -> None:
    api, clock = FakeApi(), Clock()
    a = _elector(api, "a", clock)
    assert a.try_acquire_or_renew()
    assert _lease(api)["holderIdentity"] == "a"
    clock.advance(2)
    assert a.try_acquire_or_renew()
    assert _lease(api)["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert _lease(api)["leaseTransitions"] == 0


def test_other_candidate_waits_a_lease_duration_from_its_own_observation() -> None:
    api, clock = FakeApi(), Clock()
    a, b = _elector(api, "a", clock), _elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    clock.advance(14)
    assert not b.try_acquire_or_renew()  # first seen now: counts as just changed
    clock.advance(14)
    assert not b.try_acquire_or_renew()
    clock.advance(1)  # unchanged for 15 s by b's clock
    assert b.try_acquire_or_renew()
    spec = _lease(api)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()  # a cannot renew what b holds


def test_a_renewal_restarts_the_candidates_wait() -> None:
    api, clock = FakeApi(), Clock()
    a, b = _elector(api, "a", clock), _elector(api, "b", clock)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    clock.advance(10)
    assert a.try_acquire_or_renew()
    clock.advance(6)  # 16 s since b first saw the Lease, 6 s since it changed
    assert not b.try_acquire_or_renew()


def test_expiry_ignores_the_holders_timestamps() -> None:
    """A holder whose wall clock is an hour behind writes an old renewTime: that is no
    reason to take its Lease (the old code compared it with the local wall clock)."""
    api, clock = FakeApi(), Clock()
    a, b = _elector(api, "a", clock), _elector(api, "b", clock)
    clock.wall -= datetime.timedelta(hours=1)
    assert a.try_acquire_or_renew()
    clock.wall += datetime.timedelta(hours=1)
    assert not b.try_acquire_or_renew()
    clock.advance(5)
    assert not b.try_acquire_or_renew()
    # b's wall clock jumps a day ahead: still the monotonic clock decides
    clock.wall += datetime.timedelta(days=1)
    assert not b.try_acquire_or_renew()


def test_every_lease_request_times_out_before_the_next_retry() -> None:
    api, clock = FakeApi(), Clock()
    a, b = _elector(api, "a", clock), _elector(api, "b", clock)
    assert a.try_acquire_or_renew() and a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    a.release()
    lease_requests = [t for t in api.timeouts if "/leases" in t[1]]
    assert len(lease_requests) >= 7
    assert all(t is not None and 0 < t < a.retry_period for _m, _p, t in lease_requests)


def test_fence_closes_at_the_renew_deadline_counted_from_the_renewals_start() -> None:
    api, clock = FakeApi(), Clock()
    a = _elector(api, "a", clock)
    assert not a.may_write()  # not leading yet
    assert a.try_acquire_or_renew()
    clock.advance(9.9)
    assert a.may_write()
    clock.advance(0.1)
    assert not a.may_write()
    assert a.try_acquire_or_renew() and a.may_write()  # renewed: open again
    a.step_down("test")
    assert not a.may_write() and a.lost.is_set()


def test_no_write_leaves_a_replica_past_its_renew_deadline() -> None:
    """Fencing: the view and the event recorder ask the elector right before each request."""
    api, clock = FakeApi(), Clock()
    a = _elector(api, "a", clock)
    assert a.try_acquire_or_renew()
    view = KubeView(api, may_write=a.may_write)
    p = api.create("Pod", pod("p", "c"))
    clock.advance(10)  # paused past the deadline (SIGSTOP), then resumed
    api.requests.clear()
    model = Pod.model_validate(p)
    with pytest.raises(WriteFailed, match="no longer leads"):
        view.bind_pod(model, "node-1")
    view.set_unschedulable(model, "Unschedulable", "x")
    events = EventRecorder(api, component="dra-affinity", instance="a", may_write=a.may_write)
    events.record({"kind": "Pod", "namespace": "default", "name": "p"}, "Warning",
                  "FailedScheduling", "Scheduling", "x")
    events.send_pending()
    assert api.requests == []
    assert issubclass(LeadershipLost, WriteFailed)


def test_every_write_sent_is_in_the_write_log(caplog: pytest.LogCaptureFixture) -> None:
    """The ex-leader audit's source: each write that leaves (binding, condition, event)
    has one ``write`` record with its method, path and monotonic time; a refused one none."""
    api, clock = FakeApi(), Clock()
    a = _elector(api, "a", clock)
    assert a.try_acquire_or_renew()
    view = KubeView(api, may_write=a.may_write)
    events = EventRecorder(api, component="dra-affinity", instance="a", may_write=a.may_write)
    model = Pod.model_validate(api.create("Pod", pod("p", "c")))
    api.requests.clear()
    caplog.set_level(logging.DEBUG, logger="dra_affinity.kube")
    for past_deadline in (False, True):  # the second time nothing leaves, nothing logged
        try:
            view.bind_pod(model, "node-1")
        except LeadershipLost:
            assert past_deadline
        view.set_unschedulable(model, "Unschedulable", "x")
        events.record({"kind": "Pod", "namespace": "default", "name": "p"}, "Warning",
                      "FailedScheduling", "Scheduling", "x")
        events.send_pending()
        clock.advance(10)
    logged = [(r.fields["method"], r.fields["path"]) for r in caplog.records  # type: ignore[attr-defined]
              if r.getMessage() == "write"]
    sent = [(method, path) for method, path in api.requests if method != "GET"]
    assert [m for m, _ in sent] == ["POST", "PATCH", "POST"]
    assert logged == sent


def test_leader_steps_down_when_renewals_hang_past_the_deadline() -> None:
    api = FakeApi()
    a = LeaderElector(api, namespace="kube-system", name="dra-affinity-scheduler", identity="a",
                      lease_duration=0.6, renew_deadline=0.4, retry_period=0.1)
    a.start()
    assert a.is_leader.wait(2)
    # from now on every Lease read hangs longer than the deadline (the fake holds its lock)
    api.on("GET", "/leases/dra-affinity-scheduler", lambda: time.sleep(0.5))
    assert a.lost.wait(5)
    assert not a.may_write() and not a.is_leader.is_set()
    a.stop()


def test_concurrent_takeover_only_one_wins() -> None:
    api, clock = FakeApi(), Clock()
    a, b, c = (_elector(api, who, clock) for who in "abc")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()
    clock.advance(20)
    lease = api.get("Lease", LEASE)
    # b read the expired lease; c writes first: b's update carries a stale resourceVersion
    assert c.try_acquire_or_renew()
    stale = dict(lease or {})
    stale["spec"] = {**stale["spec"], "holderIdentity": "b"}
    with pytest.raises(Exception, match="409"):
        api.update("Lease", stale)
    assert not b.try_acquire_or_renew()
    assert _lease(api)["holderIdentity"] == "c"


def test_invalid_timings_are_rejected() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaderElector(FakeApi(), namespace="n", name="l", identity="a",
                      lease_duration=5, renew_deadline=10, retry_period=2)

