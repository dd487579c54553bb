"""Claims from every client are allocated, on a real control plane.

The API server keeps opaque ``parameters`` as the bytes the creator sent, and refuses
any JSON-encoded write of such a claim whose re-encoding differs (docs/cluster.md,
"Observed server behaviour"). The scheduler writes the claim itself as protobuf.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from dra_affinity.kube.api import MERGE_PATCH, ApiError
from kube.live import Live, World, live, ns, schedulers, wait_until

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns, schedulers)  # pytest finds fixtures by module attribute

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


def _claim_body(w: World, name: str, subnet: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": w.ns}, "spec": w.claim_spec(subnet)}


def _post_spaced(live: Live, w: World, name: str, subnet: str) -> None:
    """Create a claim from JSON with the spacing of ``json.dumps`` defaults."""
    body = json.dumps(_claim_body(w, name, subnet)).encode()
    assert b", " in body and b": " in body
    live.api.request_bytes("POST", f"/apis/resource.k8s.io/v1/namespaces/{w.ns}/resourceclaims",
                           body=body)


def test_server_refuses_json_writes_of_claims_created_with_spaced_json(
        control_plane: Any, live: Live, ns: str) -> None:
    """The server behaviour the protobuf write exists for (an upstream bug; see docs/)."""
    w = World(live, ns, nodes=1, nics=1)
    _post_spaced(live, w, "spaced", "x")
    w.claim("compact", "x")  # the project's client sends compact JSON
    finalizer = {"metadata": {"finalizers": ["example.com/f"]}}
    path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    live.api.request("PATCH", f"{path}/compact", body=finalizer, content_type=MERGE_PATCH)
    with pytest.raises(ApiError) as e:
        live.api.request("PATCH", f"{path}/spaced", body=finalizer, content_type=MERGE_PATCH)
    assert e.value.status == 422 and "field is immutable" in str(e.value)
    # kubectl, the same
    kubectl = control_plane.plane.bin_dir / "kubectl"
    out = subprocess.run([str(kubectl), "--kubeconfig", str(control_plane.kubeconfig), "-n", ns,
                          "patch", "resourceclaim", "spaced", "--type=merge", "-p",
                          json.dumps(finalizer)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode != 0 and "field is immutable" in out.stderr


def test_claims_from_the_official_python_client_are_allocated(
        control_plane: Any, live: Live, ns: str, schedulers: Any) -> None:
    from kubernetes import client

    w = World(live, ns, nodes=1, nics=2)
    name = f"dra-affinity-{ns}"
    resource: Any = client.ResourceV1Api(control_plane.client)  # dict bodies, as users send them
    # the official client sends json.dumps(body): spaced JSON
    resource.create_namespaced_resource_claim(ns, _claim_body(w, "py-nic", "x"))
    resource.create_namespaced_resource_claim_template(ns, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "py-tmpl", "namespace": ns}, "spec": {"spec": w.claim_spec("x")}})
    _post_spaced(live, w, "raw-nic", "y")
    w.claim("plain-nic", "y")
    schedulers(identity="r1")
    w.pod("p-py", claim="py-nic", scheduler=name)
    w.pod("p-tmpl", template="py-tmpl", scheduler=name)
    w.pod("p-raw", claim="raw-nic", scheduler=name)
    w.pod("p-plain", claim="plain-nic", scheduler=name)
    pods = ["p-py", "p-tmpl", "p-raw", "p-plain"]
    wait_until(lambda: all(live.node_of(ns, p) for p in pods), 90, f"pods {pods} bound")
    claims = live.api.request("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")
    allocated = {c["metadata"]["name"]: c for c in claims["items"]
                 if (c.get("status") or {}).get("allocation")}
    assert len(allocated) == 4, sorted(allocated)
    for c in allocated.values():
        assert DELETE_PROTECTION in c["metadata"]["finalizers"]
        # the parameters still read as the creator wrote them
        params = c["spec"]["devices"]["config"][0]["opaque"]["parameters"]
        assert params["kind"] == "NICConfig"
