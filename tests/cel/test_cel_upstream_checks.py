"""What cel-go decides when it compiles and plans a program, as Kubernetes configures it.

Homogeneous aggregate literals, typed equality, static overload resolution, the
int literal range, selector result types, constant conversions evaluated when
the program is built (OptOptimize) and constant literals that then cost nothing
at run time. Each case's outcome was checked against cel-go by the differential
suite (tests/oracle).
"""

from __future__ import annotations

import pytest
from cel_helpers import ev, ev_cost

from dra_affinity.cel import EXTRACTOR_ENV, SELECTOR_ENV, CELCompileError, CELEvalError

COMPILE_ERRORS: list[tuple[str, str]] = [
    # homogeneous aggregate literals: element types must agree, dyn is the escape
    ("[1, 'a']", "expected type 'int' but found 'string'"),
    ("[1, 2u]", "expected type 'int' but found 'uint'"),
    ("[1, null]", "expected type 'int' but found 'null_type'"),
    ("[object.a, 1]", "expected type 'dyn' but found 'int'"),
    ("[1, object.a]", "expected type 'int' but found 'dyn'"),
    ("[[1], ['a']]", "expected type 'list(int)' but found 'list(string)'"),
    ("[[1], [object.a]]", "expected type 'list(int)' but found 'list(dyn)'"),
    ("{'a': 1, 'b': 'x'}", "expected type 'int' but found 'string'"),
    ("{1: 'a', 'b': 'x'}", "expected type 'int' but found 'string'"),
    ("[1, [1].map(x, x)]", "expected type 'int' but found 'list(int)'"),
    # equality needs one type on both sides (only the orderings are cross-numeric)
    ("1 == 1.0", "no matching overload for '_==_'"),
    ("1 != 1u", "no matching overload for '_!=_'"),
    ("[1] == [1.0]", "no matching overload for '_==_'"),
    ("1 in [1.0]", "no matching overload for '_in_'"),
    ("{1: 'a'}[1u]", "no matching overload for '_[_]'"),
    ("1 == null", "no matching overload for '_==_'"),
    # static overload resolution
    ("['a'].sum()", "no matching overload for 'sum'"),
    ("[true].sum()", "no matching overload for 'sum'"),
    ("[[1]].max()", "no matching overload for 'max'"),
    ("[3, 1].lastIndexOf('10')", "no matching overload for 'lastIndexOf'"),
    ("[1] + ['a']", "no matching overload for '_+_'"),
    ("true ? [1] : null", "no matching overload for '_?_:_'"),
    # the literal 9223372036854775808 is out of range once the minus signs are operators
    ("--9223372036854775808", "invalid int literal"),
    # conversions of constants are evaluated when the program is built
    ("uint(-1)", "program instantiation failed: unsigned integer overflow"),
    ("false ? 1u : uint(-1)", "program instantiation failed"),  # also in an untaken branch
    ("true ? 1u : uint(-1)", "program instantiation failed"),
    ("[1, 2].map(x, uint(-1))", "program instantiation failed"),
    ("object.a == 1 ? int('x') : 0", "program instantiation failed"),
    ("dyn(uint(-1))", "program instantiation failed"),
    ("double('1e400')", "program instantiation failed: type conversion error"),
    ("string(b'\\xff')", "program instantiation failed: invalid UTF-8"),
    # timestamp() and duration() of literals too, and conversions of their results
    ("timestamp('bad')", "program instantiation failed"),
    ("true || duration('1x') == duration('1s')", "program instantiation failed"),
    ("bool(string(duration('90m')))", "program instantiation failed"),
    ("double(string(timestamp('2024-01-02T03:04:05Z')))", "program instantiation failed"),
    # flatten() takes a list of lists and keeps the inner element type
    ("[1, 2].flatten()", "no matching overload for 'flatten'"),
    ("[[1], [2]].flatten().all(x, x)", "all() predicate must be bool, not int"),
    # format()'s compile-time check looks into list and map literals for %s
    ("'%s'.format([[optional.none()]])", "string clause cannot format optional_type"),
    ("'%s'.format([[?optional.of(1), ?optional.none()]])", "cannot format optional_type"),
    ("'%s'.format([{1: optional.none()}])", "string clause cannot format optional_type"),
]


@pytest.mark.parametrize(("expr", "message"), COMPILE_ERRORS, ids=[c[0] for c in COMPILE_ERRORS])
def test_compile_error(expr: str, message: str) -> None:
    with pytest.raises(CELCompileError) as info:
        EXTRACTOR_ENV.compile(expr)
    assert message in str(info.value)


