"""The fault-injecting proxy of the chaos suite, against the real API server: each kind
of fault does what it says, and everything else passes through unchanged."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from faultproxy import FAULTS, FaultProxy, faultable

from dra_affinity.kube.api import ApiError, load_api
from kube.live import Live, live, ns

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns)  # pytest finds fixtures by module attribute


def _proxy(control_plane: Any, **kw: Any) -> FaultProxy:
    plane = control_plane.plane
    return FaultProxy(("127.0.0.1", plane.ports["kube-apiserver"]), plane.pki, **kw)


def _claim(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": "none"}}]}}}


@pytest.mark.parametrize("kind", FAULTS)
def test_each_fault_kind_on_a_claim_write(control_plane: Any, live: Live, ns: str,
                                          tmp_path: Path, kind: str) -> None:
    with _proxy(control_plane, rate=1.0, seed=1, kinds=[kind]) as proxy:
        api = load_api(str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig")))
        # reads pass
        assert api.request("GET", f"/api/v1/namespaces/{ns}")["metadata"]["name"] == ns
        with pytest.raises(ApiError) as e:
            api.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
                        body=_claim(ns, "c"))
        assert e.value.status == (int(kind) if kind in ("409", "500") else 0), e.value
        # only the write whose answer was lost reached the server
        assert (live.claim(ns, "c") is not None) == (kind == "reset-after")
        assert dict(proxy.injected) == {kind: 1} and proxy.writes == 1
        # writes elsewhere (a Lease, say) are never failed
        api.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", body={
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": ns}, "spec": {}})
        assert proxy.writes == 1
        assert proxy.summary().startswith("writes=1 ")


def test_no_fault_at_rate_zero_and_watches_stream(control_plane: Any, live: Live, ns: str,
                                                  tmp_path: Path) -> None:
    with _proxy(control_plane, rate=0.0, seed=1) as proxy:
        api = load_api(str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig")))
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        names: list[str] = []

        def watch() -> None:
            for event in api.watch(path, {"resourceVersion": "0"}, timeout=20):
                names.append(event["object"]["metadata"]["name"])
                if len(names) == 3:
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        for i in range(3):
            api.request("POST", path, body=_claim(ns, f"c{i}"))
        watcher.join(30)
        assert sorted(names) == ["c0", "c1", "c2"]
        assert proxy.writes == 3 and not proxy.injected


def test_faultable_paths() -> None:
    claim = "/apis/resource.k8s.io/v1/namespaces/n/resourceclaims/c"
    assert faultable("PUT", claim) and faultable("PATCH", f"{claim}/status?fieldManager=x")
    assert faultable("POST", "/api/v1/namespaces/n/pods/p/binding")
    assert faultable("PATCH", "/api/v1/namespaces/n/pods/p/status")
    assert faultable("POST", "/api/v1/namespaces/n/events")
    assert not faultable("GET", claim)
    assert not faultable("PUT", "/apis/coordination.k8s.io/v1/namespaces/n/leases/l")
    assert not faultable("POST", "/api/v1/namespaces/n/pods")
    with pytest.raises(ValueError):
        FaultProxy(("127.0.0.1", 1), None, rate=2.0, seed=1)  # type: ignore[arg-type]
