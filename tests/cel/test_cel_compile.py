"""Compile-time behaviour: syntax and type errors, limits, result types, the cache."""

from __future__ import annotations

import threading

import pytest
from cel_helpers import bytecodes

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    MAX_EXPRESSION_LENGTH,
    MAX_NESTING_DEPTH,
    SELECTOR_ENV,
    CELCompileError,
    Environment,
)

# (expression, fragment of the message, expected position or None to skip the check)
COMPILE_ERRORS: list[tuple[str, str, int | None]] = [
    ("", "empty expression", 0),
    ("   ", "empty expression", 0),
    ("1 +", "unexpected end", 3),
    ("(1", "unexpected end", 2),
    ("1 2", "syntax error", 2),
    ("a.", "syntax error", None),
    ("'unterminated", "syntax error", 0),
    ("1 # 2", "unexpected character '#'", 2),
    ("[1, 2,,]", "syntax error", 6),
    ("x", "undeclared reference to 'x'", 0),
    ("object.a + y", "undeclared reference to 'y'", 11),
    ("foo(1)", "undeclared reference to 'foo'", 0),
    ("object.foo()", "undeclared reference to 'foo'", 7),
    ("size()", "no matching overload for 'size'", 0),
    ("size(1, 2)", "no matching overload for 'size'", 0),
    ("'a'.contains()", "no matching overload for 'contains'", 4),
    ("'a'.contains('a', 'b')", "no matching overload", None),
    ("1 + 'a'", "'_+_' applied to '(int, string)'", 2),
    ("1 + 1.0", "'_+_' applied to '(int, double)'", 2),
    ("1 + 1u", "'_+_'", None),
    ("'a' > 1", "'_>_' applied to '(string, int)'", 4),
    ("'a' - 'b'", "'_-_'", None),
    ("1.5 % 2.0", "'_%_'", None),
    ("size(1)", "'size' applied to '(int)'", 0),
    ("1 == true", "'_==_' applied to '(int, bool)'", 2),
    ("'a' == null", "'_==_'", None),
    ("[1] == ['a']", "'_==_'", None),
    ("!1", "'!_'", None),
    ("-'a'", "'-_'", None),
    ("-1u", "invalid uint literal", 0),
    ("-(1u)", "'-_'", None),
    ("1 && true", "'_&&_'", None),
    ("true ? 1 : 'a'", "'_?_:_'", None),
    ("1 ? 2 : 3", "'_?_:_'", None),
    ("1 in ['a']", "'_in_'", None),
    ("'a'[0]", "'_[_]'", None),
    ("[1]['a']", "'_[_]'", None),
    ("(1).a", "does not support field selection", None),
    ("'abc'.matches('(')", "invalid regular expression", 14),
    ("'abc'.find('[')", "invalid regular expression", None),
    ("'a'.startsWith(1)", "no matching overload", None),
    ("[1].join()", "no matching overload for 'join'", None),
    ("quantity(1)", "no matching overload for 'quantity'", None),
    ("quantity('1').isLessThan(semver('1.0.0'))", "no matching overload", None),
    ("(1).all(x, true)", "cannot be the range of a comprehension", None),
    ("[1].all(x, 1)", "predicate must be bool", None),
    ("[1].all(1, true)", "argument must be a simple name", 8),
    ("has(object)", "invalid argument to has() macro", None),
    ("has(1)", "invalid argument to has() macro", None),
    ("{[1]: 2}", "unsupported map key type", None),
    ("Foo{a: 1}", "message construction is not supported", None),
    ("if", "reserved identifier: if", 0),
    ("object.a in in", "reserved identifier: in", 12),
    ("1.", "invalid double literal", 0),
    ("1e999", "invalid double literal", 0),
    ("9223372036854775808", "invalid int literal", 0),
    ("18446744073709551616u", "invalid uint literal", 0),
    ("'\\q'", "invalid escape sequence", None),
    ("'\\uD800'", "invalid unicode code point", None),
    ("b'\\u00e9'", "not allowed in bytes literals", None),
    ("device.driver", "undeclared reference to 'device'", 0),
]


