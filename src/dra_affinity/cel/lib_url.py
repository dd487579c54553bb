"""Kubernetes' URL library (``library.URLs``): ``url()``, ``isURL()`` and the accessors.

Kubernetes accepts what Go's ``url.ParseRequestURI`` accepts (an absolute URI
or an absolute path; no fragment splitting) and keeps the result of
``url.Parse`` (which does split the fragment off). This module reproduces Go's
``net/url`` parsing for those two entry points on the UTF-8 bytes of the text:
scheme detection, query and opaque parts, authority (userinfo, bracketed IPv6
hosts, ports), percent-decoding per URL component, and the escaping used by
``getEscapedPath()`` and ``string()``. Python's ``urllib.parse`` is not used:
it is lenient where Go refuses (control bytes, bad escapes, bad ports).

Costs: ``url()`` is a string traversal (0.1 per character) as in Kubernetes;
``isURL()`` costs 1 there whatever the length, here the same as ``url()`` (a
deliberate difference: the parse is O(n) and must be paid for); accessors 1.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, Final
from urllib.parse import unquote_to_bytes

from . import types
from .errors import INVALID_ARGUMENT, CELEvalError
from .values import no_such_overload

URL_TYPE: Final = types.Ty("kubernetes.URL")

# Go's encoding modes.
_PATH, _SEGMENT, _HOST, _ZONE, _USERPASS, _QUERY, _FRAGMENT = range(7)
_ALNUM: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_HOST_OK: Final = frozenset(b"!$&'()*+,;=:[]<>\"")
_RESERVED: Final = frozenset(b"$&+,/:;=?@")
_UPPERHEX: Final = b"0123456789ABCDEF"


class _URLError(ValueError):
    pass


def _should_escape(c: int, mode: int) -> bool:
    if c in _ALNUM:
        return False
    if mode in (_HOST, _ZONE) and c in _HOST_OK:
        return False
    if c in b"-_.~":
        return False
    if c in _RESERVED:
        if mode == _PATH:
            return c == ord("?")
        if mode == _SEGMENT:
            return c in b"/;,?"
        if mode == _USERPASS:
            return c in b"@/?:"
        if mode == _QUERY:
            return True
        if mode == _FRAGMENT:
            return False
    return not (mode == _FRAGMENT and c in b"!()*")


_CTL: Final = bytes(range(0x20)) + b"\x7f"
_BAD_ESCAPE: Final = re.compile(rb"%(?![0-9a-fA-F]{2})")
_ESCAPE_SEQ: Final = re.compile(rb"%([0-9a-fA-F]{2})")


def _escape_class(mode: int) -> re.Pattern[bytes]:
    chars = b"".join(re.escape(bytes([c])) for c in range(256) if _should_escape(c, mode))
    return re.compile(b"[" + chars + b"]")


def _unescape(s: bytes, mode: int) -> bytes:
    """Go's ``unescape`` (regular expressions do the scanning; the rules are Go's)."""
    if mode in (_HOST, _ZONE) or b"%" in s or (mode == _QUERY and b"+" in s):
        return _unescape_slow(s, mode) if mode in (_HOST, _ZONE) else _unescape_fast(s, mode)
    return s


def _unescape_fast(s: bytes, mode: int) -> bytes:
    bad = _BAD_ESCAPE.search(s)
    if bad is not None:
        raise _URLError(f"invalid URL escape {s[bad.start():bad.start() + 3]!r}")
    if mode == _QUERY:
        s = s.replace(b"+", b" ")
    # every '%' starts a valid escape here, so the stdlib's decoder agrees with Go's
    return unquote_to_bytes(s) if b"%" in s else s


def _unescape_slow(s: bytes, mode: int) -> bytes:
    n = 0
    has_plus = False
    i = 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            n += 1
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise _URLError(f"invalid URL escape {s[i:i + 3]!r}")
            v = int(s[i + 1 : i + 3], 16)
            if mode == _HOST and v >> 4 < 8 and s[i : i + 3] != b"%25":
                raise _URLError(f"invalid URL escape {s[i:i + 3]!r}")
            if mode == _ZONE and s[i : i + 3] != b"%25" and v != 0x20 and _should_escape(v, _HOST):
                raise _URLError(f"invalid URL escape {s[i:i + 3]!r}")
            i += 3
        elif c == ord("+"):
            has_plus = mode == _QUERY
            i += 1
        else:
            if mode in (_HOST, _ZONE) and c < 0x80 and _should_escape(c, mode):
                raise _URLError(f"invalid character {chr(c)!r} in host name")
            i += 1
    if n == 0 and not has_plus:
        return s
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            out.append(int(s[i + 1 : i + 3], 16))
            i += 3
            continue
        if c == ord("+"):
            out.append(0x20 if mode == _QUERY else c)
        else:
            out.append(c)
        i += 1
    return bytes(out)


_ESCAPE_CLASSES: Final = {m: _escape_class(m) for m in range(7)}
_HEX_OF: Final = [b"%" + bytes([_UPPERHEX[c >> 4], _UPPERHEX[c & 15]]) for c in range(256)]


def _escape(s: bytes, mode: int) -> bytes:
    """Go's ``escape``: only the bytes that need it are rewritten."""
    rx = _ESCAPE_CLASSES[mode]
    if rx.search(s) is None:
        return s
    if mode == _QUERY:
        return rx.sub(lambda m: b"+" if m.group(0) == b" " else _HEX_OF[m.group(0)[0]], s)
    return rx.sub(lambda m: _HEX_OF[m.group(0)[0]], s)


