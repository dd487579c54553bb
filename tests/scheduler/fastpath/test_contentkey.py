"""Extraction results are shared across claims by config content: the key must keep apart
whatever an extractor could tell apart, and must never raise on odd parameters. When the
extractors only read named fields of ``object``, only those fields count."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_affinity.api.resource import DeviceClass, ResourceClaim
from dra_affinity.cel import ConfigObject, ExtractionResult, Extractor, OutcomeKind, extract
from dra_affinity.cel.extract import object_fields
from dra_affinity.scheduler.fastpath.contentkey import content_key
from dra_affinity.structured.model import PoolInfo

DRIVER = "drv.example.com"
# Reads the whole object (size() of it): every part of the content counts.
WHOLE = (Extractor("k", 'size(object) >= 0 ? "v" : ""'),)
POOL = PoolInfo(DRIVER, "pool", 1, True, WHOLE, ("meta",))
# Reads the field x only.
PROJECTED = PoolInfo(DRIVER, "pool", 1, True, (Extractor("k", 'has(object.x) ? string(object.x) : ""'),),
                     ("meta",))


# What the shared cache stores: an OK outcome (others are not shared).
OK_RESULT = ExtractionResult(OutcomeKind.OK, (("k", "v"),), "", None, None, 1, 1)


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


def key(params: Any, pool: PoolInfo = POOL) -> Any:
    return _content_key(pool, [params])


@pytest.mark.parametrize("a, b", [
    ({"x": 1}, {"x": 1.0}),
    ({"x": 1}, {"x": True}),
    ({"x": 0.0}, {"x": -0.0}),
    ({"x": "1"}, {"x": 1}),
    ({"x": [1]}, {"x": {"0": 1}}),
    ({"x": None}, {"x": "null"}),
    ({"x": [1, 2]}, {"x": [2, 1]}),
])
@pytest.mark.parametrize("pool", [POOL, PROJECTED], ids=["whole", "projected"])
def test_distinct_content_distinct_keys(a: Any, b: Any, pool: PoolInfo) -> None:
    assert key(a, pool) != key(b, pool)


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
    other = PoolInfo(DRIVER, "pool", 1, True, (Extractor("k", "object.a"),), ("meta",))
    assert _content_key(POOL, [{"a": 1}]) != _content_key(other, [{"a": 1}])


# ---------------------------------------------------------------- projection


@pytest.mark.parametrize("expressions, fields", [
    (['object.subnetID'], ("subnetID",)),
    (['object.kind == "A" ? object.a.b : object["c"]', 'has(object.d) ? "x" : ""'], ("a", "c", "d", "kind")),
    (['[1, 2].map(x, object.e)[0]'], ("e",)),
    (['"constant"'], ()),
    (['size(object) > 0 ? "a" : ""'], None),  # the whole map
    (['"a" in object ? "a" : ""'], None),
    (['object == {} ? "" : "a"'], None),
    (['object[object.k]'], None),  # computed key
    (['object[1]'], None),
    (['[{"x": "1"}].map(object, object.x)[0]'], None),  # shadowed
    (['object.subnetID', 'string(object)'], None),  # one extractor reading it all is enough
    (['object.('], None),  # does not parse
])
def test_object_fields(expressions: list[str], fields: tuple[str, ...] | None) -> None:
    assert object_fields(expressions) == fields


def test_projected_keys_ignore_fields_no_extractor_reads() -> None:
    assert key({"x": "a", "mtu": 9000}, PROJECTED) == key({"x": "a", "mtu": 1500}, PROJECTED)
    assert key({"x": "a", "labels": {"team": "t"}}, PROJECTED) == key({"x": "a"}, PROJECTED)
    # an odd value where no extractor looks does not stop sharing
    assert key({"x": "a", 1: "int key"}, PROJECTED) == key({"x": "a"}, PROJECTED)
    assert key({"x": "a"}, PROJECTED) != key({"x": "b"}, PROJECTED)
    # ... but the whole-object pool keeps them apart
    assert key({"x": "a", "mtu": 9000}) != key({"x": "a", "mtu": 1500})


@pytest.mark.parametrize("a, b", [
    ({}, {"x": None}),
    ({}, {"x": ""}),
    ({}, {"x": "absent"}),
    ({}, {"x": "projected"}),
    ({"x": ["projected"]}, {"x": "projected"}),
    ({"y": "a"}, {"x": "a"}),
])
def test_projected_absent_and_odd_values_stay_apart(a: Any, b: Any) -> None:
    assert key(a, PROJECTED) != key(b, PROJECTED)


def test_projected_values_containing_the_separator_stay_apart() -> None:
    two = PoolInfo(DRIVER, "pool", 1, True, (Extractor("k", 'object.x + "/" + object.y'),), ("meta",))
    assert key({"x": "a\x00b", "y": "c"}, two) != key({"x": "a", "y": "b\x00c"}, two)
    assert key({"x": "a\x00", "y": ""}, two) != key({"x": "a", "y": "\x00"}, two)
    assert key({"x": "a", "y": "b"}, two) == key({"y": "b", "x": "a", "z": 1}, two)


TWO = PoolInfo(DRIVER, "pool", 1, True,
               (Extractor("k", 'string(object.x) + "/" + string(object.y)'),), ("meta",))


@pytest.mark.parametrize("a, b", [
    ({"x": 1, "y": "a"}, {"x": 1.0, "y": "a"}),
    ({"x": 1, "y": "a"}, {"x": True, "y": "a"}),
    ({"x": "1", "y": "a"}, {"x": 1, "y": "a"}),
    ({"x": 0.0, "y": "a"}, {"x": -0.0, "y": "a"}),
    ({"x": "a", "y": "b"}, {"x": "a", "y": ["b"]}),
    ({"x": "a"}, {"x": "a", "y": None}),
])
def test_several_fields_keep_types_and_absence_apart(a: Any, b: Any) -> None:
    # Strings are read as a plain tuple; values Python thinks equal but an extractor
    # may not (1, 1.0, true) must still key apart, as must an absent field.
    assert key(a, TWO) != key(b, TWO)
    assert key(a, TWO) == key(dict(reversed(list(a.items())), z=0), TWO)


def test_non_map_parameters_use_the_whole_content() -> None:
    assert key(["x", "a"], PROJECTED) != key(["x", "b"], PROJECTED)
    assert key("x", PROJECTED) != key(("x",), PROJECTED)
    # a string config is not a map whose one read field is that string
    assert key("a", PROJECTED) != key({"x": "a"}, PROJECTED)


_leaf = st.one_of(st.sampled_from(["", "a", "b", "1", "\x00", "a\x00"]), st.integers(-1, 1), st.booleans(),
                  st.none(), st.sampled_from([0.0, -0.0, 1.0]))
_value = st.recursive(_leaf, lambda c: st.lists(c, max_size=2)
                      | st.dictionaries(st.sampled_from(["x", "y"]), c, max_size=2), max_leaves=4)
_params = st.dictionaries(st.sampled_from(["x", "y", "kind", "mtu"]), _value, max_size=4)
_EXPRESSIONS = [
    'object.x',
    'has(object.x) ? string(object.x) : ""',
    'object.kind == "a" ? object.x : ""',
    'has(object.y) && type(object.y) == list ? string(size(object.y)) : "none"',
    'string(object)',
    'size(object) > 1 ? "many" : ""',
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_EXPRESSIONS), min_size=1, max_size=2, unique=True), _params, _params)
def test_equal_keys_mean_equal_extractions(expressions: list[str], a: Any, b: Any) -> None:
    """The property the shared cache relies on: two configs with one content key extract
    the same outcome, whether or not the extractor set is projected."""
    pool = PoolInfo(DRIVER, "pool", 1, True,
                    tuple(Extractor(f"k{i}", e) for i, e in enumerate(expressions)), ("meta",))
    ka, kb = key(a, pool), key(b, pool)
    if ka is None or ka != kb:
        return
    ra = extract(pool.extractors, [ConfigObject("cfg", a)])
    rb = extract(pool.extractors, [ConfigObject("cfg", b)])
    assert (ra.kind, ra.keys, ra.message) == (rb.kind, rb.keys, rb.message)
    if ra.kind is OutcomeKind.OK:
        assert ra.cost == rb.cost


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_EXPRESSIONS), min_size=1, max_size=2, unique=True),
       st.lists(st.one_of(_params, _leaf), min_size=0, max_size=3),
       st.sampled_from([None, [], ["nic"], ["other"], ["nic", "other"]]),
       st.booleans())
def test_the_cheap_lookup_finds_what_content_key_stored(expressions: list[str], params: list[Any],
                                                   requests: list[str] | None,
                                                   class_config: bool) -> None:
    """The cheap lookup writes the common case out; it must find what was stored under
    content_key's key, and nothing else."""
    from dra_affinity.scheduler.fastpath.contentkey import ContentCache

    pool = PoolInfo(DRIVER, "pool", 1, True,
                    tuple(Extractor(f"k{i}", e) for i, e in enumerate(expressions)), ("meta",))
    claim = claim_with(*params, requests=requests)
    dc = DeviceClass.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "cls"},
        "spec": {"config": [{"opaque": {"driver": DRIVER, "parameters": {"x": "from-class"}}}]
                 if class_config else []}})
    stored = OK_RESULT
    for device_class in (None, dc):
        cache = ContentCache()
        assert cache.cheap_get(pool, claim, "nic", device_class) is None  # nothing known yet
        want = content_key(pool, claim, "nic", device_class)
        if want is None:
            continue
        cache.put(want, stored)
        got = cache.cheap_get(pool, claim, "nic", device_class)
        if object_fields([e.expression for e in pool.extractors]) is None:
            assert got is None  # the key may walk whole configs: not the cheap path's
        else:
            assert got is stored
        # Any other content's key finds nothing.
        other = claim_with({"x": "other", "y": "other"}, requests=requests)
        if content_key(pool, other, "nic", device_class) != want:
            assert cache.cheap_get(pool, other, "nic", device_class) is None


@pytest.mark.parametrize("params", [
    {"x": "a", "y": "b"}, {"x": 1, "y": "b"}, {"x": "a"}, {"x": "a", "y": None}, ["x"],
])
@pytest.mark.parametrize("pool", [PROJECTED, TWO], ids=["one field", "two fields"])
def test_the_cheap_lookup_finds_typed_and_absent_fields_by_content_key(
        params: Any, pool: PoolInfo) -> None:
    from dra_affinity.scheduler.fastpath.contentkey import ContentCache

    claim = claim_with(params, {"x": "second"})
    cache = ContentCache()
    key = content_key(pool, claim, "nic", None)
    assert key is not None
    cache.put(key, OK_RESULT)
    assert cache.cheap_get(pool, claim, "nic", None) is OK_RESULT
