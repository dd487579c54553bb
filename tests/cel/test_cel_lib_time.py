"""Standard CEL timestamps and durations, as cel-go in Kubernetes' environment.

Expected values are cel-go v0.29.2's (checked against it through the oracle)."""

from __future__ import annotations

import pytest
from cel_helpers import ev, ev_cost

from dra_affinity.cel import EXTRACTOR_ENV, CELCompileError, CELEvalError
from dra_affinity.cel.lib_time import Duration, Timestamp, parse_cost, parse_duration

T1 = "timestamp('2024-01-02T03:04:05Z')"
T2 = "timestamp('2024-03-10T07:30:00.123456789+05:30')"

VALUES = [
    (f"string({T1})", "2024-01-02T03:04:05Z"),
    (f"string({T2})", "2024-03-10T07:30:00.123456789+05:30"),  # the written offset is kept
    (f"int({T1})", 1704164645),
    ("string(timestamp(0))", "1970-01-01T00:00:00Z"),
    ("string(timestamp('2024-01-02T03:04:05.1234567891Z'))", "2024-01-02T03:04:05.123456789Z"),
    ("string(duration('1h30m'))", "5400s"),
    ("string(duration('-1.5s'))", "-1.5s"),
    ("string(duration('2us'))", "0.000002s"),
    ("string(duration('3\u00b5s'))", "0.000003s"),
    ("string(duration('.5h'))", "1800s"),
    ("int(duration('1.0000000001s'))", 1000000000),
    ("int(duration('2562047h47m16.854775807s'))", 2**63 - 1),
    ("int(duration('-2562047h47m16.854775808s'))", -(2**63)),
    (f"{T1}.getFullYear()", 2024),
    (f"{T1}.getMonth()", 0),  # 0-based
    (f"{T1}.getDayOfYear()", 1),  # 0-based
    (f"{T1}.getDate()", 2),  # 1-based
    (f"{T1}.getDayOfMonth()", 1),  # 0-based
    (f"{T1}.getDayOfWeek()", 2),  # Tuesday; 0 is Sunday
    (f"{T1}.getHours()", 3),
    (f"{T2}.getHours()", 2),  # accessors read UTC (Kubernetes sets DefaultUTCTimeZone)
    (f"{T2}.getMilliseconds()", 123),
    (f"{T1}.getHours('America/New_York')", 22),
    (f"{T1}.getDate('America/New_York')", 1),
    (f"{T1}.getHours('+05:30')", 8),
    (f"{T1}.getMinutes('+05:30')", 34),
    (f"{T1}.getMinutes('-00:30')", 34),
    (f"{T1}.getMinutes('+05:99')", 43),  # minutes are not range-checked, as cel-go
    (f"{T1}.getHours('UTC')", 3),
    ("timestamp('9999-12-31T23:59:59Z').getFullYear('+01:00')", 10000),
    ("duration('90m').getHours()", 1),
    ("duration('90m').getMinutes()", 90),
    ("duration('-90s').getMinutes()", -1),  # totals truncate toward zero
    ("duration('1.5s').getMilliseconds()", 1500),
    (f"string({T1} + duration('1h30m'))", "2024-01-02T04:34:05Z"),
    (f"string(duration('1h30m') + {T1})", "2024-01-02T04:34:05Z"),
    (f"string({T2} - duration('1ns'))", "2024-03-10T07:30:00.123456788+05:30"),
    (f"string({T2} - {T1})", "5871355.123456789s"),
    (f"{T1} < {T2}", True),
    (f"{T1} == timestamp('2024-01-02T08:04:05+05:00')", True),  # same instant
    ("duration('1h') == duration('60m')", True),
    ("duration('1h') > duration('-1h')", True),
    ("[duration('2s'), duration('1s')].sort() == [duration('1s'), duration('2s')]", True),
    ("type(timestamp(1)) == type(timestamp(2))", True),
]


@pytest.mark.parametrize(("expr", "want"), VALUES, ids=[v[0][:70] for v in VALUES])
def test_time_values(expr: str, want: object) -> None:
    assert ev(expr) == want


def test_values_are_typed_objects() -> None:
    assert ev(T1) == Timestamp(1704164645)
    assert ev("duration('1s')") == Duration(10**9)
    assert Duration(5400 * 10**9).go_string() == "1h30m0s"
    assert Duration(1500).go_string() == "1.5\u00b5s"
    assert Timestamp(0, 5, 3600).go_string() == "1970-01-01 01:00:00.000000005 +0100 +0100"


