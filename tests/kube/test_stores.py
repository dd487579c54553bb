"""Memory bounds of the informer side: the change FIFO holds one entry per object
however often it changes, pods this scheduler will not schedule are kept as a slim
projection that still counts what they take of their node, and the view keeps pods
and claims packed (their model's JSON), typed again when read."""

from __future__ import annotations

import gc
import json
import queue
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.api.keys import key_of
from dra_affinity.api.meta import TypedObject
from dra_affinity.kube.convert import to_model
from dra_affinity.kube.fifo import ChangeFIFO
from dra_affinity.kube.informer import ADDED, DELETED, MODIFIED, REPLACE, SYNCED, Change
from dra_affinity.kube.projection import pod_transform, slim_pod
from dra_affinity.kube.runner import Options, SchedulerProcess
from dra_affinity.kube.view import KubeView
from dra_affinity.scheduler.nodefit import pod_requests
from dra_affinity.scheduler.placement.terms import terms_of
from dra_affinity.sim.runner import Simulation
from dra_affinity.sim.scenario import load_scenario

from .fakeapi import FakeApi
from .world import build, claim, sync
from .world import pod as world_pod

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def pod(name: str, rv: int = 1, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)},
            "spec": {"containers": [{"name": "c"}], **spec}}


def drain(fifo: ChangeFIFO) -> list[tuple[str, str, str]]:
    out = []
    while True:
        try:
            ch = fifo.get_nowait()
        except queue.Empty:
            return out
        if ch.object is not None:
            out.append((ch.type, ch.object["metadata"]["name"], ch.object["metadata"]["resourceVersion"]))
        else:
            out.append((ch.type, ch.kind, str(len(ch.objects))))


def test_one_entry_per_object_however_often_it_changes() -> None:
    fifo = ChangeFIFO()
    for rv in range(1, 1001):
        fifo.put(Change("Pod", MODIFIED if rv > 1 else ADDED, object=pod("a", rv)))
        fifo.put(Change("Pod", MODIFIED, object=pod(f"b{rv % 10}", rv)))
    assert len(fifo) == 11
    got = drain(fifo)
    # "a" keeps its place (first in), with its newest version, still an ADDED.
    assert got[0] == (ADDED, "a", "1000")
    assert [g[1] for g in got[1:]] == [f"b{i % 10}" for i in range(1, 11)]
    assert fifo.coalesced == 2000 - 11


def test_delete_wins_and_a_recreation_replaces_the_old_object() -> None:
    fifo = ChangeFIFO()
    fifo.put(Change("Pod", MODIFIED, object=pod("a", 1)))
    fifo.put(Change("Pod", DELETED, object=pod("a", 2)))
    fifo.put(Change("Pod", ADDED, object=pod("b", 3)))
    fifo.put(Change("Pod", DELETED, object=pod("b", 4)))
    fifo.put(Change("Pod", ADDED, object=pod("b", 5)))
    assert drain(fifo) == [(DELETED, "a", "2"), (MODIFIED, "b", "5")]


def test_a_list_supersedes_what_waits_for_its_kind_and_stays_before_synced() -> None:
    fifo = ChangeFIFO()
    fifo.put(Change("Pod", REPLACE, objects=[pod("a")]))
    fifo.put(Change("Pod", SYNCED))
    fifo.put(Change("Pod", MODIFIED, object=pod("a", 2)))
    fifo.put(Change("Node", ADDED, object={"kind": "Node", "metadata": {"name": "n",
                                                                         "resourceVersion": "3"}}))
    fifo.put(Change("Pod", REPLACE, objects=[pod("a", 4), pod("b", 4)]))
    assert drain(fifo) == [(REPLACE, "Pod", "2"), (SYNCED, "Pod", "0"), (ADDED, "n", "3")]


def test_get_waits_for_a_put_and_times_out_empty() -> None:
    fifo = ChangeFIFO()
    with pytest.raises(queue.Empty):
        fifo.get(timeout=0.01)
    t = threading.Timer(0.05, lambda: fifo.put(Change("Pod", ADDED, object=pod("a"))))
    t.start()
    assert fifo.get(timeout=5).type == ADDED
    t.join()


