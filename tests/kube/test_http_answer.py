"""Reading one HTTP/1.1 answer off a kept connection (``read_answer``): bodies framed
by length, by chunks or by the connection's end, in whatever pieces the socket hands
them; when the connection must be closed after the answer; and every answer that is
cut short, malformed or out of place as the error the transport retries or reports."""

from __future__ import annotations

import http.client

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dra_affinity.kube import api
from dra_affinity.kube.api import read_answer


class _Sock:
    """A socket whose reads hand out the given pieces, then the connection's end."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)
        self.reads = 0

    def recv(self, n: int) -> bytes:
        self.reads += 1
        if not self.pieces:
            return b""
        piece = self.pieces.pop(0)
        assert len(piece) <= n
        return piece


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAudit-Id: 7\r\n"
BODY = b'{"kind":"ResourceClaim","metadata":{"name":"c","resourceVersion":"42"}}'


def _chunked(body: bytes, size: int) -> bytes:
    out = b""
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def test_a_body_framed_by_its_length() -> None:
    sock = _Sock(HEAD + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
    assert read_answer(sock) == (200, "OK", BODY, False)
    assert sock.reads == 1  # nothing read past the answer


def test_a_chunked_body_in_pieces_is_joined() -> None:
    wire = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(BODY, 7)
    sock = _Sock(*(wire[i:i + 5] for i in range(0, len(wire), 5)))
    assert read_answer(sock) == (200, "OK", BODY, False)
    assert not sock.pieces


@given(st.binary(max_size=3000), st.integers(1, 500),
       st.lists(st.integers(1, 400), min_size=1, max_size=40))
def test_any_split_of_any_chunked_body_reads_the_same(body: bytes, chunk: int,
                                                      cuts: list[int]) -> None:
    wire = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(body, chunk)
    pieces, at = [], 0
    for n in cuts * (len(wire) // max(sum(cuts), 1) + 1):
        if at >= len(wire):
            break
        pieces.append(wire[at:at + n])
        at += n
    assert read_answer(_Sock(*pieces)) == (200, "OK", body, False)


def test_the_reason_and_an_error_status_are_returned_with_their_body() -> None:
    status = b'{"kind":"Status","reason":"Conflict","message":"the object has been modified"}'
    wire = (b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(status) + status)
    assert read_answer(_Sock(wire)) == (409, "Conflict", status, False)


def test_an_answer_without_a_body() -> None:
    assert read_answer(_Sock(b"HTTP/1.1 204 No Content\r\nAudit-Id: 1\r\n\r\n")) == (
        204, "No Content", b"", False)


def test_connection_close_closes_after_the_answer() -> None:
    wire = HEAD + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY
    assert read_answer(_Sock(wire)) == (200, "OK", BODY, True)


def test_a_body_without_framing_ends_with_the_connection() -> None:
    sock = _Sock(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n", BODY[:10], BODY[10:])
    assert read_answer(sock) == (200, "OK", BODY, True)


def test_bytes_past_the_answer_close_the_connection() -> None:
    """Nothing was asked for them (no request is pipelined): the connection is not
    trusted for the next request."""
    wire = HEAD + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY + b"HTTP/1.1 200 OK\r\n"
    assert read_answer(_Sock(wire)) == (200, "OK", BODY, True)


def test_the_end_before_any_byte_is_a_remote_disconnect() -> None:
    """What a kept connection the server closed while idle gives: the transport sends
    the request again on a new connection."""
    with pytest.raises(http.client.RemoteDisconnected):
        read_answer(_Sock())
    assert issubclass(http.client.RemoteDisconnected, api._STALE)


@pytest.mark.parametrize("wire", [
    HEAD + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY[:-3],
    HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(BODY, 9)[:-5],
    HEAD,
], ids=["length", "chunked", "headers"])
def test_an_answer_cut_short_is_an_incomplete_read(wire: bytes) -> None:
    with pytest.raises(http.client.IncompleteRead):
        read_answer(_Sock(wire))


@pytest.mark.parametrize("wire", [
    b"SMTP ready\r\n\r\n",
    b"HTTP/1.1 2x0 OK\r\n\r\n",
    HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    HEAD + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
], ids=["not-http", "status", "chunk-size", "two-lengths"])
def test_a_malformed_answer_is_an_http_exception(wire: bytes) -> None:
    with pytest.raises(http.client.HTTPException) as e:
        read_answer(_Sock(wire))
    assert not isinstance(e.value, http.client.IncompleteRead)


def test_headers_past_the_limit_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "MAX_HEADER_BYTES", 1000)
    flood = [b"X-Filler-%d: %s\r\n" % (i, b"y" * 60) for i in range(100)]
    sock = _Sock(HEAD, *flood, b"Content-Length: 0\r\n\r\n")
    with pytest.raises(http.client.HTTPException, match="past 1000 bytes"):
        read_answer(sock)
    assert sock.pieces  # refused before the rest was read


def test_an_informational_answer_is_refused() -> None:
    with pytest.raises(http.client.HTTPException, match="informational answer 100"):
        read_answer(_Sock(b"HTTP/1.1 100 Continue\r\n\r\n"))