@pytest.mark.parametrize(("expr", "fragment", "position"), COMPILE_ERRORS, ids=[c[0][:40] for c in COMPILE_ERRORS])
def test_compile_error(expr: str, fragment: str, position: int | None) -> None:
    with pytest.raises(CELCompileError) as info:
        EXTRACTOR_ENV.compile(expr)
    err = info.value
    assert fragment in str(err), str(err)
    if position is not None:
        assert err.position == position, str(err)
    assert "\n" not in str(err)


def test_selector_env_fields_are_checked() -> None:
    with pytest.raises(CELCompileError, match="undefined field 'nope'"):
        SELECTOR_ENV.compile("device.nope")
    with pytest.raises(CELCompileError, match="undeclared reference to 'object'"):
        SELECTOR_ENV.compile("object.a")
    # a selector's static type must be bool or dyn (checked when compiling, as upstream)
    with pytest.raises(CELCompileError, match="must return bool or dyn, not string"):
        SELECTOR_ENV.compile("device.driver")
    with pytest.raises(CELCompileError, match=r"not kubernetes\.Quantity"):
        SELECTOR_ENV.compile("device.capacity['d'].mem")
    assert SELECTOR_ENV.compile("device.driver == 'x'").result_type == "bool"
    assert SELECTOR_ENV.compile("device.attributes['d'].x").result_type == "dyn"


RESULT_TYPES: list[tuple[str, str]] = [
    ("object.a", "dyn"),
    ("object.a == 'x'", "bool"),
    ("object.a == 'x' ? object.b : ''", "dyn"),
    ("object.a == 'x' ? 'y' : ''", "string"),
    ("has(object.a) ? string(object.a) : ''", "string"),
    ("object.a + 'x'", "string"),
    ("object.a + 1", "int"),
    ("'a' + 'b'", "string"),
    ("1", "int"),
    ("1u", "uint"),
    ("1.0", "double"),
    ("b'a'", "bytes"),
    ("null", "null"),
    ("[1]", "list"),
    ("{'a': 1}", "map"),
    ("[1].map(x, x)", "list"),
    ("[1].all(x, x > 0)", "bool"),
    ("size(object.a)", "int"),
    ("object.l.join(',')", "string"),
    ("type(1)", "type"),
    ("quantity('1')", "kubernetes.Quantity"),
    ("semver('1.0.0').major()", "int"),
    ("['a'].min()", "string"),
    ("object.l.min()", "dyn"),
    ("dyn('a')", "dyn"),
    ("'a,b'.split(',')[0]", "string"),
    ("{'a': 'b'}.a", "string"),
]


@pytest.mark.parametrize(("expr", "result_type"), RESULT_TYPES)
def test_result_type(expr: str, result_type: str) -> None:
    assert EXTRACTOR_ENV.compile(expr).result_type == result_type


def test_compile_cache_returns_same_program() -> None:
    a = EXTRACTOR_ENV.compile("object.kind == 'cache-test'")
    b = EXTRACTOR_ENV.compile("object.kind == 'cache-test'")
    assert a is b
    assert EXTRACTOR_ENV.compile("object.kind == 'cache-test' ") is not a


def test_compile_errors_are_cached_and_raised_again() -> None:
    for _ in range(3):
        with pytest.raises(CELCompileError, match="undeclared"):
            EXTRACTOR_ENV.compile("nope_cached")


def test_cache_is_bounded() -> None:
    env = Environment("tiny", {"object": "dyn"}, cache_size=4)
    first = env.compile("1 + 0")
    for i in range(1, 10):
        env.compile(f"1 + {i}")
    assert env.compile("1 + 0") is not first


def test_program_is_immutable() -> None:
    prog = EXTRACTOR_ENV.compile("1")
    with pytest.raises(AttributeError):
        prog.expression = "2"  # type: ignore[misc]