BIG = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                 "labels": {"app": "web"}, "annotations": {"note": "x" * 5000},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                         "name": "web-1", "uid": "r"}]},
    "spec": {"nodeName": "n1", "schedulerName": "default-scheduler",
             "containers": [{"name": "app", "image": "web:1", "env": [{"name": "A", "value": "b"}] * 50,
                             "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                             "ports": [{"containerPort": 8080, "hostPort": 80}]}],
             "initContainers": [{"name": "side", "restartPolicy": "Always", "image": "s",
                                 "resources": {"requests": {"cpu": "100m"}},
                                 "ports": [{"containerPort": 9090}]}],
             "hostNetwork": True,
             "overhead": {"cpu": "10m"}, "volumes": [{"name": "v", "emptyDir": {}}] * 20,
             "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "t"}],
             "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                 {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]}},
             "tolerations": [{"operator": "Exists"}]},
    "status": {"phase": "Running", "podIP": "10.0.0.1",
               "resourceClaimStatuses": [{"name": "nic", "resourceClaimName": "web-nic"}],
               "containerStatuses": [{"name": "app", "state": {"running": {}}}]},
}


def test_slim_pods_keep_what_node_usage_and_claims_need_and_nothing_else() -> None:
    slim = slim_pod(BIG)
    full, small = to_model("Pod", BIG).model, to_model("Pod", slim).model
    assert isinstance(full, Pod) and isinstance(small, Pod)
    assert pod_requests(small) == pod_requests(full) and pod_requests(small)
    assert small.spec.node_name == "n1" and small.metadata.labels == {"app": "web"}
    assert small.spec.resource_claims == full.spec.resource_claims
    assert small.status["resourceClaimStatuses"] == BIG["status"]["resourceClaimStatuses"]
    assert small.spec.affinity == full.spec.affinity and small.spec.affinity
    # What NodePorts and InterPodAffinity count of a bound pod is kept whole.
    assert terms_of(small) == terms_of(full) and terms_of(small).ports
    assert "annotations" not in slim["metadata"] and "volumes" not in slim["spec"]
    assert "env" not in slim["spec"]["containers"][0] and "podIP" not in slim["status"]
    assert len(repr(slim)) < len(repr(BIG)) / 8


def test_only_this_schedulers_pending_pods_are_kept_whole() -> None:
    transform = pod_transform("dra-affinity")
    mine = {**BIG, "spec": {**BIG["spec"], "schedulerName": "dra-affinity", "nodeName": None}}
    assert transform(mine) is mine
    bound = {**mine, "spec": {**mine["spec"], "nodeName": "n1"}}
    assert transform(bound) == slim_pod(bound)
    assert transform(BIG) == slim_pod(BIG)


def test_the_process_keeps_foreign_pods_slim_and_one_change_per_object() -> None:
    """Through the process's own reflectors, FIFO and view: a thousand pods of another
    scheduler bound to a node are stored slim and still count against the node; a pod
    patched many times while the loop is busy is one change waiting; our pending pod is
    kept whole."""
    api = FakeApi()
    build(api)
    node = api.get("Node", "node-1")
    assert node is not None
    node.setdefault("status", {})["allocatable"] = {"cpu": "2000", "pods": "2000"}
    api.update("Node", node, status=True)
    for i in range(1000):
        api.create("Pod", {**BIG, "metadata": {**BIG["metadata"], "name": f"web-{i}", "uid": f"u{i}"},
                           "spec": {**BIG["spec"], "nodeName": "node-1"}})
    api.create("ResourceClaim", claim("a-nic", "x"))
    mine = world_pod("a", "a-nic")
    mine["metadata"]["annotations"] = {"note": "kept"}
    api.create("Pod", mine)
    proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1))
    pods = next(r for r in proc.reflectors if r.kind == "Pod")
    for r in proc.reflectors:
        r.list_once()
    for i in range(50):  # the loop has not run yet: every update folds into the waiting one
        p = api.get("Pod", "ns/web-0")
        assert p is not None
        p["metadata"]["labels"] = {"app": "web", "v": str(i)}
        api.update("Pod", p)
    pods.watch_once()
    assert len(proc.changes) == 2 * len(proc.reflectors) + 1  # a list and SYNCED per kind, web-0
    while len(proc.changes):
        proc._drain(0)
    assert len(proc.changes) == 0 and proc.view.has_synced()
    foreign = [p for p in proc.view.pods() if p.name.startswith("web-")]
    assert len(foreign) == 1000 and all(not p.metadata.annotations for p in foreign)
    assert all(not p.spec.volumes and "podIP" not in p.status for p in foreign)
    assert max(len(repr(p.to_dict())) for p in foreign) < len(repr(BIG)) / 8
    web0 = proc.view.pod("ns/web-0")
    assert web0 is not None and web0.metadata.labels == {"app": "web", "v": "49"}
    own = proc.view.pod("default/a")
    assert own is not None and own.metadata.annotations == {"note": "kept"}
    proc.scheduler.start()
    one = to_model("Pod", BIG).model
    assert isinstance(one, Pod)
    used = proc.scheduler.cache.usage.on("node-1")
    assert used["pods"] == 1000
    assert all(used[k] == 1000 * v for k, v in pod_requests(one).items()) and pod_requests(one)


