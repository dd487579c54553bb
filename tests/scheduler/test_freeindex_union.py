"""The free-capacity index's union of sorted node lists (the Filter candidate order)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sortedcontainers import SortedList

from dra_affinity.scheduler.freeindex import _union

lists_st = st.lists(st.sets(st.integers(min_value=0, max_value=200), max_size=30), max_size=5)


@given(lists_st)
def test_union_is_sorted_deduplicated_union(sets: list[set[int]]) -> None:
    lists = [SortedList(s) for s in sets]
    assert list(_union(lists)) == sorted(set().union(*sets))


@given(lists_st)
def test_union_is_lazy_prefix(sets: list[set[int]]) -> None:
    # Filter stops at the first feasible node: a prefix must already be right.
    it = _union([SortedList(s) for s in sets])
    want = sorted(set().union(*sets))[:3]
    got = [p for _, p in zip(range(3), it, strict=False)]
    assert got == want


def test_union_two_lists_with_shared_and_tail_elements() -> None:
    assert list(_union([SortedList([1, 4, 9]), SortedList([4, 5, 11, 12])])) == [1, 4, 5, 9, 11, 12]
    assert list(_union([SortedList([]), SortedList([3])])) == [3]
