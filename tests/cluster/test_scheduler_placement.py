"""``dra-affinity scheduler`` on a real control plane: pod placement rules and NIC sharing.

Two Deployment-like groups of replicas (pods with one template's labels), each
with hostname anti-affinity against its own group and a zone topology spread
(DoNotSchedule, maxSkew 1), each sharing NICs by subnet through sharing affinity.
The nodes have one NIC each: a NIC locked to one group's subnet is closed to the
other group, so the groups must interleave, one replica per node and as many per
zone as the spread allows, exactly as both the placement rules and the locks demand.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import pytest

from kube.live import (
    MERGE_PATCH,
    Live,
    World,
    assert_no_incompatible_colocation,
    live,
    ns,
    schedulers,
    wait_until,
)

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns, schedulers)  # pytest finds fixtures by module attribute

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _rules(app: str) -> dict[str, Any]:
    """What a Deployment's pod template of ``app`` would say: never two replicas on one
    host, zones within one replica of each other."""
    return {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}]}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": app}}}],
    }


def _replica(w: World, app: str, i: int, scheduler: str) -> str:
    name = f"{app}-{i}"
    w.pod(name, template=f"{app}-nic", scheduler=scheduler, labels={"app": app}, **_rules(app))
    return name


def _message(live: Live, ns: str, pod: str, *parts: str) -> str:
    def diagnosed() -> Any:
        p = live.pod(ns, pod)
        for c in (p or {}).get("status", {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False" and all(x in c["message"] for x in parts):
                return c["message"]
        return None

    msg: str = wait_until(diagnosed, 90, f"PodScheduled=False on {pod} naming {parts}")
    return msg


def test_replicas_spread_by_host_and_zone_and_share_nics_by_subnet(
        control_plane: Any, live: Live, ns: str, schedulers: Any) -> None:
    w = World(live, ns, nodes=4, nics=1, slots=4)
    zones = {}
    for i, n in enumerate(w.nodes):
        zones[n] = "a" if i < 2 else "b"
        live.api.request("PATCH", f"/api/v1/nodes/{n}", content_type=MERGE_PATCH,
                         body={"metadata": {"labels": {ZONE: zones[n]}}})
    w.template("trainer-nic", "subnet-A")
    w.template("server-nic", "subnet-B")
    name = f"dra-affinity-{ns}"
    schedulers()

    # Each replica is bound before the next is created, as a Deployment scaled one by one.
    placed: dict[str, str] = {}
    for app in ("trainer", "server"):
        for i in range(2):
            pod = _replica(w, app, i, name)
            placed[pod] = wait_until(lambda pod=pod: live.node_of(ns, pod), 90, f"{pod} bound")

    by_app: dict[str, list[str]] = collections.defaultdict(list)
    for pod, node in placed.items():
        by_app[pod.rsplit("-", 1)[0]].append(node)
    for app, nodes in by_app.items():
        assert len(set(nodes)) == 2, (app, nodes)  # hostname anti-affinity
        assert sorted(zones[n] for n in nodes) == ["a", "b"], (app, nodes)  # one per zone
    # One NIC per node, locked to the first group's subnet: the groups interleave.
    assert set(by_app["trainer"]).isdisjoint(by_app["server"])
    assert_no_incompatible_colocation(live, ns)

    # A third trainer: its own replicas hold two hosts (anti-affinity), the server
    # replicas' NICs are locked to subnet-B (sharing affinity): nowhere to go.
    late = _replica(w, "trainer", 2, name)
    msg = _message(live, ns, late, "nodes are available",
                   "2 node(s) didn't match pod anti-affinity rules", "2 AffinityLockMismatch")
    assert live.node_of(ns, late) is None, msg

    # A server replica leaves: its node's NIC unlocks when its claim is released, and
    # the third trainer may go there only if the zones stay within one of each other.
    gone = next(p for p in placed if p.startswith("server"))
    live.delete_pod(ns, gone)
    node = wait_until(lambda: live.node_of(ns, late), 120, f"{late} bound once {gone} is gone")
    assert node == placed[gone]
    trainers = [*by_app["trainer"], node]
    per_zone = collections.Counter(zones[n] for n in trainers)
    assert max(per_zone.values()) - min(per_zone.get(z, 0) for z in "ab") <= 1, per_zone
    assert_no_incompatible_colocation(live, ns)


def test_label_keys_merge_as_the_api_server_merges_them(control_plane: Any, live: Live, ns: str) -> None:
    """``matchLabelKeys``/``mismatchLabelKeys`` of pod (anti-)affinity and spread: the
    embedded cluster's merge (validation/pod_strategy.py) writes what a 1.37 API
    server stores, on seeded pods (keys the pod has and lacks, terms of every kind)."""
    from dra_affinity.api.core import Pod
    from dra_affinity.validation.pod_strategy import merge_label_keys

    rng = random.Random(5981)
    keys = ("app", "tier", "version")
    for i in range(30):
        labels = {k: rng.choice(["a", "b"]) for k in keys if rng.random() < 0.6}

        def term(rng: random.Random = rng) -> dict[str, Any]:
            own = rng.sample(keys, rng.randint(0, 2))
            t: dict[str, Any] = {"topologyKey": rng.choice([HOST, ZONE]),
                                 "labelSelector": {"matchLabels": {"role": rng.choice(["x", "y"])}}}
            if own:
                t["matchLabelKeys"] = own[:1]
                if len(own) > 1:
                    t["mismatchLabelKeys"] = own[1:]
            return t

        affinity: dict[str, Any] = {}
        for kind in ("podAffinity", "podAntiAffinity"):
            part: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": [term()]}
            if rng.random() < 0.5:
                part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                    {"weight": rng.randint(1, 100), "podAffinityTerm": term()}]
            affinity[kind] = part
        spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                   "labelSelector": {"matchLabels": {"role": "x"}},
                   "matchLabelKeys": rng.sample(keys, rng.randint(1, 2))}]
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"merge-{i}", "namespace": ns, "labels": labels},
                "spec": {"schedulerName": "nobody", "affinity": affinity, "topologySpreadConstraints": spread,
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
        stored = live.create(body, ns)
        ours = merge_label_keys(Pod.model_validate(body)).model_dump(by_alias=True, exclude_none=True, mode="json")
        assert stored["spec"]["affinity"] == ours["spec"]["affinity"], (i, body)
        assert stored["spec"]["topologySpreadConstraints"] == ours["spec"]["topologySpreadConstraints"], (i, body)