def _escape_slow(s: bytes, mode: int) -> bytes:
    out = bytearray()
    for c in s:
        if c == 0x20 and mode == _QUERY:
            out.append(ord("+"))
        elif _should_escape(c, mode):
            out += b"%" + _UPPERHEX[c >> 4 : (c >> 4) + 1] + _UPPERHEX[c & 15 : (c & 15) + 1]
        else:
            out.append(c)
    return bytes(out)


_INVALID_ENCODED: Final = {
    m: re.compile(
        b"["
        + b"".join(
            re.escape(bytes([c]))
            for c in range(256)
            if c not in b"!$&'()*+,;=:@[]%" and _should_escape(c, m)
        )
        + b"]"
    )
    for m in (_PATH, _FRAGMENT)
}


def _valid_encoded(s: bytes, mode: int) -> bool:
    return _INVALID_ENCODED[mode].search(s) is None


def _raw_if_it_encodes(raw: bytes, decoded: bytes, mode: int) -> bytes | None:
    """The raw (as written) form of a path or fragment when it is a valid encoding of the
    decoded one, as Go's ``EscapedPath``/``EscapedFragment`` prefer it; else None."""
    if raw and _valid_encoded(raw, mode):
        try:
            if _unescape(raw, mode) == decoded:
                return raw
        except _URLError:
            pass
    return None


def _valid_port(p: bytes) -> bool:
    return p == b"" or (p[:1] == b":" and all(0x30 <= c <= 0x39 for c in p[1:]))