VALUES: list[tuple[str, object]] = [
    ("[dyn(1), dyn('a')]", [1, "a"]),
    ("[[1], []]", [[1], []]),  # an empty literal's element type is free
    ("[{}, {'a': 1}]", [{}, {"a": 1}]),
    ("[[1], [1].map(x, x)]", [[1], [1]]),
    ("[object.a, object.s]", [1, "x"]),
    ("[[].sum(), 1]", [0, 1]),  # [].sum() is an int
    ("dyn(1) == 1.0", True),  # equality across numeric kinds at run time
    ("1 < 1.5", True),  # cross-type orderings are declared (Kubernetes)
    ("{'a': 1} == {'a': object.a}", True),
    ("quantity('1') == null", False),  # Kubernetes object types are nullable
    ("true ? null : quantity('1')", None),
    ("--5", 5),
    ("---5", -5),
    ("- 9223372036854775808", -(2**63)),
    ("--1.5", 1.5),
    ("[1, 2,]", [1, 2]),
    ("{'a': 1,}", {"a": 1}),
    # a repeated key takes the last value, in constant and run-time literals
    ("{'a': 1, 'a': 2}", {"a": 2}),
    ("[1].map(x, {x: 1, 1: 2})", [{1: 2}]),
    ("[1].map(x, {'a': x, 'a': 2})", [{"a": 2}]),
    # has(): any map key type type-checks; a field test on a non-map is false
    ("has({1: 'a'}.f)", False),
    ("has(object.s.x)", False),
    ("has(object.n.x)", False),
    ("has(object.a.x)", False),
    # no homogeneity check for any list literal inside format(), as cel-go exempts
    ("'%s'.format([[1, object.a].reverse()])", "[1, 1]"),
    ("[[1], [2]].flatten()", [1, 2]),
    ("object.l.flatten()", [1, 2]),  # dyn elements: checked at run time
    ("string(duration('90m'))", "5400s"),
]

OBJ = {"a": 1, "s": "x", "n": None, "l": [1, 2]}


@pytest.mark.parametrize(("expr", "expected"), VALUES, ids=[v[0] for v in VALUES])
def test_value(expr: str, expected: object) -> None:
    assert ev(expr, OBJ) == expected


RUNTIME_ERRORS: list[tuple[str, str]] = [
    ("has(object.l.x)", "unsupported index type 'string' in list"),  # cel-go indexes the list
    # one reading of a list index, for [] and [?]: int, uint, or a double without fraction
    ("object.l[dyn('0')]", "unsupported index type 'string' in list"),
    ("object.l[?dyn(0.5)]", "unsupported index type 'double' in list"),
    ("{1: 'a'}.f", "no such key: f"),
    ("quantity('1') == dyn(1)", "no such overload"),  # Kubernetes types equal their own only
    ("semver('1.0.0') == dyn('1.0.0')", "no such overload"),
    ("['a', 'b'].transformMapEntry(i, v, {'same': i})", "repeated key"),  # cel.@mapInsert
    ("uint((true ? -1 : 1))", "unsigned integer overflow"),  # not a literal: not folded
]


@pytest.mark.parametrize(("expr", "message"), RUNTIME_ERRORS, ids=[e[0] for e in RUNTIME_ERRORS])
def test_runtime_error(expr: str, message: str) -> None:
    with pytest.raises(CELEvalError, match=message):
        ev(expr, OBJ)


def test_flatten_keeps_the_inner_element_type() -> None:
    assert str(EXTRACTOR_ENV.compile("[[1], [2]].flatten()").static_type) == "list(int)"
    assert str(EXTRACTOR_ENV.compile("[[[1]]].flatten()").static_type) == "list(list(int))"


def test_constant_timestamp_and_duration_cost_nothing_at_run_time() -> None:
    assert ev_cost("duration('90m')")[1] == 0
    assert ev_cost("timestamp('2024-01-02T03:04:05Z')")[1] == 0


def test_string_on_the_left_of_a_kubernetes_type_is_unequal() -> None:
    assert ev("dyn('1.0.0') == semver('1.0.0')") is False


COSTS: list[tuple[str, int]] = [
    ("[1, 2, 3]", 0),  # built when compiling
    ("{'a': [1, 2]}", 0),
    ("int('1')", 0),
    ("[dyn(int('1')), dyn('x')]", 0),
    ("2 in [1, 2, 3]", 0),  # decided when compiling
    ("object.a in [1, 2, 3]", 2),  # a set lookup: free, whatever the list's size
    ("object.a in " + str(list(range(500))), 2),
    ("[object.a]", 12),  # built at run time: 10
    ("[1, 2].map(x, x)", 2 * 13 + 1),  # the accumulator's [] is free
    ("has(object.a)", 1),
]


@pytest.mark.parametrize(("expr", "cost"), COSTS, ids=[c[0][:40] for c in COSTS])
def test_runtime_cost(expr: str, cost: int) -> None:
    _, actual = ev_cost(expr, {"object": OBJ})
    assert actual == cost
    assert actual <= EXTRACTOR_ENV.compile(expr).cost_estimate.max


def test_constant_set_membership_follows_cel_equality() -> None:
    assert ev("dyn(1u) in [1, 2]") is True
    assert ev("dyn(1.0) in [1, 2]") is True
    assert ev("dyn(1.5) in [1, 2]") is False
    assert ev("dyn(true) in [1, 2]") is False  # bool is never int
    assert ev("object.l in [1, 2]", OBJ) is False


def test_selector_result_type_is_checked_when_compiling() -> None:
    with pytest.raises(CELCompileError, match="must return bool or dyn, not string"):
        SELECTOR_ENV.compile("device.driver")
    with pytest.raises(CELCompileError, match="not optional_type"):
        SELECTOR_ENV.compile("device.attributes['d'].?x")
    assert SELECTOR_ENV.compile("device.attributes['d'].x").result_type == "dyn"
