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

    def read(self) -> bytes:
        return self.data


class _Pool:
    def __init__(self, status: int = 200, body: Any = None) -> None:
        self.sent: list[tuple[str, str, bytes | None, dict[str, str]]] = []
        self.status, self.body = status, body if body is not None else {"ok": True}

    def request(self, method: str, url: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, **_: Any) -> _Resp:
        self.sent.append((method, url, body, dict(headers or {})))
        return _Resp(self.status, self.body)


def _api(pool: _Pool) -> ClientApi:
    c = client.ApiClient(client.Configuration(host="http://127.0.0.1:1"))
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


def test_error_status_becomes_api_error_with_the_server_message() -> None:
    pool = _Pool(409, {"kind": "Status", "reason": "Conflict",
                       "message": "the object has been modified"})
    with pytest.raises(ApiError) as e:
        _api(pool).request("PUT", "/apis/coordination.k8s.io/v1/namespaces/n/leases/l", body={})
    assert e.value.conflict and "has been modified" in str(e.value)


def test_resource_paths() -> None:
    rc = RESOURCES["ResourceClaim"]
    assert rc.item("c", "ns", "status") == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    assert RESOURCES["Node"].collection("ignored") == "/api/v1/nodes"
    assert RESOURCES["Pod"].item("p", "d", "binding") == "/api/v1/namespaces/d/pods/p/binding"
