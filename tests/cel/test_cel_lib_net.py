"""Kubernetes' IP and CIDR CEL libraries: parsing rules, accessors, containment, costs.

Expected values and runtime costs are Kubernetes 1.37's (library.IP, library.CIDR).
"""

from __future__ import annotations

import pytest
from cel_helpers import ev, ev_cost

from dra_affinity.cel import EXTRACTOR_ENV, CELCompileError, CELEvalError

VALUES = [
    ("string(ip('10.0.0.1'))", "10.0.0.1"),
    ("string(ip('2001:DB8:0:0:0:0:0:1'))", "2001:db8::1"),  # RFC 5952 text
    ("string(ip('::1.2.3.4'))", "::102:304"),
    ("isIP('10.0.0.1')", True),
    ("isIP('01.2.3.4')", False),  # leading zeros
    ("isIP('1.2.3')", False),
    ("isIP('fe80::1%eth0')", False),  # zones are refused
    ("isIP('::ffff:1.2.3.4')", False),  # IPv4-mapped IPv6 is refused
    ("isIP(' 1.2.3.4')", False),
    ("ip.isCanonical('2001:db8::1')", True),
    ("ip.isCanonical('2001:DB8::1')", False),
    ("ip.isCanonical('2001:db8:0::1')", False),
    ("ip('10.0.0.1').family()", 4),
    ("ip('::1').family()", 6),
    ("ip('0.0.0.0').isUnspecified()", True),
    ("ip('::').isUnspecified()", True),
    ("ip('127.0.0.2').isLoopback()", True),
    ("ip('::1').isLoopback()", True),
    ("ip('224.0.0.1').isLinkLocalMulticast()", True),
    ("ip('224.0.1.1').isLinkLocalMulticast()", False),
    ("ip('ff02::1').isLinkLocalMulticast()", True),
    ("ip('ff05::1').isLinkLocalMulticast()", False),
    ("ip('169.254.1.1').isLinkLocalUnicast()", True),
    ("ip('fe80::1').isLinkLocalUnicast()", True),
    ("ip('fec0::1').isLinkLocalUnicast()", False),
    ("ip('10.0.0.1').isGlobalUnicast()", True),  # private IPv4 counts, as in Go
    ("ip('fd00::1').isGlobalUnicast()", True),
    ("ip('255.255.255.255').isGlobalUnicast()", False),
    ("ip('224.0.0.1').isGlobalUnicast()", False),
    ("ip('fe80::1').isGlobalUnicast()", False),
    ("ip('10.0.0.1') == ip('10.0.0.1')", True),
    ("ip('10.0.0.1') == ip('10.0.0.2')", False),
    ("ip('::') == ip('0.0.0.0')", False),
    ("type(ip('::1')) == type(ip('1.2.3.4'))", True),
    ("string(cidr('10.0.0.1/24'))", "10.0.0.1/24"),  # host bits kept
    ("string(cidr('10.0.0.1/24').ip())", "10.0.0.1"),
    ("string(cidr('10.0.0.1/24').masked())", "10.0.0.0/24"),
    ("string(cidr('2001:db8::1/32').masked())", "2001:db8::/32"),
    ("string(cidr('::/0').masked())", "::/0"),  # the family is kept (the integer 0 is not IPv4)
    ("cidr('::/0').containsIP('::1')", True),
    ("cidr('::/0').containsIP('0.0.0.1')", False),
    ("cidr('10.0.0.0/8').prefixLength()", 8),
    ("isCIDR('10.0.0.0/8')", True),
    ("isCIDR('10.0.0.0/33')", False),
    ("isCIDR('10.0.0.0/08')", False),  # no leading zeros in the length
    ("isCIDR('10.0.0.0')", False),
    ("isCIDR('::ffff:1.2.3.4/96')", False),
    ("isCIDR('fe80::%eth0/64')", False),
    ("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", True),
    ("cidr('10.0.0.0/8').containsIP('11.0.0.1')", False),
    ("cidr('::/0').containsIP('10.0.0.1')", False),  # families differ
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", True),
    ("cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')", False),
    ("cidr('10.0.0.0/8').containsCIDR(cidr('10.0.0.0/8'))", True),
    ("cidr('10.0.0.0/8').containsCIDR(cidr('::/0'))", False),
    ("cidr('10.0.0.0/8') == cidr('10.0.0.0/8')", True),
    ("cidr('10.0.0.1/8') == cidr('10.0.0.0/8')", False),
]


