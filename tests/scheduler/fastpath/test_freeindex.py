"""The free-capacity index's sorted node lists: their upkeep, and their union (the Filter
candidate order)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dra_affinity.bench.throughput import build_cluster
from dra_affinity.features import Features
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.fastpath.freeindex import FreeIndex, _union
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.workload import WorkloadSpec, pod_objects
from dra_affinity.structured.model import Result

lists_st = st.lists(st.sets(st.integers(min_value=0, max_value=200), max_size=30), max_size=5)


@given(lists_st)
def test_union_is_sorted_deduplicated_union(sets: list[set[int]]) -> None:
    lists = [sorted(s) for s in sets]
    assert list(_union(lists)) == sorted(set().union(*sets))


@given(lists_st)
def test_union_is_lazy_prefix(sets: list[set[int]]) -> None:
    # Filter stops at the first feasible node: a prefix must already be right.
    it = _union([sorted(s) for s in sets])
    want = sorted(set().union(*sets))[:3]
    got = [p for _, p in zip(range(3), it, strict=False)]
    assert got == want


def test_union_two_lists_with_shared_and_tail_elements() -> None:
    assert list(_union([[1, 4, 9], [4, 5, 11, 12]])) == [1, 4, 5, 9, 11, 12]
    assert list(_union([[], [3]])) == [3]


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.sampled_from([None, 0, 2, 3, 4])),
                max_size=200))
def test_set_keeps_each_category_the_sorted_nodes_with_a_device_in_it(
        ops: list[tuple[int, int, int | None]]) -> None:
    # _set moves one device (j of node pos) to a category (None: no room); a node is in a
    # category's list exactly while one of its devices is in that category, and in ANY's
    # while one of its devices has room; an emptied lock value's id is forgotten.
    index = FreeIndex.__new__(FreeIndex)
    index.by_category = {}
    index.node_cats = [[None] * 3 for _ in range(6)]
    index._ids, index._cat_of = {("",): 0, ("*",): 1}, {0: ("",), 1: ("*",)}
    used: set[int] = set()
    for pos, j, new in ops:
        if new is not None and new > 1 and new not in index._cat_of:
            index._ids[("v", new)] = new  # the id is minted again, as _id would
            index._cat_of[new] = ("v", new)
        index._set(pos, j, new)
        if new is not None:
            used.add(new)
        cats = index.node_cats
        assert cats[pos][j] == new
        for k in (0, 2, 3, 4):
            nodes = [p for p, c in enumerate(cats) if k in c]
            assert index.by_category.get(k, []) == nodes
            if not nodes and k > 1 and k in used:
                assert k not in index.by_category and ("v", k) not in index._ids
        assert index.by_category.get(1, []) == [p for p, c in enumerate(cats)
                                               if any(x is not None for x in c)]


def _by_value(index: FreeIndex) -> tuple[object, ...]:
    """The index with its categories by value (ids are minted per index, in use order)."""
    of = index._cat_of
    return ([[None if c is None else of[c] for c in cats] for cats in index.node_cats],
            {of[k]: nodes for k, nodes in index.by_category.items()})


@pytest.mark.parametrize("affinity", [True, False])
def test_kept_up_index_equals_a_fresh_one_and_picks_devices_by_category(affinity: bool) -> None:
    # Kept up from the state's change log through schedules and departures, the index
    # must hold what one built now from the state holds; and a node's devices in a
    # category are the ones its per-node list marks, in the node's order.
    cluster = build_cluster(WorkloadSpec(nodes=3, devices_per_node=3, slots=2, affinity=affinity))
    sched = Scheduler(cluster, Features(), fast_paths=FastPaths.all())
    sched.start()
    index = sched.indexed.free_index()
    alive: list[str] = []
    for n in range(40):
        claim, pod = pod_objects(f"p{n}", n % 4)
        assert cluster.apply(claim).applied and cluster.apply(pod).applied
        if sched.schedule(f"default/p{n}").result is Result.SCHEDULED:
            alive.append(f"p{n}")
        if len(alive) > 10:
            gone = alive.pop(n % len(alive))
            cluster.delete("Pod", f"default/{gone}")
            cluster.delete("ResourceClaim", f"default/{gone}-nic")
    index.catch_up()
    snap = sched.snapshot()
    fresh = FreeIndex(snap, sched.state, True)
    assert _by_value(index) == _by_value(fresh)
    assert any(c is not None for cats in index.node_cats for c in cats)
    for pos, node in enumerate(snap.nodes):
        devs = snap.by_node[node]
        cats = index.node_cats[pos]
        assert index.devices_in(pos, devs, None) == [d for d, c in zip(devs, cats, strict=True) if c is not None]
        for cat in set(cats) - {None}:
            assert index.devices_in(pos, devs, (cat,)) == [d for d, c in zip(devs, cats, strict=True) if c == cat]
            assert index.devices_in(pos, devs, (cat, -1)) == [d for d, c in zip(devs, cats, strict=True) if c == cat]
