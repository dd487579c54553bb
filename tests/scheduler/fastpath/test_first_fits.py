"""The kept verdicts' scan (:func:`first_fits`) finds what filtering node after node
finds, and looks again only at the changed nodes that node after node would reach."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dra_affinity.scheduler.fastpath.verdicts import first_fits


def node_after_node(kept: list[bool], fresh: dict[int, bool], limit: int) -> tuple[list[int], list[int]]:
    """The reference: each node in order (a changed node's answer afresh) until ``limit``
    fit; the fits, and the changed nodes reached."""
    found: list[int] = []
    reached: list[int] = []
    for p, answer in enumerate(kept):
        if p in fresh:
            reached.append(p)
            answer = fresh[p]
        if answer:
            found.append(p)
            if len(found) >= limit:
                break
    return found, reached


@st.composite
def scans(draw: st.DrawFn) -> tuple[list[bool], dict[int, bool], int]:
    n = draw(st.integers(0, 40))
    kept = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    changed = draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n)) if n else set()
    fresh = {p: draw(st.booleans()) for p in sorted(changed)}
    return kept, fresh, draw(st.integers(1, max(n, 1)))


@given(scans())
def test_the_scan_finds_what_node_after_node_finds_and_looks_only_where_it_reaches(
        case: tuple[list[bool], dict[int, bool], int]) -> None:
    kept, fresh, limit = case
    fit = bytearray(kept)
    looked_at: list[int] = []

    def look(p: int) -> bool:
        looked_at.append(p)
        fit[p] = fresh[p]
        return fresh[p]

    found, looked = first_fits(fit, sorted(fresh), limit, look)
    want, reached = node_after_node(kept, fresh, limit)
    assert found == want
    assert looked_at == reached
    assert looked == len(reached)


def test_a_changed_node_that_stopped_fitting_moves_the_stop_past_it() -> None:
    # Kept: nodes 0-3 fit. Node 1 no longer does, so with a limit of 3 the scan must
    # reach node 3 (a changed one, looked at) and not stop at node 2.
    fit = bytearray([True, True, True, True, False])
    fresh = {1: False, 3: True, 4: True}

    def look(p: int) -> bool:
        fit[p] = fresh[p]
        return fresh[p]

    assert first_fits(fit, [1, 3, 4], 3, look) == ([0, 2, 3], 2)
