"""Property tests: nothing but CELCompileError / CELEvalError ever escapes."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    CELCompileError,
    CELEvalError,
    ConfigObject,
    Extractor,
    OutcomeKind,
    extract,
)

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.sampled_from(["a", "b", "kind", "apiVersion", "subnetID", "l", "s", "n"]), inner, max_size=5),
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.sampled_from(["a", "b", "kind", "apiVersion", "subnetID", "l", "s", "n"]), json_values, max_size=6)


def _run(expr: str, obj: object) -> None:
    try:
        prog = EXTRACTOR_ENV.compile(expr)
    except CELCompileError as e:
        assert isinstance(str(e), str)
        return
    try:
        _, cost = prog.evaluate({"object": obj}, 200_000)
    except CELEvalError as e:
        assert e.reason in {
            "runtime", "missing_field", "no_such_overload", "overflow", "division_by_zero", "invalid_argument",
            "cost_exceeded",
        }
        return
    assert cost <= prog.cost_estimate.max, (expr, obj)


@FUZZ
@given(st.text(max_size=60), json_objects)
def test_arbitrary_text(text: str, obj: object) -> None:
    _run(text, obj)


CEL_ALPHABET = st.sampled_from([*list("()[]{}.,:?!<>=+-*/%&|'\"\\ 0123456789abcxyz_uUeE"), "object", "has(", "true", "null", "in"])


@FUZZ
@given(st.lists(CEL_ALPHABET, max_size=30).map("".join), json_objects)
def test_token_soup(text: str, obj: object) -> None:
    _run(text, obj)


# -- generated expression trees -----------------------------------------------------

LEAVES = st.one_of(
    st.sampled_from(
        ["object", "object.a", "object.kind", "object.l", "object.s", "object['n']", "1", "0", "-1", "2u", "1.5",
         "'x'", "''", "'a,b'", "true", "false", "null", "[]", "[1, 2]", "['a']", "{}", "{'a': 1}", "b'z'",
         "9223372036854775807", "x", "y"]
    ),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str),
    st.text(alphabet="abc.*+?[]()^$\\", max_size=6).map(lambda s: "'" + s.replace("\\", "\\\\").replace("'", "") + "'"),
)
BINARY = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in"]
METHODS0 = ["size", "lowerAscii", "upperAscii", "trim", "isSorted", "sum", "min", "max", "join", "asInteger",
            "sign", "major"]
METHODS1 = ["contains", "startsWith", "endsWith", "matches", "charAt", "indexOf", "lastIndexOf", "split",
            "substring", "join", "find", "findAll", "isLessThan", "compareTo", "add"]
GLOBALS1 = ["size", "int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "quantity", "isQuantity",
            "semver", "isSemver"]
MACROS = ["all", "exists", "exists_one", "map", "filter"]


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(BINARY), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["!", "-"]), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        st.tuples(children, st.sampled_from(["a", "kind", "l", "s", "n"])).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(children, children).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(children, st.sampled_from(METHODS0)).map(lambda t: f"({t[0]}).{t[1]}()"),
        st.tuples(children, st.sampled_from(METHODS1), children).map(lambda t: f"({t[0]}).{t[1]}({t[2]})"),
        st.tuples(st.sampled_from(GLOBALS1), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(children, st.sampled_from(MACROS), st.sampled_from(["x", "y"]), children).map(
            lambda t: f"({t[0]}).{t[1]}({t[2]}, {t[3]})"
        ),
        st.tuples(children, st.sampled_from(["a", "kind"])).map(lambda t: f"has(({t[0]}).{t[1]})"),
        st.lists(children, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(children, children).map(lambda t: "{" + f"{t[0]}: {t[1]}" + "}"),
    )


expressions = st.recursive(LEAVES, _extend, max_leaves=12)


@FUZZ
@given(expressions, json_objects)
def test_generated_expressions(expr: str, obj: object) -> None:
    _run(expr, obj)


# -- the standard extractor idiom over arbitrary JSON ----------------------------------

IDIOM = [
    Extractor("subnet", 'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig" ? object.subnetID : ""'),
    Extractor("pkey", "has(object.ibPKey) ? object.ibPKey : ''"),
]


@FUZZ
@given(st.lists(json_values, max_size=4))
def test_extractor_idiom_over_arbitrary_json(params: list[Any]) -> None:
    configs = [ConfigObject(f"config[{i}]", p) for i, p in enumerate(params)]
    r = extract(IDIOM, configs)
    assert isinstance(r.kind, OutcomeKind)
    if r.kind is OutcomeKind.OK:
        assert {k for k, _ in r.keys} == {"subnet", "pkey"}
        assert all(isinstance(v, str) and v for _, v in r.keys)
    assert isinstance(r.message, str) and r.message


@FUZZ
@given(json_objects)
def test_extractor_idiom_over_nic_like_objects(obj: dict[str, Any]) -> None:
    obj = {**obj, "apiVersion": "networking.example.com/v1", "kind": "NICConfig"}
    r = extract(IDIOM[:1], [ConfigObject("c", obj)])
    if "subnetID" not in obj:
        assert r.kind is OutcomeKind.MISSING_FIELD
    elif isinstance(obj["subnetID"], str):
        assert r.kind is (OutcomeKind.OK if obj["subnetID"] else OutcomeKind.NO_KEYS)
    else:
        assert r.kind is OutcomeKind.NON_STRING
