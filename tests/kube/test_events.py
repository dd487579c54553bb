"""Event aggregation as client-go's recorder does it: one Event per object and reason, a
series counted in memory and written on its 2nd occurrence, a changed message, a
refresh and its end; bounded memory and queue."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dra_affinity.kube.api import ApiError
from dra_affinity.kube.events import FINISH_AFTER, REFRESH_EVERY, EventRecorder

from .fakeapi import FakeApi

POD = {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1"}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def recorder(api: FakeApi, clock: Clock, **kw: Any) -> EventRecorder:
    return EventRecorder(api, component="dra-affinity", instance="r1", clock=clock,
                         wall_clock=lambda: 1.7e9 + clock.t, **kw)


def writes(api: FakeApi) -> list[tuple[str, str]]:
    return [(m, p) for m, p in api.requests if "/events" in p]


def failed(rec: EventRecorder, message: str = "0/2 nodes are available") -> None:
    rec.record(POD, "Warning", "FailedScheduling", "Scheduling", message)


def only_event(api: FakeApi) -> dict[str, Any]:
    (ev,) = api.objects["Event"].values()
    return ev


def test_the_first_occurrence_creates_an_events_v1_event() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock)
    failed(rec)
    assert rec.send_pending() == 1
    ev = only_event(api)
    assert ev["regarding"] == POD and ev["type"] == "Warning"
    assert (ev["reason"], ev["action"], ev["note"]) == (
        "FailedScheduling", "Scheduling", "0/2 nodes are available")
    assert ev["reportingController"] == "dra-affinity" and ev["reportingInstance"] == "r1"
    assert ev["metadata"]["namespace"] == "ns" and ev["metadata"]["name"].startswith("p.")
    assert ev["eventTime"].endswith("Z") and "series" not in ev


def test_repeats_count_in_memory_and_the_series_is_written_on_the_second_and_at_its_end() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock)
    for _ in range(10):
        failed(rec)
        clock.t += 10
    rec.send_pending()
    assert [m for m, _ in writes(api)] == ["POST", "PATCH"]  # create, then series count 2
    assert only_event(api)["series"]["count"] == 2
    clock.t += FINISH_AFTER
    rec.tick()
    rec.send_pending()
    assert [m for m, _ in writes(api)] == ["POST", "PATCH", "PATCH"]
    assert only_event(api)["series"]["count"] == 10
    assert len(rec) == 0  # the series ended: forgotten
    failed(rec)  # a new occurrence later starts a new Event
    rec.send_pending()
    assert len(api.objects["Event"]) == 2


def test_a_long_series_is_refreshed_every_thirty_minutes_not_per_occurrence() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock)
    start = clock.t
    while clock.t - start < 2 * 3600:  # a retry every 5 minutes for two hours
        failed(rec)
        clock.t += 300
        rec.tick()
    rec.send_pending()
    n = len(writes(api))
    assert 2 <= n <= 2 + (2 * 3600) // REFRESH_EVERY + 1, n
    assert only_event(api)["series"]["count"] >= 20


def test_a_changed_message_is_written_at_once_on_the_same_event() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock)
    failed(rec, "0/2 nodes are available: 2 InsufficientCapacity.")
    failed(rec, "0/3 nodes are available: 3 InsufficientCapacity.")
    rec.send_pending()
    ev = only_event(api)
    assert ev["note"] == "0/3 nodes are available: 3 InsufficientCapacity."
    assert ev["series"]["count"] == 2


def test_each_reason_and_object_has_its_own_event() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock)
    failed(rec)
    rec.record(POD, "Normal", "Scheduled", "Binding", "Successfully assigned ns/p to n1")
    rec.record({**POD, "name": "q", "uid": "u2"}, "Warning", "FailedScheduling", "Scheduling", "x")
    rec.send_pending()
    assert sorted((e["regarding"]["name"], e["reason"]) for e in api.objects["Event"].values()) == [
        ("p", "FailedScheduling"), ("p", "Scheduled"), ("q", "FailedScheduling")]


def test_a_full_queue_drops_and_counts() -> None:
    api, clock = FakeApi(), Clock()
    drops: list[int] = []
    rec = recorder(api, clock, max_pending=3, on_drop=lambda: drops.append(1))
    for i in range(5):
        rec.record({**POD, "name": f"p{i}"}, "Warning", "FailedScheduling", "Scheduling", "m")
    assert rec.dropped == 2 and len(drops) == 2
    assert rec.send_pending() == 3


def test_the_series_cache_is_bounded() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock, max_series=10)
    for i in range(50):
        rec.record({**POD, "name": f"p{i}"}, "Warning", "FailedScheduling", "Scheduling", "m")
        rec.send_pending()
    assert len(rec) == 10
    assert len(api.objects["Event"]) == 50


def test_a_series_whose_event_is_gone_is_carried_on_by_a_new_one() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock)
    failed(rec)
    rec.send_pending()
    api.objects["Event"].clear()  # expired (the API server's event TTL)
    failed(rec)
    rec.send_pending()
    ev = only_event(api)
    assert ev["series"]["count"] == 2 and ev["note"] == "0/2 nodes are available"
    assert ev["regarding"] == POD and ev["reason"] == "FailedScheduling"


def test_server_errors_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    api, clock = FakeApi(), Clock()

    def refuse() -> None:
        raise ApiError(403, "Forbidden", "events is forbidden")

    api.on("POST", "/events", refuse)
    rec = recorder(api, clock)
    failed(rec)
    with caplog.at_level(logging.INFO, logger="dra_affinity.kube.events"):
        rec.send_pending()
    assert not api.objects["Event"]
    assert "not recorded" in caplog.text


def test_notes_are_cut_to_the_api_limit() -> None:
    api, clock = FakeApi(), Clock()
    rec = recorder(api, clock)
    failed(rec, "x" * 5000)
    rec.send_pending()
    assert len(only_event(api)["note"]) == 1024


def test_no_event_leaves_while_the_replica_may_not_write() -> None:
    api, clock = FakeApi(), Clock()
    leading = [False]
    rec = recorder(api, clock, may_write=lambda: leading[0])
    failed(rec)
    rec.send_pending()
    assert not writes(api) and not api.objects["Event"]
    leading[0] = True
    failed(rec, "0/3 nodes are available")
    rec.send_pending()
    assert only_event(api)["note"] == "0/3 nodes are available"
