"""Score: kube-scheduler's default-profile score plugins rank the feasible nodes.

Each scheduler test places pods through the scheduler and checks that the node a
score prefers wins over node order (first-fit would choose otherwise); the pure
functions are checked against upstream's arithmetic on hand-computed cases. The
oracle suite (tests/oracle/test_placement_oracle.py) compares every plugin's
normalized scores with upstream's own plugins on 2,000 generated problems.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_placement_filters import HOST, ZONE, World, node, pod, spread, term

from dra_affinity.api.core import Node
from dra_affinity.scheduler.filter import feasible_nodes_to_find, node_scoring
from dra_affinity.scheduler.placement.scores import (
    BALANCED_ALLOCATION,
    DYNAMIC_RESOURCES,
    MAX_NODE_SCORE,
    WEIGHTS,
    balanced_allocation,
    default_normalize,
    least_allocated,
    score_nodes,
)
from dra_affinity.structured.model import Result


def sized(name: str, zone: str, cpu: str = "4", memory: str = "8Gi", **spec: Any) -> Node:
    return Node.model_validate({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name, ZONE: zone}},
        "spec": spec, "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}})


def asks(cpu: str, memory: str) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}


def prefer_nodes(*terms: tuple[int, str, str]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}}
        for w, k, v in terms]}}


def test_preferred_node_affinity_outranks_node_order() -> None:
    w = World(node("n1", "a"), node("n2", "b"), node("n3", "c"))
    assert w.place(pod("p", affinity=prefer_nodes((10, ZONE, "b"), (50, ZONE, "c"))))[:2] == (
        Result.SCHEDULED, "n3")
    # No preference: the node score is flat, node order decides (first-fit).
    assert w.place(pod("q"))[:2] == (Result.SCHEDULED, "n1")


def test_least_allocated_prefers_the_emptier_node() -> None:
    w = World(sized("n1", "a"), sized("n2", "a"))
    placed = [w.place(pod(f"p{i}", **asks("1", "1Gi")))[1] for i in range(4)]
    assert placed == ["n1", "n2", "n1", "n2"]


def test_balanced_allocation_breaks_a_tie_of_free_shares() -> None:
    # n1 holds cpu, n2 memory: equal free shares after the pod, but the memory-heavy
    # pod balances n1 and unbalances n2.
    w = World(sized("n1", "a"), sized("n2", "a"))
    w.place(pod("cpu-heavy", node_name="n1", **asks("2", "0")))
    w.place(pod("mem-heavy", node_name="n2", **asks("0", "4Gi")))
    assert w.place(pod("p", **asks("0", "4Gi")))[1] == "n1"


def test_schedule_anyway_spread_fills_the_emptiest_zone() -> None:
    w = World(node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c"))
    soft = [spread(ZONE, when="ScheduleAnyway")]
    zones = [w.place(pod(f"w{i}", {"app": "web"}, topologySpreadConstraints=soft))[1] for i in range(3)]
    assert sorted(zones, key=str) == ["a1", "b1", "c1"]


def test_preferred_anti_affinity_spreads_replicas_over_hosts() -> None:
    w = World(node("n1", "a"), node("n2", "a"), node("n3", "a"))
    aff = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term(HOST, app="db")}]}}
    hosts = [w.place(pod(f"db{i}", {"app": "db"}, affinity=aff))[1] for i in range(4)]
    assert hosts[:3] == ["n1", "n2", "n3"]
    assert hosts[3] == "n1"  # all equal again: the first in order


def test_a_bound_pods_required_affinity_attracts_the_pods_it_selects() -> None:
    w = World(node("n1", "a"), node("n2", "b"))
    w.place(pod("leader", {"role": "leader"}, node_name="n2",
                affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    term(ZONE, role="follower")]}}))
    assert w.place(pod("f", {"role": "follower"}))[1] == "n2"
    assert w.place(pod("other", {"role": "other"}))[1] == "n1"


def test_prefer_no_schedule_taints_are_avoided_unless_tolerated() -> None:
    taint = [{"key": "spot", "effect": "PreferNoSchedule"}]
    w = World(node("n1", "a", taints=taint), node("n2", "a"))
    assert w.place(pod("p"))[1] == "n2"
    tolerant = [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]
    assert w.place(pod("q", tolerations=tolerant))[1] == "n1"
    # A NoSchedule-only toleration does not count for the score.
    assert w.place(pod("r", tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]))[1] == "n2"


def test_node_scores_rank_only_when_they_can_differ() -> None:
    w = World(node("n1", "a"), node("n2", "b"))
    sched = w.sched
    sched.start()

    def ranks(p: Any) -> bool:
        assert w.cluster.apply(p).applied
        return node_scoring(sched.cache, sched.prefilter(p))

    assert not ranks(pod("plain"))
    assert not ranks(pod("asks", **asks("1", "1Gi")))  # no Node reports allocatable
    assert ranks(pod("prefers", affinity=prefer_nodes((1, ZONE, "b"))))
    assert ranks(pod("soft", {"app": "web"}, topologySpreadConstraints=[spread(ZONE, when="ScheduleAnyway")]))
    w.cluster.apply(sized("n3", "c"))
    assert ranks(pod("plain2"))


@pytest.mark.parametrize(("nodes", "find"), [
    (1, 1), (99, 99), (100, 100), (200, 100), (1000, 420), (5000, 500), (6000, 300), (20000, 1000)])
def test_feasible_nodes_to_find_is_upstreams_adaptive_share(nodes: int, find: int) -> None:
    assert feasible_nodes_to_find(nodes) == find


def test_scoring_stops_at_the_feasible_nodes_to_find() -> None:
    nodes = [node(f"n{i:03d}", "a") for i in range(120)]
    w = World(*nodes)
    # Preferring the last node: only the first 100 feasible nodes are scored (upstream's
    # minimum), so it is out of reach and the first of the equal ones wins.
    assert w.place(pod("p", affinity=prefer_nodes((100, HOST, "n119"))))[1] == "n000"
    assert w.place(pod("q", affinity=prefer_nodes((100, HOST, "n050"))))[1] == "n050"


# ------------------------------------------------------------------ arithmetic
def test_default_normalize_scales_to_the_largest_and_reverses() -> None:
    assert default_normalize([1, 3, 0], reverse=False) == [33, 100, 0]
    assert default_normalize([1, 3, 0], reverse=True) == [67, 0, 100]
    assert default_normalize([0, 0], reverse=True) == [100, 100]
    assert default_normalize([0, 0], reverse=False) == [0, 0]


def test_least_allocated_skips_resources_the_node_does_not_report() -> None:
    assert least_allocated((1000, 0), (4000, 0)) == 75
    assert least_allocated((1000, 2), (4000, 8)) == 75
    assert least_allocated((5000, 2), (4000, 8)) == 37  # over capacity counts 0
    assert least_allocated((1, 1), (0, 0)) == 0


def test_balanced_allocation_scores_the_change_in_balance() -> None:
    assert balanced_allocation((0, 0), (0, 0), (4, 8)) == 75  # unchanged
    assert balanced_allocation((2, 0), (2, 4), (4, 8)) == 87  # from 0.5/0 (75) to 0.5/0.5 (100)
    assert balanced_allocation((0, 0), (4, 0), (4, 8)) == 50  # from even (100) to 1/0 (50)
    assert balanced_allocation((0, 0), (4, 0), (0, 0)) == 75  # nothing reported


def test_device_score_is_dynamic_resources_with_its_weight() -> None:
    w = World(node("n1", "a"), node("n2", "a"))
    sched = w.sched
    sched.start()
    p = pod("p", **asks("1", "1Gi"))
    assert w.cluster.apply(p).applied
    cyc = sched.prefilter(p)
    scores = score_nodes(sched.cache.placement_index(), p, cyc.placement, {}, sched.cache.node_facts(),
                         ["n1", "n2"], {"n1": 1, "n2": 3})
    assert scores.per_node["n1"][DYNAMIC_RESOURCES] == 33
    assert scores.per_node["n2"][DYNAMIC_RESOURCES] == MAX_NODE_SCORE
    assert BALANCED_ALLOCATION in scores.plugins
    assert scores.total("n2") - scores.total("n1") == WEIGHTS[DYNAMIC_RESOURCES] * (100 - 33)
