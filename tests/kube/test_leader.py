"""Lease election: create, renew, others wait for expiry, takeover counts transitions, release."""

from __future__ import annotations

import datetime

import pytest

from dra_affinity.kube.leader import LeaderElector

from .fakeapi import FakeApi


class Now:
    def __init__(self) -> None:
        self.t = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += datetime.timedelta(seconds=seconds)


def _elector(api: FakeApi, who: str, now: Now) -> LeaderElector:
    return LeaderElector(api, namespace="kube-system", name="dra-affinity-scheduler", identity=who,
                         lease_duration=15, renew_deadline=10, retry_period=2, now=now)


def _lease(api: FakeApi) -> dict:
    lease = api.get("Lease", "kube-system/dra-affinity-scheduler")
    assert lease is not None
    return lease["spec"]


def test_first_candidate_creates_and_renews() -> None:
    api, now = FakeApi(), Now()
    a = _elector(api, "a", now)
    assert a.try_acquire_or_renew()
    assert _lease(api)["holderIdentity"] == "a"
    now.advance(2)
    assert a.try_acquire_or_renew()
    assert _lease(api)["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert _lease(api)["leaseTransitions"] == 0


def test_other_candidate_waits_until_expiry_then_takes_over() -> None:
    api, now = FakeApi(), Now()
    a, b = _elector(api, "a", now), _elector(api, "b", now)
    assert a.try_acquire_or_renew()
    now.advance(14)
    assert not b.try_acquire_or_renew()
    now.advance(2)  # 16 s after the last renewal: expired
    assert b.try_acquire_or_renew()
    spec = _lease(api)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()  # a cannot renew what b holds


def test_release_lets_a_standby_take_over_at_once() -> None:
    api, now = FakeApi(), Now()
    a, b = _elector(api, "a", now), _elector(api, "b", now)
    assert a.try_acquire_or_renew()
    a.release()
    assert _lease(api)["holderIdentity"] == ""
    assert b.try_acquire_or_renew()


def test_concurrent_takeover_only_one_wins() -> None:
    api, now = FakeApi(), Now()
    a, b = _elector(api, "a", now), _elector(api, "b", now)
    assert a.try_acquire_or_renew()
    now.advance(20)
    lease = api.get("Lease", "kube-system/dra-affinity-scheduler")
    # b read the expired lease; c writes first: b's update carries a stale resourceVersion
    c = _elector(api, "c", now)
    api.on("PUT", "/leases/dra-affinity-scheduler", lambda: None)
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
