"""Table-driven evaluation tests: operators, functions, macros, errors."""

from __future__ import annotations

import math
import re

import pytest
from cel_helpers import ev

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    SELECTOR_ENV,
    CELCompileError,
    CELEvalError,
    CelType,
    Quantity,
    Semver,
    UInt,
)

OBJ = {
    "apiVersion": "networking.example.com/v1",
    "kind": "NICConfig",
    "subnetID": "subnet-A",
    "mtu": 9000,
    "ratio": 0.5,
    "enabled": True,
    "nothing": None,
    "tags": ["a", "b", "c"],
    "nums": [3, 1, 2],
    "nested": {"inner": {"leaf": "x"}},
    "empty": {},
}

# (expression, expected value). Values compare with ==, and the Python type must
# match too (so True is never accepted for 1, nor 1.0 for 1).
VALUES: list[tuple[str, object]] = [
    # literals
    ("1", 1),
    ("-9223372036854775808", -(2**63)),
    ("9223372036854775807", 2**63 - 1),
    ("0x1F", 31),
    ("-0x10", -16),
    ("1u", UInt(1)),
    ("18446744073709551615u", UInt(2**64 - 1)),
    ("1.5", 1.5),
    ("1e3", 1000.0),
    (".5", 0.5),
    ("true", True),
    ("null", None),
    ("'a'", "a"),
    ('"a\\"b"', 'a"b'),
    ("'\\n\\t\\\\'", "\n\t\\"),
    ("'\\u00e9\\x41\\101\\U0001F600'", "\u00e9AA\U0001f600"),
    ("r'\\n'", "\\n"),
    ("'''a\nb'''", "a\nb"),
    ("b'abc'", b"abc"),
    ("b'\\xff\\001'", b"\xff\x01"),
    ("b'é'", "é".encode()),
    ("[dyn(1), dyn('a')]", [1, "a"]),  # mixed element types need dyn (homogeneous literals)
    ("{dyn('a'): dyn(1), dyn(2): dyn('b')}", {"a": 1, 2: "b"}),
    ("{'a': 1, 'a': 2}", {"a": 2}),  # a repeated key takes the last value (cel-go)
    ("[1].map(x, {x: 1, 1: 2})", [{1: 2}]),  # also in a literal built at run time
    ("{dyn(1): 'a', dyn(1u): 'b'}", {1: "b"}),  # 1 and 1u are one key
    ("has(object.mtu.x)", False),  # a field test on a non-map answers false (cel-go)
    ("--5", 5),
    ("- 9223372036854775808", -9223372036854775808),
    ("[1, 2,]", [1, 2]),  # trailing commas, as cel-go's grammar
    ("{'a': 1,}", {"a": 1}),
    # arithmetic
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("7 / 2", 3),
    ("-7 / 2", -3),
    ("7 % 3", 1),
    ("-7 % 3", -1),
    ("7 % -3", 1),
    ("1 - 2", -1),
    ("--1", 1),
    ("-(-9223372036854775807)", 2**63 - 1),
    ("3u / 2u", UInt(1)),
    ("3u % 2u", UInt(1)),
    ("2u * 3u - 1u", UInt(5)),
    ("1.5 + 1.5", 3.0),
    ("1.0 / 0.0", math.inf),
    ("-1.0 / 0.0", -math.inf),
    ("0.5 * 4.0 - 1.0", 1.0),
    ("-1.5", -1.5),
    ("'ab' + 'cd'", "abcd"),
    ("b'a' + b'b'", b"ab"),
    ("[1] + [2, 3]", [1, 2, 3]),
    # comparison and equality
    ("1 < 2", True),
    ("2 <= 2", True),
    ("'a' < 'b'", True),
    ("'b' >= 'a'", True),
    ("b'a' < b'b'", True),
    ("false < true", True),
    ("1u < 2u", True),
    ("1 < 1.5", True),
    ("2u > 1", True),
    ("1 == 1", True),
    ("dyn(1) == 1.0", True),  # static int == double is a compile error (cel-go)
    ("dyn(1u) == 1", True),
    ("1 != 2", True),
    ("'a' == 'a'", True),
    ("[1, 2] == [1, 2]", True),
    ("[1, 2] == [2, 1]", False),
    ("{'a': 1} == {'a': dyn(1.0)}", True),
    ("{'a': 1} == {'b': 1}", False),
    ("null == null", True),
    ("dyn(1) == true", False),
    ("dyn('1') == 1", False),
    ("dyn(null) == 0", False),
    ("[[1, 2], [3]] == [[1, 2], [3]]", True),
    ("0.0 / 0.0 == 0.0 / 0.0", False),
    ("type(1) == int", True),
    ("type('a') == string", True),
    ("type(1u) == uint", True),
    ("type([]) == list", True),
    ("type({}) == map", True),
    ("type(null) == null_type", True),
    ("type(int) == type", True),
    ("type(true) == bool", True),
    ("type(1.0) == double", True),
    ("type(b'') == bytes", True),
    # in
    ("2 in [1, 2, 3]", True),
    ("'x' in ['a']", False),
    ("'a' in {'a': 1}", True),
    ("dyn(1.0) in [1]", True),
    ("[1] in [[1], [2]]", True),
    # logic
    ("true && false", False),
    ("true || false", True),
    ("!true", False),
    ("!!true", True),
    ("true ? 'y' : 'n'", "y"),
    ("false ? 1 : 2", 2),
    ("1 < 2 && 2 < 3 || false", True),
    # error absorption (commutative, as in CEL)
    ("false && (1 / 0 == 1)", False),
    ("(1 / 0 == 1) && false", False),
    ("true || (1 / 0 == 1)", True),
    ("(1 / 0 == 1) || true", True),
    ("object.missing == 'x' || true", True),
    ("false && object.missing", False),
    # selection and has()
    ("object.kind", "NICConfig"),
    ("object['kind']", "NICConfig"),
    ("object.nested.inner.leaf", "x"),
    ("object.tags[1]", "b"),
    ("object.tags[1u]", "b"),
    ("object.nothing", None),
    ("has(object.kind)", True),
    ("has(object.absent)", False),
    ("has(object.nested.inner)", True),
    ("has(object.nested.nope)", False),
    ("has(object.empty.x)", False),
    ("{'a': {'b': 1}}.a.b", 1),
    ("[10, 20][1]", 20),
    ("{1: 'one'}[1]", "one"),
    ("{1: 'one'}[dyn(1u)]", "one"),
    ("{1: 'one'}[dyn(1.0)]", "one"),
    # size and string functions
    ("size('héllo')", 5),
    ("'héllo'.size()", 5),
    ("size(b'ab')", 2),
    ("size([1, 2])", 2),
    ("size({'a': 1})", 1),
    ("object.tags.size()", 3),
    ("'abc'.contains('b')", True),
    ("'abc'.startsWith('ab')", True),
    ("'abc'.endsWith('bc')", True),
    ("'abc'.matches('^a.c$')", True),
    ("'abc'.matches('b')", True),
    ("matches('abc', 'z')", False),
    ("'héllo'.matches('^h.llo$')", True),
    # conversions
    ("int('42')", 42),
    ("int('-42')", -42),
    ("int(3.9)", 3),
    ("int(-3.9)", -3),
    ("int(5u)", 5),
    ("uint(5)", UInt(5)),
    ("uint('7')", UInt(7)),
    ("uint(2.5)", UInt(2)),
    ("double(1)", 1.0),
    ("double('1.5')", 1.5),
    ("double('1e3')", 1000.0),
    ("double(2u)", 2.0),
    ("string(1)", "1"),
    ("string(-1)", "-1"),
    ("string(1u)", "1"),
    ("string(1.5)", "1.5"),
    ("string(100.0)", "100"),
    ("string(1e6)", "1e+06"),
    ("string(123456.0)", "123456"),
    ("string(1234567.0)", "1.234567e+06"),
    ("string(0.0001)", "0.0001"),
    ("string(0.00001)", "1e-05"),
    ("string(true)", "true"),
    ("string(b'abc')", "abc"),
    ("string('s')", "s"),
    ("bytes('é')", b"\xc3\xa9"),
    ("bool('true')", True),
    ("bool('0')", False),
    ("bool('F')", False),
    ("dyn(5)", 5),
    # strings extension
    ("'abc'.charAt(1)", "b"),
    ("'abc'.charAt(3)", ""),
    ("'hello'.indexOf('l')", 2),
    ("'hello'.indexOf('l', 3)", 3),
    ("'hello'.indexOf('')", 0),
    ("'hello'.indexOf('z')", -1),
    ("'hello'.lastIndexOf('l')", 3),
    ("'hello'.lastIndexOf('l', 2)", 2),
    ("'hello'.lastIndexOf('')", 5),
    ("'ÀbC'.lowerAscii()", "Àbc"),
    ("'aBc'.upperAscii()", "ABC"),
    ("'a-b-c'.replace('-', '+')", "a+b+c"),
    ("'a-b-c'.replace('-', '+', 1)", "a+b-c"),
    ("'abc'.replace('', '-')", "-a-b-c-"),
    ("'a,b,c'.split(',')", ["a", "b", "c"]),
    ("'a,b,c'.split(',', 2)", ["a", "b,c"]),
    ("'a,b,c'.split(',', 0)", []),
    ("'abc'.split('')", ["a", "b", "c"]),
    ("''.split(',')", [""]),
    ("'hello'.substring(1)", "ello"),
    ("'hello'.substring(1, 3)", "el"),
    ("'  \\t x y \\n'.trim()", "x y"),
    ("['a', 'b'].join()", "ab"),
    ("['a', 'b'].join('/')", "a/b"),
    ("[].join('/')", ""),
    # Kubernetes regex library
    ("'abc123'.find('[0-9]+')", "123"),
    ("'abc'.find('[0-9]+')", ""),
    ("'a1b22c333'.findAll('[0-9]+')", ["1", "22", "333"]),
    ("'a1b22c333'.findAll('[0-9]+', 2)", ["1", "22"]),
    ("'baaac'.findAll('a*')", ["", "aaa", ""]),
    # Kubernetes lists library
    ("[1, 2, 3].isSorted()", True),
    ("[1, 3, 2].isSorted()", False),
    ("['a', 'b'].isSorted()", True),
    ("[].isSorted()", True),
    ("[1, 2, 3].sum()", 6),
    ("[1.5, 2.5].sum()", 4.0),
    ("[].sum()", 0),
    ("[3, 1, 2].min()", 1),
    ("[3, 1, 2].max()", 3),
    ("['b', 'a'].min()", "a"),
    ("[1, 2, 1].indexOf(1)", 0),
    ("[1, 2, 1].lastIndexOf(1)", 2),
    ("[1, 2].indexOf(9)", -1),
    ("object.nums.max()", 3),
    # Kubernetes quantity library
    ("quantity('1Gi').compareTo(quantity('1024Mi'))", 0),
    ("quantity('50M').compareTo(quantity('50Mi'))", -1),
    ("quantity('200M').compareTo(quantity('0.2G'))", 0),
    ("quantity('150Mi').isGreaterThan(quantity('100Mi'))", True),
    ("quantity('50M').isLessThan(quantity('100M'))", True),
    ("quantity('50k').add(quantity('20k')) == quantity('70k')", True),
    ("quantity('50k').add(20) == quantity('50020')", True),
    ("quantity('50k').sub(20000) == quantity('30k')", True),
    ("quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')", True),
    ("quantity('50k').asInteger()", 50000),
    ("quantity('50k').isInteger()", True),
    ("quantity('500m').isInteger()", False),
    ("quantity('9999999999999999999999999999999999999G').isInteger()", False),
    ("quantity('50k').sub(20000).asApproximateFloat()", 30000.0),
    ("quantity('-5').sign()", -1),
    ("sign(quantity('0'))", 0),
    ("isQuantity('1.3Gi')", True),
    ("isQuantity('1,3G')", False),
    ("isQuantity('200K')", False),
    ("string(1) + quantity('1k').asInteger().string()" if False else "quantity('1k').asInteger() == 1000", True),
    # Kubernetes semver library
    ("semver('1.2.3').isLessThan(semver('1.10.0'))", True),
    ("semver('1.2.3').isGreaterThan(semver('1.2.3-rc.1'))", True),
    ("semver('1.2.3').compareTo(semver('1.2.3'))", 0),
    ("semver('1.2.3').compareTo(semver('2.0.0'))", -1),
    ("semver('1.2.3').major()", 1),
    ("semver('1.2.3').minor()", 2),
    ("semver('1.2.3').patch()", 3),
    ("semver('v1.0', true) == semver('1.0.0')", True),
    ("semver('1.2.3+build') == semver('1.2.3')", True),
    ("isSemver('1.0.0')", True),
    ("isSemver('v1.0')", False),
    ("isSemver('v1.0', true)", True),
    ("isSemver('01.0.0')", False),
    # macros
    ("[1, 2, 3].all(x, x > 0)", True),
    ("[1, 2, 3].all(x, x > 1)", False),
    ("[].all(x, false)", True),
    ("[1, 2, 3].exists(x, x == 2)", True),
    ("[].exists(x, true)", False),
    ("[1, 2, 3].exists_one(x, x > 2)", True),
    ("[1, 2, 3].exists_one(x, x > 1)", False),
    ("[1, 2, 3].map(x, x * 2)", [2, 4, 6]),
    ("[1, 2, 3].map(x, x > 1, x * 10)", [20, 30]),
    ("[1, 2, 3].filter(x, x != 2)", [1, 3]),
    ("{'a': 1, 'b': 2}.map(k, k)", ["a", "b"]),
    ("{'a': 1, 'b': 2}.all(k, k.size() == 1)", True),
    ("object.tags.exists(t, t == 'c')", True),
    ("object.tags.map(t, t + '!')", ["a!", "b!", "c!"]),
    ("[[1, 2], [3]].map(l, l.size())", [2, 1]),
    ("[1, 2].all(x, [3, 4].all(y, x < y))", True),
    ("[1, 2].map(x, [x].map(x, x + 1))", [[2], [3]]),
    # error absorption inside quantifiers, as in cel-go
    ("[0, 1].exists(x, 1 / x == 1)", True),
    ("[1, 0].all(x, 1 / x == 2)", False),
    # the KEP extractor idioms
    ("object.apiVersion == 'networking.example.com/v1' && object.kind == 'NICConfig' ? object.subnetID : ''", "subnet-A"),
    ("has(object.subnet) ? object.subnet : ''", ""),
]


