"""Charges that track the work: functions whose work grows with their input while
cel-go charges them a flat cost, and results far larger than their inputs.

Tested through cost counters and a memory cap (tracemalloc), never through time."""

from __future__ import annotations

import tracemalloc

import pytest

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    SHARING_AFFINITY_CEL_MAX_COST,
    CELCostExceeded,
    CELEvalError,
)
from dra_affinity.cel.library import semver_parse_cost

BUDGET = SHARING_AFFINITY_CEL_MAX_COST
LONG_PRE = "1.2.3-" + "a." * 4_000 + "a"  # a valid version of 4,001 pre-release parts


def cost(expression: str, obj: object) -> int:
    program = EXTRACTOR_ENV.compile(expression)
    _, spent = program.evaluate({"object": obj}, BUDGET)
    assert spent <= program.cost_estimate.max  # the estimate stays an upper bound
    return spent


@pytest.mark.parametrize("expression", ["isSemver(object.s)", "isSemver(object.s, true)",
                                        "semver(object.s).major() >= 0"])
def test_semver_parse_is_charged_per_character_and_part(expression: str) -> None:
    spent = cost(expression, {"s": LONG_PRE})
    assert spent >= semver_parse_cost(len(LONG_PRE), LONG_PRE.count("."))
    assert spent > 4_000  # cel-go: 1 for the parse, whatever its length
    assert cost(expression, {"s": "1.2.3"}) <= 12  # an ordinary version stays cheap


def test_version_comparison_is_charged_per_pre_release_part() -> None:
    two = cost("semver(object.s).compareTo(semver(object.s)) == 0", {"s": LONG_PRE})
    one = cost("semver(object.s).major() == 0", {"s": LONG_PRE})
    assert two - 2 * one >= 3_990  # 1 per part compared, besides the parses


def test_short_strings_cost_one_each_when_traversed() -> None:
    """Kubernetes' traversal cost of a string under 10 bytes is 0: max() of 1,600 short
    strings cost 2 for 1,600 comparisons."""
    items = [f"s{i}" for i in range(1_600)]
    for fn in ("max()", "min()", "isSorted()", "indexOf('x')"):
        assert cost(f"object.l.{fn} == object.l.{fn}", {"l": items}) >= 2 * 1_600


def test_flatten_charges_its_result_before_building_it() -> None:
    """``l`` holds n references to one list of n references to one list of n: flattening
    two levels gives n^3 elements; cel-go charges 2n + 11."""
    n = 150
    inner = list(range(n))
    middle = [inner] * n
    outer = [middle] * n
    tracemalloc.start()
    try:
        with pytest.raises(CELCostExceeded):
            EXTRACTOR_ENV.compile("object.l.flatten(2).size()").evaluate({"object": {"l": outer}}, BUDGET)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the 27 MB result was never built


def test_flatten_keeps_cel_gos_charge_for_small_inner_lists() -> None:
    assert cost("object.l.flatten().size()", {"l": [[1, 2], [3], [4, 5, 6]]}) == 2 + 3 + 11 + 1
    spent = cost("object.l.flatten().size()", {"l": [list(range(100))] * 10})
    assert spent >= (1_000 - 10) // 2


@pytest.mark.parametrize("fn", ["int", "uint", "double"])
def test_number_parse_is_charged_per_character(fn: str) -> None:
    digits = "1" * 9_800  # out of range: charged before the parse fails
    with pytest.raises(CELEvalError) as err:
        EXTRACTOR_ENV.compile(f"{fn}(object.d)").evaluate({"object": {"d": digits}}, BUDGET)
    assert err.value.cost >= 980
    assert cost(f"{fn}(object.d) == {fn}(object.d)", {"d": "12"}) == 2 + 1 + 2 + 1 + 1
