"""``snapshot``, ``plan`` and the kubectl plugin on a real control plane.

A snapshot simulated offline must decide what the live scheduler then decides; a plan
must say, without writing, what a pool's republish would do to the devices in use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube.live import (
    SRC,
    Live,
    World,
    live,
    lock_table,
    locks,
    ns,
    schedulers,
    wait_until,
)

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns, schedulers)

SUBNET = 'object.kind == "NICConfig" ? object.subnetID : ""'
VLAN = 'object.kind == "NICConfig" ? object.vlanID : ""'


def _cli(*args: str, env: dict[str, str] | None = None,
         exe: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            **(env or {})}
    return subprocess.run([*(exe or [sys.executable, "-m", "dra_affinity"]), *args],
                          capture_output=True, text=True, env=full, timeout=300, check=False)


def _world(live: Live, ns: str, schedulers: Any) -> World:
    """One node, two NICs: a and b share eth1 (subnet x, vlans 1 and 2), c holds eth2 (y)."""
    w = World(live, ns, nodes=1, nics=2)
    name = f"dra-affinity-{ns}"
    for pod, subnet, vlan in [("a", "x", "1"), ("b", "x", "2"), ("c", "y", "1")]:
        spec = w.claim_spec(subnet)
        spec["devices"]["config"][0]["opaque"]["parameters"]["vlanID"] = vlan
        live.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": f"{pod}-nic", "namespace": ns}, "spec": spec})
        w.pod(pod, claim=f"{pod}-nic", scheduler=name)
    sched = schedulers(identity="first")
    wait_until(lambda: all(live.node_of(ns, p) for p in "abc"), 60, "a, b, c bound")
    sched.stop()
    assert live.devices_of(ns, "a") == live.devices_of(ns, "b") == [w.device(w.nodes[0], 1)]
    return w


def test_snapshot_then_simulate_decides_what_the_live_scheduler_decides(
        control_plane: Any, live: Live, ns: str, schedulers: Any, tmp_path: Path) -> None:
    w = _world(live, ns, schedulers)
    w.claim("d-nic", "y")
    w.pod("d", claim="d-nic", scheduler=f"dra-affinity-{ns}")  # pending: no scheduler runs
    out = tmp_path / "cluster.yaml"
    res = _cli("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "-o", str(out),
               "--scheduler-name", f"dra-affinity-{ns}")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "" and f"written to {out}" in res.stderr
    steps = next(d for d in yaml.safe_load_all(out.read_text()) if d and d["kind"] == "Scenario")
    assert steps["spec"]["steps"][0] == {"restart": {}}
    assert {"schedule": f"{ns}/d"} in steps["spec"]["steps"]

    sim = _cli("simulate", str(out), "-o", "json")
    assert sim.returncode == 0, sim.stdout[-2000:] + sim.stderr  # every live lock reproduced
    [step] = [s for s in json.loads(sim.stdout)["steps"] if s.get("pod") == f"{ns}/d"]
    assert step["result"] == "Scheduled"
    simulated = [a["device"] for a in step["allocations"]]

    offline = _cli("locks", str(out), "--at-step", "1", "-o", "json")
    assert offline.returncode == 0, offline.stderr
    live_rows = lock_table(locks(control_plane.kubeconfig), w.driver)
    assert lock_table(json.loads(offline.stdout)["devices"], w.driver) == live_rows

    explained = _cli("explain", str(out), "--pod", f"{ns}/d", "--at-step", "1", "-o", "json")
    assert explained.returncode == 0, explained.stderr
    assert any(n["fits"] for n in json.loads(explained.stdout)["nodes"])

    schedulers(identity="second")
    wait_until(lambda: live.node_of(ns, "d"), 60, "d bound by the live scheduler")
    assert live.devices_of(ns, "d") == simulated == [w.device(w.nodes[0], 2)]


def _republish(w: World, tmp_path: Path, extractors: Any, name: str) -> Path:
    node = w.nodes[0]
    slices = [w.meta_slice(node, extractors, generation=2), w.nic_slice(node, 2, 4, generation=2)]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(slices))
    return path


def _slice_versions(live: Live, driver: str) -> dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"]
            for s in live.list("ResourceSlice", "resource.k8s.io/v1")
            if s["spec"]["driver"] == driver}


def test_plan_judges_a_republish_without_writing(control_plane: Any, live: Live, ns: str,
                                                 schedulers: Any, tmp_path: Path) -> None:
    w = _world(live, ns, schedulers)
    kubeconfig = str(control_plane.kubeconfig)
    before = _slice_versions(live, w.driver)
    eth1, eth2 = (w.device(w.nodes[0], i) for i in (1, 2))

    def plan(*args: str) -> tuple[int, dict[str, dict[str, Any]], dict[str, Any]]:
        res = _cli("plan", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json", *args)
        assert res.returncode in (0, 1), res.stderr
        report = json.loads(res.stdout)
        return res.returncode, {d["device"]: d for d in report["devices"]}, report

    # a rename: every lock kept under the new name
    code, devices, _ = plan("--slice", str(_republish(w, tmp_path, [
        {"name": "net", "expression": SUBNET}], "rename")))
    assert code == 0
    assert devices[eth1]["after"] == {"status": "Locked", "lock": {"net": "x"}}
    # a value change: the locks in use change value
    code, devices, _ = plan("--slice", str(_republish(w, tmp_path, [
        {"name": "subnet", "expression": SUBNET.replace("object.subnetID",
                                                        'object.subnetID + "-2"')}], "value")))
    assert code == 1
    assert devices[eth2]["after"] == {"status": "Locked", "lock": {"subnet": "y-2"}}
    # an added key a's and b's configs disagree on: eth1 quarantined until they leave
    code, devices, report = plan("--slice", str(_republish(w, tmp_path, [
        {"name": "subnet", "expression": SUBNET}, {"name": "vlan", "expression": VLAN}], "added")))
    assert code == 1
    assert devices[eth1]["after"]["status"] == "Unreconstructable"
    assert "vlan" in devices[eth1]["after"]["reason"]
    assert report["quarantined"] == [{"device": eth1, "until": [f"{ns}/a-nic", f"{ns}/b-nic"]}]
    assert devices[eth2]["affected"] is False
    # the pool removed
    code, devices, _ = plan("--remove-pool", f"{w.driver}/{w.nodes[0]}")
    assert code == 1
    assert {d: e["after"]["status"] for d, e in devices.items()} == {eth1: "Removed",
                                                                     eth2: "Removed"}
    # the table, and nothing was written
    res = _cli("plan", "--kubeconfig", kubeconfig, "--remove-pool", f"{w.driver}/{w.nodes[0]}")
    assert res.returncode == 1 and f"{eth1}" in res.stdout and "Removed" in res.stdout
    assert _slice_versions(live, w.driver) == before


def test_kubectl_plugin_takes_kubectl_flags(control_plane: Any, live: Live, ns: str,
                                            schedulers: Any, bin_dir: Path,
                                            tmp_path: Path) -> None:
    w = World(live, ns, nodes=1, nics=1)
    w.claim("a-nic", "x")
    w.pod("a", claim="a-nic", scheduler=f"dra-affinity-{ns}")
    schedulers()
    wait_until(lambda: live.node_of(ns, "a"), 60, "a bound")
    plugin = Path(sys.executable).parent / "kubectl-dra_affinity"
    assert plugin.is_file(), "the package installs the kubectl plugin"
    kubeconfig = yaml.safe_load(control_plane.kubeconfig.read_text())
    kubeconfig["contexts"].append({"name": "elsewhere", "context": {
        **kubeconfig["contexts"][0]["context"], "namespace": ns}})
    path = tmp_path / "kubeconfig"
    for key in ("certificate-authority", "client-certificate", "client-key"):
        for section in ("clusters", "users"):
            for entry in kubeconfig[section]:
                body = entry.get("cluster" if section == "clusters" else "user", {})
                if key in body and not Path(body[key]).is_absolute():
                    body[key] = str((control_plane.kubeconfig.parent / body[key]).resolve())
    path.write_text(yaml.safe_dump(kubeconfig))
    env = {"PATH": f"{plugin.parent}{os.pathsep}{os.environ['PATH']}", "KUBECONFIG": str(path)}
    kubectl = [str(bin_dir / "kubectl")]
    res = _cli("dra-affinity", "locks", "--context", "elsewhere", "-n", ns, "-o", "json",
               env=env, exe=kubectl)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["devices"]
    assert [r["device"] for r in rows] == [w.device(w.nodes[0], 1)]
    # the namespace of the context applies to a pod named without one
    res = _cli("dra-affinity", "explain", "--context", "elsewhere", "--pod", "a", "-o", "json",
               env=env, exe=kubectl)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["boundTo"] == w.nodes[0]
    # a context that does not exist: one line, kubectl's exit status for bad input
    res = _cli("dra-affinity", "locks", "--context", "missing", env=env, exe=kubectl)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: $KUBECONFIG={path}: no context named 'missing'"]
