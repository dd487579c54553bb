"""Kubernetes' IP and CIDR libraries (``library.IP``, ``library.CIDR``): ``net.IP`` and ``net.CIDR``.

Parsing follows Go's ``net/netip`` as Kubernetes restricts it: dotted IPv4
without leading zeros, IPv6 without a zone (``fe80::1%eth0`` is refused) and no
IPv4-mapped IPv6 (``::ffff:1.2.3.4``); a CIDR keeps its host bits
(``cidr('10.0.0.1/24').ip()`` is ``10.0.0.1``, ``masked()`` clears them), its
prefix length is plain decimal without leading zeros. The stdlib ``ipaddress``
does the address parsing; the rules above are checked around it.

Costs are Kubernetes' ``library.CostEstimator``: parsing is a string traversal
(0.1 per character, 0.2 for ``ip.isCanonical``), accessors cost 1, the
containment tests charge by the CIDR's size in bytes (``ceil(prefix bits / 8)``)
plus a parse of a string argument.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import re
from typing import Any, Final

from . import types
from .errors import INVALID_ARGUMENT, CELEvalError
from .values import no_such_overload

IP_TYPE: Final = types.Ty("net.IP")
CIDR_TYPE: Final = types.Ty("net.CIDR")

_Addr = ipaddress.IPv4Address | ipaddress.IPv6Address
_DIGITS: Final = frozenset("0123456789")


class IP:
    """A ``net.IP`` value: one IPv4 or IPv6 address. Immutable, hashable."""

    __slots__ = ("addr",)
    addr: _Addr

    def __init__(self, addr: _Addr) -> None:
        object.__setattr__(self, "addr", addr)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("IP is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is IP and self.addr == other.addr

    def __hash__(self) -> int:
        return hash(("net.IP", self.addr))

    def __str__(self) -> str:
        return str(self.addr)

    def __repr__(self) -> str:
        return f"IP({str(self.addr)!r})"

    @property
    def size(self) -> int:
        """Bytes of the address (4 or 16): its size in Kubernetes' cost model."""
        return self.addr.max_prefixlen // 8


class CIDR:
    """A ``net.CIDR`` value: an address (host bits kept) and a prefix length."""

    __slots__ = ("addr", "bits")
    addr: _Addr
    bits: int

    def __init__(self, addr: _Addr, bits: int) -> None:
        object.__setattr__(self, "addr", addr)
        object.__setattr__(self, "bits", bits)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CIDR is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is CIDR and self.addr == other.addr and self.bits == other.bits

    def __hash__(self) -> int:
        return hash(("net.CIDR", self.addr, self.bits))

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"

    def __repr__(self) -> str:
        return f"CIDR({str(self)!r})"

    @property
    def size(self) -> int:
        """Bytes covered by the prefix, ``ceil(bits / 8)``: its size in Kubernetes' cost model."""
        return math.ceil(self.bits / 8)

    def contains(self, a: _Addr) -> bool:
        if a.version != self.addr.version:
            return False
        shift = self.addr.max_prefixlen - self.bits
        return int(a) >> shift == int(self.addr) >> shift


