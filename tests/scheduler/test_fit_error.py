"""kube-scheduler's FitError message on the pod, and ``explain``'s per-node plugin.

The message counts, per reason, the nodes it rejected: a node filter's reason is
upstream's short text, a DRA reason its code; entries sorted as text.
"""

from __future__ import annotations

from test_placement_filters import HOST, ZONE, World, anti, node, pod, spread, term

from dra_affinity.scheduler.explain import explain_pod
from dra_affinity.scheduler.filter import fit_error_message
from dra_affinity.structured.model import Reason, Result


def test_fit_error_counts_each_reason_once_per_node_sorted_as_text() -> None:
    why = [
        Reason("PodAntiAffinityMismatch", "m", "n1", plugin="InterPodAffinity",
               fit=("node(s) didn't match pod anti-affinity rules",)),
        Reason("PodAntiAffinityMismatch", "m", "n2", plugin="InterPodAffinity",
               fit=("node(s) didn't match pod anti-affinity rules",)),
        Reason("InsufficientNodeResources", "m", "n3", plugin="NodeResourcesFit",
               fit=("Insufficient cpu", "Insufficient memory")),
        Reason("InsufficientCapacity", "m", "n4", "dev-a"),
        Reason("InsufficientCapacity", "m", "n4", "dev-b"),
        Reason("AffinityLockMismatch", "locked to x", "n4", "dev-c"),
    ]
    assert fit_error_message(6, why) == (
        "0/6 nodes are available: 1 AffinityLockMismatch, 1 Insufficient cpu, 1 Insufficient memory, "
        "1 InsufficientCapacity, 2 node(s) didn't match pod anti-affinity rules. locked to x")
    assert fit_error_message(0, []) == "0/0 nodes are available."


def test_failed_scheduling_names_upstreams_reasons() -> None:
    w = World(node("n1", "a"), node("n2", "a"), node("n3", "b", taints=[{"key": "k", "effect": "NoSchedule"}]))
    rule = anti(term(HOST, app="db"))
    assert w.place(pod("db0", {"app": "db"}, affinity=rule))[:2] == (Result.SCHEDULED, "n1")
    assert w.place(pod("db1", {"app": "db"}, affinity=rule))[:2] == (Result.SCHEDULED, "n2")
    result, _, _ = w.place(pod("db2", {"app": "db"}, affinity=rule))
    assert result is Result.UNSCHEDULABLE
    msg = "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match pod anti-affinity rules."
    events = [e for e in w.sched.recorder.events if e.reason == "FailedScheduling" and "db2" in e.object]
    assert events and events[-1].message == msg
    out = explain_pod(w.sched, "default/db2")
    assert out["summary"] == msg
    verdicts = {n["node"]: (n["fits"], n.get("plugin"), n.get("fitReasons")) for n in out["nodes"]}
    assert verdicts == {
        "n1": (False, "InterPodAffinity", ["node(s) didn't match pod anti-affinity rules"]),
        "n2": (False, "InterPodAffinity", ["node(s) didn't match pod anti-affinity rules"]),
        "n3": (False, "TaintToleration", ["node(s) had untolerated taint(s)"]),
    }


def test_explain_has_no_summary_when_a_node_fits() -> None:
    w = World(node("n1", "a"), node("n2", "b"))
    w.place(pod("w0", {"app": "web"}, node_name="n1"))
    assert w.cluster.apply(pod("w1", {"app": "web"}, topologySpreadConstraints=[spread(ZONE)])).applied
    out = explain_pod(w.sched, "default/w1")
    assert "summary" not in out
    assert [(n["node"], n["fits"], n.get("plugin")) for n in out["nodes"]] == [
        ("n1", False, "PodTopologySpread"), ("n2", True, None)]
