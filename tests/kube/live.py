"""Helpers for the tests that run ``dra-affinity scheduler`` against a real control plane
(``tests/cluster/test_scheduler_*.py``): raw objects, the scheduler as a subprocess,
``locks --kubeconfig``, and the co-location invariant.

Each test gets its own namespace, driver name, DeviceClass and nodes, so tests that
share one control plane never see each other's devices.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dra_affinity.kube.api import ApiError, ClientApi
from dra_affinity.kube.convert import SHARING_AFFINITY_ANNOTATION

SRC = Path(__file__).resolve().parents[2] / "src"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
EXTRACTORS = [{"name": "subnet", "expression": 'object.kind == "NICConfig" ? object.subnetID : ""'}]
MERGE_PATCH = "application/merge-patch+json"

_IRREGULAR = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
              "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
              "DeviceClass": "deviceclasses"}
_CLUSTER_SCOPED = {"Node", "Namespace", "DeviceClass", "ResourceSlice", "ClusterRole",
                   "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                   "ValidatingAdmissionPolicyBinding"}


def wait_until(pred: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll with a deadline (no fixed sleeps in assertions)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def collection(kind: str, api_version: str, namespace: str | None) -> str:
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = _IRREGULAR.get(kind) or kind.lower() + ("es" if kind.endswith("s") else "s")
    if kind in _CLUSTER_SCOPED or not namespace:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{namespace}/{plural}"


class Live:
    """Raw JSON access to the test cluster through the project's own transport."""

    def __init__(self, api_client: Any) -> None:
        self.api = ClientApi(api_client)

    def create(self, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        out: dict[str, Any] = self.api.request(
            "POST", collection(obj["kind"], obj["apiVersion"], ns), body=dict(obj))
        return out

    def apply(self, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create, or replace the existing object (keeping its resourceVersion)."""
        try:
            return self.create(obj, namespace)
        except ApiError as e:
            if e.status != 409:
                raise
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        path = f"{collection(obj['kind'], obj['apiVersion'], ns)}/{obj['metadata']['name']}"
        cur = self.api.request("GET", path)
        body = {**obj, "metadata": {**obj["metadata"],
                                    "resourceVersion": cur["metadata"]["resourceVersion"]}}
        out: dict[str, Any] = self.api.request("PUT", path, body=body)
        return out

    def get(self, kind: str, api_version: str, name: str, namespace: str | None = None
            ) -> dict[str, Any] | None:
        try:
            out: dict[str, Any] = self.api.request(
                "GET", f"{collection(kind, api_version, namespace)}/{name}")
            return out
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(self, kind: str, api_version: str, namespace: str | None = None) -> list[dict[str, Any]]:
        out = self.api.request("GET", collection(kind, api_version, namespace))
        return list(out.get("items") or [])

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete now (no kubelet would ever confirm a graceful deletion)."""
        try:
            self.api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                             body={"gracePeriodSeconds": 0})
        except ApiError as e:
            if e.status != 404:
                raise

    def pod(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.get("Pod", "v1", name, ns)

    def claim(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.get("ResourceClaim", "resource.k8s.io/v1", name, ns)

    def node_of(self, ns: str, name: str) -> str | None:
        p = self.pod(ns, name)
        return (p or {}).get("spec", {}).get("nodeName")

    def claim_of(self, ns: str, pod: str, entry: str = "nic") -> dict[str, Any] | None:
        """The pod's claim: named, or generated from a template (pod status records it)."""
        p = self.pod(ns, pod)
        if p is None:
            return None
        for rc in p["spec"].get("resourceClaims") or []:
            if rc["name"] != entry:
                continue
            if rc.get("resourceClaimName"):
                return self.claim(ns, rc["resourceClaimName"])
            for st in (p.get("status") or {}).get("resourceClaimStatuses") or []:
                if st.get("name") == entry and st.get("resourceClaimName"):
                    return self.claim(ns, st["resourceClaimName"])
        return None

    def devices_of(self, ns: str, pod: str) -> list[str]:
        return devices(self.claim_of(ns, pod))

    def events(self, ns: str, name: str) -> list[dict[str, Any]]:
        return [e for e in self.list("Event", "v1", ns)
                if (e.get("involvedObject") or {}).get("name") == name]


def devices(claim: Mapping[str, Any] | None) -> list[str]:
    alloc = ((claim or {}).get("status") or {}).get("allocation")
    if not alloc:
        return []
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in alloc["devices"]["results"]]


# ------------------------------------------------------------------------- the world
class World:
    """One test's nodes, pools and DeviceClass (names prefixed by the namespace)."""

    def __init__(self, live: Live, ns: str, *, nodes: int = 2, nics: int = 2, slots: int = 4,
                 annotation: bool = True) -> None:
        self.live, self.ns = live, ns
        self.driver = f"{ns}.example.com"
        self.klass = f"{ns}-nic"
        self.nodes = [f"{ns}-n{i}" for i in range(1, nodes + 1)]
        live.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                     "metadata": {"name": self.klass},
                     "spec": {"selectors": [{"cel": {"expression":
                                                     f'device.driver == "{self.driver}"'}}]}})
        for n in self.nodes:
            self._node(n)
            live.create(self.meta_slice(n, EXTRACTORS if annotation else None))
            live.create(self.nic_slice(n, nics, slots))

    def _node(self, name: str) -> None:
        api = self.live.api
        api.request("POST", "/api/v1/nodes", body={
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        res = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        api.request("PATCH", f"/api/v1/nodes/{name}/status", content_type=MERGE_PATCH, body={
            "status": {"capacity": res, "allocatable": res, "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
        # The TaintNodesByCondition admission plugin taints a new Node not-ready; with no
        # node lifecycle controller running, nothing would lift it: do what it would.
        api.request("PATCH", f"/api/v1/nodes/{name}", content_type=MERGE_PATCH,
                    body={"spec": {"taints": None}})

    def meta_slice(self, node: str, extractors: Any, generation: int = 1) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": f"{node}-meta"}
        if extractors is not None:
            meta["annotations"] = {SHARING_AFFINITY_ANNOTATION: extractors if isinstance(
                extractors, str) else json.dumps(extractors)}
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta,
                "spec": {"driver": self.driver, "nodeName": node,
                         "pool": {"name": node, "generation": generation, "resourceSliceCount": 2}}}

    def nic_slice(self, node: str, nics: int, slots: int, generation: int = 1) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-nics"},
                "spec": {"driver": self.driver, "nodeName": node,
                         "pool": {"name": node, "generation": generation, "resourceSliceCount": 2},
                         "devices": [{"name": f"eth{i}", "allowMultipleAllocations": True,
                                      "capacity": {f"{self.driver}/slots": {"value": str(slots)}}}
                                     for i in range(1, nics + 1)]}}

    def set_extractors(self, node: str, extractors: Any) -> None:
        """Republish the pool's metadata slice with (or without) the bridge annotation."""
        cur = self.live.get("ResourceSlice", "resource.k8s.io/v1", f"{node}-meta")
        assert cur is not None
        body = self.meta_slice(node, extractors, cur["spec"]["pool"]["generation"])
        body["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        self.live.api.request("PUT", f"/apis/resource.k8s.io/v1/resourceslices/{node}-meta", body=body)

    def claim_spec(self, subnet: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"devices": {"requests": [{"name": "nic", "exactly": {
            "deviceClassName": self.klass,
            "capacity": {"requests": {f"{self.driver}/slots": "1"}}}}]}}
        if subnet is not None:
            spec["devices"]["config"] = [{"requests": ["nic"], "opaque": {
                "driver": self.driver, "parameters": {
                    "apiVersion": f"{self.driver}/v1", "kind": "NICConfig", "subnetID": subnet}}}]
        return spec

    def claim(self, name: str, subnet: str | None) -> dict[str, Any]:
        return self.live.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                 "metadata": {"name": name, "namespace": self.ns},
                                 "spec": self.claim_spec(subnet)})

    def template(self, name: str, subnet: str | None) -> dict[str, Any]:
        return self.live.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                 "metadata": {"name": name, "namespace": self.ns},
                                 "spec": {"spec": self.claim_spec(subnet)}})

    def pod(self, name: str, *, claim: str | None = None, template: str | None = None,
            scheduler: str = "dra-affinity", requests: Mapping[str, str] | None = None,
            labels: Mapping[str, str] | None = None, **spec: Any) -> dict[str, Any]:
        """A pod using one NIC claim; ``requests`` are its container's resource requests,
        ``labels`` its labels, other keyword arguments more PodSpec fields
        (``tolerations``, ``affinity``, ...)."""
        rc: dict[str, Any] = {"name": "nic"}
        if claim:
            rc["resourceClaimName"] = claim
        else:
            rc["resourceClaimTemplateName"] = template
        resources: dict[str, Any] = {"claims": [{"name": "nic"}]}
        if requests:
            resources["requests"] = dict(requests)
        return self.live.create({"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": name, "namespace": self.ns, "labels": dict(labels or {})},
                                 "spec": {"schedulerName": scheduler, "resourceClaims": [rc],
                                          "containers": [{"name": "c",
                                                          "image": "registry.k8s.io/pause:3.10",
                                                          "resources": resources}], **spec}})

    def patch_node(self, node: str, spec: Mapping[str, Any]) -> None:
        """Merge-patch a node's spec (taints, unschedulable)."""
        self.live.api.request("PATCH", f"/api/v1/nodes/{node}", content_type=MERGE_PATCH,
                              body={"spec": dict(spec)})

    def device(self, node: str, nic: int) -> str:
        return f"{self.driver}/{node}/eth{nic}"


