"""Smoke tests of the real control plane, through the official ``kubernetes`` client.

They pin down the server behaviour the project builds on: which DRA API is served,
what happens to a ResourceSlice field the server does not know (``sharingAffinity``),
how kube-controller-manager turns a ResourceClaimTemplate into a claim, and that a
secondary scheduler can write an allocation and bind a pod.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from controlplane import (
    BINARIES,
    MERGE_PATCH,
    STATE_FILE,
    ControlPlane,
    ControlPlaneError,
    create_namespace,
    create_ready_node,
    group_members,
    raw_request,
    wait_for,
)
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conftest import ControlPlaneHandle
from dra_affinity.kube.api import RESOURCES
from dra_affinity.validation.sharing_affinity import SHARING_AFFINITY_ANNOTATION

pytestmark = pytest.mark.cluster

DRIVER = "networking.example.com"
SCHEDULER = "dra-affinity"
CONTROLPLANE_PY = Path(__file__).parent / "controlplane.py"
_ids = itertools.count()

# The KEP's metadata slice: pool-level extractors, no devices.
SHARING_AFFINITY = [
    {
        "name": "subnet",
        "expression": 'object.kind == "NICConfig" ? object.subnetID : ""',
    },
    {"name": "pkey", "expression": 'object.kind == "NICConfig" ? object.ibPKey : ""'},
]
NIC_CONFIG = {
    "apiVersion": "networking.example.com/v1",
    "kind": "NICConfig",
    "subnetID": "subnet-A",
    "ibPKey": "0x8001",
    "mtu": 9000,
}


def _name(prefix: str) -> str:
    """Cluster-scoped names must not collide between tests sharing the session's plane."""
    return f"{prefix}-{next(_ids)}"


def _message(err: ApiException) -> str:
    """The Status message of a refused request."""
    return str(json.loads(err.body or "{}").get("message", ""))


def _resource(plane: ControlPlaneHandle) -> Any:
    """resource.k8s.io/v1 API; Any because the tests walk optional fields the server sets."""
    return client.ResourceV1Api(plane.client)


def _core(plane: ControlPlaneHandle) -> Any:
    return client.CoreV1Api(plane.client)


@pytest.fixture
def namespace(control_plane: ControlPlaneHandle) -> Iterator[str]:
    name = _name("ns")
    create_namespace(control_plane.client, name)
    yield name


def _metadata_slice(name: str, node: str, pool: str, **extra_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": pool, "generation": 7, "resourceSliceCount": 2},
            **extra_spec,
        },
    }


def _device_slice(name: str, node: str, pool: str, devices: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": pool, "generation": 7, "resourceSliceCount": 2},
            "devices": [
                {
                    "name": d,
                    "allowMultipleAllocations": True,
                    "capacity": {f"{DRIVER}/slots": {"value": "16"}},
                }
                for d in devices
            ],
        },
    }


def _device_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def _claim_template(name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "nic", "exactly": {"deviceClassName": device_class}}],
                    "config": [
                        {
                            "requests": ["nic"],
                            "opaque": {"driver": DRIVER, "parameters": NIC_CONFIG},
                        }
                    ],
                }
            }
        },
    }


def _pod(name: str, template: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/app:1",
                    "resources": {"claims": [{"name": "nic"}]},
                }
            ],
        },
    }


# --------------------------------------------------------------------------- 1. API served


def test_resource_v1_is_served(control_plane: ControlPlaneHandle) -> None:
    apis: Any = client.ApisApi(control_plane.client)
    groups = apis.get_api_versions().groups
    resource = next(g for g in groups if g.name == "resource.k8s.io")
    assert "v1" in {v.version for v in resource.versions}
    assert resource.preferred_version.version == "v1"

    listing = _resource(control_plane).get_api_resources()
    by_name = {r.name: r for r in listing.resources}
    for plural, kind, namespaced in [
        ("resourceslices", "ResourceSlice", False),
        ("deviceclasses", "DeviceClass", False),
        ("resourceclaims", "ResourceClaim", True),
        ("resourceclaimtemplates", "ResourceClaimTemplate", True),
    ]:
        assert by_name[plural].kind == kind
        assert by_name[plural].namespaced is namespaced
        assert (RESOURCES[kind].plural, RESOURCES[kind].namespaced) == (plural, namespaced)
    assert "resourceclaims/status" in by_name


