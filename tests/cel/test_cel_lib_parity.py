"""Library parity with Kubernetes' CEL environment: strings offsets, quantity integer
checks (from Kubernetes' internal representation), selector domains.

Expected values are cel-go's (v0.29.2 in Kubernetes 1.37's environments).
"""

from __future__ import annotations

import pytest
from cel_helpers import ev

from dra_affinity.cel import SELECTOR_ENV, CELEvalError, Quantity, Semver

# -- ext.Strings indexOf / lastIndexOf with an offset ------------------------------

OFFSETS = [
    ("'abc'.indexOf('', 5)", 3),  # the empty string matches at the offset clamped to the end
    ("'abc'.indexOf('', 1)", 1),
    ("'abc'.indexOf('c', 3)", -1),  # past the end: not found, not an error
    ("'abc'.indexOf('a', 9)", -1),
    ("'abcabc'.indexOf('bc', 2)", 4),
    ("'h\u00e9llo'.indexOf('l', 3)", 3),  # offsets count code points
    ("'abc'.lastIndexOf('a', 5)", -1),
    ("'abc'.lastIndexOf('', 1)", 1),
    ("'abc'.lastIndexOf('', 7)", 3),
    ("'abcabc'.lastIndexOf('bc', 3)", 1),
    ("'abcabc'.lastIndexOf('bc', 4)", 4),
    ("'abcabc'.lastIndexOf('bc', 5)", 4),  # clamped to the last place the needle fits
    ("'ab'.lastIndexOf('abc', 1)", -1),
    ("'abc'.lastIndexOf('')", 3),
]


@pytest.mark.parametrize(("expr", "want"), OFFSETS, ids=[c[0] for c in OFFSETS])
def test_index_of_offsets_as_cel_go(expr: str, want: int) -> None:
    assert ev(expr) == want


@pytest.mark.parametrize("expr", ["'abc'.indexOf('a', -1)", "'abc'.lastIndexOf('a', -1)",
                                  "'abc'.indexOf('', -2)"])
def test_negative_offset_is_an_error(expr: str) -> None:
    with pytest.raises(CELEvalError) as info:
        ev(expr)
    assert info.value.reason == "invalid_argument"
    assert "index out of range" in str(info.value)


# -- quantity isInteger / asInteger ---------------------------------------------------

QUANTITY_INT = [
    # text, isInteger (Quantity.AsInt64 succeeds), asInteger value when it does
    ("1Gi", True, 2**30),
    ("1000Mi", True, 1000 * 2**20),
    ("1.5Gi", False, None),  # binary suffix with a fraction: inf.Dec representation
    ("0.5Ki", False, None),
    ("1.5", False, None),  # scale -1
    ("1.0", False, None),  # whole value, but scale -1
    ("100m", False, None),
    ("1e3", True, 1000),
    ("0.2G", True, 200_000_000),  # value 2, scale 8
    ("-1", True, -1),
    ("0", True, 0),
    ("123456789123456789", True, 123456789123456789),
    ("1234567891234567891", False, None),  # 19 digits: precision < 0, inf.Dec
    ("9999999999999999999999G", False, None),
    ("1Ti", True, 2**40),
    ("1Pi", False, None),  # binary precision estimate 15 - 1 - 15 - 1 < 0: inf.Dec
    ("1Ei", False, None),
]


@pytest.mark.parametrize(("text", "is_int", "value"), QUANTITY_INT, ids=[c[0] for c in QUANTITY_INT])
def test_quantity_integer_checks_follow_kubernetes_representation(
    text: str, is_int: bool, value: int | None
) -> None:
    assert ev(f"quantity('{text}').isInteger()") is is_int
    if value is None:
        with pytest.raises(CELEvalError) as info:
            ev(f"quantity('{text}').asInteger()")
        assert info.value.reason == "overflow"
        assert "cannot convert value to integer" in str(info.value)
    else:
        assert ev(f"quantity('{text}').asInteger()") == value


ARITH_INT = [
    ("quantity('100m').add(quantity('900m'))", False),  # scale -3 stays: 1000m is not AsInt64
    ("quantity('1.5').add(1)", False),
    ("quantity('1k').add(5)", True),  # scales 3 and 0 align to 0: 1005
    ("quantity('1Gi').sub(quantity('1.5Gi'))", False),  # one side inf.Dec: the result is too
    ("quantity('9e18').add(quantity('9e18'))", False),  # int64 overflow: inf.Dec
    ("quantity('0').add(quantity('1.5'))", False),
    ("quantity('2').sub(2)", True),
]