@pytest.mark.parametrize(("expr", "expected"), VALUES, ids=[v[0][:60] for v in VALUES])
def test_value(expr: str, expected: object) -> None:
    got = ev(expr, OBJ)
    assert got == expected
    if isinstance(expected, dict):
        assert isinstance(got, dict)
    elif isinstance(expected, list):
        assert isinstance(got, list)  # constant literals are read-only list subclasses
    else:
        assert type(got) is type(expected)


# (expression, reason of the CELEvalError)
ERRORS: list[tuple[str, str]] = [
    ("1 / 0", "division_by_zero"),
    ("1 % 0", "division_by_zero"),
    ("1u / 0u", "division_by_zero"),
    ("9223372036854775807 + 1", "overflow"),
    ("-9223372036854775808 - 1", "overflow"),
    ("9223372036854775807 * 2", "overflow"),
    ("-9223372036854775808 / -1", "overflow"),
    ("-9223372036854775808 % -1", "overflow"),
    ("-(-9223372036854775807 - 1)", "overflow"),
    ("0u - 1u", "overflow"),
    ("18446744073709551615u + 1u", "overflow"),
    ("int(9.3e18)", "overflow"),
    ("int(18446744073709551615u)", "overflow"),
    ("uint(-1)", "overflow"),
    ("int('9223372036854775808')", "invalid_argument"),
    ("int('x')", "invalid_argument"),
    ("int(' 1')", "invalid_argument"),
    ("double('1_0')", "invalid_argument"),
    ("bool('yes')", "invalid_argument"),
    ("string(b'\\xff')", "invalid_argument"),
    ("object.absent", "missing_field"),
    ("object.nested.absent.leaf", "missing_field"),
    ("object['absent']", "missing_field"),
    ("{'a': 1}.b", "missing_field"),
    ("{'a': 1}['b']", "missing_field"),
    ("has(object.absent.x)", "missing_field"),
    ("object.mtu.x", "no_such_overload"),
    ("object.nothing.x", "no_such_overload"),
    ("object.tags[3]", "invalid_argument"),
    ("object.tags[-1]", "invalid_argument"),
    ("object.tags['a']", "no_such_overload"),
    ("object.mtu + 'a'", "no_such_overload"),
    ("object.kind < 1", "no_such_overload"),
    ("object.mtu && true", "no_such_overload"),
    ("!object.mtu", "no_such_overload"),
    ("-object.kind", "no_such_overload"),
    ("object.mtu ? 1 : 2", "no_such_overload"),
    ("object.mtu.size()", "no_such_overload"),
    ("object.kind.all(x, true)", "no_such_overload"),
    ("object.tags.all(x, x)", "no_such_overload"),
    ("1 in object.mtu", "no_such_overload"),
    ("(1 / 0 == 1) && true", "division_by_zero"),
    ("true && (1 / 0 == 1)", "division_by_zero"),
    ("[1, 0].all(x, 1 / x == 1)", "division_by_zero"),
    ("[1, 0].exists_one(x, 1 / x == 1)", "division_by_zero"),
    ("[0].map(x, 1 / x)", "division_by_zero"),
    ("'abc'.charAt(4)", "invalid_argument"),
    ("'abc'.substring(2, 1)", "invalid_argument"),
    ("'abc'.substring(4)", "invalid_argument"),
    ("'abc'.indexOf('a', -1)", "invalid_argument"),
    ("[].min()", "invalid_argument"),
    ("[dyn(1), dyn('a')].max()", "no_such_overload"),
    ("[dyn(1), dyn('a')].sum()", "no_such_overload"),
    ("[9223372036854775807, 1].sum()", "overflow"),
    ("[dyn('a'), dyn(1)].join()", "no_such_overload"),
    ("quantity('200K')", "invalid_argument"),
    ("quantity('500m').asInteger()", "overflow"),
    ("semver('v1.0.0')", "invalid_argument"),
    ("'a'.matches(object.kind + '(')", "invalid_argument"),
    ("object.tags.map(x, x, x)", "no_such_overload"),
]


