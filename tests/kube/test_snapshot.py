"""``snapshot``: a cluster written as a scenario that reproduces it (in-memory API server)."""

from __future__ import annotations

import io
from typing import Any

import pytest
import yaml

from dra_affinity.kube.locks import cluster_locks
from dra_affinity.kube.snapshot import SNAPSHOT_KINDS, write_snapshot
from dra_affinity.sim.runner import Simulation
from dra_affinity.sim.scenario import load_scenario_text
from dra_affinity.tools import locks, run_until

from .fakeapi import FakeApi
from .test_process import _process, _run
from .world import build, claim, pod


@pytest.fixture
def api() -> FakeApi:
    a = FakeApi()
    build(a)
    for name, subnet in [("a", "x"), ("b", "x"), ("c", "y")]:
        a.create("ResourceClaim", claim(f"{name}-nic", subnet))
        a.create("Pod", pod(name, f"{name}-nic"))
    _run(_process(a), a)
    # pending after the scheduler ran: one of ours (subnet y fits the y-locked NIC), one not ours
    a.create("ResourceClaim", claim("d-nic", "y"))
    a.create("Pod", pod("d", "d-nic"))
    a.create("ResourceClaim", claim("e-nic", "z"))
    a.create("Pod", pod("e", "e-nic", scheduler="default-scheduler"))
    # a bound pod without claims (it counts against the node) with a secret in its env,
    # and a finished one (counted nowhere)
    a.create("Pod", {"metadata": {"name": "web", "namespace": "default"},
                     "spec": {"nodeName": "node-1", "containers": [{
                         "name": "web", "image": "nginx", "env": [{"name": "TOKEN", "value": "s3cret"}],
                         "resources": {"requests": {"cpu": "100m"}}}]},
                     "status": {"phase": "Running"}})
    a.create("Pod", {"metadata": {"name": "done", "namespace": "default"},
                     "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]},
                     "status": {"phase": "Succeeded"}})
    return a


def _snapshot(api: FakeApi, **kw: Any) -> tuple[str, Any]:
    buf = io.StringIO()
    result = write_snapshot(api, buf, **kw)
    return buf.getvalue(), result


def test_the_scenario_reproduces_the_cluster_and_schedules_the_pending_pod(api: FakeApi) -> None:
    text, result = _snapshot(api)
    sc = load_scenario_text(text, "snapshot.yaml")
    assert sc.spec.steps[0].restart is not None
    out = Simulation(sc).run()
    assert out["expectationsFailed"] == 0
    expected = [s for s in out["steps"] if s["action"] == "expectDevice"]
    live = {r["device"]: r for r in cluster_locks(api)[0]}
    assert len(expected) == result.expected_devices == sum(
        1 for r in live.values() if r["status"] == "Locked") == 2
    # the pending pod of this scheduler is scheduled; the other scheduler's is not
    assert result.pending == ["default/d"]
    [d] = [s for s in out["steps"] if s["action"] == "schedule"]
    assert d["pod"] == "default/d" and d["result"] == "Scheduled"
    assert d["allocations"][0]["device"] == live[next(
        k for k, r in live.items() if r["lock"] == {"subnet": "y"})]["device"]
    # locks FILE before the pending pod gives what the cluster gives
    offline = {r["device"]: (r["status"], r.get("lock")) for r in locks(run_until(sc, 1))}
    for did, row in live.items():
        assert offline[did][0] == row["status"]
        if row["status"] == "Locked":
            assert offline[did][1] == row["lock"]


def test_only_what_placement_reads_is_written(api: FakeApi) -> None:
    text, result = _snapshot(api)
    docs = list(yaml.safe_load_all(text))
    pods = {d["metadata"]["name"]: d for d in docs if d and d["kind"] == "Pod"}
    assert "done" not in pods  # finished and without claims
    assert pods["web"]["spec"]["containers"] == [{"name": "web", "resources": {
        "requests": {"cpu": "100m"}}}]
    assert "s3cret" not in text and "nginx" not in text and "image" not in text
    assert all("resourceVersion" not in d["metadata"] for d in docs if d)
    listed = {path for method, path in api.requests if method == "GET"}
    assert not [p for p in listed if "secrets" in p or "configmaps" in p]
    assert result.counts == {"Node": 2, "DeviceClass": 1, "ResourceSlice": 4,
                             "ResourceClaimTemplate": 0, "ResourceClaim": 5, "Pod": 6}
    assert list(result.counts) == list(SNAPSHOT_KINDS)
    # a lock value YAML would read as a boolean is quoted
    assert "subnet: 'y'" in text


def test_large_lists_stream_page_by_page_with_progress(api: FakeApi) -> None:
    seen: list[tuple[str, int, int | None]] = []
    before = len(api.requests)
    text, _ = _snapshot(api, page_size=2, progress=lambda k, n, t: seen.append((k, n, t)))
    pods = [s for s in seen if s[0] == "Pod"]
    assert [n for _, n, _ in pods] == [2, 4, 6, 7]  # listed, the finished pod included
    assert sum(1 for m, p in api.requests[before:] if m == "GET" and p.endswith("/pods")) == 4
    assert text == _snapshot(api)[0]  # page size changes nothing written


def test_namespace_narrows_the_pods_to_schedule(api: FakeApi) -> None:
    _, result = _snapshot(api, namespace="other")
    assert result.pending == []


def test_template_claims_are_written_as_the_claims_the_controller_made(api: FakeApi) -> None:
    api.create("Pod", {"metadata": {"name": "t", "namespace": "default"},
                       "spec": {"schedulerName": "dra-affinity", "containers": [{"name": "c"}],
                                "resourceClaims": [{"name": "nic",
                                                    "resourceClaimTemplateName": "nic-x"}]},
                       "status": {"resourceClaimStatuses": [{"name": "nic",
                                                             "resourceClaimName": "t-nic-7h2k"}]}})
    api.create("ResourceClaim", claim("t-nic-7h2k", "x"))
    text, _ = _snapshot(api)
    [t] = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Pod"
           and d["metadata"]["name"] == "t"]
    assert t["spec"]["resourceClaims"] == [{"name": "nic", "resourceClaimName": "t-nic-7h2k"}]
    out = Simulation(load_scenario_text(text, "s.yaml")).run()
    claims = [c for s in out["steps"] if s.get("pod") == "default/t" for c in s["allocations"]]
    assert [c["claim"] for c in claims] == ["default/t-nic-7h2k"]