def test_a_pending_pod_is_modelled_whole_and_its_binding_assumed_from_the_model() -> None:
    """The view converts our pending pod whole (tolerations, selectors: what Filter reads);
    a resync of the same version is recognised as unchanged; the assumed binding is the
    same model with its node (sharing its parts, not converted again) until the informer
    shows the binding, whose pod is then kept slim."""
    api = FakeApi()
    build(api)
    api.create("ResourceClaim", claim("a-nic", "x"))
    mine = world_pod("a", "a-nic")
    mine["metadata"]["annotations"] = {"note": "x" * 5000}
    mine["spec"]["tolerations"] = [{"key": "t", "operator": "Exists"}]
    mine["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}] * 20
    api.create("Pod", mine)
    proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1))
    for r in proc.reflectors:
        r.list_once()
    while len(proc.changes):
        proc._drain(0)
    view = proc.view
    pod_model = view.pod("default/a")
    assert pod_model is not None and pod_model.spec.tolerations and pod_model.metadata.annotations
    whole = api.get("Pod", "default/a")
    assert whole is not None
    queued = len(proc.queue)
    seen: list[object] = []
    view.pod_listeners.append(lambda old, new: seen.append(new))
    view.apply(Change("Pod", MODIFIED, object=whole))  # the same version again
    assert seen == [] and view.pod("default/a") is pod_model and len(proc.queue) == queued
    view.bind_pod(pod_model, "node-1")
    assumed = view.pod("default/a")
    assert assumed is not None and assumed.spec.node_name == "node-1" and seen == [assumed]
    assert assumed.spec.tolerations is pod_model.spec.tolerations
    assert assumed.metadata is pod_model.metadata and pod_model.spec.node_name is None
    echo = api.get("Pod", "default/a")
    assert echo is not None and echo["spec"]["nodeName"] == "node-1"
    for r in proc.reflectors:
        r.list_once()
    while len(proc.changes):
        proc._drain(0)
    bound = view.pod("default/a")
    assert bound is not None and bound is not assumed and bound.spec.node_name == "node-1"
    assert not bound.spec.tolerations and not bound.metadata.annotations and view._assumed["Pod"] == {}


# ----------------------------------------------------------------------------- memory per object
def _served_pod(i: int, node: str | None = None) -> dict[str, Any]:
    """A pod of the cluster harness as the API server returns it (defaults filled in)."""
    p: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"0000-{i:08d}",
                     "resourceVersion": str(1000 + i), "creationTimestamp": "2026-12-06T18:00:00Z"},
        "spec": {"volumes": [{"name": "kube-api-access-abcde", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt",
                                   "items": [{"key": "ca.crt", "path": "ca.crt"}]}}],
                    "defaultMode": 420}}],
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"claims": [{"name": "nic"}]},
                                 "volumeMounts": [{"name": "kube-api-access-abcde", "readOnly": True,
                                                   "mountPath": "/var/run/secrets/kubernetes.io/sa"}],
                                 "terminationMessagePath": "/dev/termination-log",
                                 "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                 "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                 "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
                 "securityContext": {}, "schedulerName": "dra-affinity", "priority": 0,
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}],
                 "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
                 "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": f"subnet-{i % 8}"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort", "resourceClaimStatuses": [
            {"name": "nic", "resourceClaimName": f"p{i}-nic-{i:05x}"}]}}
    if node:
        p["spec"]["nodeName"] = node
    return p