@pytest.mark.parametrize(("expr", "reason"), ERRORS, ids=[e[0][:60] for e in ERRORS])
def test_error(expr: str, reason: str) -> None:
    if _CONSTANT_CONVERSION.fullmatch(expr):
        expr = _constant_conversion_fails_at_compile_time(expr)
    with pytest.raises(CELEvalError) as info:
        ev(expr, OBJ)
    assert info.value.reason == reason, str(info.value)
    assert "\n" not in str(info.value)


def test_missing_field_message_names_key() -> None:
    with pytest.raises(CELEvalError, match="no such key: subnet"):
        ev("object.subnet", OBJ)


def test_bool_is_never_int() -> None:
    assert ev("dyn(true) == 1") is False
    assert ev("[dyn(true)].exists(x, x == 1)") is False
    assert ev("1 in [dyn(true)]") is False
    assert ev("{true: 'a'}[true]") == "a"
    with pytest.raises(CELEvalError):
        ev("{1: 'a'}[dyn(true)]")
    assert ev("type(true) == int") is False
    value = ev("object.enabled", OBJ)
    assert value is True


_CONSTANT_CONVERSION = re.compile(r"(int|uint|double|string|bytes|bool)\((.*)\)")


def _constant_conversion_fails_at_compile_time(expr: str) -> str:
    """A conversion of a constant is evaluated when the program is built (cel-go's
    OptOptimize): its error is a compile error. Returns the same conversion applied to
    a comprehension variable, which only fails when evaluated."""
    m = _CONSTANT_CONVERSION.fullmatch(expr)
    assert m is not None, expr
    with pytest.raises(CELCompileError, match=r"^program instantiation failed: "):
        EXTRACTOR_ENV.compile(expr)
    return f"[{m[2]}].map(v, {m[1]}(v))[0]"


