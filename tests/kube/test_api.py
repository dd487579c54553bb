"""The raw transport over the official client's configuration: compact JSON bodies,
headers, keep-alive connections and their failures, errors as ApiError.

Requests read whole are checked against a real HTTP/1.1 server on loopback; watches,
and every request when a proxy is configured, go through urllib3's pool, replaced here
by a recording one."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client

from dra_affinity.kube.api import RESOURCES, ApiError, ClientApi


class _Server:
    """An HTTP/1.1 server on loopback that records requests and the connection each came
    on; ``drop_after`` makes it close a connection after answering (without saying so),
    as a server does with an idle keep-alive connection; ``hang_up`` closes it unanswered;
    ``delay`` waits that many seconds before answering."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.status, self.body = 200, b'{"ok":true}'
        self.drop_after = False
        self.hang_up = False
        self.delay = 0.0
        self.accepted = itertools.count()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.serial = next(outer.accepted)  # one per connection accepted

            def _any(self) -> None:
                drop = outer.drop_after  # as set when the request came (the test moves on)
                length = int(self.headers.get("Content-Length") or 0)
                outer.seen.append({"method": self.command, "path": self.path,
                                   "headers": dict(self.headers), "conn": self.serial,
                                   "body": self.rfile.read(length) if length else None})
                if outer.hang_up:
                    self.close_connection = True
                    return
                if outer.delay:
                    time.sleep(outer.delay)
                try:
                    self.send_response(outer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(outer.body)))
                    self.end_headers()
                    self.wfile.write(outer.body)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    self.close_connection = True
                    return
                if drop:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def connections(self) -> int:
        return len({r["conn"] for r in self.seen})


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _client(host: str, token: str | None = None, proxy: str | None = None) -> ClientApi:
    cfg = client.Configuration(host=host)
    if token is not None:
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    cfg.proxy = proxy
    return ClientApi(client.ApiClient(cfg))


def test_bodies_are_compact_json_with_the_content_type(server: _Server) -> None:
    api = _client(server.url)
    out = api.request("PATCH", "/apis/resource.k8s.io/v1/namespaces/d/resourceclaims/c/status",
                      body={"status": {"x": [1, 2]}, "metadata": {"resourceVersion": "5"}},
                      content_type="application/merge-patch+json")
    assert out == {"ok": True}
    [req] = server.seen
    assert req["method"] == "PATCH" and req["path"].endswith("/resourceclaims/c/status")
    assert req["body"] == b'{"status":{"x":[1,2]},"metadata":{"resourceVersion":"5"}}'
    assert req["headers"]["Content-Type"] == "application/merge-patch+json"
    assert req["headers"]["Content-Length"] == str(len(req["body"]))


def test_requests_carry_the_query_the_token_and_the_user_agent(server: _Server) -> None:
    api = _client(server.url, token="t0")
    api.request("GET", "/api/v1/pods", query={"watch": "true", "fieldSelector": "a!=b,c=d"})
    [req] = server.seen
    assert (req["method"], req["body"]) == ("GET", None)
    assert req["path"] == "/api/v1/pods?fieldSelector=a%21%3Db%2Cc%3Dd&watch=true"
    headers = req["headers"]
    assert headers["Authorization"] == "Bearer t0" and "Content-Type" not in headers
    assert headers["User-Agent"].startswith("OpenAPI-Generator")
    assert headers["Host"] == server.url.removeprefix("http://")


def test_the_token_is_read_at_each_request(server: _Server) -> None:
    """A token the client's refresh hook renews (exec plugins, projected files) is sent
    as renewed, not as it was when the client was built."""
    api = _client(server.url, token="old")

    def refresh(c: Any) -> None:
        c.api_key["authorization"] = "new"
    api.client.configuration.refresh_api_key_hook = refresh
    api.request("GET", "/api/v1/nodes")
    assert server.seen[0]["headers"]["Authorization"] == "Bearer new"


def test_one_connection_is_kept_alive_per_thread(server: _Server) -> None:
    api = _client(server.url)
    for _ in range(3):
        api.request("GET", "/api/v1/nodes")
    assert server.connections() == 1
    other = threading.Thread(target=api.request, args=("GET", "/api/v1/nodes"))
    other.start()
    other.join()
    assert server.connections() == 2 and len(server.seen) == 4


def test_a_connection_the_server_closed_while_idle_is_replaced_and_the_request_sent_again(
        server: _Server) -> None:
    api = _client(server.url)
    server.drop_after = True
    api.request("GET", "/api/v1/nodes")  # answered, then the server drops the connection
    server.drop_after = False
    assert api.request("POST", "/api/v1/namespaces/d/pods/p/binding", body={"b": 1}) == {"ok": True}
    assert [r["method"] for r in server.seen] == ["GET", "POST"]
    assert server.connections() == 2


