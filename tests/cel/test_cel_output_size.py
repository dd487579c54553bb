"""Cost charged for the size of what an expression builds, and the memory cap.

A string never costs less than 0.1 per byte of the memory it takes, charged
before it is built: one the remaining budget cannot pay for is never built.
Assertions are on cost counters, result sizes and traced allocations, never
on time.
"""

from __future__ import annotations

import tracemalloc

import pytest

from dra_affinity.cel import EXTRACTOR_ENV, SHARING_AFFINITY_CEL_MAX_COST, CELCostExceeded

BUDGET = SHARING_AFFINITY_CEL_MAX_COST
EMOJI = "\U0001f600"  # stored with 4 bytes per character


def run(expr: str, obj: object, budget: int = BUDGET) -> tuple[object, int]:
    return EXTRACTOR_ENV.compile(expr).evaluate({"object": obj}, budget)


def peak_bytes(expr: str, obj: object, budget: int = BUDGET) -> tuple[int, BaseException | None]:
    """Peak traced allocation while evaluating (the error, if any)."""
    prog = EXTRACTOR_ENV.compile(expr)
    tracemalloc.start()
    err: BaseException | None = None
    try:
        prog.evaluate({"object": obj}, budget)
    except CELCostExceeded as e:
        err = e
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, err


def test_hostile_replace_with_one_wide_character_is_cut_off_before_building() -> None:
    s = "a" * 2999 + EMOJI  # 3,000 characters, one needs 4 bytes: the result would be ~36 MB
    peak, err = peak_bytes('object.s.replace("", object.s)', {"s": s})
    assert isinstance(err, CELCostExceeded)
    # 3,000 + 3,001 * 3,000 characters at 4 bytes, 0.1 per byte, plus the two selections
    assert err.cost == 4 + (3000 + 3001 * 3000) * 4 // 10
    assert err.cost > BUDGET
    assert peak < 1_000_000  # nothing of the 36 MB was allocated


def test_ascii_replace_pays_for_its_result() -> None:
    s = "a" * 3000
    value, cost = run('object.s.replace("", object.s)', {"s": s})
    assert isinstance(value, str)
    assert len(value) == 3000 + 3001 * 3000
    assert cost == 4 + len(value) // 10
    assert cost <= BUDGET
    # and the same expression with a smaller budget builds nothing
    peak, err = peak_bytes('object.s.replace("", object.s)', {"s": s}, budget=100_000)
    assert isinstance(err, CELCostExceeded) and peak < 1_000_000


@pytest.mark.parametrize("ch", ["\u00e9", "\u0416", EMOJI])
def test_concatenation_is_charged_by_memory(ch: str) -> None:
    width = 1 if ch < "\u0100" else 2 if ch < "\U00010000" else 4
    s = ch * 100
    _, cost = run("object.s + object.s", {"s": s})
    assert cost == 2 + 2 + 200 * width // 10


def test_ascii_concatenation_costs_exactly_as_cel_go() -> None:
    _, cost = run("object.s + object.s", {"s": "x" * 95})
    assert cost == 2 + 2 + 19  # ceil(0.1 * 190)


def test_join_of_wide_strings_is_charged_by_memory() -> None:
    _, ascii_cost = run("object.l.join('')", {"l": ["ab"] * 100})
    assert ascii_cost == 2 + 40  # Kubernetes: ceil(0.2 * 200)
    _, wide_cost = run("object.l.join('')", {"l": [EMOJI * 2] * 100})
    assert wide_cost == 2 + 80  # 800 bytes at 0.1


def test_split_charges_the_parts() -> None:
    _, cost = run("object.s.split('')", {"s": "x" * 1000})
    assert cost == 2 + 200  # Kubernetes' 0.2 per character covers 1,000 one-character parts
    _, wide = run("object.s.split('')", {"s": EMOJI * 1000})
    assert wide == 2 + 400 + 100  # 4,000 bytes and 1,000 parts at 0.1


def test_growth_by_repeated_concatenation_in_a_comprehension_is_bounded() -> None:
    # Each step builds a longer string; the total charged covers every string built.
    expr = "object.l.map(x, object.s + object.s + object.s).size()"
    value, cost = run(expr, {"l": list(range(10)), "s": EMOJI * 1000})
    assert value == 10
    per = 2 + 2 + 800 + 2 + 1200  # two selections and 2,000 wide chars, then 3,000
    assert cost == 2 + 10 * (per + 12) + 1 + 1


def test_static_estimate_bounds_the_wide_runtime_cost() -> None:
    prog = EXTRACTOR_ENV.compile('object.s.replace("", object.s)')
    _, cost = prog.evaluate({"object": {"s": EMOJI * 10}}, BUDGET)
    assert cost <= prog.cost_estimate.max
    prog2 = EXTRACTOR_ENV.compile("object.s + object.s")
    _, cost2 = prog2.evaluate({"object": {"s": EMOJI * 10}}, BUDGET)
    assert cost2 <= prog2.cost_estimate.max
