"""Memory bounds of the informer side: the change FIFO holds one entry per object
however often it changes, and pods this scheduler will not schedule are kept as a
slim projection that still counts what they take of their node."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.kube.convert import to_model
from dra_affinity.kube.fifo import ChangeFIFO
from dra_affinity.kube.informer import ADDED, DELETED, MODIFIED, REPLACE, SYNCED, Change
from dra_affinity.kube.projection import pod_transform, slim_pod
from dra_affinity.kube.runner import Options, SchedulerProcess
from dra_affinity.scheduler.nodefit import pod_requests
from dra_affinity.scheduler.placement.terms import terms_of

from .fakeapi import FakeApi
from .world import build, claim
from .world import pod as world_pod


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
    raw = [e.raw for e in proc.view._store["Pod"].values()]
    foreign = [r for r in raw if r["metadata"]["name"].startswith("web-")]
    assert len(foreign) == 1000 and all("annotations" not in r["metadata"] for r in foreign)
    assert max(len(repr(r)) for r in foreign) < len(repr(BIG)) / 8
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


def test_a_pending_pod_is_modelled_whole_but_only_its_projection_is_kept() -> None:
    """The view converts our pending pod whole (tolerations, selectors: what Filter reads)
    and keeps beside the model only the projection, before and after the binding is
    assumed; a resync of the same version is still recognised as unchanged."""
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
    kept = view.raw("Pod", "default/a")
    assert kept is not None and kept == slim_pod(kept)
    assert "annotations" not in kept["metadata"] and "volumes" not in kept["spec"]
    assert "tolerations" not in kept["spec"]
    whole = api.get("Pod", "default/a")
    assert whole is not None
    queued = len(proc.queue)
    seen: list[object] = []
    view.pod_listeners.append(lambda old, new: seen.append(new))
    view.apply(Change("Pod", MODIFIED, object=whole))  # the same version again
    assert seen == [] and view.pod("default/a") is pod_model and len(proc.queue) == queued
    view.bind_pod(pod_model, "node-1")
    assumed = view.raw("Pod", "default/a")
    assert assumed is not None and assumed == slim_pod(assumed)
    assert assumed["spec"]["nodeName"] == "node-1" and "annotations" not in assumed["metadata"]
