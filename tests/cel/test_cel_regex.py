"""Regular expressions: Go's syntax and limits on RE2, and what compiling and matching cost."""

from __future__ import annotations

import math
from typing import Any

import pytest
import re2

from dra_affinity.cel import EXTRACTOR_ENV, CELCompileError, CELCostExceeded, CELEvalError, regex
from dra_affinity.cel.regex import RegexError, compile_cost, parse_cost, shape

BUDGET = 1_000_000


def run(expression: str, obj: object = None, budget: int = BUDGET) -> tuple[object, int]:
    return EXTRACTOR_ENV.compile(expression).evaluate({"object": obj}, budget)


# ---------------------------------------------------------------- Go's dialect
@pytest.mark.parametrize("pattern", [
    r"\pL{999}", r"(?:\pL|\pN){1000}", r"(?i)\pL{500}", r"x{1000}", r"(?:a{10}){100}",
    "(" * 999 + "a" + ")" * 999, "(?:" * 2500 + "a" + ")" * 2500, r"(?P<n>a)(?P<n>b)",
    r"(?<n>a)", r"\Q.*\E", r"\x{10FFFF}", r"\123", r"[[:word:]]+", r"\p{^Greek}",
])
def test_patterns_go_accepts_are_valid(pattern: str) -> None:
    shape(pattern)  # no RegexError


@pytest.mark.parametrize(("pattern", "message"), [
    (r"\C", "invalid escape sequence"),  # RE2 alone would accept it (any byte)
    (r"x{1001}", "invalid repeat count"),
    (r"(?:a{10}){101}", "invalid repeat count"),  # nested repeats multiply
    (r"((a{2}){2}){251}", "invalid repeat count"),
    ("(" * 1000 + "a" + ")" * 1000, "nests too deeply"),
    (r"(?:abcdefghij){1000}" * 400, "expression too large"),
    (r"a**", "invalid nested repetition operator"),
    (r"\8", "invalid escape sequence"),
    (r"(?i-)a", "invalid or unsupported Perl syntax"),
    (r"(a", r"missing closing \)"),
    (r"[a", r"missing closing \]"),
])
def test_patterns_go_refuses_are_errors(pattern: str, message: str) -> None:
    with pytest.raises(RegexError, match=message):
        shape(pattern)


def test_invalid_literal_pattern_is_a_compile_error_and_computed_one_a_runtime_error() -> None:
    with pytest.raises(CELCompileError, match="invalid escape sequence"):
        EXTRACTOR_ENV.compile(r"'x'.matches(r'\C')")
    with pytest.raises(CELEvalError, match="invalid escape sequence") as err:
        run("object.s.matches(object.p)", {"s": "x", "p": r"\C"})
    assert err.value.reason == "invalid_argument"
    assert err.value.cost == 2 + 2 + parse_cost(2)  # the two reads, then checking the pattern


def test_large_go_valid_literal_pattern_compiles_and_is_charged_when_evaluated() -> None:
    prog = EXTRACTOR_ENV.compile(r"'x'.matches(r'\pL{999}')")  # valid, not compiled now
    assert prog.cost_estimate.min > BUDGET  # so admission refuses it, by its cost
    with pytest.raises(CELCostExceeded):
        prog.evaluate({}, BUDGET)


# ---------------------------------------------------------------- compile cost
def test_compile_is_charged_before_the_program_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = regex._compile

    def spy(pattern: str, s: Any) -> Any:
        built.append(pattern)
        return real(pattern, s)

    monkeypatch.setattr(regex, "_compile", spy)
    with pytest.raises(CELCostExceeded) as err:
        run("object.s.matches(object.p)", {"s": "x", "p": r"\pL{999}"})
    assert built == []
    assert err.value.cost > BUDGET
    s = shape(r"\pL{999}")
    assert compile_cost(s) > 4 * s.units  # charged by the size RE2 would build


def test_distinct_patterns_each_pay_their_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """What made an evaluation take 80 minutes: distinct patterns RE2 took 40 ms to refuse,
    at 9 units each. Now each is charged its check and compile before any work."""
    patterns = [rf"\pL{{{n}}}" for n in range(200, 999)]
    with pytest.raises(CELCostExceeded) as err:
        run("object.l.exists(p, 'x'.matches(p))", {"l": patterns})
    first = shape(patterns[0])
    assert err.value.cost <= BUDGET + compile_cost(shape(patterns[1])) + parse_cost(10) + 100
    assert compile_cost(first) + parse_cost(len(patterns[0])) > 400_000


def test_a_pattern_is_charged_once_per_evaluation() -> None:
    p = "b+"
    s = shape(p)
    per_pattern = parse_cost(len(p)) + compile_cost(s)
    match = math.ceil(0.1 * 4) * math.ceil(0.25 * len(p))
    _, once = run("'abc'.matches(object.p)", {"p": p})
    _, thrice = run("[1, 2, 3].all(i, 'abc'.matches(object.p))", {"p": p})
    assert once == 2 + per_pattern + match  # reading object.p, then the pattern, the match
    # all(): 1 + per element 2 + 1 + body (read 2 + match), + the pattern's compile once
    assert thrice == 1 + 3 * (2 + 1 + 2 + match) + per_pattern


def test_literal_patterns_cost_only_their_matches_as_in_cel_go() -> None:
    _, cost = run("'abcdef'.matches('c.e')")
    assert cost == 1 * 1  # ceil(0.1 * 7) * ceil(0.25 * 3)


def test_invalid_patterns_are_remembered() -> None:
    regex._short_shape.cache_clear()
    for _ in range(3):
        with pytest.raises(RegexError):
            shape(r"x{1001}")
    info = regex._short_shape.cache_info()
    assert (info.misses, info.hits) == (1, 2)


# ---------------------------------------------------------------- match cost
def test_backtracking_heavy_pattern_is_charged_by_its_program() -> None:
    """``a.{0,999}c`` over 10 KiB: cel-go charges 3,075 per match (the pattern's 10
    characters) for work that grows with its 2,000 instructions."""
    text = "a" * 10_000
    s = shape("a.{0,999}c")
    assert s.go_size == 2000
    per_match = math.ceil(0.1 * (1 + len(text))) * math.ceil(0.25 * s.go_size)
    with pytest.raises(CELCostExceeded) as err:
        run("object.l.all(x, !object.s.matches('a.{0,999}c'))", {"s": text, "l": list(range(330))})
    assert err.value.cost <= BUDGET + per_match
    assert per_match > BUDGET // 3  # so at most two matches run


# ---------------------------------------------------------------- estimates and cache
@pytest.mark.parametrize("pattern", [
    "", "a", "abc", "(?i)abc", ".", "(?s).{100}", r"\d+", r"[a-z0-9]([-a-z0-9]*[a-z0-9])?",
    r"\pL{20}", r"(?i)\p{Greek}+", r"[\d\pL]{3}", r"a.{0,999}c", r"(a|b|c)*d", r"[^a]", r"[é-ü]+",
    r"(?:abcdefghij){100}", r"x{2,5}", r"x{2,}", r"\x{10FFFF}", r"[[:alpha:]]+", r"\Q.*\E",
])
def test_unit_estimate_tracks_re2s_program(pattern: str) -> None:
    s = shape(pattern)
    actual = re2.compile(pattern, options=regex._options(s.units)).programsize
    assert actual / 1.6 <= s.units <= max(4 * actual, actual + 20)


def test_program_cache_is_bounded_by_size() -> None:
    for n in range(100):
        regex.compiled(rf"\p{{Greek}}{{{n + 50}}}")
    assert regex._CACHE._units <= regex.CACHE_TOTAL_UNITS