@pytest.mark.parametrize(("expr", "is_int"), ARITH_INT, ids=[c[0] for c in ARITH_INT])
def test_quantity_representation_through_add_and_sub(expr: str, is_int: bool) -> None:
    assert ev(expr + ".isInteger()") is is_int


def test_quantity_from_data_uses_its_canonical_text() -> None:
    dev = {"driver": "d", "attributes": {}, "capacity": {"d": {"m": Quantity.parse("1.5Gi")}},
           "allowMultipleAllocations": False}
    # a capacity not built by CEL: its canonical text "1536Mi" is an int64 amount
    prog = SELECTOR_ENV.compile("device.capacity['d'].m.isInteger() && device.capacity['d'].m.asInteger() == 1610612736")
    assert prog.evaluate({"device": dev}, 1000)[0] is True


# -- selectors: unknown attribute or capacity domain ----------------------------------

DEVICE = {
    "driver": "gpu.example.com",
    "attributes": {"gpu.example.com": {"model": "a100", "v": Semver.parse("1.2.3")}},
    "capacity": {"gpu.example.com": {"memory": Quantity.parse("40Gi")}},
    "allowMultipleAllocations": False,
}

DOMAINS = [
    ("has(device.attributes['nic.example.com'].model)", True, False),
    ("has(device.capacity['nic.example.com'].memory)", True, False),
    ("size(device.attributes['nic.example.com']) == 0", True, True),
    ("'nic.example.com' in device.attributes", True, False),  # membership stays real
    ("'gpu.example.com' in device.attributes", True, True),
    ("device.attributes['nic.example.com'].all(k, false)", True, True),
    ("device.attributes['nic.example.com'].model == 'a100'", False, "no such key: model"),
    ("device.capacity['nic.example.com'].memory.isLessThan(quantity('1'))", False,
     "no such key: memory"),
    ("device.attributes['gpu.example.com'].absent == 'x'", False, "no such key: absent"),
]


@pytest.mark.parametrize(("expr", "ok", "want"), DOMAINS, ids=[c[0] for c in DOMAINS])
@pytest.mark.parametrize("bind", ["plain", "domain-maps"])
def test_unknown_domain_reads_as_an_empty_map(expr: str, ok: bool, want: object, bind: str) -> None:
    from dra_affinity.cel.lib_dra import adapt_device

    dev = DEVICE if bind == "plain" else adapt_device(DEVICE)
    prog = SELECTOR_ENV.compile(expr)
    if ok:
        assert prog.evaluate({"device": dev}, 1000)[0] is want
    else:
        with pytest.raises(CELEvalError) as info:
            prog.evaluate({"device": dev}, 1000)
        assert info.value.reason == "missing_field"
        assert str(want) in str(info.value)


def test_domain_map_is_not_mutated_or_shared() -> None:
    prog = SELECTOR_ENV.compile("size(device.attributes['x.com']) == 0")
    assert prog.evaluate({"device": DEVICE}, 1000)[0] is True
    assert set(DEVICE["attributes"]) == {"gpu.example.com"}  # type: ignore[arg-type]


# -- the static estimate bounds the runtime cost of library results --------------------

BOUNDED = [
    ("[dyn([1]), dyn([[2]])].flatten(2).sum()", None),
    ("[[1], [2, 3]].flatten().isSorted()", None),
    ("lists.range(5).isSorted()", None),
    ("lists.range(50).map(i, string(i)).sortBy(s, s).isSorted()", None),
    ("url(object.u).getQuery().size() + size(url(object.u).getEscapedPath())",
     {"u": "http://h/" + "%C3%BC" * 300 + "?" + "a=1&" * 300}),
    ("'%s|%s'.format([object.l, object.m]).size()", {"l": ["\u4e16" * 50] * 20, "m": {"k": [1.5] * 40}}),
    ("timestamp(object.t).getHours('Asia/Kolkata') + duration(object.d).getMinutes()",
     {"t": "2024-01-02T03:04:05Z", "d": "-90s"}),
    ("cidr(object.c).containsCIDR(object.c) && ip.isCanonical(object.i)", {"c": "2001:db8::/32", "i": "::1"}),
]


@pytest.mark.parametrize(("expr", "obj"), BOUNDED, ids=[b[0][:60] for b in BOUNDED])
def test_runtime_cost_within_static_estimate(expr: str, obj: object) -> None:
    from dra_affinity.cel import EXTRACTOR_ENV

    prog = EXTRACTOR_ENV.compile(expr)
    _, cost = prog.evaluate({"object": obj}, 10**7)
    assert cost <= prog.cost_estimate.max