def test_results_are_plain_python() -> None:
    assert type(ev("'a' + 'b'")) is str
    assert type(ev("[1].map(x, string(x))")) is list
    assert ev("{'k': [dyn(1), dyn('v')]}") == {"k": [1, "v"]}
    assert ev("type(1)") == CelType("int")


def test_input_is_not_mutated() -> None:
    obj = {"l": [1, 2], "m": {"a": 1}}
    ev("object.l + [3]", obj)
    ev("object.l.map(x, x).size() + object.m.map(k, k).size()", obj)
    assert obj == {"l": [1, 2], "m": {"a": 1}}


def test_iteration_variable_is_scoped() -> None:
    assert ev("[1, 2].map(object, object * 2) == [2, 4] && object.kind == 'NICConfig'", OBJ) is True
    assert ev("[1].all(x, [2].all(x, x == 2)) && [3].exists(x, x == 3)") is True


def test_json_like_values_and_tuples() -> None:
    assert ev("object.l[0] + object.l.size()", {"l": (5, 6)}) == 7
    assert ev("object.f == 1", {"f": 1.0}) is True
    assert ev("type(object.f) == double", {"f": 1.0}) is True
    assert ev("type(object.i) == int", {"i": 1}) is True


def test_catastrophic_regex_is_linear() -> None:
    text = "a" * 50_000 + "!"
    assert ev("object.s.matches('(a+)+$')", {"s": text}) is False
    assert ev("object.s.matches('^(a|aa)+$')", {"s": text}) is False
    assert ev("object.s.find('(a*)*b')", {"s": text}) == ""
    # Linear time comes from RE2 (no backtracking); the engine never falls back to re.
    import re2

    from dra_affinity.cel.library import regex_program as compile_regex

    assert type(compile_regex("(a+)+$")[0]) is type(re2.compile("a"))


