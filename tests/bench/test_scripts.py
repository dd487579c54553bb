"""The measurement scripts under benchmarks/ keep running (tiny workloads)."""

from __future__ import annotations

import sys
from pathlib import Path

from ._run import run_json

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, *args: str) -> dict[str, object]:
    return run_json([sys.executable, str(ROOT / "benchmarks" / name), *args])


def test_hostile_quick_runs_every_case() -> None:
    """Every hostile case is admitted and ends in a classified outcome; a retry is
    answered from the remembered outcome (never slower to classify than the first)."""
    out = script("hostile.py", "--quick")
    cases = out["cases"]
    assert isinstance(cases, list) and len(cases) >= 8
    for row in cases:
        assert "rejected" not in row, row
        assert row["outcome"].split(":")[0] in (
            "Scheduled", "Unschedulable", "UnschedulableAndUnresolvable", "Error"), row
    assert out["worstCPU"]["case"] in {r["case"] for r in cases}  # type: ignore[index]


def test_http_answer_compares_both_readers_on_the_same_answers() -> None:
    """The script checks each reader's body against the one sent (it exits otherwise)."""
    out = script("http_answer.py", "--answers", "200")
    assert out["answers"] == 200 and out["bodyBytes"] > 1000
    assert out["httpClientMicroseconds"] > 0 and out["readAnswerMicroseconds"] > 0  # type: ignore[operator]


def test_retry_cost_retries_filter_nothing_again() -> None:
    """The script checks every retry's message against the pod's first (it fails
    otherwise); nothing changed, so a retry computes no verdict."""
    out = script("retry_cost.py", "--nodes", "4", "--devices", "2", "--pods", "8", "--rounds", "1")
    rounds = out["rounds"]
    assert isinstance(rounds, list) and [r["round"] for r in rounds][-1] == "retry 1"
    assert rounds[-1]["verdictsComputed"] == 0 and rounds[-1]["verdictsReused"] > 0


def test_drain_replay_counts_conversions_per_pod() -> None:
    """The recorded trace replays on the view: every pod's events applied, and fewer
    conversions than the watch events and the scheduler's writes (issue 30)."""
    out = script("drain_replay.py", str(ROOT / "benchmarks" / "drain-trace-150.json.gz"),
                 "--repeat", "1", "--kubelet", "2")
    assert out["pods"] == 150
    rows = out["byKindAndType"]
    assert isinstance(rows, dict)
    assert rows["Pod ADDED"]["applied"] == rows["ResourceClaim ADDED"]["applied"] == 150
    # The kubelet's first update of a bound pod moves only its resourceVersion, the second
    # its phase: neither is converted once the view holds what the informer delivered.
    kubelet = rows["Pod MODIFIED (kubelet)"]
    assert kubelet["applied"] == 300 and kubelet["converted"] < 30 and kubelet["told"] < 180
    assert out["conversionsPerPod"] < 5 < out["watchChangesPerPod"]  # type: ignore[operator]
