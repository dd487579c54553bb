"""The scheduler process end to end against the in-memory API server (no threads)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from dra_affinity.kube.api import ApiError
from dra_affinity.kube.convert import SHARING_AFFINITY_ANNOTATION
from dra_affinity.kube.locks import cluster_locks
from dra_affinity.kube.runner import JsonFormatter, Options, SchedulerProcess
from dra_affinity.kube.view import DELETE_PROTECTION

from .fakeapi import FakeApi
from .world import EXTRACTORS, build, claim, meta_slice, pod, sync


def _process(api: FakeApi) -> SchedulerProcess:
    proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1,
                                         initial_backoff=0.0, max_backoff=0.0))
    sync(api, proc.view)
    proc.scheduler.start()
    proc.started.set()
    return proc


def _run(proc: SchedulerProcess, api: FakeApi, rounds: int = 20) -> None:
    """Schedule until the queue has nothing ready, re-syncing the view in between."""
    for _ in range(rounds):
        sync(api, proc.view)
        key = proc.queue.pop()
        if key is None:
            return
        proc.schedule_one(key)


def _devices(api: FakeApi, key: str) -> list[str]:
    c = api.get("ResourceClaim", key)
    assert c is not None
    alloc = (c.get("status") or {}).get("allocation")
    if not alloc:
        return []
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in alloc["devices"]["results"]]


def _node(api: FakeApi, key: str) -> str | None:
    p = api.get("Pod", key)
    assert p is not None
    return p["spec"].get("nodeName")


@pytest.fixture
def api() -> FakeApi:
    a = FakeApi()
    build(a)
    return a


def test_matching_keys_share_a_device_and_conflicting_keys_do_not(api: FakeApi) -> None:
    for name, subnet in [("a", "x"), ("b", "x"), ("c", "y")]:
        api.create("ResourceClaim", claim(f"{name}-nic", subnet))
        api.create("Pod", pod(name, f"{name}-nic"))
    proc = _process(api)
    _run(proc, api)
    assert _devices(api, "default/a-nic") == _devices(api, "default/b-nic")
    assert _devices(api, "default/a-nic") != _devices(api, "default/c-nic")
    for name in "abc":
        assert _node(api, f"default/{name}") is not None
        c = api.get("ResourceClaim", f"default/{name}-nic")
        assert c is not None
        assert DELETE_PROTECTION in c["metadata"]["finalizers"]
        assert [r["name"] for r in c["status"]["reservedFor"]] == [name]
        assert c["status"]["reservedFor"][0]["uid"] == f"uid-pod-{name}"
    # the claim itself is written once, by a merge patch of its finalizers on the
    # resourceVersion read: never its spec, which the server compares byte for byte
    main = [(m, p, b) for m, p, b in api.bodies if "/resourceclaims/" in p
            and not p.endswith("/status")]
    assert len(main) == 3 and not api.protobuf_writes
    for method, _path, body in main:
        assert method == "PATCH" and set(body) == {"metadata"}
        assert set(body["metadata"]) == {"resourceVersion", "finalizers"}
    rows, _ = cluster_locks(api)
    locks = {r["device"]: r["lock"] for r in rows if r["status"] == "Locked"}
    assert locks[_devices(api, "default/a-nic")[0]] == {"subnet": "x"}
    assert locks[_devices(api, "default/c-nic")[0]] == {"subnet": "y"}


def test_a_claim_the_server_refuses_to_patch_as_json_gets_its_finalizer_as_protobuf(
        api: FakeApi) -> None:
    """A claim created with spaced opaque parameters: the merge patch is refused (422),
    the finalizer goes as a protobuf write of the claim read, spec bytes untouched."""
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.spaced.add("default/a-nic")
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    _run(proc, api)
    assert _node(api, "default/a") is not None
    c = api.get("ResourceClaim", "default/a-nic")
    assert c is not None and DELETE_PROTECTION in c["metadata"]["finalizers"]
    assert api.protobuf_writes == ["/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/a-nic"]
    tried = [m for m, p in api.requests if p.endswith("/resourceclaims/a-nic")]
    assert tried == ["PATCH", "GET", "PUT"]  # refused; read as protobuf; written back


def test_next_cycle_sees_its_own_write_before_the_watch(api: FakeApi) -> None:
    """No re-sync between the two attempts: only the assume cache knows of the first."""
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("ResourceClaim", claim("b-nic", "y"))
    api.create("Pod", pod("a", "a-nic"))
    api.create("Pod", pod("b", "b-nic"))
    proc = _process(api)
    proc.schedule_one(proc.queue.pop() or "")
    proc.schedule_one(proc.queue.pop() or "")
    a, b = _devices(api, "default/a-nic"), _devices(api, "default/b-nic")
    assert a and b and a != b  # a Clean device would have been chosen twice otherwise


def test_no_fit_sets_condition_and_event_and_backs_off(api: FakeApi) -> None:
    # two nodes x two NICs: four subnets fill every NIC; a fifth cannot fit
    for i, subnet in enumerate("pqrst"):
        api.create("ResourceClaim", claim(f"p{i}-nic", subnet))
        api.create("Pod", pod(f"p{i}", f"p{i}-nic"))
    proc = _process(api)
    _run(proc, api)
    bound = [i for i in range(5) if _node(api, f"default/p{i}")]
    assert len(bound) == 4
    stuck = next(i for i in range(5) if i not in bound)
    p = api.get("Pod", f"default/p{stuck}")
    assert p is not None
    cond = p["status"]["conditions"][0]
    assert cond["type"] == "PodScheduled" and cond["status"] == "False"
    assert cond["reason"] == "Unschedulable"
    assert "AffinityLockMismatch" in cond["message"]
    events = [o for o in api.objects["Event"].values() if o["reason"] == "FailedScheduling"]
    assert events and events[0]["regarding"]["name"] == f"p{stuck}"
    assert events[0]["regarding"]["uid"] == f"uid-pod-p{stuck}"
    assert events[0]["action"] == "Scheduling" and events[0]["note"] == cond["message"]
    assert proc.queue.attempts(f"default/p{stuck}") >= 1
    # Rejected by the DynamicResources filter: parked until an event could help.
    assert proc.queue.where(f"default/p{stuck}") == "unschedulable"
    assert _devices(api, f"default/p{stuck}-nic") == []


def test_bind_failure_rolls_back_claim_and_leaves_no_ghost_lock(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)

    def fail() -> None:
        raise ApiError(500, "InternalError", "etcd timeout")

    api.on("POST", "/pods/a/binding", fail)
    _run(proc, api, rounds=1)
    c = api.get("ResourceClaim", "default/a-nic")
    assert c is not None
    assert "allocation" not in c.get("status", {})
    assert not c["status"].get("reservedFor")
    assert DELETE_PROTECTION not in (c["metadata"].get("finalizers") or [])
    assert _node(api, "default/a") is None
    # the scheduler's own cache has no lock left (before and after the watch echoes)
    assert not any(st.status.label == "Locked" for st in proc.scheduler.state.affinity_states.values())
    sync(api, proc.view)
    assert not any(st.status.label == "Locked" for st in proc.scheduler.state.affinity_states.values())
    # and a different subnet can now take the first device
    api.delete("Pod", "default/a")
    api.create("ResourceClaim", claim("b-nic", "y"))
    api.create("Pod", pod("b", "b-nic"))
    _run(proc, api)
    assert _devices(api, "default/b-nic") == ["networking.example.com/node-1/eth1"]


def test_failed_bind_is_retried_and_then_succeeds(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)

    def fail() -> None:
        raise ApiError(500, "InternalError", "etcd timeout")

    api.on("POST", "/pods/a/binding", fail)
    _run(proc, api)
    assert _node(api, "default/a") == "node-1"
    assert _devices(api, "default/a-nic") == ["networking.example.com/node-1/eth1"]
    assert proc.queue.attempts("default/a") == 0 and "default/a" not in proc.queue


def test_claim_conflict_is_retried_after_reading_again(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)

    def touch() -> None:  # someone else updates the claim (a label) just before our write
        c = api.get("ResourceClaim", "default/a-nic")
        assert c is not None
        c["metadata"].setdefault("labels", {})["touched"] = "yes"
        api.update("ResourceClaim", c)

    api.on("PATCH", "/resourceclaims/a-nic/status", touch)
    _run(proc, api, rounds=1)
    assert _node(api, "default/a") == "node-1"
    c = api.get("ResourceClaim", "default/a-nic")
    assert c is not None and c["metadata"]["labels"] == {"touched": "yes"}
    assert c["status"]["allocation"]["devices"]["results"][0]["device"] == "eth1"
    puts = [p for m, p in api.requests if m == "PATCH" and p.endswith("a-nic/status")]
    assert len(puts) == 2


def test_claim_allocated_elsewhere_is_a_conflict_without_writes(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    other = {"devices": {"results": [{"request": "nic", "driver": "networking.example.com",
                                      "pool": "node-2", "device": "eth2", "shareID": "s1",
                                      "consumedCapacity": {"networking.example.com/slots": "1"}}]},
             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                 {"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]}}

    def allocate_elsewhere() -> None:
        c = api.get("ResourceClaim", "default/a-nic")
        assert c is not None
        c["status"] = {"allocation": other}
        api.update("ResourceClaim", c, status=True)

    api.on("PATCH", "/resourceclaims/a-nic/status", allocate_elsewhere)
    proc.schedule_one(proc.queue.pop() or "")
    c = api.get("ResourceClaim", "default/a-nic")
    assert c is not None and c["status"]["allocation"] == other  # untouched by us
    assert _node(api, "default/a") is None
    # the cache follows the cluster: node-2/eth2 holds the claim, node-1/eth1 nothing
    assert proc.scheduler.state.shares("networking.example.com/node-2/eth2")
    assert not proc.scheduler.state.shares("networking.example.com/node-1/eth1")


def test_restart_rebuilds_the_same_locks(api: FakeApi) -> None:
    for name, subnet in [("a", "x"), ("b", "y"), ("c", "x")]:
        api.create("ResourceClaim", claim(f"{name}-nic", subnet))
        api.create("Pod", pod(name, f"{name}-nic"))
    proc = _process(api)
    _run(proc, api)
    before, _ = cluster_locks(api)
    again = _process(api)  # a new process: nothing but the cluster
    after, _ = cluster_locks(api)
    assert before == after
    assert {r["device"]: r["lock"] for r in before if r["lock"]} == {
        "networking.example.com/node-1/eth1": {"subnet": "x"},
        "networking.example.com/node-1/eth2": {"subnet": "y"}}
    assert again.scheduler.state.affinity_states.keys() == proc.scheduler.state.affinity_states.keys()


def test_deleted_pod_leaves_the_queue(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    assert "default/a" in proc.queue
    api.delete("Pod", "default/a")
    sync(api, proc.view)
    assert "default/a" not in proc.queue


def test_other_schedulers_pods_are_not_taken(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic", scheduler="default-scheduler"))
    proc = _process(api)
    assert len(proc.queue) == 0


def test_metrics_exposition_has_kep_metrics_and_latency(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    _run(proc, api)
    text = proc.metrics.exposition()
    assert "sharing_affinity_locked_devices 1.0" in text
    assert 'dra_affinity_scheduling_attempt_duration_seconds_count{result="Scheduled"} 1.0' in text
    assert "dra_affinity_pod_scheduling_duration_seconds_count 1.0" in text


def test_json_log_lines() -> None:
    rec = logging.LogRecord("dra_affinity.kube", logging.INFO, __file__, 1, "scheduled", None, None)
    rec.fields = {"pod": "default/a", "node": "node-1"}
    import json

    out: dict[str, Any] = json.loads(JsonFormatter().format(rec))
    assert out["msg"] == "scheduled" and out["pod"] == "default/a" and out["level"] == "info"


@pytest.mark.parametrize("tune_gc", [False, True])
def test_threads_end_to_end_with_leader_election_and_clean_stop(api: FakeApi, tune_gc: bool) -> None:
    """run(): reflectors, Lease, loop and HTTP in their threads; SIGTERM's path (stopping).
    The collector is tuned while scheduling only when the options ask (the CLI does)."""
    import gc
    import threading
    import time
    import urllib.request

    from dra_affinity.scheduler.gctune import YOUNG_THRESHOLD

    for name, subnet in [("a", "x"), ("b", "x"), ("c", "y")]:
        api.create("ResourceClaim", claim(f"{name}-nic", subnet))
        api.create("Pod", pod(name, f"{name}-nic"))
    proc = SchedulerProcess(api, Options(identity="r1", metrics_port=0, metrics_address="127.0.0.1",
                                         lease_duration=3, renew_deadline=2, retry_period=0.5,
                                         tune_gc=tune_gc))
    thresholds = gc.get_threshold()
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(proc.run(install_signals=False)))
    t.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with api.lock:
                if all(_node(api, f"default/{n}") for n in "abc"):
                    break
            time.sleep(0.05)
        with api.lock:
            assert all(_node(api, f"default/{n}") for n in "abc")
        assert proc._server is not None
        port = proc._server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            assert r.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        assert "sharing_affinity_locked_devices 2.0" in text
        assert "dra_affinity_leader 1.0" in text
        assert 'python_gc_collections_total{generation="0"}' in text
        assert (gc.get_threshold()[0] == YOUNG_THRESHOLD) is tune_gc
    finally:
        proc.stopping.set()
        t.join(30)
        gc.unfreeze()
    assert codes == [0]
    assert gc.get_threshold() == thresholds
    lease = api.get("Lease", "kube-system/dra-affinity-scheduler")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # released


def test_taints_and_cordons_filter_with_reasons(api: FakeApi) -> None:
    """Every node is offered; the node filters turn tainted and cordoned ones away, with
    a reason. The affinity-pools taint is tolerated implicitly (--tolerated-taint)."""
    n1 = api.get("Node", "node-1")
    assert n1 is not None
    n1["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    api.update("Node", n1)
    n2 = api.get("Node", "node-2")
    assert n2 is not None
    n2["spec"]["taints"] = [{"key": "dra-affinity.io/affinity-pools", "value": "true",
                             "effect": "NoSchedule"}]
    api.update("Node", n2)
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    assert list(proc.view.nodes()) == ["node-1", "node-2"]
    node2 = proc.view.node("node-2")
    assert node2 is not None and node2.spec.taints == []  # tolerated: not seen by the filters
    assert proc.view.node("node-2") is node2  # one view per Node object
    _run(proc, api)
    assert _node(api, "default/a") == "node-2"
    n2 = api.get("Node", "node-2")
    assert n2 is not None
    n2["spec"]["unschedulable"] = True
    api.update("Node", n2)
    api.create("ResourceClaim", claim("b-nic", "x"))
    api.create("Pod", pod("b", "b-nic"))
    _run(proc, api, rounds=1)
    assert _node(api, "default/b") is None
    stored = api.get("Pod", "default/b")
    assert stored is not None
    (cond,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["message"] == (
        "0/2 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable.")
    # A toleration of its own lets a pod onto the not-ready node.
    p = pod("c", "c-nic")
    p["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
    api.create("ResourceClaim", claim("c-nic", "x"))
    api.create("Pod", p)
    _run(proc, api)
    assert _node(api, "default/c") == "node-1"


def test_resource_fit_counts_pods_bound_by_other_schedulers(api: FakeApi) -> None:
    for name in ("node-1", "node-2"):
        n = api.get("Node", name)
        assert n is not None
        n.setdefault("status", {})["allocatable"] = {"cpu": "2", "memory": "4Gi", "pods": "10"}
        api.update("Node", n, status=True)
    other = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other", "namespace": "default"},
             "spec": {"schedulerName": "default-scheduler", "nodeName": "node-1",
                      "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]}}
    api.create("Pod", other)
    api.create("ResourceClaim", claim("a-nic", "x"))
    p = pod("a", "a-nic")
    p["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
    api.create("Pod", p)
    proc = _process(api)
    _run(proc, api)
    assert _node(api, "default/a") == "node-2"  # node-1 has 500m left
    api.delete("Pod", "default/other")
    api.create("ResourceClaim", claim("b-nic", "x"))
    q = pod("b", "b-nic")
    q["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]
    api.create("Pod", q)
    _run(proc, api)
    assert _node(api, "default/b") == "node-1"  # freed when the other pod went


def test_pod_waits_for_its_template_claim_without_an_attempt(api: FakeApi) -> None:
    """PreEnqueue: no attempt, condition or event while the template's claim is missing;
    the claim's creation (with the pod's status naming it) lets the pod through."""
    p = pod("t", "unused")
    p["spec"]["resourceClaims"] = [{"name": "nic", "resourceClaimTemplateName": "subnet-x"}]
    api.create("Pod", p)
    proc = _process(api)
    _run(proc, api, rounds=1)
    assert proc.queue.where("default/t") == "gated" and proc.queue.attempts("default/t") == 0
    assert not api.objects["Event"]
    stored = api.get("Pod", "default/t")
    assert stored is not None and "conditions" not in stored["status"]
    # the resourceclaim controller's work, by hand: the claim, then the pod's status
    c = claim("t-nic-abcde", "x")
    c["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "t",
                                         "uid": "uid-pod-t", "controller": True}]
    api.create("ResourceClaim", c)
    stored["status"]["resourceClaimStatuses"] = [{"name": "nic", "resourceClaimName": "t-nic-abcde"}]
    api.update("Pod", stored, status=True)
    sync(api, proc.view)
    assert proc.queue.where("default/t") == "active"
    _run(proc, api)
    assert _node(api, "default/t") == "node-1"


def test_unreadable_bridge_fails_the_pool_closed_until_fixed(api: FakeApi) -> None:
    """An annotation that does not validate: the pool's NICs are filtered with the real
    problem in the reason (no stand-in key), and every other pool still serves."""
    meta = api.get("ResourceSlice", "node-1-meta")
    assert meta is not None
    meta["metadata"]["annotations"][SHARING_AFFINITY_ANNOTATION] = "[{not json"
    api.update("ResourceSlice", meta)
    n2 = api.get("Node", "node-2")
    assert n2 is not None
    n2["spec"]["unschedulable"] = True  # only node-1 is left
    api.update("Node", n2)
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    assert list(proc.view.slice_problems()) == ["node-1-meta"]
    _run(proc, api, rounds=1)
    assert _node(api, "default/a") is None
    stored = api.get("Pod", "default/a")
    assert stored is not None
    (cond,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "AffinityInvalidPool" in cond["message"]
    assert "not JSON" in cond["message"], cond["message"]
    meta = api.get("ResourceSlice", "node-1-meta")
    assert meta is not None
    meta["metadata"]["annotations"][SHARING_AFFINITY_ANNOTATION] = json.dumps(EXTRACTORS)
    api.update("ResourceSlice", meta)
    _run(proc, api)
    assert not proc.view.slice_problems()
    assert _node(api, "default/a") == "node-1"


def test_key_declared_by_two_metadata_slices_warns_on_the_later_slice(api: FakeApi) -> None:
    """Each slice passes admission; the pool does not. The slice that repeats the key gets
    a SharingAffinityInvalid Warning when the slices change, not at the next attempt;
    once per message, and again when the problem comes back after a fix."""
    for name in ("node-1-meta", "node-1-nics"):
        obj = api.get("ResourceSlice", name)
        assert obj is not None
        obj["spec"]["pool"]["resourceSliceCount"] = 3
        api.update("ResourceSlice", obj)
    proc = _process(api)

    def warnings() -> list[dict[str, Any]]:
        proc.events.send_pending()
        return [e for e in api.objects["Event"].values()
                if e["reason"] == "SharingAffinityInvalid"]

    def publish(extractors: Any) -> None:
        second = meta_slice("node-1", annotation=extractors)
        second["metadata"]["name"] = "node-1-meta2"
        second["spec"]["pool"]["resourceSliceCount"] = 3
        if api.get("ResourceSlice", "node-1-meta2") is None:
            api.create("ResourceSlice", second)
        else:
            api.update("ResourceSlice", second)
        sync(api, proc.view)
        proc.check_pools()

    assert warnings() == []
    publish([{"name": "subnet", "expression": '"x"'}])
    (ev,) = warnings()
    assert ev["type"] == "Warning"
    assert ev["regarding"] == {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                               "name": "node-1-meta2"}
    assert ev["note"] == ("pool networking.example.com/node-1 generation 1: duplicate "
                          "sharingAffinity key 'subnet' in slices node-1-meta and node-1-meta2")
    # attempts on the invalid pool build snapshots again: nothing more is written
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    _run(proc, api)
    assert _node(api, "default/a") == "node-2"
    assert warnings() == [ev]
    # fixed (another key), then broken again: told again, as the Event's series
    publish([{"name": "vlan", "expression": '"1"'}])
    assert warnings() == [ev]
    publish([{"name": "subnet", "expression": '"y"'}])
    (again,) = warnings()
    assert again["series"]["count"] == 2


def test_unschedulable_pods_wait_for_an_event_that_can_help_and_write_only_changes(
        api: FakeApi) -> None:
    """Queueing hints end to end: an unschedulable pod is not retried by events its
    rejection does not care about; one that can help retries it; the same verdict again
    writes no condition and only counts in the Event's series; a release lets it bind."""
    for i, subnet in enumerate("pqrst"):
        api.create("ResourceClaim", claim(f"p{i}-nic", subnet))
        api.create("Pod", pod(f"p{i}", f"p{i}-nic"))
    proc = _process(api)
    _run(proc, api)
    stuck = next(i for i in range(5) if not _node(api, f"default/p{i}"))
    key = f"default/p{stuck}"

    def status_writes() -> int:
        return len([p for m, p in api.requests if m == "PATCH" and p.endswith(f"/p{stuck}/status")])

    def failed_events() -> list[dict[str, Any]]:
        return [o for o in api.objects["Event"].values()
                if o["reason"] == "FailedScheduling" and o["regarding"]["name"] == f"p{stuck}"]

    assert proc.queue.where(key) == "unschedulable" and status_writes() == 1
    attempts = proc.queue.attempts(key)
    # A node label: no plugin that rejected it cares.
    n1 = api.get("Node", "node-1")
    assert n1 is not None
    n1["metadata"]["labels"]["rack"] = "r1"
    api.update("Node", n1)
    _run(proc, api)
    assert proc.queue.attempts(key) == attempts and proc.queue.where(key) == "unschedulable"
    # A slice republished: it may; same verdict, same message: nothing new is written.
    meta = api.get("ResourceSlice", "node-2-meta")
    assert meta is not None
    meta["metadata"]["labels"] = {"republished": "yes"}
    api.update("ResourceSlice", meta)
    _run(proc, api)
    assert proc.queue.attempts(key) == attempts + 1
    assert status_writes() == 1
    (ev,) = failed_events()
    assert ev["series"]["count"] == 2
    # A pod holding a lock goes, its claim with it: devices released, the pod fits.
    other = next(i for i in range(5) if i != stuck)
    api.delete("Pod", f"default/p{other}")
    api.delete("ResourceClaim", f"default/p{other}-nic")
    _run(proc, api)
    assert _node(api, key) is not None and key not in proc.queue


