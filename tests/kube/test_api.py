"""The raw transport over the official client: compact JSON bodies, errors as ApiError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from dra_affinity.kube.api import RESOURCES, ApiError, ClientApi


class _Resp:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.reason = "OK" if status < 300 else "Conflict"
        self.data = json.dumps(body).encode()
        self.headers: dict[str, str] = {}

        self.released = False

    def read(self) -> bytes:
        return self.data

    def release_conn(self) -> None:
        self.released = True


class _Pool:
    def __init__(self, status: int = 200, body: Any = None) -> None:
        self.sent: list[tuple[str, str, bytes | None, dict[str, str]]] = []
        self.status, self.body = status, body if body is not None else {"ok": True}

        self.connection_pool_kw: dict[str, Any] = {"maxsize": 10}

    def urlopen(self, method: str, url: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, **_: Any) -> _Resp:
        self.sent.append((method, url, body, dict(headers or {})))
        return _Resp(self.status, self.body)


def _api(pool: _Pool, token: str | None = None) -> ClientApi:
    cfg = client.Configuration(host="http://127.0.0.1:1")
    if token is not None:
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    c = client.ApiClient(cfg)
    c.rest_client.pool_manager = pool
    return ClientApi(c)


def test_bodies_are_compact_json_with_the_content_type() -> None:
    pool = _Pool()
    api = _api(pool)
    out = api.request("PATCH", "/apis/resource.k8s.io/v1/namespaces/d/resourceclaims/c/status",
                      body={"status": {"x": [1, 2]}, "metadata": {"resourceVersion": "5"}},
                      content_type="application/merge-patch+json")
    assert out == {"ok": True}
    method, url, body, headers = pool.sent[0]
    assert method == "PATCH" and url.endswith("/resourceclaims/c/status")
    assert body == b'{"status":{"x":[1,2]},"metadata":{"resourceVersion":"5"}}'
    assert headers["Content-Type"] == "application/merge-patch+json"


def test_requests_carry_the_query_the_token_and_the_user_agent() -> None:
    pool = _Pool()
    api = _api(pool, token="t0")
    api.request("GET", "/api/v1/pods", query={"watch": "true", "fieldSelector": "a!=b,c=d"})
    method, url, body, headers = pool.sent[0]
    assert (method, body) == ("GET", None)
    assert url == "http://127.0.0.1:1/api/v1/pods?fieldSelector=a%21%3Db%2Cc%3Dd&watch=true"
    assert headers["Authorization"] == "Bearer t0" and "Content-Type" not in headers
    assert headers["User-Agent"].startswith("OpenAPI-Generator")


def test_the_token_is_read_at_each_request() -> None:
    """A token the client's refresh hook renews (exec plugins, projected files) is sent
    as renewed, not as it was when the client was built."""
    pool = _Pool()
    api = _api(pool, token="old")
    cfg = api.client.configuration

    def refresh(c: Any) -> None:
        c.api_key["authorization"] = "new"
    cfg.refresh_api_key_hook = refresh
    api.request("GET", "/api/v1/nodes")
    assert pool.sent[0][3]["Authorization"] == "Bearer new"


def test_keep_connections_only_raises_the_pool_size() -> None:
    pool = _Pool()
    api = _api(pool)
    api.keep_connections(30)
    assert pool.connection_pool_kw["maxsize"] == 30
    api.keep_connections(4)
    assert pool.connection_pool_kw["maxsize"] == 30


def test_error_status_becomes_api_error_with_the_server_message() -> None:
    pool = _Pool(409, {"kind": "Status", "reason": "Conflict",
                       "message": "the object has been modified"})
    with pytest.raises(ApiError) as e:
        _api(pool).request("PUT", "/apis/coordination.k8s.io/v1/namespaces/n/leases/l", body={})
    assert e.value.conflict and "has been modified" in str(e.value)


def test_a_watch_refused_is_an_api_error_and_gives_its_connection_back() -> None:
    pool = _Pool(410, {"kind": "Status", "reason": "Expired", "message": "too old"})
    answers: list[_Resp] = []
    urlopen = pool.urlopen

    def keep(*a: Any, **kw: Any) -> _Resp:
        answers.append(urlopen(*a, **kw))
        return answers[-1]
    pool.urlopen = keep  # type: ignore[method-assign]
    with pytest.raises(ApiError) as e:
        _api(pool).watch("/api/v1/pods", {"resourceVersion": "1"}, 5.0)
    assert e.value.gone and "too old" in str(e.value)
    assert answers[0].released and pool.sent[0][1].endswith("resourceVersion=1&watch=true")


def test_resource_paths() -> None:
    rc = RESOURCES["ResourceClaim"]
    assert rc.item("c", "ns", "status") == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    assert RESOURCES["Node"].collection("ignored") == "/api/v1/nodes"
    assert RESOURCES["Pod"].item("p", "d", "binding") == "/api/v1/namespaces/d/pods/p/binding"