def test_version_is_the_pinned_release(control_plane: ControlPlaneHandle) -> None:
    info = client.VersionApi(control_plane.client).get_code()
    assert (info.major, info.minor, info.git_version) == ("1", "37", "v1.37.2")


# --------------------------------------------------------------------------- 2. metadata slices


def test_metadata_slice_without_devices_keeps_its_annotation(
    control_plane: ControlPlaneHandle,
) -> None:
    """The annotation bridge: a device-less pool slice can carry the extractors as an annotation."""
    api = _resource(control_plane)
    node, name = _name("node-meta"), _name("meta")
    body = _metadata_slice(name, node, node)
    annotation = json.dumps(SHARING_AFFINITY, sort_keys=True)
    body["metadata"]["annotations"] = {SHARING_AFFINITY_ANNOTATION: annotation}
    api.create_resource_slice(body, field_validation="Strict")
    stored = api.read_resource_slice(name)
    assert stored.metadata.annotations == {SHARING_AFFINITY_ANNOTATION: annotation}
    assert not stored.spec.devices
    assert stored.spec.pool.resource_slice_count == 2


def test_sharing_affinity_field_is_rejected_under_strict_validation(
    control_plane: ControlPlaneHandle,
) -> None:
    name = _name("meta-strict")
    body = _metadata_slice(name, "node-x", "pool-x", sharingAffinity=SHARING_AFFINITY)
    status, _, result = raw_request(
        control_plane.client,
        "POST",
        "/apis/resource.k8s.io/v1/resourceslices",
        body=body,
        query={"fieldValidation": "Strict"},
    )
    assert status == 400
    assert result["reason"] == "BadRequest"
    assert 'unknown field "spec.sharingAffinity"' in result["message"]
    status, _, _ = raw_request(
        control_plane.client, "GET", f"/apis/resource.k8s.io/v1/resourceslices/{name}"
    )
    assert status == 404


def test_sharing_affinity_field_is_dropped_with_a_warning_by_default(
    control_plane: ControlPlaneHandle,
) -> None:
    name = _name("meta-warn")
    body = _metadata_slice(name, "node-y", "pool-y", sharingAffinity=SHARING_AFFINITY)
    status, headers, created = raw_request(
        control_plane.client, "POST", "/apis/resource.k8s.io/v1/resourceslices", body=body
    )
    assert status == 201
    # One RFC 7234 warning (code 299), the field path quoted inside the quoted text.
    assert headers["Warning"] == '299 - "unknown field \\"spec.sharingAffinity\\""'
    assert "sharingAffinity" not in created["spec"]
    stored = _resource(control_plane).read_resource_slice(name)
    assert stored.spec.to_dict().get("sharingAffinity") is None
    assert stored.spec.pool.name == "pool-y"


def test_sharing_affinity_field_is_dropped_silently_when_ignored(
    control_plane: ControlPlaneHandle,
) -> None:
    name = _name("meta-ignore")
    body = _metadata_slice(name, "node-z", "pool-z", sharingAffinity=SHARING_AFFINITY)
    status, headers, created = raw_request(
        control_plane.client,
        "POST",
        "/apis/resource.k8s.io/v1/resourceslices",
        body=body,
        query={"fieldValidation": "Ignore"},
    )
    assert status == 201
    assert "Warning" not in headers
    assert "sharingAffinity" not in created["spec"]


