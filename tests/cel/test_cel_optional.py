"""Optional types (cel-go's cel.OptionalTypes, in Kubernetes' environment since 1.28).

Values and errors are cel-go's (checked case by case against cel-go by the
differential suite, tests/oracle); costs are ours where cel-go's attribute
model differs (see docs/cel.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from cel_helpers import ev, ev_cost
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_affinity.cel import EXTRACTOR_ENV, SELECTOR_ENV, CELCompileError, CELEvalError, CelType
from dra_affinity.cel.optionals import OPT_NONE, CelOptional

OBJ: dict[str, Any] = {"a": 1, "s": "x", "m": {"k": 1}, "l": [1, 2], "n": None, "z": 0}


def some(v: object) -> CelOptional:
    return CelOptional(True, v)


VALUES: list[tuple[str, object]] = [
    ("object.?a", some(1)),
    ("object.?missing", OPT_NONE),
    ("object.?n", some(None)),  # present, holding null
    ("object.?m.?k", some(1)),
    ("object.?m.k", some(1)),  # selecting through an optional gives an optional
    ("object.m.?k", some(1)),
    ("object.?missing.k", OPT_NONE),
    ("object.?s.x", OPT_NONE),  # a field of a non-map value: absent
    ("object.?a.x", OPT_NONE),
    ("object.l[?1]", some(2)),
    ("object.l[?5]", OPT_NONE),
    ("object.l[?-1]", OPT_NONE),
    ("object.?l[0]", some(1)),
    ("object.?m[?'zz']", OPT_NONE),
    ("{'a': 1}.?a", some(1)),
    ("{1: 2}[?1]", some(2)),
    ("[1, 2][?5]", OPT_NONE),
    ("optional.of(1)", some(1)),
    ("optional.none()", OPT_NONE),
    ("optional.of(optional.none()).hasValue()", True),
    ("optional.ofNonZeroValue(0)", OPT_NONE),
    ("optional.ofNonZeroValue(0.0)", OPT_NONE),
    ("optional.ofNonZeroValue('')", OPT_NONE),
    ("optional.ofNonZeroValue([])", OPT_NONE),
    ("optional.ofNonZeroValue({})", OPT_NONE),
    ("optional.ofNonZeroValue(false)", OPT_NONE),
    ("optional.ofNonZeroValue(null)", OPT_NONE),
    ("optional.ofNonZeroValue(object.z)", OPT_NONE),
    ("optional.ofNonZeroValue(object.a)", some(1)),
    ("object.?a.value() + 1", 2),
    ("object.?a.hasValue()", True),
    ("object.?missing.hasValue()", False),
    ("object.?missing.orValue(5)", 5),
    ("object.?a.orValue(5)", 1),
    ("object.?a.orValue(1 / 0)", 1),  # the default is evaluated only when needed
    ("object.?missing.or(optional.of(2))", some(2)),
    ("object.?a.or(optional.of(2))", some(1)),
    ("object.?missing.or(object.?missing)", OPT_NONE),
    ("[?object.?missing]", []),
    ("[?object.?a, dyn(2)]", [1, 2]),
    ("[1, ?optional.none(), ?optional.of(3)]", [1, 3]),
    ("{?'a': object.?a}", {"a": 1}),
    ("{?'a': object.?missing, 'b': dyn(2)}", {"b": 2}),
    ("optional.of(1) == optional.of(1)", True),
    ("optional.of(1) != optional.none()", True),
    ("object.?missing == optional.none()", True),
    ("optional.of([1]) == optional.of([1])", True),
    ("type(optional.none()) == optional_type", True),
    ("type(object.?a)", CelType("optional_type")),
    ("object.?m.?k.orValue(0) + object.l[?0].orValue(0)", 2),
]


@pytest.mark.parametrize(("expr", "expected"), VALUES, ids=[v[0] for v in VALUES])
def test_optional_values(expr: str, expected: object) -> None:
    got = ev(expr, OBJ)
    if isinstance(expected, CelOptional):
        assert isinstance(got, CelOptional)
        assert got.present == expected.present
        assert got.value == expected.value
        assert type(got.value) is type(expected.value)
    else:
        assert got == expected
        assert type(got) is type(expected) or isinstance(got, type(expected))


RUNTIME_ERRORS: list[tuple[str, str]] = [
    ("optional.none().value()", "optional.none() dereference"),
    ("object.?missing.value()", "optional.none() dereference"),
    ("object.?missing.orValue(1 / 0)", "division by zero"),
    ("object.?l.?x", "unsupported index type 'string' in list"),  # as cel-go
    ("object.l[?'a']", "unsupported index type 'string' in list"),
    ("[?object.a]", "no such overload"),  # not an optional at run time
    ("{?'a': object.a}", "no such overload"),
    ("object.a.value()", "no such overload"),
]


def test_optional_index_of_a_value_without_entries_is_none() -> None:
    # cel-go's presence test answers "absent" for a value it cannot index
    assert ev("object.a[?0].hasValue()", OBJ) is False
    assert ev("dyn('abc')[?0].orValue('none')", OBJ) == "none"
    assert ev("dyn(1.5)[?'k'].hasValue()", OBJ) is False


@pytest.mark.parametrize(("expr", "message"), RUNTIME_ERRORS, ids=[e[0] for e in RUNTIME_ERRORS])
def test_optional_runtime_errors(expr: str, message: str) -> None:
    with pytest.raises(CELEvalError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ev(expr, OBJ)


COMPILE_ERRORS: list[tuple[str, str]] = [
    ("[?1]", "expected type 'optional_type(int)' but found 'int'"),
    ("{?'a': 1}", "expected type 'optional_type(int)' but found 'int'"),
    ("optional.of(1) == 1", "no matching overload for '_==_'"),
    ("object.?a.or(1)", "no matching overload for 'or'"),
    ("optional.of(1).orValue('a')", "no matching overload for 'orValue'"),
    ("[1][?0u]", "no matching overload for '_[?_]'"),
    ("[1][?1.0]", "no matching overload for '_[?_]'"),
    ("object.?a.size()", "no matching overload for 'size'"),
    ("string(optional.of(1))", "no matching overload for 'string'"),
    ("(1).?a", "does not support field selection"),
    ("[1, ?optional.of('a')]", "expected type 'int' but found 'string'"),
    ("optional.nope()", "undeclared reference"),
    ("object.?", "syntax error"),
    ("object[?]", "syntax error"),
]


@pytest.mark.parametrize(("expr", "message"), COMPILE_ERRORS, ids=[e[0] for e in COMPILE_ERRORS])
def test_optional_compile_errors(expr: str, message: str) -> None:
    with pytest.raises(CELCompileError) as info:
        EXTRACTOR_ENV.compile(expr)
    assert message in str(info.value)


def test_optional_static_types() -> None:
    assert EXTRACTOR_ENV.compile("optional.of(1)").result_type == "optional_type"
    assert str(EXTRACTOR_ENV.compile("optional.of(1)").static_type) == "optional_type(int)"
    assert str(EXTRACTOR_ENV.compile("optional.of(1).value()").static_type) == "int"
    assert str(EXTRACTOR_ENV.compile("{'a': 'b'}.?a").static_type) == "optional_type(string)"
    assert str(EXTRACTOR_ENV.compile("[1, ?optional.none()]").static_type) == "list(int)"
    assert str(EXTRACTOR_ENV.compile("object.?a.orValue(1)").static_type) == "dyn"


COSTS: list[tuple[str, int]] = [
    ("optional.of(1)", 1),
    ("optional.none().orValue(5)", 1),  # orValue/or themselves cost nothing (as cel-go)
    ("optional.of(1).or(optional.of(2))", 1),  # the argument is not evaluated
    ("optional.none().or(optional.of(2))", 2),
    ("object.?a", 2),  # object (1) + the optional selection (1)
    ("object.l[?1]", 3),
    ("[?object.?a]", 12),  # + a list built at run time (10)
]


@pytest.mark.parametrize(("expr", "cost"), COSTS, ids=[c[0] for c in COSTS])
def test_optional_costs_are_bounded_by_the_estimate(expr: str, cost: int) -> None:
    _, actual = ev_cost(expr, {"object": OBJ})
    assert actual == cost
    assert actual <= EXTRACTOR_ENV.compile(expr).cost_estimate.max


def test_optional_result_is_never_a_map_key() -> None:
    with pytest.raises(CELCompileError, match="unsupported map key type"):
        EXTRACTOR_ENV.compile("{optional.of(1): 1}")
    with pytest.raises(CELEvalError, match="unsupported map key type"):
        ev("{dyn(object.?a): 1}", OBJ)


# -- cel.bind: the device-selector environment has it (DRA adds ext.Bindings) --------------

DEVICE = {
    "driver": "gpu.example.com",
    "attributes": {"gpu.example.com": {"model": "a100", "cores": 108}},
    "capacity": {},
    "allowMultipleAllocations": False,
}


def sel(expr: str) -> tuple[object, int]:
    return SELECTOR_ENV.compile(expr).evaluate({"device": DEVICE}, 10**6)


def test_bind_in_selectors() -> None:
    expr = "cel.bind(a, device.attributes['gpu.example.com'], a.model == 'a100' && a.cores >= 100)"
    assert sel(expr)[0] is True
    # the bound value is evaluated once: 1 + 2 (device.attributes, index) then 2 reads
    # of `a` with their selections and comparisons
    assert sel("cel.bind(n, 2, n * n)".replace("n * n", "n * n == 4"))[0] is True
    assert sel("cel.bind(n, 2, cel.bind(n, n + 1, n) == 3)")[0] is True  # shadowing
    assert sel("cel.bind(n, 2, [1, 2].exists(n, n == 1)) && cel.bind(n, 2, n == 2)")[0] is True


def test_bind_cost_is_init_plus_body() -> None:
    _, cost = sel("cel.bind(d, device.driver, d == 'gpu.example.com' || d == 'x')")
    assert cost == 2 + (1 + 2)  # device.driver once, then one read and compare
    est = SELECTOR_ENV.compile("cel.bind(d, device.driver, d == 'gpu.example.com' || d == 'x')")
    assert cost <= est.cost_estimate.max


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("cel.bind(1, 2, true)", "argument must be a simple name"),
        ("cel.bind(x, 1)", "expects 3 arguments"),
        ("cel.bind(x, 1, y)", "undeclared reference to 'y'"),
        ("cel.bind(x, 'a', x) == 1", "no matching overload"),
    ],
)
def test_bind_compile_errors(expr: str, message: str) -> None:
    with pytest.raises(CELCompileError, match=message):
        SELECTOR_ENV.compile(expr)


def test_bind_is_not_in_the_extractor_environment() -> None:
    # as Kubernetes' base environment (ValidatingAdmissionPolicy) has no ext.Bindings
    with pytest.raises(CELCompileError, match=r"undeclared reference to 'cel\.bind'"):
        EXTRACTOR_ENV.compile("cel.bind(x, 1, x == 1)")


def test_bind_variable_does_not_leak() -> None:
    with pytest.raises(CELCompileError, match="undeclared reference to 'x'"):
        SELECTOR_ENV.compile("cel.bind(x, 1, x == 1) && x == 1")


# -- hostile input: only CEL errors escape, costs stay within the estimate -------------

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEAVES = st.sampled_from(["object", "object.a", "object.m", "object.l", "object.n", "1", "'x'", "[]", "{}",
                          "optional.none()", "optional.of(1)", "object.?a", "null", "[1, 2]", "x"])


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(["a", "k", "m", "l"])).map(lambda t: f"({t[0]}).?{t[1]}"),
        st.tuples(children, children).map(lambda t: f"({t[0]})[?{t[1]}]"),
        st.tuples(children, children).map(lambda t: f"[?{t[0]}, {t[1]}]"),
        st.tuples(children, children).map(lambda t: "{?" + f"'k': {t[0]}, 'j': {t[1]}" + "}"),
        st.tuples(children, st.sampled_from(["value()", "hasValue()"])).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(children, st.sampled_from(["orValue", "or"]), children).map(
            lambda t: f"({t[0]}).{t[1]}({t[2]})"
        ),
        st.tuples(st.sampled_from(["optional.of", "optional.ofNonZeroValue", "dyn"]), children).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
        st.tuples(children, children).map(lambda t: f"({t[0]}) == ({t[1]})"),
        st.tuples(children, children).map(lambda t: f"({t[0]}).map(x, {t[1]})"),
    )


@FUZZ
@given(st.recursive(LEAVES, _extend, max_leaves=10), st.sampled_from([OBJ, {}, {"a": [1]}, {"m": "s"}]))
def test_optional_expressions_only_raise_cel_errors(expr: str, obj: object) -> None:
    try:
        prog = EXTRACTOR_ENV.compile(expr)
    except CELCompileError:
        return
    try:
        _, cost = prog.evaluate({"object": obj}, 100_000)
    except CELEvalError:
        return
    assert cost <= prog.cost_estimate.max, expr


def test_nested_binds_are_bounded_by_the_nesting_limit() -> None:
    expr = "true"
    for i in range(120):
        expr = f"cel.bind(v{i}, {i}, {expr})"
    with pytest.raises(CELCompileError, match="nesting too deep"):
        SELECTOR_ENV.compile(expr)
    shallow = "true"
    for i in range(20):
        shallow = f"cel.bind(v{i}, {i}, {shallow})"
    assert sel(shallow)[0] is True