_IPV4: Final = re.compile(r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\Z")


@functools.lru_cache(maxsize=1024)
def _parse_addr(raw: str) -> _Addr:
    """``netip.ParseAddr`` plus Kubernetes' refusals; ValueError with the reason.

    Cached: addresses are immutable, and a loop over one data string parses it once."""
    m = _IPV4.match(raw)
    if m is not None:
        parts = [int(g) for g in m.groups()]
        if max(parts) <= 255:
            return ipaddress.IPv4Address((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3])
    if "%" in raw:
        raise ValueError(f"IP address {raw!r} with zone value is not allowed")
    if not raw.isascii() or not raw or raw != raw.strip():
        raise ValueError(f"IP Address {raw!r} parse error during conversion from string")
    try:
        addr = ipaddress.ip_address(raw)
    except ValueError:
        raise ValueError(f"IP Address {raw!r} parse error during conversion from string") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {raw!r} is not allowed")
    return addr


@functools.lru_cache(maxsize=1024)
def _parse_cidr(raw: str) -> CIDR:
    """``netip.ParsePrefix`` plus Kubernetes' refusal of IPv4-mapped IPv6."""
    head, sep, bits_text = raw.rpartition("/")
    if not sep:
        raise ValueError(f"network address parse error: no '/' in {raw!r}")
    if "%" in head:
        raise ValueError(f"network address parse error: IPv6 zones cannot be present in a prefix: {raw!r}")
    if (
        not bits_text
        or not set(bits_text) <= _DIGITS
        or (len(bits_text) > 1 and bits_text[0] == "0")
        or len(bits_text) > 3
    ):
        raise ValueError(f"network address parse error: bad bits after slash: {bits_text!r}")
    if not head.isascii() or not head or head != head.strip():
        raise ValueError(f"network address parse error: bad address in {raw!r}")
    try:
        addr = ipaddress.ip_address(head)
    except ValueError:
        raise ValueError(f"network address parse error: bad address in {raw!r}") from None
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise ValueError(f"network address parse error: prefix length out of range in {raw!r}")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {raw!r} is not allowed")
    return CIDR(addr, bits)


# -- functions --------------------------------------------------------------------


def ip(x: Any) -> IP:
    """``ip(string)``, and the member ``cidr.ip()`` (the prefix's address, host bits kept)."""
    if type(x) is str:
        try:
            return IP(_parse_addr(x))
        except ValueError as e:
            raise CELEvalError(str(e), INVALID_ARGUMENT) from None
    if type(x) is CIDR:
        return IP(x.addr)
    raise no_such_overload("ip", x)


def is_ip(s: Any) -> bool:
    if type(s) is not str:
        raise no_such_overload("isIP", s)
    try:
        _parse_addr(s)
    except ValueError:
        return False
    return True


def ip_is_canonical(s: Any) -> bool:
    if type(s) is not str:
        raise no_such_overload("ip.isCanonical", s)
    try:
        return str(_parse_addr(s)) == s
    except ValueError as e:
        raise CELEvalError(str(e), INVALID_ARGUMENT) from None


def cidr(s: Any) -> CIDR:
    if type(s) is not str:
        raise no_such_overload("cidr", s)
    try:
        return _parse_cidr(s)
    except ValueError as e:
        raise CELEvalError(str(e), INVALID_ARGUMENT) from None


def is_cidr(s: Any) -> bool:
    if type(s) is not str:
        raise no_such_overload("isCIDR", s)
    try:
        _parse_cidr(s)
    except ValueError:
        return False
    return True


def _ip_of(name: str, x: Any) -> _Addr:
    if type(x) is not IP:
        raise no_such_overload(name, x)
    a: _Addr = x.addr
    return a


def family(x: Any) -> int:
    return _ip_of("family", x).version


def is_unspecified(x: Any) -> bool:
    return _ip_of("isUnspecified", x).is_unspecified


def is_loopback(x: Any) -> bool:
    return _ip_of("isLoopback", x).is_loopback


def is_link_local_multicast(x: Any) -> bool:
    a = _ip_of("isLinkLocalMulticast", x)
    if a.version == 4:
        return a in ipaddress.IPv4Network("224.0.0.0/24")
    return (int(a) >> 112) & 0xFF0F == 0xFF02


def is_link_local_unicast(x: Any) -> bool:
    a = _ip_of("isLinkLocalUnicast", x)
    if a.version == 4:
        return a in ipaddress.IPv4Network("169.254.0.0/16")
    return (int(a) >> 118) == 0x3FA  # fe80::/10


def is_global_unicast(x: Any) -> bool:
    """Go's ``IsGlobalUnicast``: private IPv4 and ULA IPv6 addresses count as global."""
    a = _ip_of("isGlobalUnicast", x)
    if a.version == 4 and int(a) in (0, 0xFFFFFFFF):
        return False
    return not (
        a.is_unspecified or a.is_loopback or a.is_multicast or is_link_local_unicast(x)
    )


def _cidr_of(name: str, x: Any) -> CIDR:
    if type(x) is not CIDR:
        raise no_such_overload(name, x)
    return x


def contains_ip(c: Any, other: Any) -> bool:
    net = _cidr_of("containsIP", c)
    if type(other) is str:
        other = ip(other)
    return net.contains(_ip_of("containsIP", other))


def contains_cidr(c: Any, other: Any) -> bool:
    net = _cidr_of("containsCIDR", c)
    if type(other) is str:
        other = cidr(other)
    o = _cidr_of("containsCIDR", other)
    # netip: Overlaps and the containing prefix is not longer.
    if o.addr.version != net.addr.version or net.bits > o.bits:
        return False
    return net.contains(o.addr)


def prefix_length(c: Any) -> int:
    return _cidr_of("prefixLength", c).bits


def masked(c: Any) -> CIDR:
    n = _cidr_of("masked", c)
    shift = n.addr.max_prefixlen - n.bits
    value = int(n.addr) >> shift << shift
    addr = ipaddress.IPv6Address(value) if n.addr.version == 6 else ipaddress.IPv4Address(value)
    return CIDR(addr, n.bits)


def to_string(x: Any) -> str:
    """``string(ip)`` / ``string(cidr)``: Go's canonical text (RFC 5952 for IPv6)."""
    return str(x)


# -- costs (receiver first) ---------------------------------------------------------


def _size(v: object) -> int:
    if type(v) is str:
        return len(v)
    if type(v) in (IP, CIDR):
        return v.size  # type: ignore[attr-defined,no-any-return]
    return 1


def _parse_cost(args: tuple[object, ...]) -> int:
    if type(args[0]) is CIDR:  # cidr.ip(): a field read
        return 1
    return math.ceil(_size(args[0]) * 0.1)


def _canonical_cost(args: tuple[object, ...]) -> int:
    return math.ceil(_size(args[0]) * 2 * 0.1)


def _contains_ip_cost(args: tuple[object, ...]) -> int:
    c = _size(args[0])
    cost = math.ceil((c + c) * 0.1)
    if type(args[1]) is str:
        cost += math.ceil(_size(args[1]) * 0.1)
    return cost


def _contains_cidr_cost(args: tuple[object, ...]) -> int:
    c = _size(args[0])
    cost = math.ceil((c + c) * 0.1) + math.ceil(c * 0.1) + 1
    if type(args[1]) is str:
        cost += math.ceil(_size(args[1]) * 0.1)
    return cost


def _one(_args: tuple[object, ...]) -> int:
    return 1


_S, _B, _I = types.STRING, types.BOOL, types.INT

# (name, member, arity, impl, overloads as (result, *params), cost)
NET_FUNCTIONS: Final = (
    ("ip", False, 1, ip, [(IP_TYPE, _S)], _parse_cost),
    ("ip", True, 0, ip, [(IP_TYPE, CIDR_TYPE)], _one),
    ("isIP", False, 1, is_ip, [(_B, _S)], _parse_cost),
    ("ip.isCanonical", False, 1, ip_is_canonical, [(_B, _S)], _canonical_cost),
    ("family", True, 0, family, [(_I, IP_TYPE)], _one),
    ("isUnspecified", True, 0, is_unspecified, [(_B, IP_TYPE)], _one),
    ("isLoopback", True, 0, is_loopback, [(_B, IP_TYPE)], _one),
    ("isLinkLocalMulticast", True, 0, is_link_local_multicast, [(_B, IP_TYPE)], _one),
    ("isLinkLocalUnicast", True, 0, is_link_local_unicast, [(_B, IP_TYPE)], _one),
    ("isGlobalUnicast", True, 0, is_global_unicast, [(_B, IP_TYPE)], _one),
    ("cidr", False, 1, cidr, [(CIDR_TYPE, _S)], _parse_cost),
    ("isCIDR", False, 1, is_cidr, [(_B, _S)], _parse_cost),
    ("containsIP", True, 1, contains_ip, [(_B, CIDR_TYPE, IP_TYPE), (_B, CIDR_TYPE, _S)],
     _contains_ip_cost),
    ("containsCIDR", True, 1, contains_cidr, [(_B, CIDR_TYPE, CIDR_TYPE), (_B, CIDR_TYPE, _S)],
     _contains_cidr_cost),
    ("prefixLength", True, 0, prefix_length, [(_I, CIDR_TYPE)], _one),
    ("masked", True, 0, masked, [(CIDR_TYPE, CIDR_TYPE)], _one),
)


def estimate(name: str, sizes: list[int]) -> tuple[int, int] | None:
    """Static (cost, result size) of a call, from its operands' size bounds (receiver first)."""
    n0 = sizes[0] if sizes else 1
    if name in ("cidr", "isIP", "isCIDR"):
        return math.ceil(n0 * 0.1), 1
    if name == "ip":
        return max(math.ceil(n0 * 0.1), 1), 1
    if name == "ip.isCanonical":
        return math.ceil(n0 * 0.2), 1
    if name in ("containsIP", "containsCIDR"):
        # a CIDR is at most 16 bytes; a string argument is parsed too
        return math.ceil(32 * 0.1) + math.ceil(16 * 0.1) + 1 + math.ceil(sizes[1] * 0.1), 1
    return None