def test_shareable_device_slice_keeps_consumable_capacity(
    control_plane: ControlPlaneHandle,
) -> None:
    """DRAConsumableCapacity is on: allowMultipleAllocations and capacity survive the round trip."""
    api = _resource(control_plane)
    name = _name("devices")
    api.create_resource_slice(
        _device_slice(name, "node-d", "pool-d", ["eth1"]), field_validation="Strict"
    )
    device = api.read_resource_slice(name).spec.devices[0]
    assert device.allow_multiple_allocations is True
    assert device.capacity[f"{DRIVER}/slots"].value == "16"


def test_slice_with_neither_node_nor_all_nodes_is_rejected(
    control_plane: ControlPlaneHandle,
) -> None:
    body = _metadata_slice(_name("meta-bad"), "n", "p")
    del body["spec"]["nodeName"]
    with pytest.raises(ApiException) as err:
        _resource(control_plane).create_resource_slice(body)
    assert err.value.status == 422
    assert "spec" in _message(err.value)


# --------------------------------------------------------------------------- 3. claims from templates


def _pod_with_generated_claim(
    control_plane: ControlPlaneHandle, namespace: str, scheduler: str = SCHEDULER
) -> tuple[Any, Any]:
    """Create class, template and pod; wait for the controller's claim; return (pod, claim)."""
    resource = _resource(control_plane)
    core = _core(control_plane)
    device_class = _name("nic-class")
    resource.create_device_class(_device_class(device_class))
    resource.create_namespaced_resource_claim_template(
        namespace, _claim_template("nic", device_class)
    )
    core.create_namespaced_pod(namespace, _pod("worker", "nic", scheduler))

    def claim_status() -> Any:
        pod = core.read_namespaced_pod("worker", namespace)
        statuses = pod.status.resource_claim_statuses or []
        return pod if statuses and statuses[0].resource_claim_name else None

    pod = wait_for(claim_status, timeout=60, what="the pod's resourceClaimStatuses")
    claim_name = pod.status.resource_claim_statuses[0].resource_claim_name
    claim = resource.read_namespaced_resource_claim(claim_name, namespace)
    return pod, claim


def test_controller_creates_claim_from_template(
    control_plane: ControlPlaneHandle, namespace: str
) -> None:
    pod, claim = _pod_with_generated_claim(control_plane, namespace)

    status = pod.status.resource_claim_statuses[0]
    assert status.name == "nic"
    # Upstream's pattern: generateName "<pod>-<podClaimName>-", five random characters.
    assert claim.metadata.name.startswith("worker-nic-")
    assert len(claim.metadata.name) == len("worker-nic-") + 5
    assert claim.metadata.generate_name == "worker-nic-"
    assert claim.metadata.annotations["resource.kubernetes.io/pod-claim-name"] == "nic"
    (owner,) = claim.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("Pod", "worker", pod.metadata.uid)
    # The controller sets controller=true but not blockOwnerDeletion.
    assert owner.controller is True
    assert owner.block_owner_deletion is None
    # The template's spec, opaque config included, is copied verbatim.
    (config,) = claim.spec.devices.config
    assert config.opaque.driver == DRIVER
    assert config.opaque.parameters == NIC_CONFIG
    assert claim.status is None or claim.status.allocation is None
    # No scheduler named dra-affinity runs: the pod stays pending and unbound.
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None


def test_deleting_the_pod_garbage_collects_its_claim(
    control_plane: ControlPlaneHandle, namespace: str
) -> None:
    _, claim = _pod_with_generated_claim(control_plane, namespace)
    core = _core(control_plane)
    resource = _resource(control_plane)
    core.delete_namespaced_pod("worker", namespace, grace_period_seconds=0)

    def claim_gone() -> bool:
        try:
            resource.read_namespaced_resource_claim(claim.metadata.name, namespace)
        except ApiException as err:
            return bool(err.status == 404)
        return False

    wait_for(claim_gone, timeout=60, what=f"claim {claim.metadata.name} to be deleted")


# --------------------------------------------------------------------------- 4. allocate and bind


