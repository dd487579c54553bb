"""Pool gathering: generations, completeness, structural and sharing-affinity validity."""

from __future__ import annotations

import random
from typing import Any

from dra_affinity import cel
from dra_affinity.api.resource import SHARING_AFFINITY_CEL_MAX_COST, ResourceSlice
from dra_affinity.structured.pools import gather_pools
from dra_affinity.validation import validate_object
from validation.manifests import (
    DRIVER,
    PKEY_EXPR,
    SUBNET_EXPR,
    Manifest,
    device_slice,
    expensive_expr,
    meta_slice,
    parse,
)

POOL = (DRIVER, "node-1")


def slices(*manifests: Manifest) -> list[ResourceSlice]:
    out: list[Any] = [parse(m) for m in manifests]
    return out


def test_complete_pool_with_metadata_and_devices() -> None:
    pools = gather_pools(
        slices(
            device_slice(), meta_slice(extractors=[("subnet", SUBNET_EXPR), ("pkey", PKEY_EXPR)])
        )
    )
    pool = pools[POOL]
    assert pool.id == POOL and pool.generation == 1
    assert [s.metadata.name for s in pool.slices] == ["node-1-meta", "node-1-nics"]
    assert pool.declares_sharing_affinity
    assert pool.extractors == (
        cel.Extractor("subnet", SUBNET_EXPR),
        cel.Extractor("pkey", PKEY_EXPR),
    )
    assert not (pool.is_incomplete or pool.is_invalid or pool.is_affinity_invalid)


def test_pool_without_sharing_affinity() -> None:
    pool = gather_pools(slices(device_slice(count=1)))[POOL]
    assert not pool.declares_sharing_affinity and pool.extractors == ()
    assert not (pool.is_incomplete or pool.is_invalid or pool.is_affinity_invalid)


def test_newest_generation_incomplete() -> None:
    pool = gather_pools(slices(device_slice(generation=7)))[POOL]
    assert pool.is_incomplete
    assert pool.incomplete_reason == f"pool {DRIVER}/node-1 generation 7: 1 of 2 slices published"


def test_older_generation_is_ignored() -> None:
    old = [device_slice(generation=1), meta_slice(generation=1)]
    new = device_slice("node-1-nics-v2", generation=2, devices=["eth9"])
    pool = gather_pools(slices(*old, new))[POOL]
    assert pool.generation == 2
    assert [s.metadata.name for s in pool.slices] == ["node-1-nics-v2"]
    assert pool.is_incomplete  # the gen-1 metadata slice does not complete gen 2
    assert not pool.declares_sharing_affinity and pool.extractors == ()


def test_republished_generation_completes() -> None:
    stale = meta_slice("stale-meta", generation=1, extractors=[("subnet", SUBNET_EXPR)])
    pool = gather_pools(
        slices(
            stale,
            device_slice(generation=2),
            meta_slice(generation=2, extractors=[("pkey", PKEY_EXPR)]),
        )
    )[POOL]
    assert not pool.is_incomplete
    assert [e.name for e in pool.extractors] == ["pkey"]


def test_disagreeing_slice_counts_are_incomplete() -> None:
    pool = gather_pools(slices(device_slice(count=2), meta_slice(count=3)))[POOL]
    assert pool.is_incomplete
    assert "disagree on resourceSliceCount (2, 3)" in (pool.incomplete_reason or "")


def test_too_many_slices_are_incomplete() -> None:
    pool = gather_pools(slices(device_slice(count=1), meta_slice(count=1)))[POOL]
    assert pool.incomplete_reason == (
        f"pool {DRIVER}/node-1 generation 1: 2 slices published but resourceSliceCount is 1 "
        "(1 more than declared)")


def test_duplicate_device_names_across_slices_are_invalid() -> None:
    pool = gather_pools(
        slices(device_slice("a", devices=["eth1"]), device_slice("b", devices=["eth1"]))
    )[POOL]
    assert pool.is_invalid and not pool.is_affinity_invalid
    assert "duplicate device name eth1 in slices a and b" in (pool.invalid_reason or "")