def test_re2_syntax_only() -> None:
    # backreferences and lookaround are not RE2: an error, never a fallback
    with pytest.raises(CELEvalError, match="invalid regular expression"):
        ev("object.s.matches(object.p)", {"s": "aa", "p": "(a)\\1"})


# -- the selector environment -------------------------------------------------

DEVICE = {
    "driver": "gpu.example.com",
    "attributes": {
        "gpu.example.com": {"model": "a100", "cores": 108, "sharing": True, "driverVersion": Semver.parse("1.2.3")},
    },
    "capacity": {"gpu.example.com": {"memory": Quantity.parse("40Gi")}},
    "allowMultipleAllocations": True,
}

SELECTORS: list[tuple[str, object]] = [
    ("device.driver == 'gpu.example.com'", True),
    ("device.attributes['gpu.example.com'].model == 'a100'", True),
    ("device.attributes['gpu.example.com'].cores > 100", True),
    ("device.attributes['gpu.example.com'].sharing", True),
    ("device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.0'))", True),
    ("device.capacity['gpu.example.com'].memory.compareTo(quantity('32Gi')) >= 0", True),
    ("device.capacity['gpu.example.com'].memory == quantity('40960Mi')", True),
    ("device.allowMultipleAllocations", True),
    ("has(device.attributes['gpu.example.com'].model)", True),
    ("'other.example.com' in device.attributes", False),
]