def _allocation(node: str, pool: str, device: str) -> dict[str, Any]:
    return {
        "devices": {
            "results": [{"request": "nic", "driver": DRIVER, "pool": pool, "device": device}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def test_secondary_scheduler_can_allocate_reserve_and_bind(
    control_plane: ControlPlaneHandle, namespace: str
) -> None:
    core = _core(control_plane)
    resource = _resource(control_plane)
    node = _name("node-bind")
    create_ready_node(control_plane.client, node)
    pod, claim = _pod_with_generated_claim(control_plane, namespace)

    status = {
        "status": {
            "allocation": _allocation(node, node, "eth1"),
            "reservedFor": [{"resource": "pods", "name": "worker", "uid": pod.metadata.uid}],
        }
    }
    resource.patch_namespaced_resource_claim_status(
        claim.metadata.name, namespace, status, _content_type=MERGE_PATCH
    )
    stored = resource.read_namespaced_resource_claim(claim.metadata.name, namespace)
    (result,) = stored.status.allocation.devices.results
    assert (result.request, result.driver, result.pool, result.device) == (
        "nic",
        DRIVER,
        node,
        "eth1",
    )
    term = stored.status.allocation.node_selector.node_selector_terms[0]
    assert term.match_fields[0].values == [node]
    assert [r.uid for r in stored.status.reserved_for] == [pod.metadata.uid]

    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name="worker"),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    response = core.create_namespaced_pod_binding(
        "worker", namespace, binding, _preload_content=False
    )
    assert response.status == 201
    assert core.read_namespaced_pod("worker", namespace).spec.node_name == node

    # A pod is bound once: a second binding is refused.
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("worker", namespace, binding, _preload_content=False)
    assert err.value.status == 409


def test_reserved_for_without_allocation_is_rejected(
    control_plane: ControlPlaneHandle, namespace: str
) -> None:
    pod, claim = _pod_with_generated_claim(control_plane, namespace)
    resource = _resource(control_plane)
    status = {
        "status": {"reservedFor": [{"resource": "pods", "name": "worker", "uid": pod.metadata.uid}]}
    }
    with pytest.raises(ApiException) as err:
        resource.patch_namespaced_resource_claim_status(
            claim.metadata.name, namespace, status, _content_type=MERGE_PATCH
        )
    assert err.value.status == 422
    assert "status.reservedFor" in _message(err.value)
    stored = resource.read_namespaced_resource_claim(claim.metadata.name, namespace)
    assert stored.status is None or not stored.status.reserved_for


def test_stock_scheduler_allocates_and_binds_a_claim(
    control_plane: ControlPlaneHandle, namespace: str
) -> None:
    """The upstream scheduler's DRA path works here end to end (a reference for ours)."""
    resource = _resource(control_plane)
    core = _core(control_plane)
    node = _name("node-stock")
    created = create_ready_node(control_plane.client, node)
    assert created.spec.taints is None
    assert created.status.conditions[0].type == "Ready"
    # A single-slice pool whose two plain devices the stock allocator may pick.
    resource.create_resource_slice(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": _name("stock")},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "eth0"}, {"name": "eth1"}],
            },
        }
    )
    pod, claim = _pod_with_generated_claim(control_plane, namespace, scheduler="default-scheduler")

    def bound() -> Any:
        current = core.read_namespaced_pod("worker", namespace)
        return current if current.spec.node_name else None

    try:
        bound_pod = wait_for(bound, timeout=60, what="the stock scheduler to bind the pod")
    except ControlPlaneError:
        conditions = core.read_namespaced_pod("worker", namespace).status.conditions
        log = control_plane.plane.workdir / "logs" / "kube-scheduler.log"
        tail = "\n".join(log.read_text().splitlines()[-15:])
        pytest.fail(f"pod not bound; conditions {conditions}; scheduler log:\n{tail}")
    assert bound_pod.spec.node_name == node
    stored = resource.read_namespaced_resource_claim(claim.metadata.name, namespace)
    (result,) = stored.status.allocation.devices.results
    assert (result.driver, result.pool) == (DRIVER, node)
    assert result.device in {"eth0", "eth1"}
    assert [r.uid for r in stored.status.reserved_for] == [pod.metadata.uid]