# ------------------------------------------------------------------------- processes
class SchedulerProc:
    """``dra-affinity scheduler`` as a subprocess (JSON logs to a file)."""

    def __init__(self, kubeconfig: Path | str, log: Path, *, name: str = "dra-affinity",
                 identity: str = "r1", lease_namespace: str = "default",
                 lease_name: str = "dra-affinity-scheduler", extra: list[str] | None = None) -> None:
        self.log = log
        self.args = [sys.executable, "-m", "dra_affinity", "scheduler", "--kubeconfig",
                     str(kubeconfig), "--scheduler-name", name, "--identity", identity,
                     "--lease-namespace", lease_namespace, "--lease-name", lease_name,
                     "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5",
                     "--initial-backoff", "0.2", "--max-backoff", "2",
                     "--metrics-port", "0", "--metrics-address", "127.0.0.1", *(extra or [])]
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self._fh = self.log.open("ab")
        self.proc = subprocess.Popen(self.args, stdout=self._fh, stderr=self._fh, env=env,
                                     start_new_session=True)

    def records(self) -> Iterator[dict[str, Any]]:
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                yield json.loads(line)
            except ValueError:
                continue

    def port(self) -> int:
        def find() -> int | None:
            ports = [r.get("metricsPort") for r in self.records() if r.get("msg") == "starting"]
            return ports[-1] if ports else None
        return int(wait_until(find, 30, "the scheduler's metrics port"))

    def metrics(self) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port()}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def leading(self) -> bool:
        return any(r.get("msg") == "scheduling started" for r in self.records())

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._fh.close()

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


