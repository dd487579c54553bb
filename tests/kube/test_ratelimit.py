"""Client-side QPS and burst: a token bucket in front of the API client."""

from __future__ import annotations

import pytest

from dra_affinity.kube import protowire
from dra_affinity.kube.api import ApiError
from dra_affinity.kube.ratelimit import RateLimitedApi, TokenBucket

from .fakeapi import FakeApi


class Clock:
    """A clock that sleeping advances."""

    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


def test_a_burst_goes_at_once_then_qps_paces_the_rest() -> None:
    clock = Clock()
    bucket = TokenBucket(10.0, 5, clock=clock, sleep=clock.sleep)
    waits = [bucket.wait() for _ in range(15)]
    assert waits[:5] == [0.0] * 5
    assert all(w == pytest.approx(0.1) for w in waits[5:])
    assert clock.t == pytest.approx(1.0)  # 10 requests beyond the burst at 10/s


def test_tokens_accrue_while_idle_up_to_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, 3, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        bucket.wait()
    clock.t += 100.0  # idle: the bucket refills, but only to the burst
    assert [bucket.wait() for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.5)]


def test_qps_zero_means_no_limit() -> None:
    clock = Clock()
    bucket = TokenBucket(0.0, 0, clock=clock, sleep=clock.sleep)
    assert not bucket.limited
    assert all(bucket.wait() == 0.0 for _ in range(1000)) and not clock.slept


def test_a_limit_needs_a_burst() -> None:
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(10.0, 0)


def test_every_request_and_watch_takes_a_token_and_is_observed() -> None:
    clock = Clock()
    api = FakeApi()
    seen: list[tuple[str, int, float]] = []
    limited = RateLimitedApi(api, TokenBucket(1.0, 1, clock=clock, sleep=clock.sleep),
                             observe=lambda m, s, w: seen.append((m, s, w)))
    limited.request("POST", "/api/v1/namespaces/default/pods",
                    body={"metadata": {"name": "a"}, "spec": {}})
    with pytest.raises(ApiError):
        limited.request("GET", "/api/v1/namespaces/default/pods/missing")
    list(limited.watch("/api/v1/pods", {"resourceVersion": "0"}, 1.0))
    assert [(m, s) for m, s, _ in seen] == [("POST", 200), ("GET", 404), ("WATCH", 200)]
    assert [w for _, _, w in seen] == [0.0, pytest.approx(1.0), pytest.approx(1.0)]
    assert clock.t == pytest.approx(2.0)


def test_byte_requests_take_a_token_and_are_observed_too() -> None:
    clock = Clock()
    api = FakeApi()
    api.create("Pod", {"metadata": {"name": "a", "namespace": "default"}, "spec": {}})
    seen: list[tuple[str, int, float]] = []
    limited = RateLimitedApi(api, TokenBucket(1.0, 1, clock=clock, sleep=clock.sleep),
                             observe=lambda m, s, w: seen.append((m, s, w)))
    got = limited.request_bytes("GET", "/api/v1/namespaces/default/pods/a",
                                accept=protowire.CONTENT_TYPE)
    assert got == api.request_bytes("GET", "/api/v1/namespaces/default/pods/a",
                                    accept=protowire.CONTENT_TYPE)
    with pytest.raises(ApiError):
        limited.request_bytes("GET", "/api/v1/namespaces/default/pods/missing",
                              accept=protowire.CONTENT_TYPE)
    assert [(m, s) for m, s, _ in seen] == [("GET", 200), ("GET", 404)]
    assert clock.t == pytest.approx(1.0)