RUNTIME_ERRORS = [
    ("timestamp(object.s)", {"s": "bad"}, "invalid_argument"),
    ("timestamp(object.s)", {"s": "2024-02-30T00:00:00Z"}, "invalid_argument"),
    ("timestamp(object.s)", {"s": "2024-01-02t03:04:05Z"}, "invalid_argument"),
    ("timestamp(object.s)", {"s": "0000-12-31T23:59:59Z"}, "overflow"),  # before year 1
    ("timestamp(object.n)", {"n": 253402300800}, "overflow"),
    ("duration(object.s)", {"s": "1x"}, "invalid_argument"),
    ("duration(object.s)", {"s": ""}, "invalid_argument"),
    ("duration(object.s)", {"s": "2562047h47m16.854775808s"}, "invalid_argument"),  # > int64
    ("timestamp('9999-12-31T23:59:59Z') + duration(object.s)", {"s": "1s"}, "overflow"),
    ("timestamp('0001-01-01T00:00:00Z') - duration(object.s)", {"s": "1ns"}, "overflow"),
    ("duration('2562047h') + duration(object.s)", {"s": "2562047h"}, "overflow"),
    ("timestamp('9999-01-01T00:00:00Z') - timestamp(object.s)", {"s": "0001-01-01T00:00:00Z"},
     "overflow"),
    ("timestamp(1).getHours(object.s)", {"s": "Mars/Base"}, "invalid_argument"),
    ("timestamp(1).getHours(object.s)", {"s": "x:30"}, "invalid_argument"),
    ("duration(object.s) + dyn(1)", {"s": "1s"}, "no_such_overload"),
    ("-dyn(duration(object.s))", {"s": "1s"}, "no_such_overload"),
]


@pytest.mark.parametrize(("expr", "obj", "reason"), RUNTIME_ERRORS, ids=[f"{e[0]}-{e[1]}" for e in RUNTIME_ERRORS])
def test_time_runtime_errors(expr: str, obj: object, reason: str) -> None:
    with pytest.raises(CELEvalError) as info:
        ev(expr, obj)
    assert info.value.reason == reason


@pytest.mark.parametrize("expr", ["timestamp('bad')", "duration('1x')", "-duration('1s')",
                                  "timestamp(1) + timestamp(2)", "duration('1s') < timestamp(1)",
                                  "timestamp(1.5)", "duration(1)", "duration('1s').getFullYear()",
                                  "duration('1s').getHours('UTC')"])
def test_time_compile_errors(expr: str) -> None:
    # literals are validated when compiling, as Kubernetes' AST validators do
    with pytest.raises(CELCompileError):
        EXTRACTOR_ENV.compile(expr)


@pytest.mark.parametrize(("text", "ns"), [("0", 0), ("+5s", 5 * 10**9), ("1h1m1s1ms1us1ns", 3661001001001),
                                          ("1.5h", 5400 * 10**9), ("-0.000000001s", -1), ("1\u03bcs", 1000)])
def test_parse_duration(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", ["", "-", "1", ".s", "1.s.", "s", "1hh", "9223372036854775808ns", "1e3s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_time_costs() -> None:
    # 1 per operator and accessor, as cel-go (object.s: 2); a parse from a string costs
    # 1 + 2 per character, beyond cel-go's 1 (its work grows with the string)
    act = {"object": {"s": "2024-01-02T03:04:05Z", "d": "1h"}}
    ts, du = parse_cost(20), parse_cost(2)
    assert (ts, du) == (41, 5)
    assert ev_cost("timestamp(object.s).getHours()", act)[1] == 2 + ts + 1
    assert ev_cost("timestamp(object.s) + duration(object.d)", act)[1] == 2 + ts + 2 + du + 1
    assert ev_cost("timestamp(object.s) < timestamp(object.s)", act)[1] == 2 + ts + 2 + ts + 1
    long = {"object": {"s": "1" * 1000 + "s"}}
    # duration('1s') of a literal is evaluated when compiling: free at run time
    assert ev_cost("duration(object.s) == duration('1s')", {"object": {"s": "1s"}})[1] == 2 + 5 + 0 + 1
    with pytest.raises(CELEvalError) as info:
        ev("duration(object.s)", long["object"])
    assert info.value.cost == 2 + 1 + 2002  # charged before the parse fails


def test_time_cost_within_estimate() -> None:
    prog = EXTRACTOR_ENV.compile("timestamp(object.s) - timestamp(object.s) < duration(object.d)")
    _, cost = prog.evaluate({"object": {"s": "2024-01-02T03:04:05Z", "d": "1h"}}, 10**6)
    assert cost <= prog.cost_estimate.max