def fence_violations(proc: SchedulerProc) -> list[str]:
    """The writes of a replica (its debug write log) not covered by one of its Lease
    renewals: sent before any, or at or after the renew deadline of every renewal that
    started before them. Both are on the replica's monotonic clock; the log's order
    between threads is not relied on."""
    records = list(proc.records())
    renewals = [(float(r["monotonic"]), float(r["writesUntil"])) for r in records
                if r.get("msg") == "lease renewed"]
    out: list[str] = []
    for r in records:
        if r.get("msg") != "write":
            continue
        at = float(r["monotonic"])
        if not any(start <= at < until for start, until in renewals):
            out.append(f"{proc.log.name}: {r.get('method')} {r.get('path')} at {at}")
    return out


def locks(kubeconfig: Path | str) -> list[dict[str, Any]]:
    """``dra-affinity locks --kubeconfig -o json``: the rows, holders without tentative flags."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "dra_affinity", "locks", "--kubeconfig",
                          str(kubeconfig), "-o", "json"], capture_output=True, env=env, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr.decode()
    rows: list[dict[str, Any]] = json.loads(out.stdout)["devices"]
    return rows


def lock_table(rows: list[dict[str, Any]], driver: str) -> dict[str, tuple[str, dict[str, str]]]:
    return {r["device"]: (r["status"], r["lock"]) for r in rows if r["device"].startswith(driver + "/")}


def subnet_of(claim: Mapping[str, Any]) -> str | None:
    for cfg in claim.get("spec", {}).get("devices", {}).get("config") or []:
        params = (cfg.get("opaque") or {}).get("parameters") or {}
        if params.get("kind") == "NICConfig":
            return str(params.get("subnetID"))
    return None


def colocation(live: Live, ns: str) -> dict[str, set[str | None]]:
    """Device -> the subnets of every claim allocated on it (must be one each)."""
    out: dict[str, set[str | None]] = {}
    for c in live.list("ResourceClaim", "resource.k8s.io/v1", ns):
        for d in devices(c):
            out.setdefault(d, set()).add(subnet_of(c))
    return out


def assert_no_incompatible_colocation(live: Live, ns: str) -> None:
    bad = {d: s for d, s in colocation(live, ns).items() if len(s) > 1}
    assert not bad, f"devices shared by different subnets: {bad}"


def sa_kubeconfig(live: Live, admin_kubeconfig: Path, path: Path, ns: str, sa: str) -> Path:
    """A kubeconfig that authenticates as a ServiceAccount (a TokenRequest), same server and CA."""
    import yaml

    tok = live.api.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                           body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "spec": {"expirationSeconds": 3600}})
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]
    ca = cluster["cluster"].get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster["cluster"]["certificate-authority"] = str((admin_kubeconfig.parent / ca).resolve())
    cfg = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
           "users": [{"name": sa, "user": {"token": tok["status"]["token"]}}],
           "contexts": [{"name": sa, "context": {"cluster": cluster["name"], "user": sa}}],
           "current-context": sa}
    path.write_text(yaml.safe_dump(cfg))
    return path


def deploy_docs(name: str, **subst: str) -> list[dict[str, Any]]:
    import yaml

    text = (DEPLOY / name).read_text()
    for k, v in subst.items():
        text = re.sub(rf"\b{re.escape(k)}\b", v, text)
    return [d for d in yaml.safe_load_all(text) if d]


# ------------------------------------------------------------------------- pytest fixtures
# Imported by tests/cluster/test_scheduler_*.py (which use the harness's control_plane).
import itertools  # noqa: E402

import pytest  # noqa: E402

_ids = itertools.count()

@pytest.fixture
def live(control_plane: Any) -> Live:
    return Live(control_plane.client)


@pytest.fixture
def ns(control_plane: Any, live: Live) -> str:
    """A fresh namespace (its default ServiceAccount exists, so pods can be created)."""
    from controlplane import create_namespace

    name = f"s{os.getpid() % 10000}-{next(_ids)}"
    create_namespace(control_plane.client, name)
    return name


@pytest.fixture
def schedulers(control_plane: Any, ns: str, tmp_path: Path) -> Iterator[Callable[..., SchedulerProc]]:
    """Start ``dra-affinity scheduler`` processes (stopped at teardown; logs shown on failure)."""
    started: list[SchedulerProc] = []

    def start(identity: str = "r1", kubeconfig: Path | None = None, **kw: Any) -> SchedulerProc:
        kw.setdefault("lease_namespace", ns)
        kw.setdefault("name", f"dra-affinity-{ns}")
        p = SchedulerProc(kubeconfig or control_plane.kubeconfig, tmp_path / f"{identity}.log",
                          identity=identity, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()
        sys.stderr.write(f"--- scheduler {p.log.name}\n{p.tail(60)}\n")
