"""The API server as the adapter uses it: raw JSON requests and watch streams.

Everything goes through the official ``kubernetes`` client's configuration
(authentication, TLS, proxies from the kubeconfig) and its urllib3 connection
settings, but not through its typed models, which drop fields they do not know
(``spec.sharingAffinity`` among them). :class:`Api` is the small protocol the rest of the package needs;
:class:`ClientApi` implements it over ``kubernetes.client.ApiClient``, and the
unit tests implement it in memory.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

import httptools

from dra_affinity.api.keys import CLUSTER_SCOPED

__all__ = [
    "RESOURCES",
    "Api",
    "ApiError",
    "ClientApi",
    "Resource",
    "load_api",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class Resource:
    """Where one kind lives: API path prefix and plural."""

    kind: str
    prefix: str  # "/api/v1" or "/apis/resource.k8s.io/v1"
    plural: str

    @property
    def namespaced(self) -> bool:
        """Whether objects of the kind live in a namespace (:data:`CLUSTER_SCOPED`)."""
        return self.kind not in CLUSTER_SCOPED

    def collection(self, namespace: str | None = None) -> str:
        if self.namespaced and namespace:
            return f"{self.prefix}/namespaces/{namespace}/{self.plural}"
        return f"{self.prefix}/{self.plural}"

    def item(self, name: str, namespace: str | None = None, sub: str = "") -> str:
        path = f"{self.collection(namespace)}/{name}"
        return f"{path}/{sub}" if sub else path


RESOURCES: dict[str, Resource] = {
    "Namespace": Resource("Namespace", "/api/v1", "namespaces"),
    "Node": Resource("Node", "/api/v1", "nodes"),
    "Pod": Resource("Pod", "/api/v1", "pods"),
    "Event": Resource("Event", "/apis/events.k8s.io/v1", "events"),
    "DeviceClass": Resource("DeviceClass", "/apis/resource.k8s.io/v1", "deviceclasses"),
    "ResourceSlice": Resource("ResourceSlice", "/apis/resource.k8s.io/v1", "resourceslices"),
    "ResourceClaim": Resource("ResourceClaim", "/apis/resource.k8s.io/v1", "resourceclaims"),
    "ResourceClaimTemplate": Resource("ResourceClaimTemplate", "/apis/resource.k8s.io/v1",
                                      "resourceclaimtemplates"),
    "Lease": Resource("Lease", "/apis/coordination.k8s.io/v1", "leases"),
}


class ApiError(Exception):
    """A non-2xx answer (or a transport failure, status 0), with the server's message."""

    def __init__(self, status: int, reason: str, message: str = "",
                 body: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = dict(body or {})

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        return self.status == 410


class Api(Protocol):
    """Raw JSON access to one API server."""

    def request(self, method: str, path: str, *, body: Any = None,
                query: Mapping[str, str] | None = None,
                content_type: str = "application/json",
                timeout: float | None = None) -> Any:
        """The decoded JSON answer; raises :class:`ApiError` on a non-2xx status."""
        ...

    def request_bytes(self, method: str, path: str, *, body: bytes | None = None,
                      content_type: str = "application/json", accept: str = "application/json",
                      timeout: float | None = None) -> bytes:
        """One request with a body and an answer in any encoding (protobuf: see
        :mod:`.protowire`), sent and returned byte for byte; :class:`ApiError` on a
        non-2xx status."""
        ...

    def watch(self, path: str, query: Mapping[str, str], timeout: float) -> Iterator[dict[str, Any]]:
        """Watch events (``{"type": ..., "object": ...}``) until the server ends the stream;
        raises :class:`ApiError` when the watch cannot start."""
        ...


def _error_from(status: int, reason: str, data: bytes) -> ApiError:
    body: dict[str, Any] = {}
    message = ""
    try:
        decoded = json.loads(data) if data else {}
        if isinstance(decoded, dict):
            body = decoded
            message = str(decoded.get("message", ""))
    except (ValueError, UnicodeDecodeError):
        message = data[:300].decode("utf-8", "replace")
    return ApiError(status, reason or str(body.get("reason", "")), message, body)


# What urllib3's pool passes to each connection it opens (TLS, socket options); the
# keep-alive connections below are opened with the same.
_CONNECTION_KW = frozenset({
    "cert_reqs", "ca_certs", "ca_cert_dir", "ca_cert_data", "cert_file", "key_file",
    "key_password", "assert_hostname", "assert_fingerprint", "server_hostname", "ssl_context",
    "ssl_version", "ssl_minimum_version", "ssl_maximum_version", "socket_options"})
# A reused connection that fails so, without an answer, was closed by the server while idle.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


#: Bytes asked of the socket per read (a TLS read returns at most one 16 KiB record).
_RECV = 65536
#: An answer's status line and headers may take this many bytes at most (http.client
#: allowed 100 headers of 64 KiB).
MAX_HEADER_BYTES = 1 << 20


class _Answer:
    """What ``httptools``' parser reports of one answer (its callbacks). Whatever
    follows the first answer is not kept (nothing was asked for it)."""

    __slots__ = ("body", "done", "framed", "head_done", "keep_alive", "messages", "parser",
                 "reason", "status")

    def __init__(self) -> None:
        self.parser: Any = None  # llhttp answers the status and whether to keep the
        self.status = 0          # connection only until the message completes: they
        self.keep_alive = False  # are asked with the headers
        self.reason = b""
        self.body: list[bytes] = []
        self.framed = False  # a Content-Length or Transfer-Encoding says where the body ends
        self.head_done = False
        self.done = False
        self.messages = 0

    def on_message_begin(self) -> None:
        self.messages += 1

    def on_status(self, reason: bytes) -> None:
        if not self.head_done:
            self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        if not self.head_done:
            self.head_done = True
            self.status = int(self.parser.get_status_code())
            self.keep_alive = bool(self.parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        if not self.done:
            self.body.append(body)

    def on_message_complete(self) -> None:
        self.done = True


def read_answer(sock: Any) -> tuple[int, str, bytes, bool]:
    """One HTTP/1.1 answer read from ``sock``: (status, reason, body, whether the
    connection must be closed after it). For requests other than HEAD, which the
    scheduler never sends (an answer to HEAD has headers that describe no body).

    Raises ``http.client.RemoteDisconnected`` when the connection ends before the
    first byte (a kept connection the server closed while idle), another
    ``http.client.HTTPException`` when the answer is malformed, cut short, has headers
    past :data:`MAX_HEADER_BYTES` or is informational (1xx: nothing the scheduler sends
    asks for one), and ``OSError`` on a socket failure or timeout."""
    answer = _Answer()
    answer.parser = parser = httptools.HttpResponseParser(answer)
    received = 0
    try:
        while not answer.done:
            data = sock.recv(_RECV)
            if not data:
                if not received:
                    raise http.client.RemoteDisconnected("the connection closed without an answer")
                if answer.head_done and not answer.framed:  # the body ends with the connection
                    break
                raise http.client.IncompleteRead(b"".join(answer.body))
            received += len(data)
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as e:
                raise http.client.HTTPException(f"malformed answer: {e}") from None
            if not answer.head_done and received > MAX_HEADER_BYTES:
                raise http.client.HTTPException(f"answer headers past {MAX_HEADER_BYTES} bytes")
    finally:
        answer.parser = None
    if answer.status < 200:
        raise http.client.HTTPException(f"unexpected informational answer {answer.status}")
    will_close = not answer.done or answer.messages > 1 or not answer.keep_alive
    return answer.status, answer.reason.decode("latin-1"), b"".join(answer.body), will_close


class _KeepAlive:
    """One HTTP/1.1 keep-alive connection per thread to one API server, for requests
    whose answer is read whole (watches stream through urllib3's pool).

    A request is written with one ``sendall`` (headers and body together) and its
    answer read with ``recv`` into ``httptools``' parser (llhttp): mostly two blocking
    calls, so the thread gives up the GIL twice per request, where urllib3's pool does
    five or six times (a liveness poll, headers and body sent apart, reads). Each
    give-up wakes another thread. ``http.client``'s parser (the headers go through the
    email package) cost about 95 µs per answer where llhttp costs 6 µs
    (``benchmarks/http_answer.py``). Connections are opened by urllib3 with the pool's
    own settings (CA, client certificate, hostname checks, socket options).

    A reused connection the server closed while idle fails with no answer: the request
    is sent once more on a new connection. The scheduler's writes carry a precondition
    (a resourceVersion, the pod's UID) or are settled by reading back, so a repeat of one
    the server did carry out is refused, not applied twice."""

    def __init__(self, host: str, pool_kw: Mapping[str, Any]) -> None:
        url = urlsplit(host)
        self.https = url.scheme == "https"
        self.hostname = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.base = url.path.rstrip("/")
        default_port = 443 if self.https else 80
        self.host_header = self.hostname if self.port == default_port else f"{self.hostname}:{self.port}"
        if ":" in self.hostname and self.port != default_port:
            self.host_header = f"[{self.hostname}]:{self.port}"
        self.connection_kw = {k: v for k, v in pool_kw.items() if k in _CONNECTION_KW}
        self._local = threading.local()

    def _open(self, timeout: float) -> Any:
        from urllib3.connection import HTTPConnection, HTTPSConnection

        kw = self.connection_kw if self.https else {
            k: v for k, v in self.connection_kw.items() if k == "socket_options"}
        cls = HTTPSConnection if self.https else HTTPConnection
        conn = cls(self.hostname, self.port, timeout=timeout, **kw)
        conn.connect()
        return conn

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None,
                timeout: float) -> tuple[int, str, bytes]:
        """(status, reason, body) of one request; OSError or HTTPException when unanswered."""
        lines = [f"{method} {self.base}{target} HTTP/1.1", f"Host: {self.host_header}",
                 *(f"{k}: {v}" for k, v in headers.items())]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        while True:
            conn = getattr(self._local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = self._local.conn = self._open(timeout)
            try:
                if conn.sock.gettimeout() != timeout:
                    # Setting it costs a system call and a hand-off of the GIL: only
                    # when it changes (requests mostly share the default).
                    conn.sock.settimeout(timeout)
                conn.sock.sendall(data)
                status, reason, payload, will_close = read_answer(conn.sock)
            except _STALE:
                self.close()
                if reused:
                    continue
                raise
            except BaseException:
                self.close()
                raise
            if will_close:
                self.close()
            return status, reason, payload


class ClientApi:
    """:class:`Api` over the official client's configuration.

    The kubeconfig's TLS, client certificates, proxy and token (refreshed by the
    client's hook when it expires) are the official client's; requests are sent with
    headers built here, as client-go's transport sends them: no per-request
    configuration, parameter sanitizing or response model. Requests read whole go
    over :class:`_KeepAlive` connections (through urllib3's pool when a proxy is
    configured); watches stream through the pool, which keeps up to
    :meth:`keep_connections` idle connections so that threads that watch or send at
    once do not each open (and then drop) a TLS connection."""

    def __init__(self, api_client: Any) -> None:
        self.client = api_client
        cfg = api_client.configuration
        self._host = str(cfg.host).rstrip("/")
        self._headers = {k: str(v) for k, v in api_client.default_headers.items()}
        pool_kw = api_client.rest_client.pool_manager.connection_pool_kw
        self._direct = None if cfg.proxy else _KeepAlive(self._host, pool_kw)

    def keep_connections(self, count: int) -> None:
        """Keep up to ``count`` idle connections (one per thread that may hold a
        request at once); call it before the first request."""
        pool_kw = self.client.rest_client.pool_manager.connection_pool_kw
        pool_kw["maxsize"] = max(int(pool_kw.get("maxsize") or 1), count)

    def _headers_for(self, accept: str, content_type: str | None) -> dict[str, str]:
        headers = {**self._headers, "Accept": accept}
        auth = self.client.configuration.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers["Authorization"] = str(auth["value"])
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    @staticmethod
    def _encode(body: Any) -> bytes | None:
        if body is None or isinstance(body, bytes):
            return body
        # Bodies are sent as compact JSON, as Go clients send them: the server keeps
        # opaque parameters (RawExtension) byte for byte and later compares them so
        # (a claim update whose parameters are spaced differently is "modified").
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()

    def _send(self, method: str, path: str, body: Any, query: Mapping[str, str] | None,
              content_type: str, timeout: float | tuple[float, float],
              accept: str = "application/json", stream: bool = False) -> Any:
        """The urllib3 response of a request through the pool; ApiError when there is none."""
        import urllib3

        url = self._host + path
        if query:
            url += "?" + urlencode(sorted(query.items()))
        data = self._encode(body)
        headers = self._headers_for(accept, content_type if data is not None else None)
        t = (urllib3.Timeout(connect=timeout[0], read=timeout[1]) if isinstance(timeout, tuple)
             else urllib3.Timeout(total=timeout))
        try:
            return self.client.rest_client.pool_manager.urlopen(
                method, url, body=data, headers=headers, timeout=t, preload_content=not stream)
        except urllib3.exceptions.HTTPError as e:
            raise ApiError(0, type(e).__name__, str(e)) from None
        except OSError as e:
            raise ApiError(0, type(e).__name__, str(e)) from None

    def request(self, method: str, path: str, *, body: Any = None,
                query: Mapping[str, str] | None = None,
                content_type: str = "application/json",
                timeout: float | None = None) -> Any:
        data = self._answer(method, path, body, query, content_type, timeout)
        return json.loads(data) if data else None

    def request_bytes(self, method: str, path: str, *, body: bytes | None = None,
                      content_type: str = "application/json", accept: str = "application/json",
                      timeout: float | None = None) -> bytes:
        return self._answer(method, path, body, None, content_type, timeout, accept)

    def _answer(self, method: str, path: str, body: Any,
                         query: Mapping[str, str] | None, content_type: str,
                         timeout: float | None, accept: str = "application/json") -> bytes:
        """One request's answer as bytes; ApiError on a non-2xx status."""
        import urllib3

        if self._direct is None:
            resp = self._send(method, path, body, query, content_type, timeout or 30.0, accept)
            status, reason, data = int(resp.status), str(resp.reason or ""), bytes(resp.data)
        else:
            target = path + ("?" + urlencode(sorted(query.items())) if query else "")
            sent = self._encode(body)
            headers = self._headers_for(accept, content_type if sent is not None else None)
            try:
                status, reason, data = self._direct.request(method, target, headers, sent,
                                                            timeout or 30.0)
            except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as e:
                raise ApiError(0, type(e).__name__, str(e)) from None
        if not 200 <= status < 300:
            raise _error_from(status, reason, data)
        return data

    def watch(self, path: str, query: Mapping[str, str], timeout: float) -> Iterator[dict[str, Any]]:
        # Connect timeout, then a read timeout past the server's own timeoutSeconds.
        raw = self._send("GET", path, None, {**query, "watch": "true"}, "application/json",
                         (10.0, timeout + 30.0), stream=True)
        if not 200 <= int(raw.status) < 300:
            try:
                raise _error_from(int(raw.status), str(raw.reason or ""), raw.read())
            finally:
                raw.release_conn()
        return _lines(raw)


def _lines(raw: Any) -> Iterator[dict[str, Any]]:
    import urllib3

    buf = b""
    try:
        for chunk in raw.stream(amt=None, decode_content=False):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
        if buf.strip():
            yield json.loads(buf)
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise ApiError(0, type(e).__name__, str(e)) from None
    finally:
        raw.release_conn()


def load_api(kubeconfig: str | None, context: str | None = None) -> ClientApi:
    """An :class:`Api` from a kubeconfig file, or the in-cluster service account."""
    from kubernetes import client, config

    if kubeconfig:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return ClientApi(client.ApiClient(cfg))
