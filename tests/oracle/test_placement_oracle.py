"""Placement differential suite: our node filters against kube-scheduler's own plugins.

Each seeded problem (placement_gen.py: a few nodes over zones, racks and hosts
with taints, cordons and allocatable; namespaces; bound pods with labels,
requests, host ports and (anti-)affinity terms; one incoming pod with any mix of
node selector and affinity, tolerations, requests, host ports, pod (anti-)affinity
and topology spread) goes to both sides. Upstream: the oracle's ``placement``
operation, which runs kube-scheduler 1.37's default-profile plugins through its
framework over a snapshot of the problem. Ours: PreFilter, then the node filters
beside DRA on every node, then Score of the feasible nodes. Compared: the
feasible nodes exactly, for each rejected node the first failing plugin and its
FitError reasons, the weights, each score plugin's normalized score on every
feasible node exactly (and which plugins skip), and that the node we rank first
is one upstream ranks first (it breaks ties at random). Findings are
grouped into ``out/oracle/placement-report.md``; the test fails on findings the
allow-list (known_differences.PLACEMENT_KNOWN) does not explain and on entries
explaining none.
"""

from __future__ import annotations

import json

import pytest
from differential import Finding, failure_message, judge, render, write_report
from known_differences import PLACEMENT_KNOWN
from ours import PlacementOutcome, placement_oracle_outcome, placement_ours
from placement_gen import Problem, generate

from oracle import Oracle, report_dir

pytestmark = pytest.mark.oracle

SEED = 5981
N_PROBLEMS = 2000


def compare(p: Problem, ours: PlacementOutcome, up: PlacementOutcome) -> list[Finding]:
    body = json.dumps(p.request(), sort_keys=True)
    detail = (f"tags: {sorted(p.tags)}\nours: {ours}\nupstream: {up}\nproblem: {body}")
    family = "placement"

    def finding(kind: str) -> Finding:
        return Finding(family, kind, p.id, detail, len(body),
                       {"ours": ours, "upstream": up, "tags": p.tags, "problem": p.request()})

    if ours.error:
        return [finding("setup")]
    out = []
    if ours.feasible != up.feasible:
        out.append(finding("feasible"))
    for node, (plugin, reasons) in sorted(up.rejected.items()):
        mine = ours.rejected.get(node)
        if mine is None:
            continue  # counted under "feasible"
        if mine[0] != plugin:
            out.append(finding(f"plugin:{mine[0]}->{plugin}"))
        elif mine[1] != reasons:
            out.append(finding(f"reasons:{plugin}"))
    if ours.feasible == up.feasible and up.feasible:
        if ours.weights != up.weights:
            out.append(finding("weights"))
            return out
        plugins = sorted({p for per in (*ours.scores.values(), *up.scores.values()) for p in per})
        for plugin in plugins:
            mine_s = {n: per.get(plugin) for n, per in ours.scores.items()}
            theirs = {n: per.get(plugin) for n, per in up.scores.items()}
            if mine_s != theirs:
                skipped = "skip" if any(v is None for v in (*mine_s.values(), *theirs.values())) else "score"
                out.append(finding(f"{skipped}:{plugin}"))
        # The node ranked first must be one upstream ranks first (it breaks ties at random).
        up_totals, our_totals = up.totals(), ours.totals()
        best = max(our_totals.values())
        chosen = next(n for n in up.feasible if our_totals[n] == best)
        if up_totals[chosen] != max(up_totals.values()):
            out.append(finding("choice"))
    return out


@pytest.fixture(scope="module")
def problems() -> list[Problem]:
    return generate(SEED, N_PROBLEMS)


@pytest.fixture(scope="module")
def outcomes(oracle: Oracle, problems: list[Problem]) -> list[tuple[Problem, PlacementOutcome, PlacementOutcome]]:
    answers = oracle.batch([p.request() for p in problems])
    return [(p, placement_ours(p.request()), placement_oracle_outcome(a))
            for p, a in zip(problems, answers, strict=True)]


def test_generator_is_deterministic_and_covers_the_constraints(problems: list[Problem]) -> None:
    assert [p.request() for p in generate(SEED, 50)] == [p.request() for p in problems[:50]]
    tags = set().union(*(p.tags for p in problems))
    for want in ["op.In", "op.NotIn", "op.Exists", "op.DoesNotExist", "selector.nil", "selector.empty",
                 "namespaces", "namespaceSelector", "matchLabelKeys", "podAffinity.required",
                 "podAntiAffinity.required", "podAffinity.preferred", "podAntiAffinity.preferred",
                 "spread.DoNotSchedule", "spread.ScheduleAnyway", "minDomains", "nodeAffinityPolicy",
                 "nodeTaintsPolicy", "spread.matchLabelKeys", "hostPort", "hostIP", "taints", "cordoned",
                 "nodeSelector", "nodeAffinity.required", "nodeAffinity.preferred", "nodeAffinity.Gt/Lt",
                 "tolerations", "terminating", "node.no-zone"]:
        assert want in tags, want


def test_every_plugin_rejects_somewhere(
        outcomes: list[tuple[Problem, PlacementOutcome, PlacementOutcome]]) -> None:
    plugins = {plugin for _, _, up in outcomes for plugin, _ in up.rejected.values()}
    assert {"NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
            "PodTopologySpread", "InterPodAffinity"} <= plugins
    assert sum(1 for _, _, up in outcomes if up.feasible) >= N_PROBLEMS // 2
    assert sum(1 for _, _, up in outcomes if not up.feasible) >= N_PROBLEMS // 20


def test_every_score_plugin_ranks_somewhere(
        outcomes: list[tuple[Problem, PlacementOutcome, PlacementOutcome]]) -> None:
    """Each score plugin gives feasible nodes of some problem different scores upstream
    (a plugin that never ranks anything would be compared only trivially)."""
    ranked = {plugin for _, _, up in outcomes
              for plugin in {p for per in up.scores.values() for p in per}
              if len({per.get(plugin) for per in up.scores.values()}) > 1}
    assert {"TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
            "NodeResourcesBalancedAllocation"} <= ranked


def test_placement_differential(outcomes: list[tuple[Problem, PlacementOutcome, PlacementOutcome]]) -> None:
    findings = [f for p, ours, up in outcomes for f in compare(p, ours, up)]
    verdict = judge(findings, PLACEMENT_KNOWN)
    path = report_dir() / "placement-report.md"
    write_report(path, render("Placement: dra-affinity vs kube-scheduler's filter plugins (1.37)",
                              len(outcomes), verdict, PLACEMENT_KNOWN), findings)
    assert not verdict.unexplained and not verdict.unused, failure_message(verdict, path)
