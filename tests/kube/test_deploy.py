"""deploy/: manifests parse, RBAC grants every request the scheduler makes, monitoring
refers to metrics the scheduler serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from dra_affinity.kube.runner import Options, SchedulerProcess

from .fakeapi import FakeApi
from .test_process import _process, _run
from .world import build, claim, pod

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


#: Files of deploy/ that are not Kubernetes objects: kustomizations, the plain rules file.
NOT_OBJECTS = {"kustomization.yaml", "rules.yaml", "constraints.txt"}


def test_manifests_parse_with_kinds_and_names() -> None:
    for f in sorted(DEPLOY.glob("*.yaml")) + sorted((DEPLOY / "monitoring").glob("*.yaml")):
        if f.name in NOT_OBJECTS:
            continue
        for d in yaml.safe_load_all(f.read_text()):
            assert d["apiVersion"] and d["kind"] and d["metadata"]["name"], f


def test_deployment_runs_two_replicas_with_leader_election_and_probes() -> None:
    (dep,) = [d for d in _docs("deployment.yaml") if d["kind"] == "Deployment"]
    assert dep["spec"]["replicas"] == 2
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert "--leader-elect" in c["args"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    sa = dep["spec"]["template"]["spec"]["serviceAccountName"]
    assert any(d["kind"] == "ServiceAccount" and d["metadata"]["name"] == sa for d in _docs("rbac.yaml"))


_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "POST": "create", "DELETE": "delete"}


def _grants() -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for d in _docs("rbac.yaml"):
        if d["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in d["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        out.add((g, r, v))
    return out


def _needed(method: str, path: str, query_watch: bool = False) -> tuple[str, str, str]:
    parts = [p for p in path.split("/") if p]
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    verb = _VERBS[method]
    if method == "GET" and len(rest) == 1:
        verb = "list"
    return group, resource, verb


def test_rbac_grants_every_request_the_scheduler_makes() -> None:
    api = FakeApi()
    build(api)
    for name, subnet in [("a", "x"), ("b", "y"), ("c", "x"), ("d", "z"), ("e", "w")]:
        api.create("ResourceClaim", claim(f"{name}-nic", subnet))
        api.create("Pod", pod(name, f"{name}-nic"))
    api.requests.clear()
    proc = _process(api)
    proc.elector = None
    from dra_affinity.kube.leader import LeaderElector

    el = LeaderElector(api, namespace="dra-affinity-system", name="dra-affinity-scheduler",
                       identity="a")
    assert el.try_acquire_or_renew() and el.try_acquire_or_renew()
    el.release()
    _run(proc, api)
    grants = _grants()
    needed = {_needed(m, p) for m, p in api.requests}
    # status writes of claims also need the synthetic resourceclaims/binding (1.36+)
    for verb in ("update", "patch"):
        if ("resource.k8s.io", "resourceclaims/status", verb) in needed:
            needed.add(("resource.k8s.io", "resourceclaims/binding", verb))
    needed |= {(g, r, "watch") for g, r, v in needed if v == "list"}
    missing = sorted(n for n in needed if n not in grants)
    assert not missing, missing
    assert ("", "pods/binding", "create") in needed  # the run did bind


def test_monitoring_refers_only_to_served_metrics() -> None:
    api = FakeApi()
    proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1))
    proc.attempts.labels("Scheduled").inc()
    proc.attempt_seconds.labels("Scheduled").observe(0.01)
    text = proc.metrics.exposition()
    served = set(re.findall(r"^# TYPE ([a-z_:]+) ", text, re.M))
    served |= {f"{n}_total" for n in re.findall(r"^# TYPE ([a-z_:]+) counter", text, re.M)}
    rules = (DEPLOY / "monitoring" / "rules.yaml").read_text()
    dash = json.loads((DEPLOY / "monitoring" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used: set[str] = set()
    for text in [rules, *exprs]:
        used |= set(re.findall(r"\b((?:sharing_affinity|dra_affinity)_[a-z_]+)", text))
    used = {re.sub(r"_(bucket|count|sum)$", "", u) for u in used}
    assert used and not (used - served), sorted(used - served)