def test_unknown_declared_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown CEL type"):
        Environment("bad", {"x": "widget"})


def test_declared_types_are_used() -> None:
    env = Environment("typed", {"s": "string", "l": "list(int)", "m": "map(string, int)"})
    assert env.compile("s + 'x'").result_type == "string"
    assert env.compile("l[0] + 1").result_type == "int"
    assert env.compile("m.a").result_type == "int"
    with pytest.raises(CELCompileError):
        env.compile("s + 1")


def test_nesting_limit_parentheses() -> None:
    deep = "(" * 5000 + "1" + ")" * 5000
    with pytest.raises(CELCompileError, match="expression nesting too deep"):
        EXTRACTOR_ENV.compile(deep)


def test_nesting_limit_operator_chain() -> None:
    chain = " + ".join(["1"] * 10240)
    with pytest.raises(CELCompileError, match="expression nesting too deep"):
        EXTRACTOR_ENV.compile(chain)
    nested_calls = "object" + ".a" * 150
    with pytest.raises(CELCompileError, match="expression nesting too deep"):
        EXTRACTOR_ENV.compile(nested_calls)
    unary = "!(" * 300 + "true" + ")" * 300
    with pytest.raises(CELCompileError, match="expression nesting too deep"):
        EXTRACTOR_ENV.compile(unary)
    # a run of one unary operator is not nesting: cel-go keeps one operator for an odd
    # run and none for an even one
    assert EXTRACTOR_ENV.compile("!" * 300 + "true").evaluate({}, 10) == (True, 0)
    assert EXTRACTOR_ENV.compile("!" * 301 + "true").evaluate({}, 10) == (False, 1)
    assert EXTRACTOR_ENV.compile("-" * 301 + "5").evaluate({}, 10) == (-5, 1)


def test_nesting_within_limit_compiles_and_runs() -> None:
    ok = "(" * (MAX_NESTING_DEPTH - 5) + "1" + ")" * (MAX_NESTING_DEPTH - 5)
    assert EXTRACTOR_ENV.compile(ok).evaluate({}, 10)[0] == 1
    chain = " + ".join(["1"] * (MAX_NESTING_DEPTH - 5))
    assert EXTRACTOR_ENV.compile(chain).evaluate({}, 1000)[0] == MAX_NESTING_DEPTH - 5


def test_long_logical_chains_are_balanced() -> None:
    # cel-go balances && and || so long disjunctions do not nest deeply.
    expr = " || ".join(f"object.k == 'v{i}'" for i in range(1000))
    prog = EXTRACTOR_ENV.compile(expr)
    assert prog.evaluate({"object": {"k": "v999"}}, 10**6)[0] is True
    assert prog.evaluate({"object": {"k": "none"}}, 10**6)[0] is False


def test_absurdly_long_input_is_refused_quickly() -> None:
    text = "1 + " * (MAX_EXPRESSION_LENGTH // 4) + "1"
    env = Environment("fresh", {"object": "dyn"})  # no cached result
    ops, err = bytecodes(lambda: env.compile(text))
    assert isinstance(err, CELCompileError) and "expression too long" in str(err)
    assert ops < 2_000  # refused before parsing: no token of the 100 Ki was looked at


def test_selector_length_limit_size_compiles() -> None:
    # An expression at CEL_SELECTOR_EXPRESSION_MAX_LENGTH compiles (admission decides on length).
    body = " || ".join(["object.k == 'xxxxxxxx'"] * 390)
    assert len(body) < 10 * 1024
    EXTRACTOR_ENV.compile(body)


def test_non_string_expression() -> None:
    with pytest.raises(CELCompileError, match="must be a string"):
        EXTRACTOR_ENV.compile(123)  # type: ignore[arg-type]


def test_concurrent_compile_and_evaluate() -> None:
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            prog = EXTRACTOR_ENV.compile(f"object.n + {i % 7}")
            for n in range(200):
                value, _ = prog.evaluate({"object": {"n": n}}, 100)
                assert value == n + i % 7
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