@pytest.mark.parametrize(("expr", "want"), VALUES, ids=[v[0] for v in VALUES])
def test_ip_cidr_values(expr: str, want: object) -> None:
    assert ev(expr) == want


ERRORS = [
    "ip('1.2.3')",
    "ip('fe80::1%eth0')",
    "ip('::ffff:1.2.3.4')",
    "cidr('1.2.3.4/33')",
    "cidr('1.2.3.4')",
    "cidr('::ffff:1.2.3.4/120')",
    "ip.isCanonical('nope')",
    "cidr('10.0.0.0/8').containsIP('x')",
    "cidr('10.0.0.0/8').containsCIDR('x')",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_ip_cidr_errors_are_cel_errors(expr: str) -> None:
    with pytest.raises(CELEvalError) as info:
        ev(expr)
    assert info.value.reason == "invalid_argument"


def test_dynamic_non_ip_is_no_such_overload() -> None:
    with pytest.raises(CELEvalError) as info:
        ev("ip(object.x)", {"x": 1})
    assert info.value.reason == "no_such_overload"


@pytest.mark.parametrize("expr", ["ip(1)", "cidr('1.2.3.4/8').containsIP(1)", "ip('::1').prefixLength()",
                                  "ip('::1') == cidr('::1/128')"])
def test_ill_typed_calls_are_compile_errors(expr: str) -> None:
    with pytest.raises(CELCompileError):
        EXTRACTOR_ENV.compile(expr)


COSTS = [
    # object.s costs 2 (variable, field); parse: ceil(0.1 x characters); accessors 1;
    # containment: ceil(0.2 x the CIDR's bytes), + ceil(0.1 x bytes) + 1 for containsCIDR,
    # + the parse of a string argument. Figures checked against Kubernetes 1.37.
    ("ip(object.s)", {"s": "10.0.0.1"}, 2 + 1),
    ("ip(object.s)", {"s": "2001:db8:1:2:3:4:5:6"}, 2 + 2),
    ("ip.isCanonical(object.s)", {"s": "2001:db8:1:2:3:4:5:6"}, 2 + 4),
    ("isCIDR(object.s)", {"s": "10.0.0.0/8"}, 2 + 1),
    ("cidr(object.s).prefixLength()", {"s": "10.0.0.0/8"}, 2 + 1 + 1),
    ("cidr(object.s).ip()", {"s": "10.0.0.0/8"}, 2 + 1 + 1),
    ("cidr(object.s).containsIP(string(object.t))", {"s": "10.0.0.0/16", "t": "10.0.0.1"},
     2 + 2 + 2 + 1 + 1 + 1),
    ("cidr(object.s).containsCIDR(cidr(object.s))", {"s": "::1/128"}, 2 + 1 + 2 + 1 + 4 + 2 + 1),
    ("string(ip(object.s))", {"s": "::1"}, 2 + 1 + 1),
]


@pytest.mark.parametrize(("expr", "obj", "cost"), COSTS, ids=[f"{c[0]}-{c[2]}" for c in COSTS])
def test_ip_cidr_runtime_costs(expr: str, obj: object, cost: int) -> None:
    _, actual = ev_cost(expr, {"object": obj})
    assert actual == cost
    assert actual <= EXTRACTOR_ENV.compile(expr).cost_estimate.max
