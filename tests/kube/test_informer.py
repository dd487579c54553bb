"""Reflectors: paginated list as one REPLACE, watch from its version, 410 means list again."""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.kube.api import ApiError
from dra_affinity.kube.informer import REPLACE, SYNCED, Reflector
from dra_affinity.kube.view import KubeView

from .fakeapi import FakeApi
from .world import ListSink, build, claim, pod, sync


def test_list_is_paginated_and_delivered_once_with_synced() -> None:
    api = FakeApi()
    for i in range(7):
        api.create("ResourceClaim", claim(f"c{i}", "x"))
    sink: Any = ListSink()
    r = Reflector(api, "ResourceClaim", sink, page_size=3)
    r.list_once()
    assert [c.type for c in sink.items] == [REPLACE, SYNCED]
    assert [o["metadata"]["name"] for o in sink.items[0].objects] == [f"c{i}" for i in range(7)]
    assert all(o["kind"] == "ResourceClaim" for o in sink.items[0].objects)
    assert sum(1 for m, p in api.requests if m == "GET") == 3
    assert r.resource_version == str(api.rv)


def test_watch_continues_from_the_list_and_bookmarks_move_the_version() -> None:
    api = FakeApi()
    api.create("ResourceClaim", claim("a", "x"))
    sink: Any = ListSink()
    r = Reflector(api, "ResourceClaim", sink)
    r.list_once()
    api.create("ResourceClaim", claim("b", "x"))
    api.delete("ResourceClaim", "default/a")
    r.watch_once()
    assert [(c.type, c.object["metadata"]["name"]) for c in sink.items[2:]] == [
        ("ADDED", "b"), ("DELETED", "a")]
    assert r.resource_version == str(api.rv)


def test_gone_lists_again_and_the_view_drops_what_disappeared() -> None:
    api = FakeApi()
    build(api)
    api.create("ResourceClaim", claim("a", "x"))
    view = KubeView(api)
    sync(api, view)
    assert view.claim("default/a") is not None
    sink: Any = ListSink()
    r = Reflector(api, "ResourceClaim", sink)
    r.list_once()
    api.delete("ResourceClaim", "default/a")
    api.compact()
    with pytest.raises(ApiError) as e:
        r.watch_once()
    assert e.value.gone
    # run() handles it: a second list, whose REPLACE no longer has the claim
    r.list_once()
    for ch in sink.items:
        view.apply(ch)
    assert view.claim("default/a") is None
    assert r.lists == 2


def test_error_event_raises_with_its_code() -> None:
    r = Reflector(FakeApi(), "Pod", ListSink())  # type: ignore[arg-type]
    with pytest.raises(ApiError) as e:
        r.handle({"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "old"}})
    assert e.value.gone


def test_pod_field_selector_limits_to_this_scheduler() -> None:
    api = FakeApi()
    api.create("Pod", pod("mine", "c"))
    api.create("Pod", pod("theirs", "c", scheduler="default-scheduler"))
    sink: Any = ListSink()
    Reflector(api, "Pod", sink, field_selector="spec.schedulerName=dra-affinity").list_once()
    assert [o["metadata"]["name"] for o in sink.items[0].objects] == ["mine"]


def test_run_retries_after_failures_and_stops() -> None:
    api = FakeApi()
    api.create("ResourceClaim", claim("a", "x"))

    def flaky() -> None:  # runs before the first request only
        raise ApiError(0, "ConnectionRefused", "down")

    api.on("GET", "/resourceclaims", flaky)
    sink: Any = ListSink()
    r = Reflector(api, "ResourceClaim", sink)
    orig = r.watch_once

    def once() -> None:
        orig()
        r.stop()

    r.watch_once = once  # type: ignore[method-assign]
    r.run()
    assert [c.type for c in sink.items[:2]] == [REPLACE, SYNCED]
    lists = [p for m, p in api.requests if m == "GET" and p.endswith("/resourceclaims")]
    assert len(lists) == 2  # the failed one, then the one that worked


def test_managed_fields_are_dropped() -> None:
    api = FakeApi()
    api.create("Node", {"metadata": {"name": "n1", "labels": {"a": "b"},
                                     "managedFields": [{"manager": "kubectl", "fieldsV1": {}}]}})
    sink: Any = ListSink()
    r = Reflector(api, "Node", sink)
    r.list_once()
    (node,) = sink.items[0].objects
    assert "managedFields" not in node["metadata"] and node["metadata"]["labels"] == {"a": "b"}
    n = api.get("Node", "n1")
    assert n is not None and n["metadata"]["managedFields"]  # the server still has them
    n["metadata"]["labels"] = {"a": "c"}
    api.update("Node", n)
    r.watch_once()
    change = sink.items[-1]
    assert change.object is not None and "managedFields" not in change.object["metadata"]
    assert change.object["metadata"]["labels"] == {"a": "c"}
