"""Lockstep runs: variants take turns in their own processes; figures other than time
are those of a plain run, failures are reported, never hung on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dra_affinity.bench import throughput
from dra_affinity.bench.throughput import run_fill, run_lockstep
from dra_affinity.sim.workload import WorkloadSpec

SPEC = WorkloadSpec(nodes=6, devices_per_node=2, values=4, seed=2, fill=0.6)
COUNTS = ("attempts", "scheduled", "unschedulable", "deletions", "finalFill", "lockedDevices",
          "extractorEvaluations", "sameNodeAsPrevious")


def test_lockstep_gives_the_figures_of_plain_runs() -> None:
    variants = [replace(SPEC, affinity=True), replace(SPEC, affinity=False)]
    stepped = run_lockstep(variants, chunk=7)
    plain = [run_fill(v) for v in variants]
    for s, p in zip(stepped, plain, strict=True):
        assert {k: s[k] for k in COUNTS} == {k: p[k] for k in COUNTS}
    assert stepped[0]["lockedDevices"] > 0 and stepped[1]["lockedDevices"] == 0


def test_same_node_as_previous_counts_consecutive_placements_on_one_node() -> None:
    # One value: both variants place alike, filling node after node (first fit), so
    # most placements follow one on the same node; many values spread pods out, and
    # with sharing affinity fewer follow on the same node than without it.
    one = replace(SPEC, values=1, churn=0.0)
    same = [run_fill(replace(one, affinity=a))["sameNodeAsPrevious"] for a in (True, False)]
    assert same[0] == same[1]
    slots = one.devices_per_node * one.slots
    assert same[0] == pytest.approx((slots - 1) / slots, abs=0.05)
    many = replace(SPEC, values=16, zipf=0.0, churn=0.0)
    spread = [run_fill(replace(many, affinity=a))["sameNodeAsPrevious"] for a in (True, False)]
    assert spread[0] < spread[1]


def test_variants_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "turns"

    def fake(spec: WorkloadSpec, pause: Callable[[], None] | None = None,
             chunk: int = 1, *, tune_gc: bool = False) -> dict[str, Any]:
        assert pause is not None
        pause()  # set-up done
        for turn in range(3 if spec.affinity else 5):
            with log.open("a") as f:
                f.write(f"{'A' if spec.affinity else 'B'}{turn}\n")
            pause()
        return {"variant": spec.affinity}

    monkeypatch.setattr(throughput, "run_fill", fake)
    out = run_lockstep([replace(SPEC, affinity=True), replace(SPEC, affinity=False)])
    assert out == [{"variant": True}, {"variant": False}]
    # one turn each while both run, then the longer one alone
    assert log.read_text().split() == ["A0", "B0", "A1", "B1", "A2", "B2", "B3", "B4"]


def test_a_failing_variant_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(spec: WorkloadSpec, pause: Callable[[], None] | None = None,
             chunk: int = 1, *, tune_gc: bool = False) -> dict[str, Any]:
        if not spec.affinity:
            raise ValueError("baseline broke")
        assert pause is not None
        pause()
        return {}

    monkeypatch.setattr(throughput, "run_fill", fake)
    with pytest.raises(RuntimeError, match="ValueError: baseline broke"):
        run_lockstep([replace(SPEC, affinity=True), replace(SPEC, affinity=False)])


def test_garbage_collector_tuned_only_when_asked() -> None:
    """The bench's processes tune the collector as the scheduler's does when asked, and
    report the collections each generation ran; a plain call leaves the caller's
    process as it was."""
    import gc

    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    plain = run_fill(SPEC)
    assert (gc.get_threshold(), gc.get_freeze_count()) == (threshold, frozen)
    larger = replace(SPEC, nodes=30)  # enough allocations for young collections to run
    untuned = throughput.run_isolated(larger)
    tuned = throughput.run_isolated(larger, tune_gc=True)
    for out in (plain, untuned, tuned):
        assert len(out["gcCollections"]) == 3 and min(out["gcCollections"]) >= 0
    young, _, full = tuned["gcCollections"]
    assert young < untuned["gcCollections"][0] and full == 0
    stepped = run_lockstep([larger], chunk=7, tune_gc=True)[0]
    assert stepped["gcCollections"][0] < untuned["gcCollections"][0]


def test_counting_recorder_keeps_no_events() -> None:
    from dra_affinity.bench.throughput import CountingRecorder

    rec = CountingRecorder()
    for i in range(5):
        rec.event(f"Pod default/p{i}", "Normal", "Scheduled", "assigned")
    rec.event("Pod default/x", "Warning", "FailedScheduling", "no fit")
    assert rec.events == [] and rec.counts == {"Scheduled": 5, "FailedScheduling": 1}


def test_a_departed_pods_claim_is_deleted_too() -> None:
    """Nothing of a departed pod stays in the cluster: live claims equal live pods."""
    from dra_affinity.bench import throughput
    from dra_affinity.sim.cluster import Cluster
    from dra_affinity.sim.workload import WorkloadSpec

    seen: list[Cluster] = []
    real = throughput.build_cluster

    def spy(spec: WorkloadSpec, progress: object = None) -> Cluster:
        c = real(spec)
        seen.append(c)
        return c

    import pytest

    mp = pytest.MonkeyPatch()
    mp.setattr(throughput, "build_cluster", spy)
    try:
        out = throughput.run_fill(WorkloadSpec(nodes=6, devices_per_node=2, churn=0.3, seed=2))
    finally:
        mp.undo()
    assert out["deletions"] > 0
    (cluster,) = seen
    assert cluster.count("ResourceClaim") == cluster.count("Pod") == out["scheduled"] - out["deletions"]
