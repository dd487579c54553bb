"""ext.Strings version 2 as Kubernetes 1.37 configures it: string.format() and strings.quote().

Expected texts are cel-go's (checked against it through the oracle), including the
en-US number formatting of golang.org/x/text that %f and %e go through."""

from __future__ import annotations

import pytest
from cel_helpers import ev, ev_cost

from dra_affinity.cel import EXTRACTOR_ENV, CELCompileError, CELCostExceeded, CELEvalError

OBJ = {"d": 1234567.891, "i": -255, "s": "h\u00e9llo", "nan": "NaN", "z": -0.0, "tiny": -5e-324,
       "l": [1, "a", 2.5, True, None, [1], {"k": 1.5}], "m": {"b": 1, "a": "x", "c": [1]},
       "one": ["x"], "two": ["x", 1]}

VALUES = [
    ("'%s-%d'.format([dyn('a'), dyn(1)])", "a-1"),
    ("'a%%b%s'.format([object.i])", "a%b-255"),
    ("'%.2f'.format([object.d])", "1,234,567.89"),  # grouped, as x/text for en-US
    ("'%f'.format([object.d])", "1,234,567.891000"),
    ("'%.1f'.format([object.z])", "0.0"),  # an exact negative zero loses its sign
    ("'%.2f'.format([object.tiny])", "-0.00"),
    ("'%f'.format(['Infinity'])", "\u221e"),
    ("'%f'.format([object.nan])", "NaN"),
    ("'%e'.format([object.d])", "1.234568\u00d710\u2070\u2076"),
    ("'%.2e'.format([object.d])", "1.234568\u00d710\u2070\u2076"),  # the precision is a width
    ("'%e'.format([1e-7])", "1.000000\u00d710\u207b\u2070\u2077"),
    ("'%.12e'.format(['NaN'])", "         NaN"),
    ("'%e'.format(['-Infinity'])", "    -\u221e"),
    ("'%x'.format([object.i])", "-ff"),
    ("'%X'.format([object.s])", "68C3A96C6C6F"),
    ("'%x'.format([b'\\x01\\xff'])", "01ff"),
    ("'%o'.format([object.i])", "-377"),
    ("'%b'.format([object.i])", "-11111111"),
    ("'%b'.format([true])", "1"),
    ("'%d'.format([1u])", "1"),
    ("'%s'.format([object.d])", "1.234567891e+06"),
    ("'%s'.format([null])", "null"),
    ("'%s'.format([type(1)])", "int"),
    ("'%s'.format([timestamp(0)])", "1970-01-01T00:00:00Z"),
    ("'%s'.format([object.l])", '[1, "a", 2.500000, true, null, [1], {"k":1.500000}]'),
    ("'%s'.format([object.m])", '{"a":"x", "b":1, "c":[1]}'),  # entries sorted by key text
    ("'%s'.format([[1.0/0.0, 0.0/0.0]])", '["+Inf", "NaN"]'),
    ("'%s'.format([[dyn(b'ab'), dyn('x\"y'), dyn('tab\\tx'), dyn(duration('1s'))]])",
     '[b"ab", "x\\"y", "tab\\tx", duration("1s")]'),
    ("'%s'.format(object.two)", "x"),  # extra arguments are ignored at run time
    ("strings.quote(object.s)", '"h\u00e9llo"'),
    ("strings.quote('a\"b\\\\c\\n\\t\\a')", '"a\\"b\\\\c\\n\\t\\a"'),
]


@pytest.mark.parametrize(("expr", "want"), VALUES, ids=[v[0][:60] for v in VALUES])
def test_format_values(expr: str, want: str) -> None:
    assert ev(expr, OBJ) == want


RUNTIME_ERRORS = [
    "'%d'.format([object.d])",
    "'%s %s'.format(object.one)",  # index 1 out of range
    "'%'.format(object.one)",
    "'%z'.format(object.one)",
    "'%.f'.format(object.one)",
    "'%.2'.format(object.one)",
    "'%f'.format([object.s])",
    "'%s'.format([b'\\xff'])",
    "'%s'.format([{object.d: 1}])",  # no formatting of double map keys
]


@pytest.mark.parametrize("expr", RUNTIME_ERRORS)
def test_format_runtime_errors(expr: str) -> None:
    with pytest.raises(CELEvalError) as info:
        ev(expr, OBJ)
    assert info.value.reason == "invalid_argument"


COMPILE_ERRORS = [
    "'%d'.format(['a'])",  # literal list: clause types checked when compiling
    "'%.3f'.format([1])",
    "'%s %s'.format(['a'])",
    "'%d'.format([1, 2])",  # too many arguments
    "'%s %s'.format([object.s])",
    "'%'.format([object.s])",
    "'%z'.format([object.s])",
    "'%.f'.format([object.d])",
    "'%.101f'.format([1.0])",  # beyond the precision bound
    "strings.quote(1)",
    "'x'.format('a')",
]


@pytest.mark.parametrize("expr", COMPILE_ERRORS)
def test_format_compile_errors(expr: str) -> None:
    with pytest.raises(CELCompileError):
        EXTRACTOR_ENV.compile(expr)


def test_format_cost_and_memory_bound() -> None:
    # cel-go: ceil(0.1 x format length); ours adds 0.1 per character of the result
    value, cost = ev_cost("'%s'.format([object.s])", {"object": {"s": "x" * 1000}})
    assert value == "x" * 1000
    assert cost == 2 + 10 + 1 + 100
    prog = EXTRACTOR_ENV.compile("object.l.map(x, '%s%s%s%s'.format([object.l, object.l, object.l, object.l]))")
    with pytest.raises(CELCostExceeded):
        prog.evaluate({"object": {"l": ["y" * 1000] * 200}}, 1_000_000)


def test_format_runtime_cost_within_estimate() -> None:
    prog = EXTRACTOR_ENV.compile("'%s and %f'.format([object.s, object.d])")
    _, cost = prog.evaluate({"object": {"s": "\u4e16" * 3000, "d": 1e308}}, 10**7)
    assert cost <= prog.cost_estimate.max
