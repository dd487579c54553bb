"""A fault-injecting HTTPS proxy on loopback, between a client and kube-apiserver.

The proxy terminates TLS with the control plane's own serving certificate (it names
127.0.0.1 and is signed by the plane's CA), so a kubeconfig that differs from the
admin's only in its server URL reaches it (:meth:`FaultProxy.kubeconfig`), and it
re-originates each request to kube-apiserver with the admin's client certificate.
One request per connection: the proxy asks the API server to close after its answer
(``Connection: close``, which the server repeats to the client) and relays that answer
byte for byte until the server closes, so watch streams pass through unchanged.

Writes (POST, PUT, PATCH, DELETE) on the paths a scheduler writes (ResourceClaims and
their status, pods' ``binding`` and ``status``, Events) fail on a seeded fraction
``rate`` of them, each with one kind drawn from ``kinds``:

* ``409``: answered ``Conflict`` without being forwarded;
* ``500``: answered ``InternalError`` without being forwarded;
* ``reset``: the connection reset before anything is forwarded (nothing stored);
* ``reset-after``: forwarded, the server's whole answer read, then the connection
  reset: the write may be stored, and the client never learns it.

Every other request (reads, watches, the Lease) passes untouched. When kube-apiserver
cannot be reached the client's connection is reset, as a dead server's would be.
:attr:`FaultProxy.injected` counts the faults by kind, :attr:`FaultProxy.writes` the
writes it could have failed.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import select
import socket
import ssl
import struct
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from controlplane import Pki, write_kubeconfig

#: Every kind of fault, in the order they are drawn from.
FAULTS = ("409", "500", "reset", "reset-after")

_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_NS = r"/namespaces/[^/]+"
#: The paths whose writes may fail: claims (and status), pod binding and status, events.
_FAULTABLE = re.compile(
    rf"^(?:/apis/resource\.k8s\.io/v1{_NS}/resourceclaims(?:/[^/]+(?:/status)?)?"
    rf"|/api/v1{_NS}/pods/[^/]+/(?:binding|status)"
    rf"|/api/v1{_NS}/events(?:/[^/]+)?"
    rf"|/apis/events\.k8s\.io/v1{_NS}/events(?:/[^/]+)?)$")
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection"})
_MAX_HEAD = 1 << 20
_STATUS_TEXT = {"409": ("Conflict", "Conflict"), "500": ("Internal Server Error", "InternalError")}


class ProxyError(Exception):
    """A request the proxy cannot relay (malformed, or a framing it does not speak)."""


def faultable(method: str, path: str) -> bool:
    """Whether a request is a write the proxy may fail (query string ignored)."""
    return method in _WRITE_METHODS and _FAULTABLE.match(path.split("?", 1)[0]) is not None


class FaultProxy:
    """The proxy (see the module's docstring); a context manager that starts and stops it."""

    def __init__(self, upstream: tuple[str, int], pki: Pki, *, rate: float, seed: int,
                 kinds: Sequence[str] = FAULTS) -> None:
        unknown = sorted(set(kinds) - set(FAULTS))
        if unknown or not kinds:
            raise ValueError(f"fault kinds: unknown {unknown} (known: {', '.join(FAULTS)})")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate {rate} is not within [0, 1]")
        self.upstream = upstream
        self.pki = pki
        self.rate = rate
        self.kinds = tuple(kinds)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        #: Faults injected so far, by kind.
        self.injected: Counter[str] = Counter()
        #: Writes seen on the faultable paths (failed or not).
        self.writes = 0
        self._open: set[socket.socket] = set()
        self._stopped = threading.Event()
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
        self._server_ctx.set_alpn_protocols(["http/1.1"])
        self._client_ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        self._client_ctx.load_cert_chain(str(pki.client_cert("admin")), str(pki.client_key("admin")))
        self._client_ctx.set_alpn_protocols(["http/1.1"])
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig that reaches the API server through this proxy (as the admin)."""
        return write_kubeconfig(path, self.server, self.pki, "admin")

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting and cut every open connection (watch streams included)."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            _close(conn)
        self._thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summary(self) -> str:
        """``writes=N 409=a 500=b reset=c reset-after=d`` (every kind, zeros included)."""
        with self._lock:
            return " ".join([f"writes={self.writes}",
                             *(f"{k}={self.injected[k]}" for k in FAULTS)])

    # ------------------------------------------------------------------ internals
    def _decide(self, method: str, path: str) -> str | None:
        if not faultable(method, path):
            return None
        with self._lock:
            self.writes += 1
            if self._rng.random() >= self.rate:
                return None
            kind = self._rng.choice(self.kinds)
            self.injected[kind] += 1
            return kind

    def _track(self, conn: socket.socket) -> socket.socket:
        with self._lock:
            self._open.add(conn)
        if self._stopped.is_set():
            _close(conn)
        return conn

    def _forget(self, *conns: socket.socket | None) -> None:
        for conn in conns:
            if conn is None:
                continue
            with self._lock:
                self._open.discard(conn)
            _close(conn)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _addr = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(self._track(conn),),
                             name="fault-proxy-conn", daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        client: socket.socket = raw
        upstream: socket.socket | None = None
        try:
            raw.settimeout(30)
            client = self._track(self._server_ctx.wrap_socket(raw, server_side=True))
            method, path, request = _read_request(client)
            fault = self._decide(method, path)
            if fault in _STATUS_TEXT:
                client.sendall(_status_answer(fault))
                return
            if fault == "reset":
                _reset(client)
                return
            try:
                upstream = self._track(self._client_ctx.wrap_socket(
                    socket.create_connection(self.upstream, timeout=10),
                    server_hostname=self.upstream[0]))
                upstream.sendall(request)
            except OSError:
                _reset(client)  # as a dead or unreachable server's connection would be
                return
            if fault == "reset-after":
                while upstream.recv(65536):
                    pass  # the server's whole answer: the write is done (or refused)
                _reset(client)
                return
            client.settimeout(None)
            upstream.settimeout(None)
            _relay(upstream, client)
        except (OSError, ProxyError, ValueError):
            _reset(client)
        finally:
            self._forget(upstream, client, raw)


def _read_request(conn: socket.socket) -> tuple[str, str, bytes]:
    """One request (method, path, bytes to forward with ``Connection: close``)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            raise ProxyError("the client closed before a whole request head")
        buf += chunk
        if len(buf) > _MAX_HEAD:
            raise ProxyError("request head too large")
    head, body = buf.split(b"\r\n\r\n", 1)
    first, *fields = head.split(b"\r\n")
    method, target, _version = first.decode("latin-1").split(" ", 2)
    kept: list[bytes] = []
    length = 0
    for line in fields:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"transfer-encoding":
            raise ProxyError("chunked request bodies are not relayed")
        if key == b"content-length":
            length = int(value.strip())
        if key not in _HOP_BY_HOP:
            kept.append(line)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ProxyError("the client closed before the whole request body")
        body += chunk
    out = b"\r\n".join([first, *kept, b"Connection: close"]) + b"\r\n\r\n" + body[:length]
    return method, target, out


def _status_answer(kind: str) -> bytes:
    text, reason = _STATUS_TEXT[kind]
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": f"{reason} injected by the fault proxy", "reason": reason,
                       "code": int(kind)}).encode()
    return (f"HTTP/1.1 {kind} {text}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def _relay(upstream: socket.socket, client: socket.socket) -> None:
    """The server's answer to the client until the server closes; a client that closes
    (a watch it gave up) ends it too."""
    while True:
        pending = isinstance(upstream, ssl.SSLSocket) and upstream.pending() > 0
        ready = [upstream] if pending else select.select([upstream, client], [], [])[0]
        if upstream in ready:
            data = upstream.recv(65536)
            if not data:
                return
            client.sendall(data)
        if client in ready and not client.recv(65536):
            return


def _reset(conn: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), not an orderly shutdown."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _close(conn)


def _close(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.close()
