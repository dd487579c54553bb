"""NodePorts, PodTopologySpread and InterPodAffinity as Filter plugins, on the embedded cluster.

Each test places pods through the scheduler (PreFilter, Filter, Reserve, Bind) and
checks where they land or why they do not; the counts behind the plugins are also
compared with a recount from scratch after churn (the incremental index must equal
upstream's per-cycle walk).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from dra_affinity.api.core import Namespace, Node, Pod
from dra_affinity.scheduler.nodefit import PlacementError, placement_of
from dra_affinity.scheduler.placement.selectors import EVERYTHING, NOTHING, parse_label_selector
from dra_affinity.scheduler.placement.terms import HostPort, terms_of
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name: str, zone: str | None = None, *, taints: list[dict[str, str]] | None = None,
         **labels: str) -> Node:
    lab = {HOST: name, **labels}
    if zone is not None:
        lab[ZONE] = zone
    return Node.model_validate({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab},
                                "spec": {"taints": taints or []}})


def pod(name: str, labels: dict[str, str] | None = None, *, ns: str = "default", node_name: str | None = None,
        **spec: Any) -> Pod:
    data: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
                            "spec": {"containers": [{"name": "c", "image": "x"}], **spec}}
    if node_name:
        data["spec"]["nodeName"] = node_name
    return Pod.model_validate(data)


def term(key: str, **match: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": match}, "topologyKey": key}


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(key: str, skew: int = 1, *, when: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


class World:
    def __init__(self, *nodes: Node, namespaces: dict[str, dict[str, str]] | None = None) -> None:
        self.cluster = Cluster()
        for ns, labels in (namespaces or {}).items():
            assert self.cluster.apply(Namespace.model_validate(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})).applied
        for n in nodes:
            assert self.cluster.apply(n).applied
        self.sched = Scheduler(self.cluster)

    def place(self, p: Pod) -> tuple[Result, str | None, list[str]]:
        assert self.cluster.apply(p).applied
        a = self.sched.schedule(f"{p.namespace}/{p.name}")
        return a.result, a.node, [r.code for r in a.reasons]

    def bind(self, p: Pod) -> None:
        assert self.cluster.apply(p).applied

    def delete(self, p: Pod) -> None:
        self.cluster.delete("Pod", f"{p.namespace}/{p.name}")


# ------------------------------------------------------------------ selectors and terms
def test_nil_selector_selects_nothing_and_empty_selects_everything() -> None:
    assert parse_label_selector(None, "x") == NOTHING
    assert parse_label_selector({}, "x") == EVERYTHING
    assert not NOTHING.matches({}) and EVERYTHING.matches({"a": "b"})
    sel = parse_label_selector({"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["db"]},
        {"key": "canary", "operator": "DoesNotExist"}]}, "x")
    assert sel.matches({"app": "web"}) and sel.matches({"app": "web", "tier": "fe"})
    assert not sel.matches({"app": "web", "tier": "db"}) and not sel.matches({"app": "web", "canary": ""})


@pytest.mark.parametrize(("raw", "field"), [
    ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "labelSelector.matchExpressions[0].values"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
     "labelSelector.matchExpressions[0].values"),
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
     "labelSelector.matchExpressions[0].operator"),
    ({"matchLabels": {"a": 1}}, "labelSelector.matchLabels.a"),
])
def test_malformed_selectors_name_the_field(raw: dict[str, Any], field: str) -> None:
    p = pod("p", affinity=anti({"labelSelector": raw, "topologyKey": HOST}))
    with pytest.raises(PlacementError) as e:
        placement_of(p)
    assert e.value.field == ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]."
                             + field)


@pytest.mark.parametrize(("c", "field"), [
    ({"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}, "maxSkew"),
    ({"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}, "topologyKey"),
    ({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Maybe"}, "whenUnsatisfiable"),
    ({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0}, "minDomains"),
    ({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "x"},
     "nodeTaintsPolicy"),
])
def test_malformed_spread_constraints_name_the_field(c: dict[str, Any], field: str) -> None:
    with pytest.raises(PlacementError) as e:
        placement_of(pod("p", topologySpreadConstraints=[c]))
    assert e.value.field == f"spec.topologySpreadConstraints[0].{field}"


def test_a_term_without_namespaces_selects_its_own_namespace() -> None:
    t = terms_of(pod("p", ns="team-a", affinity=anti(term(HOST, app="web"))))
    (only,) = t.anti_affinity
    assert only.namespaces == {"team-a"} and only.namespace_selector == NOTHING
    everywhere = terms_of(pod("p", affinity=anti({**term(HOST, app="web"), "namespaceSelector": {}})))
    assert everywhere.anti_affinity[0].matches("other", {"app": "web"})


def test_host_ports_default_as_the_api_server_writes_them() -> None:
    p = pod("p", hostNetwork=True, containers=[{"name": "c", "image": "x", "ports": [
        {"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1", "hostPort": 53}]}],
        initContainers=[{"name": "s", "image": "x", "restartPolicy": "Always", "ports": [{"containerPort": 9, "hostPort": 9}]},
                        {"name": "i", "image": "x", "ports": [{"containerPort": 7, "hostPort": 7}]}])
    assert terms_of(p).ports == (HostPort("0.0.0.0", "TCP", 9), HostPort("0.0.0.0", "TCP", 8080),
                                 HostPort("10.0.0.1", "UDP", 53))


def test_spread_match_label_keys_narrow_the_selector_to_the_pods_own_values() -> None:
    c = {**spread(ZONE), "matchLabelKeys": ["pod-template-hash", "absent"]}
    (sc,) = terms_of(pod("p", {"app": "web", "pod-template-hash": "abc"}, topologySpreadConstraints=[c])).spread
    assert sc.selector.matches({"app": "web", "pod-template-hash": "abc"})
    assert not sc.selector.matches({"app": "web", "pod-template-hash": "old"})


# ------------------------------------------------------------------ NodePorts
def test_host_ports_conflict_on_the_same_protocol_and_port_with_wildcard_addresses() -> None:
    w = World(node("n1"), node("n2"))
    ports = [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}]
    w.bind(pod("a", node_name="n1", containers=[{"name": "c", "image": "x", "ports": ports}]))
    wildcard = [{"containerPort": 80, "hostPort": 8080}]
    assert w.place(pod("b", containers=[{"name": "c", "image": "x", "ports": wildcard}]))[:2] == (
        Result.SCHEDULED, "n2")
    other_ip = [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"}]
    # n1: a holds only 10.0.0.1; (n2: b's 0.0.0.0 would hold every address)
    assert w.place(pod("c", containers=[{"name": "c", "image": "x", "ports": other_ip}]))[1] == "n1"
    res, where, codes = w.place(pod("c2", containers=[{"name": "c", "image": "x", "ports": wildcard}]))
    assert (res, where, codes) == (Result.UNSCHEDULABLE, None, [reasons.HOST_PORT_CONFLICT] * 2)
    udp = [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]
    assert w.place(pod("d", containers=[{"name": "c", "image": "x", "ports": udp}]))[:2] == (
        Result.SCHEDULED, "n1")


def test_a_port_frees_when_its_pod_goes() -> None:
    w = World(node("n1"))
    ports = [{"containerPort": 80, "hostPort": 80}]
    a = pod("a", node_name="n1", containers=[{"name": "c", "image": "x", "ports": ports}])
    w.bind(a)
    assert w.place(pod("b", containers=[{"name": "c", "image": "x", "ports": ports}]))[0] is Result.UNSCHEDULABLE
    w.delete(a)
    assert w.sched.schedule("default/b").node == "n1"


# ------------------------------------------------------------------ PodTopologySpread
def test_zone_spread_places_each_pod_in_the_emptiest_zone() -> None:
    w = World(node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c"))
    placed = [w.place(pod(f"w{i}", {"app": "web"}, topologySpreadConstraints=[spread(ZONE)]))[1]
              for i in range(6)]
    zones = [{"a1": "a", "a2": "a", "b1": "b", "c1": "c"}[n or ""] for n in placed]
    assert zones == ["a", "b", "c", "a", "b", "c"]


def test_a_node_without_the_topology_key_is_unresolvable_for_spread() -> None:
    w = World(node("nokey"), node("z1", "a"))
    res, where, _ = w.place(pod("w", {"app": "web"}, topologySpreadConstraints=[spread(ZONE)]))
    assert where == "z1"
    w2 = World(node("nokey"))
    res, where, codes = w2.place(pod("w", {"app": "web"}, topologySpreadConstraints=[spread(ZONE)]))
    assert res is Result.UNSCHEDULABLE and codes == [reasons.TOPOLOGY_SPREAD_MISSING_LABEL]


def test_min_domains_holds_the_minimum_at_zero_until_enough_domains_exist() -> None:
    w = World(node("a1", "a"), node("b1", "b"))
    c = spread(ZONE, 1, minDomains=3)
    assert w.place(pod("w0", {"app": "web"}, topologySpreadConstraints=[c]))[1] == "a1"
    assert w.place(pod("w1", {"app": "web"}, topologySpreadConstraints=[c]))[1] == "b1"
    # Two domains < minDomains 3: the global minimum counts as 0, so 1 + 1 - 0 > 1 everywhere.
    res, _, codes = w.place(pod("w2", {"app": "web"}, topologySpreadConstraints=[c]))
    assert res is Result.UNSCHEDULABLE and set(codes) == {reasons.TOPOLOGY_SPREAD_SKEW}
    # Without minDomains the minimum is 1 and the pod fits.
    assert w.place(pod("w3", {"app": "web"}, topologySpreadConstraints=[spread(ZONE)]))[0] is Result.SCHEDULED


def test_node_inclusion_policies_decide_which_domains_count() -> None:
    taint = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    w = World(node("a1", "a"), node("b1", "b", taints=taint), node("c1", "c", pool="x"))
    # Honor node affinity (default): only pool=x nodes count, zone c is the only domain.
    sel = {"pool": "x"}
    for i in range(2):
        assert w.place(pod(f"s{i}", {"app": "web"}, nodeSelector=sel,
                           topologySpreadConstraints=[spread(ZONE)]))[1] == "c1"
    # Ignore node affinity: zones a, b, c count; zone c now holds 2, the others 0.
    res, _, codes = w.place(pod("s2", {"app": "web"}, nodeSelector=sel, topologySpreadConstraints=[
        spread(ZONE, nodeAffinityPolicy="Ignore")]))
    assert res is Result.UNSCHEDULABLE and reasons.TOPOLOGY_SPREAD_SKEW in codes
    # Taints: with Honor, the tainted zone b is no domain (minimum over a and c).
    w.bind(pod("x1", {"app": "web"}, node_name="a1"))
    honor = spread(ZONE, nodeTaintsPolicy="Honor")
    got = w.place(pod("s3", {"app": "web"}, topologySpreadConstraints=[honor]))
    assert got[1] == "a1"  # a holds 1, c 2, b is ignored: a is at skew 1 + 1 - 1 = 1


def test_spread_counts_only_live_pods_of_its_namespace() -> None:
    w = World(node("a1", "a"), node("b1", "b"))
    w.bind(pod("other-ns", {"app": "web"}, ns="other", node_name="a1"))
    gone = pod("gone", {"app": "web"}, node_name="a1")
    gone = gone.model_copy(update={"metadata": gone.metadata.model_copy(
        update={"deletion_timestamp": "2026-01-01T00:00:00Z"})})
    w.bind(gone)
    assert w.place(pod("w", {"app": "web"}, topologySpreadConstraints=[spread(ZONE)]))[1] == "a1"


# ------------------------------------------------------------------ InterPodAffinity
def test_hostname_anti_affinity_puts_each_replica_on_its_own_node() -> None:
    w = World(node("n1"), node("n2"), node("n3"))
    placed = [w.place(pod(f"r{i}", {"app": "web"}, affinity=anti(term(HOST, app="web")))) for i in range(4)]
    assert [p[1] for p in placed[:3]] == ["n1", "n2", "n3"]
    assert placed[3][0] is Result.UNSCHEDULABLE and set(placed[3][2]) == {reasons.POD_ANTI_AFFINITY_MISMATCH}


def test_existing_pods_anti_affinity_keeps_newcomers_away() -> None:
    w = World(node("n1", "a"), node("n2", "a"), node("n3", "b"))
    w.bind(pod("db", {"app": "db"}, node_name="n1", affinity=anti(term(ZONE, app="web"))))
    res, where, _ = w.place(pod("web", {"app": "web"}))  # no constraint of its own
    assert (res, where) == (Result.SCHEDULED, "n3")
    w2 = World(node("n1", "a"))
    w2.bind(pod("db", {"app": "db"}, node_name="n1", affinity=anti(term(ZONE, app="web"))))
    assert w2.place(pod("web", {"app": "web"}))[2] == [reasons.EXISTING_POD_ANTI_AFFINITY]


def test_required_affinity_follows_the_leader_and_the_first_pod_may_match_itself() -> None:
    w = World(node("n1", "a"), node("n2", "b"), node("n3", "b"))
    follow = affinity(term(ZONE, app="leader"))
    # No leader anywhere and the pod is no leader: nowhere.
    assert w.place(pod("f0", {"app": "worker"}, affinity=follow))[0] is Result.UNSCHEDULABLE
    # A leader that matches its own term lands anywhere (first-fit: n1)...
    assert w.place(pod("l0", {"app": "leader"}, affinity=follow))[1] == "n1"
    w.delete(pod("l0"))
    w.bind(pod("leader", {"app": "leader"}, node_name="n3"))
    # ...once a leader runs, followers go to its zone.
    assert w.sched.schedule("default/f0").node == "n2"


def test_namespaces_and_namespace_selectors_choose_whose_pods_count() -> None:
    w = World(node("n1"), node("n2"), node("n3"),
              namespaces={"prod-a": {"env": "prod"}, "prod-b": {"env": "prod"}, "dev": {"env": "dev"}})
    w.bind(pod("x", {"app": "web"}, ns="prod-b", node_name="n1"))
    w.bind(pod("y", {"app": "web"}, ns="dev", node_name="n2"))
    own_ns = anti(term(HOST, app="web"))
    assert w.place(pod("p1", {"app": "web"}, ns="prod-a", affinity=own_ns))[1] == "n1"
    by_selector = anti({**term(HOST, app="web"), "namespaceSelector": {"matchLabels": {"env": "prod"}}})
    assert w.place(pod("p2", {"app": "other"}, ns="dev", affinity=by_selector))[1] == "n2"
    by_name = anti({**term(HOST, app="web"), "namespaces": ["dev"]})
    assert w.place(pod("p3", {"app": "other"}, ns="prod-a", affinity=by_name))[1] == "n1"
    everywhere = anti({**term(HOST, app="web"), "namespaceSelector": {}})
    assert w.place(pod("p4", {"app": "other"}, ns="prod-a", affinity=everywhere))[1] == "n3"


def test_existing_anti_affinity_namespace_selector_reads_the_newcomers_namespace_labels() -> None:
    w = World(node("n1"), node("n2"), namespaces={"prod": {"env": "prod"}, "dev": {"env": "dev"}})
    guard = anti({**term(HOST, app="web"), "namespaceSelector": {"matchLabels": {"env": "prod"}}})
    w.bind(pod("g", {"app": "guard"}, ns="dev", node_name="n1", affinity=guard))
    assert w.place(pod("a", {"app": "web"}, ns="prod"))[1] == "n2"
    assert w.place(pod("b", {"app": "web"}, ns="dev"))[1] == "n1"


# ------------------------------------------------------------------ batches and incrementality
def test_a_batch_does_not_place_two_anti_affine_pods_together() -> None:
    w = World(node("n1"), node("n2"))
    a, b = (pod(n, {"app": "web"}, affinity=anti(term(HOST, app="web"))) for n in ("a", "b"))
    w.bind(a)
    w.bind(b)
    first, second = w.sched.schedule_concurrently(["default/a", "default/b"])
    assert (first.result, first.node) == (Result.SCHEDULED, "n1")
    assert second.result is Result.UNSCHEDULABLE and second.reasons[0].code == reasons.RESERVE_CONFLICT
    assert w.sched.schedule("default/b").node == "n2"


def recount(sched: Scheduler, placement_pod: Pod) -> list[dict[tuple[str, str], int]]:
    """The spread and anti-affinity counts walked from scratch, as upstream's PreFilter does."""
    index = sched.cache.placement_index()
    labels = sched.snapshot().labels
    cyc_terms = placement_of(placement_pod).terms
    out = []
    for t in cyc_terms.anti_affinity:
        counts: dict[tuple[str, str], int] = {}
        for bp in sched.cache.usage.pods.values():
            v = labels.get(bp.node, {}).get(t.topology_key)
            if v is not None and t.matches(bp.namespace, bp.labels):
                counts[(t.topology_key, v)] = counts.get((t.topology_key, v), 0) + 1
        out.append(counts)
    assert index is sched.cache.placement_index()
    return out


def test_incremental_counts_equal_a_recount_after_churn() -> None:
    rng = random.Random(7)
    nodes = [node(f"n{i}", "abc"[i % 3]) for i in range(6)]
    w = World(*nodes)
    probe = pod("probe", {"app": "x"}, affinity=anti(term(ZONE, app="web"), term(HOST, tier="fe")))
    w.sched.start()
    live: list[Pod] = []
    for step in range(200):
        if live and rng.random() < 0.4:
            w.delete(live.pop(rng.randrange(len(live))))
        else:
            p = pod(f"p{step}", {"app": rng.choice(["web", "db"]), "tier": rng.choice(["fe", "be"])},
                    node_name=f"n{rng.randrange(6)}")
            w.bind(p)
            live.append(p)
        if step % 20 == 0:
            cyc = w.sched.prefilter(probe)
            from dra_affinity.scheduler.filter import placement_state
            st = placement_state(w.sched.cache, cyc)
            got = [dict(t.pairs) for _, t in st.anti] if st is not None else [{}, {}]
            assert got == recount(w.sched, probe)
