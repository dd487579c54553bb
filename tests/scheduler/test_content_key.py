"""Extraction results are shared across claims by config content: the key must keep apart
whatever an extractor could tell apart, and must never raise on odd parameters."""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.allocator.model import PoolInfo
from dra_affinity.scheduler.extraction import _content_key

POOL = PoolInfo("drv.example.com", "pool", 1, True, (), ("meta",))


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
