"""Allocation differential suite: our scheduler against upstream's structured allocator.

Each seeded problem (alloc_gen.py: one node, pools of several slices and
generations, classes with CEL selectors, claims with ExactCount/All,
firstAvailable, selectors, matchAttribute/distinctAttribute, consumable
capacity under every request policy, devices already allocated) goes to both
sides. Compared: the outcome (allocated / unschedulable / error), the chosen
device per request (driver/pool/device, in result order), the consumed
capacity and the presence of share IDs. Findings are grouped into
``out/oracle/allocate-report.md``; the test fails on findings not explained by
the allow-list (known_differences.ALLOCATE_KNOWN) and on entries explaining
none.
"""

from __future__ import annotations

import json

import pytest
from alloc_gen import Problem, generate
from differential import Finding, failure_message, judge, render, write_report
from known_differences import ALLOCATE_KNOWN
from ours import AllocOutcome, alloc_oracle_outcome, allocate_ours

from oracle import Oracle, report_dir

pytestmark = pytest.mark.oracle

SEED = 5981
N_PROBLEMS = 2000


def _show(o: AllocOutcome) -> str:
    if o.outcome == "allocated":
        return "allocated " + json.dumps(o.allocations)
    return f"{o.outcome}: {o.message[:400]}"


def compare(p: Problem, ours: AllocOutcome, up: AllocOutcome) -> list[Finding]:
    """Findings for one problem: outcome first; devices and capacity when both allocated."""
    body = json.dumps(p.request(), sort_keys=True)
    detail = f"tags: {sorted(p.tags)}\nours: {_show(ours)}\nupstream: {_show(up)}\nproblem: {body}"
    family = "+".join(sorted(t for t in p.tags if not t.startswith(("pool.", "policy."))))

    def finding(kind: str) -> Finding:
        return Finding(family, kind, p.id, detail, len(body),
                       {"ours": ours, "upstream": up, "tags": p.tags, "problem": p.request()})

    if ours.outcome != up.outcome:
        return [finding(f"outcome:{ours.outcome}->{up.outcome}")]
    if ours.outcome != "allocated" or ours.allocations == up.allocations:
        return []
    strip = [[c[:4] for c in claim] for claim in ours.allocations]
    if strip != [[c[:4] for c in claim] for claim in up.allocations]:
        return [finding("devices")]
    return [finding("capacity")]


@pytest.fixture(scope="module")
def problems() -> list[Problem]:
    return generate(SEED, N_PROBLEMS)


@pytest.fixture(scope="module")
def outcomes(oracle: Oracle, problems: list[Problem]) -> list[tuple[Problem, AllocOutcome, AllocOutcome]]:
    answers = oracle.batch([p.request() for p in problems])
    return [(p, allocate_ours(p.request()), alloc_oracle_outcome(a))
            for p, a in zip(problems, answers, strict=True)]


def test_generator_is_deterministic_and_covers_the_features(problems: list[Problem]) -> None:
    assert [p.request() for p in generate(SEED, 50)] == [p.request() for p in problems[:50]]
    tags = set().union(*(p.tags for p in problems))
    for want in ["incomplete", "old-generation", "mode.All", "firstAvailable", "matchAttribute",
                 "distinctAttribute", "request-selector", "capacity-request", "already-allocated",
                 "already-consumed", "policy.none", "policy.default", "policy.validValues",
                 "policy.validRange", "policy.validRangeStep", "pool.all", "pool.other"]:
        assert want in tags, want


def test_every_outcome_is_reached(outcomes: list[tuple[Problem, AllocOutcome, AllocOutcome]]) -> None:
    seen = {up.outcome for _, _, up in outcomes}
    assert {"allocated", "unschedulable", "error"} <= seen
    assert sum(1 for _, _, up in outcomes if up.outcome == "allocated") >= N_PROBLEMS // 5


def test_allocate_differential(outcomes: list[tuple[Problem, AllocOutcome, AllocOutcome]]) -> None:
    findings = [f for p, ours, up in outcomes for f in compare(p, ours, up)]
    verdict = judge(findings, ALLOCATE_KNOWN)
    path = report_dir() / "allocate-report.md"
    write_report(path, render("Allocation: dra-affinity vs upstream structured allocator (1.37)",
                              len(outcomes), verdict, ALLOCATE_KNOWN), findings)
    assert not verdict.unexplained and not verdict.unused, failure_message(verdict, path)