@pytest.mark.parametrize(("expr", "expected"), SELECTORS)
def test_selector(expr: str, expected: object) -> None:
    value, _ = SELECTOR_ENV.compile(expr).evaluate({"device": DEVICE}, 10**6)
    assert value == expected


def test_selector_env_accepts_foreign_exact_quantities() -> None:
    from fractions import Fraction

    class OtherQuantity:
        def __init__(self, value: Fraction) -> None:
            self.value = value
            self.format = "BinarySI"

    dev = {**DEVICE, "capacity": {"gpu.example.com": {"memory": OtherQuantity(Fraction(40 * 2**30))}}}
    prog = SELECTOR_ENV.compile("device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('1Gi'))")
    assert prog.evaluate({"device": dev}, 1000)[0] is True
    prog = SELECTOR_ENV.compile("device.capacity['gpu.example.com'].memory == quantity('40Gi')")
    assert prog.evaluate({"device": dev}, 1000)[0] is True


def test_selector_missing_attribute_is_missing_field() -> None:
    prog = SELECTOR_ENV.compile("device.attributes['gpu.example.com'].absent == 'x'")
    with pytest.raises(CELEvalError) as info:
        prog.evaluate({"device": DEVICE}, 1000)
    assert info.value.reason == "missing_field"


def test_unbound_variable_is_an_eval_error() -> None:
    prog = EXTRACTOR_ENV.compile("object.a")
    with pytest.raises(CELEvalError, match="not bound"):
        prog.evaluate({}, 100)


