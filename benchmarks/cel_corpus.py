"""A corpus of CEL expressions with the results cel-go (as embedded in Kubernetes) gives.

Each case binds ``object`` (the decoded opaque-config JSON) and states the
expected result: a value, or ``ERROR`` when cel-go reports an evaluation or
compile error. Used by ``benchmarks/cel_compare.py`` and by the differential
tests in ``tests/cel/test_cel_differential.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final


class _Error:
    def __repr__(self) -> str:
        return "ERROR"


ERROR: Final = _Error()

NIC: Final = {
    "apiVersion": "networking.example.com/v1",
    "kind": "NICConfig",
    "vendor": "acme",
    "subnetID": "subnet-A",
    "ibPKey": "0x8001",
    "qos": "gold",
    "mtu": 9000,
    "vlanTag": 100,
    "tags": ["a", "b", "c"],
    "nums": [3, 1, 2],
    "ratio": 0.25,
    "nested": {"inner": {"leaf": "x"}},
}

SUBNET_EXTRACTOR: Final = (
    'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig" ? object.subnetID : ""'
)


@dataclass(frozen=True)
class Case:
    expr: str
    expect: object
    obj: object = field(default_factory=lambda: NIC)
    note: str = ""


CORPUS: Final[tuple[Case, ...]] = (
    # the KEP's extractor idioms
    Case(SUBNET_EXTRACTOR, "subnet-A"),
    Case(SUBNET_EXTRACTOR, "", {"apiVersion": "other/v1", "kind": "X"}),
    Case(
        '(object.apiVersion == "networking.example.com/v1" || object.apiVersion == "networking.example.com/v1beta1")'
        ' && object.kind == "NICConfig" ? object.subnetID : ""',
        "subnet-A",
    ),
    Case("has(object.subnet) ? object.subnet : ''", ""),
    Case("object.subnet", ERROR, note="missing field"),
    Case("object.ibPKey", "0x8001"),
    Case("object.nested.inner.leaf", "x"),
    Case("has(object.nested.inner)", True),
    Case("object.mtu", 9000),
    Case("object.ratio * 4.0", 1.0),
    # arithmetic and overflow
    Case("1 + 2 * 3", 7),
    Case("-7 / 2", -3),
    Case("-7 % 3", -1),
    Case("9223372036854775807 + 1", ERROR, note="int overflow"),
    Case("-9223372036854775808 / -1", ERROR),
    Case("1 / 0", ERROR),
    Case("1.0 / 0.0 > 1e308", True),
    Case("0u - 1u", ERROR),
    Case("3u * 2u == 6u", True),
    # equality and ordering
    Case("dyn(1) == 1.0", True, note="heterogeneous numeric equality"),
    Case("dyn(1u) == 1", True),
    Case("dyn(1) == true", False),
    Case("dyn('1') == 1", False),
    Case("[1, 2] == [1, 2]", True),
    Case("{'a': 1} == {'a': 1}", True),
    Case("'abc' < 'abd'", True),
    Case("b'a' < b'b'", True),
    Case("null == null", True),
    # logic and error absorption
    Case("false && (1 / 0 == 1)", False),
    Case("(1 / 0 == 1) && false", False),
    Case("(1 / 0 == 1) || true", True),
    Case("true || object.missing", True),
    Case("(1 / 0 == 1) || false", ERROR),
    Case("true ? 'a' : 'b'", "a"),
    Case("!(1 < 2)", False),
    # strings
    Case("size('héllo')", 5),
    Case("'hello'.contains('ell')", True),
    Case("'hello'.startsWith('he') && 'hello'.endsWith('lo')", True),
    Case("'subnet-42'.matches('^subnet-[0-9]+$')", True),
    Case("'a' + 'b' + 'c'", "abc"),
    Case("string(42)", "42"),
    Case("string(1.5)", "1.5"),
    Case("int('123') + 1", 124),
    Case("double('2.5')", 2.5),
    Case("'AbC'.lowerAscii()", "abc"),
    Case("'a,b'.split(',')", ["a", "b"]),
    Case("'hello'.substring(1, 3)", "el"),
    Case("'  x  '.trim()", "x"),
    Case("['a', 'b'].join('-')", "a-b"),
    Case("'hello'.indexOf('l')", 2),
    Case("'a-b'.replace('-', '_')", "a_b"),
    # lists, maps and macros
    Case("object.tags.size()", 3),
    Case("'b' in object.tags", True),
    Case("'qos' in object", True),
    Case("object.nums.all(n, n > 0)", True),
    Case("object.nums.exists(n, n == 2)", True),
    Case("object.nums.exists_one(n, n > 2)", True),
    Case("object.nums.map(n, n * 10)", [30, 10, 20]),
    Case("object.nums.filter(n, n >= 2)", [3, 2]),
    Case("object.nums.map(n, n > 1, n + 1)", [4, 3]),
    Case("[1, 0].all(x, 1 / x > 0)", ERROR),
    Case("[0, 1].exists(x, 1 / x == 1)", True, note="error absorbed by a later true"),
    Case("object.tags[5]", ERROR),
    Case("{'k': 'v'}['k']", "v"),
    Case("type(object.mtu) == int", True),
    Case("type(object.ratio) == double", True),
    # Kubernetes libraries
    Case("'abc123'.find('[0-9]+')", "123"),
    Case("'a1b2'.findAll('[0-9]')", ["1", "2"]),
    Case("[1, 2, 3].isSorted()", True),
    Case("[1, 2, 3].sum()", 6),
    Case("[3, 1, 2].max()", 3),
    Case("quantity('1Gi').isGreaterThan(quantity('1000Mi'))", True),
    Case("quantity('200M').compareTo(quantity('0.2G'))", 0),
    Case("semver('1.10.0').isGreaterThan(semver('1.9.0'))", True),
    Case("isQuantity('1,3G')", False),
)