def test_queue_and_client_metrics_are_exposed(api: FakeApi) -> None:
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    _run(proc, api)
    proc.observe_queue()
    text = proc.metrics.exposition()
    assert 'dra_affinity_pending_pods{queue="unschedulable"} 0.0' in text
    assert 'dra_affinity_rest_client_requests_total{client="scheduler",code="200",method="POST"}' \
        in text
    assert 'dra_affinity_rest_client_requests_total{client="events",code="200",method="POST"}' in text
    assert "dra_affinity_thread_cpu_seconds_total{thread=" in text
    assert "dra_affinity_dropped_total" in text


def test_profile_dir_writes_each_threads_profile(api: FakeApi, tmp_path: Any) -> None:
    """--profile-dir: the loop, the binding workers, the reflectors and the Event sink
    each leave a profile of what they ran; the loop's holds the scheduling cycles."""
    import pstats
    import threading
    import time

    from dra_affinity.observe.profiles import summary

    for name, subnet in [("a", "x"), ("b", "y")]:
        api.create("ResourceClaim", claim(f"{name}-nic", subnet))
        api.create("Pod", pod(name, f"{name}-nic"))
    proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1,
                                         max_in_flight_bindings=2,
                                         profile_dir=str(tmp_path / "prof")))
    t = threading.Thread(target=lambda: proc.run(install_signals=False))
    t.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with api.lock:
                if _node(api, "default/a") and _node(api, "default/b"):
                    break
            time.sleep(0.05)
    finally:
        proc.stopping.set()
        t.join(30)
    # Reflectors are not waited for at shutdown (a watch may hold them): each writes
    # its profile as it notices the stop.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list((tmp_path / "prof").glob("reflector-*"))) < 6:
        time.sleep(0.05)
    groups = summary(tmp_path / "prof")
    assert {"scheduling-loop", "binding", "events"} <= set(groups)
    assert any(g.startswith("reflector") for g in groups)

    def ran(group: str) -> set[str]:
        files = [str(p) for p in (tmp_path / "prof").glob(f"{group}*.prof")]
        return {name for _, _, name in pstats.Stats(*files).stats}  # type: ignore[attr-defined]
    assert "scheduling_cycle" in ran("scheduling-loop")
    assert "binding_cycle" in ran("binding")