def test_constant_literals_are_shared_and_read_only() -> None:
    prog = EXTRACTOR_ENV.compile("[dyn(1), dyn([2, 3]), dyn({'a': 1})]")
    first, cost = prog.evaluate({}, 100)
    assert first == [1, [2, 3], {"a": 1}]
    assert cost == 0  # built once when compiling, free at run time as in cel-go
    with pytest.raises(TypeError):
        first.append(4)  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        first[2]["b"] = 2  # type: ignore[index]
    assert prog.evaluate({}, 100)[0] == [1, [2, 3], {"a": 1}]


def test_map_literal_keys_follow_cel_equality() -> None:
    assert ev("{1: 'a'}[dyn(1u)]") == "a"
    assert ev("{1u: 'a'}[dyn(1)]") == "a"
    assert ev("{1: 'a'}[dyn(1.0)]") == "a"
    assert ev("{true: 'a'}[true]") == "a"
    assert ev("dyn(1u) in {1: 2}") is True
    assert ev("{1: 2} == {dyn(1u): 2}") is True
    with pytest.raises(CELEvalError, match="collide"):
        ev("{dyn(1): 'a', dyn(true): 'b'}")


# -- numeric conversions error as cel-go's (strconv.ParseInt/ParseUint/ParseFloat) --------

CONVERSIONS_OK = [
    ('int("+5")', 5),
    ('int("-0")', 0),
    ('int("007")', 7),
    ('int("-9223372036854775808")', -(2**63)),
    ('int("9223372036854775807")', 2**63 - 1),
    ('uint("18446744073709551615")', UInt(2**64 - 1)),
    ('double("1e-400")', 0.0),  # underflow is not an error in Go
    ('double("0x1p-2")', 0.25),  # Go accepts hexadecimal floats
    ('double("-0X1.8P1")', -3.0),
    ('double("Infinity")', math.inf),
    ('double("-INF")', -math.inf),
    ('double(".5")', 0.5),
    ('double("5.")', 5.0),
    ('double("1.7976931348623157e308")', 1.7976931348623157e308),
    ("int(-9223372036854774784.0)", -(2**63) + 1024),
    ("uint(-0.0)", UInt(0)),
]