def test_no_answer_on_a_new_connection_is_an_api_error_sent_once(server: _Server) -> None:
    api = _client(server.url)
    server.hang_up = True
    with pytest.raises(ApiError) as e:
        api.request("POST", "/api/v1/namespaces/d/pods/p/binding", body={"b": 1})
    assert e.value.status == 0 and len(server.seen) == 1
    server.hang_up = False
    assert api.request("GET", "/api/v1/nodes") == {"ok": True}  # a new connection


def test_each_request_waits_its_own_timeout_on_a_kept_connection(server: _Server) -> None:
    api = _client(server.url)
    assert api.request("GET", "/api/v1/nodes", timeout=30) == {"ok": True}
    server.delay = 5.0  # far past the request's timeout, however slow the machine
    with pytest.raises(ApiError) as e:  # the same connection, a shorter timeout
        api.request("GET", "/api/v1/nodes", timeout=0.2)
    assert e.value.status == 0 and server.connections() == 1
    server.delay = 0.0
    assert api.request("GET", "/api/v1/nodes", timeout=30) == {"ok": True}  # a new connection


def test_nothing_listening_is_an_api_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ApiError) as e:
        _client(f"http://127.0.0.1:{port}").request("GET", "/api/v1/nodes", timeout=5)
    assert e.value.status == 0


def test_error_status_becomes_api_error_with_the_server_message(server: _Server) -> None:
    server.status = 409
    server.body = json.dumps({"kind": "Status", "reason": "Conflict",
                              "message": "the object has been modified"}).encode()
    api = _client(server.url)
    with pytest.raises(ApiError) as e:
        api.request("PUT", "/apis/coordination.k8s.io/v1/namespaces/n/leases/l", body={})
    assert e.value.conflict and "has been modified" in str(e.value)
    server.status, server.body = 200, b'{"ok":true}'
    assert api.request("GET", "/api/v1/nodes") == {"ok": True}  # the connection is still usable
    assert server.connections() == 1


# ---------------------------------------------------------------- through urllib3's pool
class _Resp:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.reason = "OK" if status < 300 else "Gone"
        self.data = json.dumps(body).encode()
        self.released = False

    def read(self) -> bytes:
        return self.data

    def release_conn(self) -> None:
        self.released = True


class _Pool:
    def __init__(self, status: int = 200, body: Any = None) -> None:
        self.sent: list[tuple[str, str, bytes | None, dict[str, str]]] = []
        self.answers: list[_Resp] = []
        self.status, self.body = status, body if body is not None else {"ok": True}
        self.connection_pool_kw: dict[str, Any] = {"maxsize": 10}

    def urlopen(self, method: str, url: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, **_: Any) -> _Resp:
        self.sent.append((method, url, body, dict(headers or {})))
        self.answers.append(_Resp(self.status, self.body))
        return self.answers[-1]


def _pooled(pool: _Pool, proxy: str | None = None) -> ClientApi:
    api = _client("http://127.0.0.1:1", proxy=proxy)
    api.client.rest_client.pool_manager = pool
    return ClientApi(api.client)


def test_with_a_proxy_requests_go_through_the_pool() -> None:
    pool = _Pool()
    api = _pooled(pool, proxy="http://proxy.invalid:3128")
    assert api.request("PATCH", "/api/v1/namespaces/d/pods/p/status", body={"a": 1},
                       content_type="application/merge-patch+json") == {"ok": True}
    method, url, body, headers = pool.sent[0]
    assert (method, url, body) == ("PATCH", "http://127.0.0.1:1/api/v1/namespaces/d/pods/p/status",
                                   b'{"a":1}')
    assert headers["Content-Type"] == "application/merge-patch+json"


def test_keep_connections_only_raises_the_pool_size() -> None:
    pool = _Pool()
    api = _pooled(pool)
    api.keep_connections(30)
    assert pool.connection_pool_kw["maxsize"] == 30
    api.keep_connections(4)
    assert pool.connection_pool_kw["maxsize"] == 30


def test_a_watch_refused_is_an_api_error_and_gives_its_connection_back() -> None:
    pool = _Pool(410, {"kind": "Status", "reason": "Expired", "message": "too old"})
    with pytest.raises(ApiError) as e:
        _pooled(pool).watch("/api/v1/pods", {"resourceVersion": "1"}, 5.0)
    assert e.value.gone and "too old" in str(e.value)
    assert pool.answers[0].released and pool.sent[0][1].endswith("resourceVersion=1&watch=true")


def test_resource_paths() -> None:
    rc = RESOURCES["ResourceClaim"]
    assert rc.item("c", "ns", "status") == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    assert RESOURCES["Node"].collection("ignored") == "/api/v1/nodes"
    assert RESOURCES["Pod"].item("p", "d", "binding") == "/api/v1/namespaces/d/pods/p/binding"


def test_cluster_scoped_kinds_have_no_namespace_in_their_paths() -> None:
    assert [k for k, r in RESOURCES.items() if not r.namespaced] == [
        "Namespace", "Node", "DeviceClass", "ResourceSlice"]
    assert RESOURCES["ResourceSlice"].item("s", "ns") == "/apis/resource.k8s.io/v1/resourceslices/s"
    assert RESOURCES["Lease"].collection("ns") == "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