# --------------------------------------------------------------------------- 5. stopping


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(") ", 1)[1][0] != "Z"


def test_stop_leaves_no_process(bin_dir: Path, tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "cp", bin_dir)
    with plane:
        pids = plane.pids()
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
        assert all(_running(pid) for pid in pids.values())
        assert json.loads((tmp_path / "cp" / STATE_FILE).read_text())["server"] == plane.server
    assert not any(_running(pid) for pid in pids.values())
    assert all(group_members(pid) == [] for pid in pids.values())
    assert not (tmp_path / "cp" / STATE_FILE).exists()
    plane.stop()  # idempotent


def test_cli_up_down_leaves_no_process(bin_dir: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "cli"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    up = subprocess.run(
        [
            sys.executable,
            str(CONTROLPLANE_PY),
            "up",
            "--dir",
            str(workdir),
            "--bin-dir",
            str(bin_dir),
            "--with-scheduler",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert up.returncode == 0, up.stderr
    kubeconfig = Path(up.stdout.strip())
    assert kubeconfig == workdir / "admin.kubeconfig"
    state = json.loads((workdir / STATE_FILE).read_text())
    pids = {c["name"]: c["pid"] for c in state["components"]}
    try:
        assert set(pids) == set(BINARIES)
        # The components outlived the `up` process, in sessions of their own.
        assert all(_running(pid) and os.getsid(pid) == pid for pid in pids.values())
        from kubernetes import config

        api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        try:
            assert client.VersionApi(api).get_code().git_version == "v1.37.2"
        finally:
            api.close()
    finally:
        down = subprocess.run(
            [sys.executable, str(CONTROLPLANE_PY), "down", "--dir", str(workdir)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
    assert down.returncode == 0, down.stderr
    assert "kube-scheduler, kube-controller-manager, kube-apiserver, etcd" in down.stderr
    assert not any(_running(pid) for pid in pids.values())
    assert not (workdir / STATE_FILE).exists()


def test_bad_flag_fails_start_and_stops_what_started(bin_dir: Path, tmp_path: Path) -> None:
    plane = ControlPlane(
        tmp_path / "bad", bin_dir, extra_args={"kube-apiserver": ["--no-such-flag"]}
    )
    with pytest.raises(ControlPlaneError) as err:
        plane.start()
    assert "kube-apiserver exited with code" in str(err.value)
    assert "unknown flag: --no-such-flag" in str(err.value)
    assert plane.components == []
    # etcd had started (it wrote its data directory) and was stopped with the rest.
    assert (tmp_path / "bad" / "etcd" / "member").is_dir()
    assert _processes_mentioning(str(tmp_path / "bad")) == []
    assert not (tmp_path / "bad" / STATE_FILE).exists()


def _processes_mentioning(text: str) -> list[int]:
    """Running processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and _running(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_port_taken_before_start_up_is_replaced(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The API server's port is taken between being found free and being bound: the
    # control plane starts over on fresh ports instead of failing.
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = int(taken.getsockname()[1])
    picks = itertools.count()
    real = controlplane.free_port

    def free_port() -> int:
        # The third port of the first round is the API server's.
        return busy if next(picks) == 2 else real()

    monkeypatch.setattr(controlplane, "free_port", free_port)
    plane = ControlPlane(tmp_path / "cp", bin_dir)
    try:
        with plane:
            assert plane.ports["kube-apiserver"] != busy
            assert set(plane.pids()) == {"etcd", "kube-apiserver", "kube-controller-manager"}
            assert next(picks) == 10  # two rounds of five ports: one retry
    finally:
        taken.close()
    assert _processes_mentioning(str(tmp_path / "cp")) == []