def test_duplicate_key_across_metadata_slices() -> None:
    a = meta_slice("meta-a", count=3, extractors=[("subnet", SUBNET_EXPR)])
    b = meta_slice("meta-b", count=3, extractors=[("subnet", SUBNET_EXPR)])
    devices = device_slice(count=3)
    # Neither slice can be rejected at admission in isolation.
    assert validate_object(parse(a)) == [] and validate_object(parse(b)) == []
    pool = gather_pools(slices(b, devices, a))[POOL]
    assert pool.is_affinity_invalid and not pool.is_invalid and not pool.is_incomplete
    reason = pool.affinity_invalid_reason or ""
    assert "'subnet'" in reason and "meta-a" in reason and "meta-b" in reason
    # Republished with the colliding key renamed: valid, union in slice-name order.
    b_fixed = meta_slice("meta-b", count=3, extractors=[("pkey", PKEY_EXPR)])
    pool = gather_pools(slices(b_fixed, devices, a))[POOL]
    assert not pool.is_affinity_invalid
    assert [e.name for e in pool.extractors] == ["subnet", "pkey"]


def test_combined_cost_across_metadata_slices() -> None:
    heavy = expensive_expr()
    a = meta_slice("meta-a", count=3, extractors=[("a", heavy)])
    b = meta_slice("meta-b", count=3, extractors=[("b", heavy)])
    assert validate_object(parse(a)) == [] and validate_object(parse(b)) == []
    pool = gather_pools(slices(a, b, device_slice(count=3)))[POOL]
    assert pool.is_affinity_invalid
    reason = pool.affinity_invalid_reason or ""
    total = 2 * cel.EXTRACTOR_ENV.compile(heavy).cost_estimate.min
    assert f"combined estimated cost {total}" in reason
    assert "meta-a, meta-b" in reason and str(SHARING_AFFINITY_CEL_MAX_COST) in reason
    # Within budget once one of them is cheap.
    cheap = meta_slice("meta-b", count=3, extractors=[("b", SUBNET_EXPR)])
    assert not gather_pools(slices(a, cheap, device_slice(count=3)))[POOL].is_affinity_invalid


def test_slice_with_devices_and_sharing_affinity_is_affinity_invalid() -> None:
    both = device_slice(count=1)
    both["spec"]["sharingAffinity"] = [{"name": "subnet", "expression": SUBNET_EXPR}]
    pool = gather_pools(slices(both))[POOL]
    assert pool.declares_sharing_affinity and pool.is_affinity_invalid
    assert "sets both devices and sharingAffinity" in (pool.affinity_invalid_reason or "")


def test_non_compiling_extractor_is_affinity_invalid() -> None:
    pool = gather_pools(slices(meta_slice(count=1, extractors=[("subnet", "object.x +")])))[POOL]
    assert pool.is_affinity_invalid
    assert "'subnet'" in (pool.affinity_invalid_reason or "")


def test_counter_references_checked_only_in_complete_pools() -> None:
    consumer = device_slice(count=2, devices=["eth1"])
    consumer["spec"]["devices"][0]["consumesCounters"] = [
        {"counterSet": "nic-slots", "counters": {"slots": {"value": "1"}}}
    ]
    pool = gather_pools(slices(consumer))[POOL]
    assert pool.is_incomplete and not pool.is_invalid  # the set may be in the missing slice
    counters = meta_slice("node-1-counters", count=2, extractors=[])
    counters["spec"].pop("sharingAffinity")
    counters["spec"]["sharedCounters"] = [
        {"name": "nic-slots", "counters": {"slots": {"value": "8"}}}
    ]
    assert not gather_pools(slices(consumer, counters))[POOL].is_invalid
    counters["spec"]["sharedCounters"] = [{"name": "other", "counters": {"slots": {"value": "8"}}}]
    pool = gather_pools(slices(consumer, counters))[POOL]
    assert "unknown counter set nic-slots" in (pool.invalid_reason or "")


def test_pools_are_sorted_and_deterministic() -> None:
    ms = [
        device_slice("z", pool="p2", count=1),
        device_slice("y", pool="p1", count=2),
        meta_slice("x", pool="p1", count=2),
        {
            **device_slice("w", pool="p1", count=1),
            "spec": {
                **device_slice(pool="p1")["spec"],
                "driver": "a.example.com",
                "pool": {"name": "p1"},
            },
        },
    ]
    first = gather_pools(slices(*ms))
    assert list(first) == [("a.example.com", "p1"), (DRIVER, "p1"), (DRIVER, "p2")]
    rng = random.Random(5981)
    for _ in range(5):
        rng.shuffle(ms)
        assert gather_pools(slices(*ms)) == first


def test_bad_data_never_raises() -> None:
    zero = device_slice(count=1)
    zero["spec"]["pool"]["resourceSliceCount"] = 0
    pool = gather_pools(slices(zero))[POOL]
    assert pool.is_incomplete and pool.is_invalid
    assert gather_pools([]) == {}
