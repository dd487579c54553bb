"""Extraction results are shared across claims by config content: the key must keep apart
whatever an extractor could tell apart, and must never raise on odd parameters."""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.allocator.model import PoolInfo
from dra_affinity.api.resource import DeviceClass, ResourceClaim
from dra_affinity.scheduler.extraction import content_key

DRIVER = "drv.example.com"
POOL = PoolInfo(DRIVER, "pool", 1, True, (), ("meta",))


def claim_with(*params: Any, requests: list[str] | None = None,
               driver: str = DRIVER) -> ResourceClaim:
    return ResourceClaim.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {
            "requests": [{"name": "nic", "exactly": {"deviceClassName": "cls"}},
                         {"name": "other", "exactly": {"deviceClassName": "cls"}}],
            "config": [{"requests": requests or [], "opaque": {"driver": driver, "parameters": p}}
                       for p in params]}}})


def _content_key(pool: PoolInfo, params: list[Any]) -> Any:
    return content_key(pool, claim_with(*params), "nic", None)


def key(params: Any) -> Any:
    return _content_key(POOL, [params])


@pytest.mark.parametrize("a, b", [
    ({"x": 1}, {"x": 1.0}),
    ({"x": 1}, {"x": True}),
    ({"x": 0.0}, {"x": -0.0}),
    ({"x": "1"}, {"x": 1}),
    ({"x": [1]}, {"x": {"0": 1}}),
    ({"x": None}, {"x": "null"}),
    ({"x": [1, 2]}, {"x": [2, 1]}),
])
def test_distinct_content_distinct_keys(a: Any, b: Any) -> None:
    assert key(a) != key(b)


def test_key_order_does_not_matter() -> None:
    assert key({"a": 1, "b": {"c": [1, "x"], "d": 2}}) == key({"b": {"d": 2, "c": [1, "x"]}, "a": 1})


def test_configs_are_positional() -> None:
    assert _content_key(POOL, [{"a": 1}, {"b": 2}]) != _content_key(POOL, [{"b": 2}, {"a": 1}])


@pytest.mark.parametrize("params", [{1: "int key"}, {"x": object()}, {"x": {1, 2}}])
def test_unusual_parameters_are_not_shared(params: Any) -> None:
    assert key(params) is None


def test_deep_nesting_is_not_shared_and_does_not_raise() -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = {"n": deep}
    assert key(deep) is None


def test_only_configs_in_scope_and_for_the_driver_count() -> None:
    base = content_key(POOL, claim_with({"a": 1}), "nic", None)
    assert content_key(POOL, claim_with({"a": 1}, requests=["nic"]), "nic", None) == base
    # a config scoped to another request, or for another driver, is not seen
    assert content_key(POOL, claim_with({"a": 2}, requests=["other"]), "nic", None) != base
    assert content_key(POOL, claim_with({"a": 2}, requests=["other"]), "nic", None) == \
        content_key(POOL, claim_with({"b": 3}, driver="other.example.com"), "nic", None)


def test_class_configs_are_part_of_the_key() -> None:
    def cls(params: Any) -> DeviceClass:
        return DeviceClass.model_validate({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "cls"},
            "spec": {"config": [{"opaque": {"driver": DRIVER, "parameters": params}}]}})
    claim = claim_with({"a": 1})
    assert content_key(POOL, claim, "nic", cls({"m": 1})) != content_key(POOL, claim, "nic", cls({"m": 2}))
    assert content_key(POOL, claim, "nic", cls({"m": 1})) != content_key(POOL, claim, "nic", None)


def test_extractor_sets_are_part_of_the_key() -> None:
    from dra_affinity.cel import Extractor
    other = PoolInfo(DRIVER, "pool", 1, True, (Extractor("k", "object.a"),), ("meta",))
    assert _content_key(POOL, [{"a": 1}]) != _content_key(other, [{"a": 1}])