@pytest.mark.parametrize(("expr", "want"), CONVERSIONS_OK, ids=[c[0] for c in CONVERSIONS_OK])
def test_numeric_conversion_ok(expr: str, want: object) -> None:
    got = ev(expr)
    assert got == want and type(got) is type(want)


CONVERSION_ERRORS = [
    # strings: syntax and range are one conversion error, as in cel-go
    ('int("9223372036854775808")', "invalid_argument"),
    ('int("-9223372036854775809")', "invalid_argument"),
    ('int(" 5")', "invalid_argument"),
    ('int("5.0")', "invalid_argument"),
    ('int("1_000")', "invalid_argument"),
    ('uint("+5")', "invalid_argument"),  # ParseUint takes no sign
    ('uint("-0")', "invalid_argument"),
    ('uint("18446744073709551616")', "invalid_argument"),
    ('double("1e400")', "invalid_argument"),  # beyond the largest double: not +Inf
    ('double("-1e400")', "invalid_argument"),
    ('double("1.7976931348623159e308")', "invalid_argument"),
    ('double("0x1p5000")', "invalid_argument"),
    ('double("+nan")', "invalid_argument"),  # Go's nan takes no sign
    ('double("1_0")', "invalid_argument"),
    ('double("0x1")', "invalid_argument"),  # a hex float needs its p exponent
    ('double("")', "invalid_argument"),
    # doubles and uints out of range
    ("int(9223372036854775807.0)", "overflow"),  # 2**63 after rounding
    ("int(-9223372036854775808.0)", "overflow"),  # cel-go refuses the boundary too
    ('int(double("nan"))', "overflow"),
    ('int(double("inf"))', "overflow"),
    ("uint(-1.0)", "overflow"),
    ("uint(-0.5)", "overflow"),
    ("uint(18446744073709551616.0)", "overflow"),
    ('uint(double("nan"))', "overflow"),
    ("uint(-1)", "overflow"),
    ("int(18446744073709551615u)", "overflow"),
    # arithmetic
    ("9223372036854775807 + 1", "overflow"),
    ("-9223372036854775807 - 2", "overflow"),
    ("4611686018427387904 * 2", "overflow"),
    ("-(-9223372036854775807 - 1)", "overflow"),
    ("(-9223372036854775807 - 1) / -1", "overflow"),
    ("(-9223372036854775807 - 1) % -1", "overflow"),
    ("18446744073709551615u + 1u", "overflow"),
    ("0u - 1u", "overflow"),
    ("1 / 0", "division_by_zero"),
    ("1 % 0", "division_by_zero"),
    ("1u / 0u", "division_by_zero"),
]


@pytest.mark.parametrize(("expr", "reason"), CONVERSION_ERRORS, ids=[c[0] for c in CONVERSION_ERRORS])
def test_numeric_conversion_errors(expr: str, reason: str) -> None:
    if _CONSTANT_CONVERSION.fullmatch(expr):
        expr = _constant_conversion_fails_at_compile_time(expr)
    with pytest.raises(CELEvalError) as info:
        ev(expr)
    assert info.value.reason == reason


def test_double_of_a_9000_digit_string_is_an_error_not_infinity() -> None:
    with pytest.raises(CELEvalError, match="type conversion error from 'string' to 'double'"):
        ev("double(object.s)", {"s": "9" * 9000})
    assert ev("double(object.s)", {"s": "0." + "9" * 9000}) == 1.0


def test_double_arithmetic_follows_ieee() -> None:
    assert ev("1.7976931348623157e308 * 10.0") == math.inf
    assert ev("1.0 / 0.0") == math.inf
    assert math.isnan(ev('double("nan") + 1.0'))  # type: ignore[arg-type]
