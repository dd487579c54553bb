"""Kubernetes' URL CEL library: Go net/url parsing (ParseRequestURI to accept, Parse to keep)
and the accessors. Expected values are Kubernetes 1.37's."""

from __future__ import annotations

import pytest
from cel_helpers import ev, ev_cost

from dra_affinity.cel import EXTRACTOR_ENV, CELCompileError, CELEvalError

FULL = "https://u:p%40@h.com:80/p%2Fq%20r?a=1&b=2&a=3&c=%zz&d;e=1#fr%20ag"

VALUES = [
    ("isURL('https://example.com:8443/a/b?x=1#f')", True),
    ("isURL('/relative/path')", True),  # an absolute path is a request URI
    ("isURL('not a url')", False),
    ("isURL('relative/path')", False),
    ("isURL('')", False),
    ("isURL('http://h:abc/')", False),  # bad port
    ("isURL('http://[::1/')", False),
    ("isURL('http://[1.2.3.4]/')", False),  # IPv4 in brackets
    ("isURL('http://h/\\u0007')", False),  # control byte
    ("isURL('*')", True),
    ("isURL('mailto:x@y.com')", True),  # opaque
    ("url('https://example.com:8443/a/b?x=1#f').getScheme()", "https"),
    ("url('HTTP://EXAMPLE.com/').getScheme()", "http"),  # the scheme is lower-cased, not the host
    ("url('HTTP://EXAMPLE.com/').getHost()", "EXAMPLE.com"),
    ("url('https://example.com:8443/a/b?x=1#f').getHost()", "example.com:8443"),
    ("url('https://example.com:8443/a/b?x=1#f').getHostname()", "example.com"),
    ("url('https://example.com:8443/a/b?x=1#f').getPort()", "8443"),
    ("url('https://example.com/').getPort()", ""),
    ("url('http://[::1]:80/').getHost()", "[::1]:80"),
    ("url('http://[::1]:80/').getHostname()", "::1"),
    ("url('http://[fe80::1%25eth0]:8080/x').getHostname()", "fe80::1%eth0"),
    ("url('http://ex%C3%BCmple.com/').getHost()", "ex\u00fcmple.com"),  # only non-ASCII escapes in hosts
    (f"url('{FULL}').getEscapedPath()", "/p%2Fq%20r"),  # the raw path is kept when valid
    ("url('http://h/a b').getEscapedPath()", "/a%20b"),
    ("url('http://h/\u00fc').getEscapedPath()", "/%C3%BC"),
    ("url('mailto:x@y.com').getEscapedPath()", ""),
    (f"url('{FULL}').getQuery()", {"a": ["1", "3"], "b": ["2"]}),  # bad escape and ';' pairs dropped
    ("url('http://h/p;x?a+b=c+d').getQuery()", {"a b": ["c d"]}),
    ("url('http://h/?').getQuery()", {}),
    ("url('http://h/') == url('http://h/')", True),
    ("url('http://h/') == url('http://h')", False),
]


@pytest.mark.parametrize(("expr", "want"), VALUES, ids=[v[0][:70] for v in VALUES])
def test_url_values(expr: str, want: object) -> None:
    assert ev(expr) == want


@pytest.mark.parametrize("expr", ["url('not a url')", "url('http://h:x/')", "url('http://h/%zz')",
                                  "url('http://h/#%zz')", "url('http://a@b@[x]/')", "url('')",
                                  "url('http://ex%41mple.com/')"])
def test_url_parse_errors(expr: str) -> None:
    with pytest.raises(CELEvalError) as info:
        ev(expr)
    assert info.value.reason == "invalid_argument"
    assert "URL parse error" in str(info.value)


def test_url_of_non_string_data_is_no_such_overload() -> None:
    with pytest.raises(CELEvalError) as info:
        ev("url(object.x)", {"x": 1})
    assert info.value.reason == "no_such_overload"


@pytest.mark.parametrize("expr", ["url(1)", "url('http://h/').getQuery(1)", "'x'.getHost()",
                                  "string(url('http://h/'))"])
def test_ill_typed_url_calls_are_compile_errors(expr: str) -> None:
    with pytest.raises(CELCompileError):
        EXTRACTOR_ENV.compile(expr)


def test_url_costs() -> None:
    # url(): 0.1 per character, as Kubernetes; accessors 1
    s = "https://example.com:8443/a/b?x=1#f"  # 34 characters: 4
    assert ev_cost("url(object.s).getHost()", {"object": {"s": s}})[1] == 2 + 4 + 1
    # isURL: Kubernetes charges 1 whatever the length; we charge the parse like url()
    assert ev_cost("isURL(object.s)", {"object": {"s": s}})[1] == 2 + 4
    long = "http://h/" + "a" * 5000
    assert ev_cost("isURL(object.s)", {"object": {"s": long}})[1] == 2 + 501
    # beyond Kubernetes: 1 per %-escape
    escaped = "http://h/" + "%20" * 100  # 309 characters
    assert ev_cost("isURL(object.s)", {"object": {"s": escaped}})[1] == 2 + 31 + 100
    # getQuery: 0.1 per character of the query and 10 per parameter
    assert ev_cost("url(object.s).getQuery()", {"object": {"s": "http://h/?a=1&b=2"}})[1] == 2 + 2 + 1 + 20
    prog = EXTRACTOR_ENV.compile("url(object.s).getQuery()")
    value, cost = prog.evaluate({"object": {"s": "http://h/?" + "a=1&" * 100}}, 10**6)
    assert value == {"a": ["1"] * 100}
    assert cost <= prog.cost_estimate.max