def _served_claim(i: int, node: str) -> dict[str, Any]:
    """The claim made for pod ``i`` from its template, allocated on ``node`` and reserved."""
    params = {"apiVersion": "networking.example.com/v1", "kind": "NICConfig",
              "subnetID": f"subnet-{i % 8}"}
    driver = "networking.example.com"
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"p{i}-nic-{i:05x}", "generateName": f"p{i}-nic-", "namespace": "bench",
                     "uid": f"1111-{i:08d}", "resourceVersion": str(5000 + i),
                     "creationTimestamp": "2026-12-06T18:00:00Z",
                     "finalizers": ["resource.kubernetes.io/delete-protection"],
                     "annotations": {"resource.kubernetes.io/pod-claim-name": "nic"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": f"p{i}",
                                          "uid": f"0000-{i:08d}", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
            "deviceClassName": "shared-nic", "allocationMode": "ExactCount", "count": 1,
            "capacity": {"requests": {f"{driver}/slots": "1"}}}}],
            "config": [{"requests": ["nic"], "opaque": {"driver": driver, "parameters": params}}]}},
        "status": {"allocation": {
            "devices": {"results": [{"request": "nic", "driver": driver, "pool": node,
                                     "device": f"eth{i % 8}", "shareID": f"2222-{i:08d}",
                                     "consumedCapacity": {f"{driver}/slots": "1"}}],
                        "config": [{"source": "FromClaim", "requests": ["nic"],
                                    "opaque": {"driver": driver, "parameters": params}}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": f"p{i}", "uid": f"0000-{i:08d}"}]}}


def _kept_bytes(kind: str, served: list[dict[str, Any]],
                transform: Any = None) -> float:
    """Bytes the view holds per object after applying ``served`` (decoded inside the
    measurement, as a watch decodes each event)."""
    view = KubeView(FakeApi())
    texts = [json.dumps(o) for o in served]
    gc.collect()
    tracemalloc.start()
    try:
        for t in texts:
            obj = json.loads(t)
            view.apply(Change(kind, ADDED, object=transform(obj) if transform else obj))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(view._store[kind]) == len(served)
    return held / len(served)


def test_what_the_view_keeps_per_claim_and_pod_is_bounded() -> None:
    """A claim or pod costs what its packed form does (its model's JSON), plus its share
    of the recently used kept typed. Kept beside a typed model, the server's JSON made a
    claim cost 25 KB here, and a typed claim costs 9 KB even with its parts shared."""
    n = 400
    transform = pod_transform("dra-affinity")
    per_claim = _kept_bytes("ResourceClaim", [_served_claim(i, f"node-{i % 20}") for i in range(n)])
    per_bound = _kept_bytes("Pod", [_served_pod(i, f"node-{i % 20}") for i in range(n)], transform)
    per_pending = _kept_bytes("Pod", [_served_pod(i) for i in range(n)], transform)
    assert per_claim < 5_000, per_claim
    assert per_bound < 2_500, per_bound
    assert per_pending < 4_500, per_pending


def test_pods_and_claims_are_kept_packed_and_read_back_as_they_were() -> None:
    """Through the process: after scheduling, every pod and claim is kept packed (its
    model's JSON) and reads back equal to the server's object converted, with the same
    fields set; the most recently used are typed, the others typed again on each read."""
    api = FakeApi()
    build(api, nodes=("node-1", "node-2", "node-3"), nics=4)
    for i in range(12):
        api.create("ResourceClaim", claim(f"p{i}-nic", f"net-{i % 3}"))
        api.create("Pod", world_pod(f"p{i}", f"p{i}-nic"))
    proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1,
                                         initial_backoff=0.0, max_backoff=0.0))
    sync(api, proc.view)
    proc.scheduler.start()
    proc.started.set()
    while (key := proc.queue.pop()) is not None:
        proc.schedule_one(key)
    sync(api, proc.view)
    view = proc.view
    assert view._assumed == {"ResourceClaim": {}, "Pod": {}}
    for kind, read in (("Pod", view.pod), ("ResourceClaim", view.claim)):
        served = api.objects[kind]
        assert served and all(isinstance(e.kept, str) for e in view._store[kind].values())
        for key, raw in served.items():
            listed = {**raw, "metadata": {k: v for k, v in raw["metadata"].items()
                                          if k != "managedFields"}}  # as reflectors drop them
            want = to_model(kind, listed).model  # whole: world.sync lists with no transform
            got = read(key)
            assert got == want and got.model_fields_set == want.model_fields_set
            assert got.to_dict() == want.to_dict()
    bound = [p for p in view.pods() if p.spec.node_name]
    assert len(bound) == 12 and len(view.pods()) == 12 and len(view.claims()) == 12
    allocated = [c for c in view.claims() if c.status.allocation is not None]
    assert len(allocated) == 12
    # Read twice in a row: one typed model; read again after many others: an equal one.
    first = view.claim("default/p0-nic")
    assert first is not None and view.claim("default/p0-nic") is first
    for i in range(70):
        view._remember("Pod", f"other/{i}", view._store["Pod"]["default/p1"], first)
    again = view.claim("default/p0-nic")
    assert again == first and again is not first


def test_claims_are_gone_through_one_at_a_time() -> None:
    """``claims()`` and ``pods()`` type each object when it is taken, and keep none of
    them: going through every claim of a large cluster never holds them all typed."""
    view = KubeView(FakeApi())
    for i in range(300):
        view.apply(Change("ResourceClaim", ADDED, object=_served_claim(i, f"node-{i % 20}")))
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        n = sum(1 for c in view.claims() if c.status.allocation is not None)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert n == 300
    assert peak < 100 * 15_000  # the recently used ones typed, not all 300


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_pod_and_claim_reads_back_from_its_packed_form(example: str) -> None:
    """The examples' pods and claims after their scenario ran (allocations with shares,
    consumed capacity, configs from classes and claims, reservations), kept packed by the
    view and read back: equal to the model converted, with the same fields set."""
    sim = Simulation(load_scenario(str(EXAMPLES / example)))
    sim.run()
    view = KubeView(FakeApi())
    objs: list[TypedObject] = [*sim.cluster.pods(), *sim.cluster.claims()]
    assert objs
    for obj in objs:
        view.apply(Change(obj.kind, ADDED, object=obj.to_dict()))
    view._recent.clear()
    for obj in objs:
        want = to_model(obj.kind, obj.to_dict()).model
        got = view.pod(key_of(obj)) if obj.kind == "Pod" else view.claim(key_of(obj))
        assert got == want and got is not None and got.model_fields_set == want.model_fields_set
        assert got.to_dict() == obj.to_dict()


def test_bound_pods_kept_packed_still_count_for_anti_affinity_and_their_node() -> None:
    """A pod of another scheduler bound to node-1, kept packed: its labels still repel our
    pod's anti-affinity and its requests still fill its node; typed again at a restart
    (``start`` reads every pod), it counts the same."""
    api = FakeApi()
    build(api)
    web = world_pod("web", "unused", scheduler="default-scheduler")
    web["metadata"]["labels"] = {"app": "web"}
    web["spec"]["nodeName"] = "node-1"
    web["spec"]["resourceClaims"] = []
    api.create("Pod", web)
    api.create("ResourceClaim", claim("a-nic", "x"))
    mine = world_pod("a", "a-nic")
    mine["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    api.create("Pod", mine)
    for _restart in range(2):
        proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1))
        for r in proc.reflectors:
            r.list_once()
        while len(proc.changes):
            proc._drain(0)
        assert isinstance(proc.view._store["Pod"]["default/web"].kept, str)
        proc.scheduler.start()
        proc.started.set()
        assert proc.scheduler.cache.usage.on("node-1")["pods"] == 1
        while (key := proc.queue.pop()) is not None:
            proc.schedule_one(key)
        bound = api.get("Pod", "default/a")
        assert bound is not None and bound["spec"]["nodeName"] == "node-2"
