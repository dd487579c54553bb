"""Seeded placement problems for the oracle's ``placement`` operation.

A problem is a small cluster as a scheduler's snapshot holds it (nodes with
zone/rack/host labels, taints, cordons and allocatable; Namespace objects with
labels; pods bound to nodes with labels, requests, host ports and (anti-)affinity
terms, some terminating) and one pod to place, stating any mix of nodeSelector,
required and preferred node affinity, tolerations, requests, host ports,
required and preferred pod affinity and anti-affinity (label selectors with every
operator, nil and empty selectors, namespaces, namespaceSelector), topology spread
constraints (DoNotSchedule and ScheduleAnyway, maxSkew 1-3, minDomains, node
inclusion policies, matchLabelKeys).

Pods are written as the API server stores them: valid, and with pod affinity's
``matchLabelKeys``/``mismatchLabelKeys`` already merged into the label selector
(the scheduler plugins read only the merged selector; topology spread merges its
own ``matchLabelKeys``, so those are left for both sides to merge).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
HOST = "kubernetes.io/hostname"
TOPOLOGY_KEYS = (ZONE, RACK, HOST)
NAMESPACES = {"default": {"env": "prod"}, "team-a": {"team": "a", "env": "prod"},
              "team-b": {"team": "b", "env": "dev"}}
# A namespace pods may live in without a Namespace object (a selector sees no labels).
UNLISTED_NAMESPACE = "scratch"
LABELS = {"app": ("web", "db", "cache"), "tier": ("fe", "be"), "version": ("v1", "v2")}
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass
class Problem:
    id: str
    nodes: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    pod: dict[str, Any]
    tags: set[str] = field(default_factory=set)

    def request(self) -> dict[str, Any]:
        return {"op": "placement", "id": self.id, "nodes": self.nodes, "namespaces": self.namespaces,
                "pods": self.pods, "pod": self.pod}


class _Gen:
    def __init__(self, rng: random.Random, tags: set[str]) -> None:
        self.rng = rng
        self.tags = tags

    def chance(self, p: float, tag: str | None = None) -> bool:
        hit = self.rng.random() < p
        if hit and tag:
            self.tags.add(tag)
        return hit

    # ------------------------------------------------------------------ labels
    def labels(self) -> dict[str, str]:
        return {k: self.rng.choice(v) for k, v in LABELS.items() if self.chance(0.6)}

    def requirement(self) -> dict[str, Any]:
        key = self.rng.choice(list(LABELS))
        op = self.rng.choice(OPERATORS)
        self.tags.add(f"op.{op}")
        if op in ("In", "NotIn"):
            values = self.rng.sample(LABELS[key], self.rng.randint(1, len(LABELS[key])))
            return {"key": key, "operator": op, "values": values}
        return {"key": key, "operator": op}

    def selector(self) -> dict[str, Any] | None:
        r = self.rng.random()
        if r < 0.05:
            self.tags.add("selector.nil")
            return None
        if r < 0.1:
            self.tags.add("selector.empty")
            return {}
        sel: dict[str, Any] = {}
        if self.chance(0.7):
            sel["matchLabels"] = {k: self.rng.choice(v) for k, v in LABELS.items() if self.chance(0.4)} or {
                "app": self.rng.choice(LABELS["app"])}
        if self.chance(0.4) or not sel:
            sel["matchExpressions"] = [self.requirement() for _ in range(self.rng.randint(1, 2))]
        return sel

    # ------------------------------------------------------------------ terms
    def affinity_term(self, labels: dict[str, str]) -> dict[str, Any]:
        t: dict[str, Any] = {"topologyKey": self.rng.choice(TOPOLOGY_KEYS)}
        sel = self.selector()
        if sel is not None:
            t["labelSelector"] = sel
        if self.chance(0.2, "namespaces"):
            t["namespaces"] = self.rng.sample([*NAMESPACES, UNLISTED_NAMESPACE], self.rng.randint(1, 2))
        if self.chance(0.25, "namespaceSelector"):
            t["namespaceSelector"] = self.rng.choice(
                [{}, {"matchLabels": {"env": "prod"}}, {"matchExpressions": [{"key": "team", "operator": "Exists"}]}])
        if sel is not None and self.chance(0.15, "matchLabelKeys"):
            # Stored as the API server merges them: the keys stay, the selector gains
            # key In/NotIn (the pod's value) for each key the pod carries.
            keys = [k for k in LABELS if k not in (sel.get("matchLabels") or {})][:1]
            field_name, op = self.rng.choice([("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")])
            t[field_name] = keys
            merged = [{"key": k, "operator": op, "values": [labels[k]]} for k in keys if k in labels]
            if merged:
                sel["matchExpressions"] = [*sel.get("matchExpressions", []), *merged]
        return t

    def pod_affinity(self, labels: dict[str, str], hard: float, soft: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kind in ("podAffinity", "podAntiAffinity"):
            part: dict[str, Any] = {}
            if self.chance(hard, f"{kind}.required"):
                part["requiredDuringSchedulingIgnoredDuringExecution"] = [
                    self.affinity_term(labels) for _ in range(self.rng.randint(1, 2))]
            if self.chance(soft, f"{kind}.preferred"):
                part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                    {"weight": self.rng.randint(1, 100), "podAffinityTerm": self.affinity_term(labels)}
                    for _ in range(self.rng.randint(1, 2))]
            if part:
                out[kind] = part
        return out

    def node_requirement(self) -> dict[str, Any]:
        r = self.rng.random()
        if r < 0.2:
            self.tags.add("nodeAffinity.Gt/Lt")
            return {"key": "example.com/gpus", "operator": self.rng.choice(["Gt", "Lt"]),
                    "values": [str(self.rng.randint(0, 4))]}
        key = self.rng.choice([ZONE, RACK, "disk"])
        values = {ZONE: ["a", "b", "c"], RACK: ["r0", "r1", "r2", "r3"], "disk": ["ssd", "hdd"]}[key]
        op = self.rng.choice(OPERATORS)
        if op in ("In", "NotIn"):
            return {"key": key, "operator": op, "values": self.rng.sample(values, self.rng.randint(1, 2))}
        return {"key": key, "operator": op}

    def spread(self, labels: dict[str, str]) -> list[dict[str, Any]]:
        out = []
        for key in self.rng.sample(TOPOLOGY_KEYS, self.rng.randint(1, 2)):
            hard = self.chance(0.6)
            c: dict[str, Any] = {"maxSkew": self.rng.randint(1, 3), "topologyKey": key,
                                 "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway"}
            self.tags.add("spread." + c["whenUnsatisfiable"])
            sel = self.selector()
            if sel is not None:
                c["labelSelector"] = sel
            if hard and self.chance(0.3, "minDomains"):
                c["minDomains"] = self.rng.randint(1, 4)
            if self.chance(0.3, "nodeAffinityPolicy"):
                c["nodeAffinityPolicy"] = self.rng.choice(["Honor", "Ignore"])
            if self.chance(0.3, "nodeTaintsPolicy"):
                c["nodeTaintsPolicy"] = self.rng.choice(["Honor", "Ignore"])
            if self.chance(0.2, "spread.matchLabelKeys"):
                keys = [k for k in LABELS if not sel or (k not in (sel.get("matchLabels") or {})
                        and all(e["key"] != k for e in sel.get("matchExpressions", [])))]
                if keys:
                    c["matchLabelKeys"] = keys[:1]
            out.append(c)
        return out

    def ports(self) -> list[dict[str, Any]]:
        out = []
        for _ in range(self.rng.randint(1, 2)):
            p: dict[str, Any] = {"containerPort": self.rng.choice([80, 443, 8080]),
                                 "hostPort": self.rng.choice([80, 443, 8080])}
            if self.chance(0.3):
                p["protocol"] = self.rng.choice(["TCP", "UDP"])
            if self.chance(0.3, "hostIP"):
                p["hostIP"] = self.rng.choice(["0.0.0.0", "127.0.0.1", "10.0.0.1"])
            out.append(p)
        # The API server refuses two equal (hostPort, protocol, hostIP) in one pod.
        seen: set[tuple[Any, ...]] = set()
        unique = []
        for p in out:
            k = (p["hostPort"], p.get("protocol", "TCP"), p.get("hostIP", ""))
            if k not in seen:
                seen.add(k)
                unique.append(p)
        return unique

    def container(self, ports: bool) -> dict[str, Any]:
        c: dict[str, Any] = {"name": "app", "image": "registry.k8s.io/pause:3.10"}
        req: dict[str, str] = {}
        if self.chance(0.7):
            req["cpu"] = f"{self.rng.choice([100, 250, 500, 1000, 1500])}m"
        if self.chance(0.7):
            req["memory"] = f"{self.rng.choice([128, 256, 512, 1024, 2048])}Mi"
        if req:
            c["resources"] = {"requests": req}
        if ports:
            c["ports"] = self.ports()
        return c


def _node(g: _Gen, i: int) -> dict[str, Any]:
    rng = g.rng
    name = f"node-{i}"
    labels = {HOST: name}
    if g.chance(0.9):
        labels[ZONE] = rng.choice("abc")
    else:
        g.tags.add("node.no-zone")
    if g.chance(0.8):
        labels[RACK] = f"r{rng.randint(0, 3)}"
    if g.chance(0.5):
        labels["disk"] = rng.choice(["ssd", "hdd"])
    if g.chance(0.4):
        labels["example.com/gpus"] = str(rng.randint(0, 4))
    spec: dict[str, Any] = {}
    if g.chance(0.25, "taints"):
        spec["taints"] = [{"key": rng.choice(["dedicated", "gpu"]), "value": rng.choice(["", "x"]),
                           "effect": rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule",
                                                 "PreferNoSchedule"])}
                          for _ in range(rng.randint(1, 2))]
        for t in spec["taints"]:
            if not t["value"]:
                del t["value"]
        # Upstream validation: one taint per (key, effect).
        spec["taints"] = list({(t["key"], t["effect"]): t for t in spec["taints"]}.values())
    if g.chance(0.08, "cordoned"):
        spec["unschedulable"] = True
    alloc = {"cpu": rng.choice(["2", "4", "8"]), "memory": rng.choice(["4Gi", "8Gi", "16Gi"]),
             "pods": str(rng.choice([3, 5, 110]))}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": spec, "status": {"allocatable": alloc, "capacity": alloc}}


def _pod(g: _Gen, name: str, namespace: str, *, incoming: bool) -> dict[str, Any]:
    rng = g.rng
    labels = g.labels()
    spec: dict[str, Any] = {"schedulerName": "dra-affinity",
                            "containers": [g.container(g.chance(0.2 if incoming else 0.15, "hostPort"))]}
    affinity = g.pod_affinity(labels, 0.3 if incoming else 0.12, 0.3 if incoming else 0.15)
    if incoming:
        if g.chance(0.15, "nodeSelector"):
            spec["nodeSelector"] = {ZONE: rng.choice("abc")}
        node_aff: dict[str, Any] = {}
        if g.chance(0.15, "nodeAffinity.required"):
            node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
                {"matchExpressions": [g.node_requirement() for _ in range(rng.randint(1, 2))]}
                for _ in range(rng.randint(1, 2))]}
        if g.chance(0.3, "nodeAffinity.preferred"):
            node_aff["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "preference": {"matchExpressions": [g.node_requirement()]}}
                for _ in range(rng.randint(1, 3))]
        if node_aff:
            affinity["nodeAffinity"] = node_aff
        if g.chance(0.3, "tolerations"):
            spec["tolerations"] = [rng.choice([
                {"key": "dedicated", "operator": "Exists"},
                {"key": "gpu", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
                {"key": "gpu", "operator": "Exists", "effect": "PreferNoSchedule"},
                {"operator": "Exists", "effect": "NoExecute"}])]
        if g.chance(0.45, "spread"):
            spec["topologySpreadConstraints"] = g.spread(labels)
    if affinity:
        spec["affinity"] = affinity
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def generate_one(seed: int, index: int) -> Problem:
    rng = random.Random(f"{seed}/{index}")
    tags: set[str] = set()
    g = _Gen(rng, tags)
    nodes = [_node(g, i) for i in range(rng.randint(2, 8))]
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": lab}}
                  for n, lab in NAMESPACES.items()]
    spaces = [*NAMESPACES, UNLISTED_NAMESPACE]
    pods = []
    for i in range(rng.randint(0, 14)):
        p = _pod(g, f"bound-{i}", rng.choice(spaces), incoming=False)
        p["spec"]["nodeName"] = rng.choice(nodes)["metadata"]["name"]
        if g.chance(0.05, "terminating"):
            p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        pods.append(p)
    pod = _pod(g, "incoming", rng.choice(spaces), incoming=True)
    return Problem(f"p{index}", nodes, namespaces, pods, pod, tags)


def generate(seed: int, n: int) -> list[Problem]:
    return [generate_one(seed, i) for i in range(n)]