class URL:
    """A ``kubernetes.URL`` value: the components of Go's ``url.URL``. Immutable."""

    __slots__ = (
        "force_query", "fragment", "host", "omit_host", "opaque", "password", "path",
        "raw_fragment", "raw_path", "raw_query", "scheme", "user",
    )  # fmt: skip

    scheme: bytes
    opaque: bytes
    user: bytes | None
    password: bytes | None
    host: bytes
    path: bytes
    raw_path: bytes
    raw_query: bytes
    force_query: bool
    omit_host: bool
    fragment: bytes
    raw_fragment: bytes

    def __init__(self) -> None:
        for name, v in (("scheme", b""), ("opaque", b""), ("user", None), ("password", None),
                        ("host", b""), ("path", b""), ("raw_path", b""), ("raw_query", b""),
                        ("force_query", False), ("omit_host", False), ("fragment", b""),
                        ("raw_fragment", b"")):
            object.__setattr__(self, name, v)

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("URL is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is URL and self.text() == other.text()

    def __hash__(self) -> int:
        return hash(("kubernetes.URL", self.text()))

    def __repr__(self) -> str:
        return f"URL({str(self)!r})"

    def __str__(self) -> str:
        return _text(self.text())

    # -- Go's URL methods ----------------------------------------------------------

    def escaped_path(self) -> bytes:
        raw = _raw_if_it_encodes(self.raw_path, self.path, _PATH)
        if raw is not None:
            return raw
        if self.path == b"*":
            return b"*"
        return _escape(self.path, _PATH)

    def escaped_fragment(self) -> bytes:
        raw = _raw_if_it_encodes(self.raw_fragment, self.fragment, _FRAGMENT)
        return raw if raw is not None else _escape(self.fragment, _FRAGMENT)

    def host_port(self) -> tuple[bytes, bytes]:
        host, port = self.host, b""
        colon = host.rfind(b":")
        if colon != -1 and _valid_port(host[colon:]):
            host, port = host[:colon], host[colon + 1 :]
        if host.startswith(b"[") and host.endswith(b"]"):
            host = host[1:-1]
        return host, port

    def text(self) -> bytes:
        """``URL.String()``."""
        out = bytearray()
        if self.scheme:
            out += self.scheme + b":"
        if self.opaque:
            out += self.opaque
        else:
            if (self.scheme or self.host or self.user is not None) and not (
                self.omit_host and not self.host and self.user is None
            ):
                if self.host or self.path or self.user is not None:
                    out += b"//"
                if self.user is not None:
                    out += _escape(self.user, _USERPASS)
                    if self.password is not None:
                        out += b":" + _escape(self.password, _USERPASS)
                    out += b"@"
                if self.host:
                    out += _escape(self.host, _HOST)
            path = self.escaped_path()
            if path and path[:1] != b"/" and self.host:
                out += b"/"
            if not out and b":" in path.split(b"/", 1)[0]:
                out += b"./"
            out += path
        if self.force_query or self.raw_query:
            out += b"?" + self.raw_query
        if self.fragment:
            out += b"#" + self.escaped_fragment()
        return bytes(out)


def _text(b: bytes) -> str:
    # Go strings may hold any bytes; as CEL strings they read as UTF-8
    # (an invalid sequence becomes U+FFFD, as Go's JSON encoding shows it).
    return b.decode("utf-8", "replace")


def _get_scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A:
            continue
        if 0x30 <= c <= 0x39 or c in b"+-.":
            if i == 0:
                return b"", raw
            continue
        if c == ord(":"):
            if i == 0:
                raise _URLError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return b"", raw
    return b"", raw


def _parse_host(scheme: bytes, host: bytes) -> bytes:
    open_idx = host.rfind(b"[")
    if open_idx > 0:
        raise _URLError("invalid IP-literal")
    if open_idx == 0:
        close = host.rfind(b"]")
        if close < 0:
            raise _URLError("missing ']' in host")
        colon_port = host[close + 1 :]
        if not _valid_port(colon_port):
            raise _URLError(f"invalid port {colon_port!r} after host")
        port = _unescape(colon_port, _HOST)
        name = host[1:close]
        zone = name.find(b"%25")
        if zone >= 0:
            hostname = _unescape(name[:zone], _HOST) + _unescape(name[zone:], _ZONE)
        else:
            hostname = _unescape(name, _HOST)
        addr_text, _, zone_text = hostname.partition(b"%")
        try:
            if b"%" in hostname and not zone_text:
                raise ValueError("empty zone")
            addr = ipaddress.ip_address(addr_text.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise _URLError("invalid host") from None
        if addr.version == 4:
            raise _URLError("invalid IP-literal")
        return b"[" + hostname + b"]" + port
    i = host.find(b":")
    if i != -1:
        last = host.rfind(b":")
        if last != i and scheme not in (b"http", b"https"):
            i = last
        if not _valid_port(host[i:]):
            raise _URLError(f"invalid port {host[i:]!r} after host")
    return _unescape(host, _HOST)


def _parse_authority(u: URL, authority: bytes) -> None:
    i = authority.rfind(b"@")
    host = _parse_host(u.scheme, authority if i < 0 else authority[i + 1 :])
    u._set("host", host)
    if i < 0:
        return
    userinfo = authority[:i]
    if not all(c in _ALNUM or c in b"-._:~!$&'()*+,;=%@" for c in userinfo):
        raise _URLError("net/url: invalid userinfo")
    name, colon, password = userinfo.partition(b":")
    u._set("user", _unescape(name, _USERPASS))
    if colon:
        u._set("password", _unescape(password, _USERPASS))


def _parse(raw: bytes, via_request: bool, keep: bool = True) -> URL:
    """Go's ``parse``; ``keep=False`` only validates (the raw path is not worked out)."""
    if len(raw.translate(None, _CTL)) != len(raw):
        raise _URLError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise _URLError("empty url")
    u = URL()
    if raw == b"*":
        u._set("path", b"*")
        return u
    scheme, rest = _get_scheme(raw)
    u._set("scheme", scheme.lower())
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        u._set("force_query", True)
        rest = rest[:-1]
    else:
        rest, _, query = rest.partition(b"?")
        u._set("raw_query", query)
    if not rest.startswith(b"/"):
        if u.scheme:
            u._set("opaque", rest)
            return u
        if via_request:
            raise _URLError("invalid URI for request")
        if b":" in rest.split(b"/", 1)[0]:
            raise _URLError("first path segment in URL cannot contain colon")
    if (u.scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, rest = rest[2:], b""
        slash = authority.find(b"/")
        if slash >= 0:
            authority, rest = authority[:slash], authority[slash:]
        _parse_authority(u, authority)
    elif u.scheme and rest.startswith(b"/"):
        u._set("omit_host", True)
    path = _unescape(rest, _PATH)
    u._set("path", path)
    if keep:
        u._set("raw_path", b"" if _is_canonical_path(rest) else rest)
    return u


def _is_canonical_path(raw: bytes) -> bool:
    """``escape(unescape(raw)) == raw`` for a path, without building the escaped text:
    no byte outside escapes needs escaping, and every escape is upper-case and needed."""
    if _ESCAPE_CLASSES[_PATH].search(raw.replace(b"%", b"")) is not None:
        return False
    for seq in set(_ESCAPE_SEQ.findall(raw)):
        if seq != seq.upper() or not _should_escape(int(seq, 16), _PATH):
            return False
    return True


def parse_url(text: str) -> URL:
    """Kubernetes' ``url()``: ``ParseRequestURI`` must accept the text; the value is ``Parse``'s."""
    raw = text.encode("utf-8", "surrogatepass")
    _parse(raw, True, keep=False)
    head, sep, frag = raw.partition(b"#")
    u = _parse(head, False)
    if sep and frag:
        f = _unescape(frag, _FRAGMENT)
        u._set("fragment", f)
        u._set("raw_fragment", b"" if _escape(f, _FRAGMENT) == frag else frag)
    return u


# -- functions ------------------------------------------------------------------------


def url(s: Any) -> URL:
    if type(s) is not str:
        raise no_such_overload("url", s)
    try:
        return parse_url(s)
    except _URLError as e:
        shown = s if len(s) <= 60 else s[:57] + "..."
        raise CELEvalError(
            f"URL parse error during conversion from string: {shown!r}: {e}", INVALID_ARGUMENT
        ) from None


def is_url(s: Any) -> bool:
    if type(s) is not str:
        raise no_such_overload("isURL", s)
    try:
        _parse(s.encode("utf-8", "surrogatepass"), True, keep=False)
    except _URLError:
        return False
    return True


def _u(name: str, x: Any) -> URL:
    if type(x) is not URL:
        raise no_such_overload(name, x)
    return x


def get_scheme(x: Any) -> str:
    return _text(_u("getScheme", x).scheme)


def get_host(x: Any) -> str:
    return _text(_u("getHost", x).host)


def get_hostname(x: Any) -> str:
    return _text(_u("getHostname", x).host_port()[0])


def get_port(x: Any) -> str:
    return _text(_u("getPort", x).host_port()[1])


def get_escaped_path(x: Any) -> str:
    return _text(_u("getEscapedPath", x).escaped_path())


def get_query(x: Any) -> dict[str, list[str]]:
    """Go's ``url.Query()``: pairs split on ``&``; a pair with ``;`` or a bad escape is skipped."""
    q = _u("getQuery", x).raw_query
    out: dict[str, list[str]] = {}
    if q.count(b"&") + 1 > 10000:  # Go's default limit on query parameters
        return out
    for part in q.split(b"&") if q else ():
        if b";" in part or not part:
            continue
        k, _, v = part.partition(b"=")
        try:
            key, value = _unescape(k, _QUERY), _unescape(v, _QUERY)
        except _URLError:
            continue
        out.setdefault(_text(key), []).append(_text(value))
    return out


def _parse_cost(args: tuple[object, ...]) -> int:
    # Kubernetes: 0.1 per character. Beyond it, 1 per percent-escape: decoding one
    # costs far more than scanning a character.
    s = args[0]
    return math.ceil(len(s) * 0.1) + s.count("%") if type(s) is str else 1


QUERY_PARAMETER_COST: Final = 10


def _query_cost(args: tuple[object, ...]) -> int:
    # Beyond Kubernetes (1): the map is as large as the query: 0.1 per character and,
    # per parameter, what creating a list costs in cel-go (10).
    u = args[0]
    if type(u) is not URL:
        return 1
    q = u.raw_query
    params = q.count(b"&") + 1 if q else 0
    return max(1, math.ceil(len(q) * 0.1) + QUERY_PARAMETER_COST * params)


def _one(_args: tuple[object, ...]) -> int:
    return 1


_S, _B = types.STRING, types.BOOL

# (name, member, arity, impl, overloads as (result, *params), cost)
URL_FUNCTIONS: Final = (
    ("url", False, 1, url, [(URL_TYPE, _S)], _parse_cost),
    ("isURL", False, 1, is_url, [(_B, _S)], _parse_cost),
    ("getScheme", True, 0, get_scheme, [(_S, URL_TYPE)], _one),
    ("getHost", True, 0, get_host, [(_S, URL_TYPE)], _one),
    ("getHostname", True, 0, get_hostname, [(_S, URL_TYPE)], _one),
    ("getPort", True, 0, get_port, [(_S, URL_TYPE)], _one),
    ("getEscapedPath", True, 0, get_escaped_path, [(_S, URL_TYPE)], _one),
    ("getQuery", True, 0, get_query, [(types.map_of(_S, types.LIST_STRING), URL_TYPE)], _query_cost),
)


def estimate(name: str, sizes: list[int]) -> tuple[int, int] | None:
    """Static (cost, result size) of a call, from its operands' size bounds."""
    n0 = sizes[0] if sizes else 1
    if name in ("url", "isURL"):
        return max(math.ceil(n0 * 0.1) + n0, 1), n0
    if name in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"):
        return 1, 3 * n0  # escaping may triple the text
    if name == "getQuery":
        return max(1, math.ceil(n0 * 0.1) + QUERY_PARAMETER_COST * (n0 // 2 + 1)), n0
    return None
