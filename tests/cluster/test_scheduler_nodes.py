"""``dra-affinity scheduler`` on a real control plane: the node filters beside DRA.

A secondary scheduler must keep pods where the stock scheduler would: off tainted
nodes they do not tolerate, off cordoned nodes, on nodes their required node
affinity names, and within each node's allocatable CPU, memory and pod count
(counting pods bound by any scheduler).
"""

from __future__ import annotations

from typing import Any

import pytest

from kube.live import MERGE_PATCH, Live, World, live, ns, schedulers, wait_until

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns, schedulers)  # pytest finds fixtures by module attribute


def _unschedulable_message(live: Live, ns: str, pod: str) -> str:
    def diagnosed() -> Any:
        p = live.pod(ns, pod)
        conds = [c for c in (p or {}).get("status", {}).get("conditions") or []
                 if c["type"] == "PodScheduled" and c["status"] == "False"
                 and "nodes are available" in c["message"]]
        return conds and conds[0]["message"]

    msg: str = wait_until(diagnosed, 60, f"PodScheduled=False on {pod}")
    return msg


def _on(node: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": [node]}]}]}}}


def test_taints_affinity_cordon_and_resources(control_plane: Any, live: Live, ns: str,
                                              schedulers: Any) -> None:
    w = World(live, ns, nodes=2, nics=2, slots=4)  # nodes: 8 CPUs, 32Gi, 110 pods
    n1, n2 = w.nodes
    name = f"dra-affinity-{ns}"
    w.patch_node(n1, {"taints": [{"key": "example.com/dedicated", "value": "team-a",
                                  "effect": "NoSchedule"}]})
    team_a = [{"key": "example.com/dedicated", "operator": "Equal", "value": "team-a",
               "effect": "NoSchedule"}]
    for p in ("plain", "tolerant", "big", "late"):
        w.claim(f"{p}-nic", "x")
    schedulers()
    # No toleration: only n2 is open, although n1 comes first.
    w.pod("plain", claim="plain-nic", scheduler=name)
    wait_until(lambda: live.node_of(ns, "plain"), 60, "plain bound")
    assert live.node_of(ns, "plain") == n2
    # Tolerates the taint and requires n1 by name.
    w.pod("tolerant", claim="tolerant-nic", scheduler=name, tolerations=team_a, affinity=_on(n1))
    w.pod("big", claim="big-nic", scheduler=name, requests={"cpu": "6"}, tolerations=team_a,
          affinity=_on(n1))
    wait_until(lambda: live.node_of(ns, "tolerant") and live.node_of(ns, "big"), 60, "bound")
    assert live.node_of(ns, "tolerant") == live.node_of(ns, "big") == n1
    # n1 has 2 CPUs left, n2 is not n1: unschedulable, with both reasons.
    w.pod("late", claim="late-nic", scheduler=name, requests={"cpu": "6"}, tolerations=team_a,
          affinity=_on(n1))
    msg = _unschedulable_message(live, ns, "late")
    # kube-scheduler's FitError message: each plugin's short reason with its node count
    # (other tests' nodes share the control plane: every node but n1 fails NodeAffinity).
    assert "1 Insufficient cpu" in msg and "node(s) didn't match Pod's node affinity/selector" in msg, msg
    assert live.node_of(ns, "late") is None
    # Cordoned, n1 is refused for that first. A cordon cannot make the pod fit, so it
    # is not tried again for it; a label on n2 could (NodeAffinity rejected it there).
    w.patch_node(n1, {"unschedulable": True})
    live.api.request("PATCH", f"/api/v1/nodes/{n2}", content_type=MERGE_PATCH,
                     body={"metadata": {"labels": {"rack": "r2"}}})
    wait_until(lambda: "1 node(s) were unschedulable" in _unschedulable_message(live, ns, "late"), 60,
               "NodeUnschedulable's reason in the message")
    assert live.node_of(ns, "late") is None
    # Uncordoned, and the big pod gone: its CPU is free again and the late pod takes it.
    w.patch_node(n1, {"unschedulable": None})
    live.delete_pod(ns, "big")
    wait_until(lambda: live.node_of(ns, "late"), 90, "late bound once big is gone")
    assert live.node_of(ns, "late") == n1
