"""The `bench` JSON interface (scripts depend on it): run the CLI on a tiny workload."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from ._run import run_json


def run(*args: str) -> dict[str, object]:
    return run_json([sys.executable, "-m", "dra_affinity", "bench", *args, "--output", "json"])


def test_bench_json_interface() -> None:
    out = run("--nodes", "12", "--devices-per-node", "2", "--seed", "3", "--fill", "0.6", "--values", "4",
              "--scaling", "--scaling-nodes", "4,8", "--scaling-devices", "1,2", "--scaling-pods", "40")
    w = out["workload"]
    assert isinstance(w, dict)
    assert (w["nodes"], w["devicesPerNode"], w["seed"], w["fill"]) == (12, 2, 3, 0.6)
    for variant in ("withAffinity", "withoutAffinity"):
        v = out[variant]
        assert isinstance(v, dict)
        for key in ("podsPerSecond", "filterP50Ms", "filterP99Ms", "peakMemoryMB"):
            assert isinstance(v[key], (int, float)) and v[key] >= 0, key
        deciles = v["fillDeciles"]
        assert isinstance(deciles, list) and deciles
        assert [d["fill"] for d in deciles] == sorted(d["fill"] for d in deciles)
        assert all(set(d) >= {"fill", "podsPerSecond"} for d in deciles)
        assert v["finalFill"] >= 0.6 and v["unschedulable"] == 0
        assert len(v["gcCollections"]) == 3  # collections per generation while it ran
    wa, wo = out["withAffinity"], out["withoutAffinity"]
    assert isinstance(wa, dict) and isinstance(wo, dict)
    assert out["overheadRatio"] == round(wa["podsPerSecond"] / wo["podsPerSecond"], 3)
    assert wa["lockedDevices"] > 0 and wo["lockedDevices"] == 0
    rows = out["scaling"]
    assert isinstance(rows, list)
    assert [(r["nodes"], r["devicesPerNode"]) for r in rows] == [(4, 1), (4, 2), (8, 1), (8, 2)]
    assert all(r["podsPerSecond"] > 0 for r in rows)
    # The whole command's CPU against the timed scheduling in it (both fills and the cells).
    timed = wa["schedulingSeconds"] + wo["schedulingSeconds"] + 0.0
    assert out["timedSchedulingSeconds"] >= round(timed, 3) - 0.002  # + the scaling cells
    assert out["wholeRunCpuSeconds"] > out["timedSchedulingSeconds"] > 0
    # The ratio comes from the unrounded seconds: equal up to the rounding of both to 1 ms.
    whole, timed_s = out["wholeRunCpuSeconds"], out["timedSchedulingSeconds"]
    slack = (whole + 0.0005) / (timed_s - 0.0005) - whole / timed_s + 0.0005
    assert abs(out["wholeRunCpuRatio"] - whole / timed_s) <= slack
    for v in (wa, wo):
        assert v["processCpuSeconds"] >= v["schedulingSeconds"] > 0


def test_bench_rejects_bad_scaling_lists() -> None:
    p = subprocess.run([sys.executable, "-m", "dra_affinity", "bench", "--scaling",
                        "--scaling-nodes", "a,b"], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_offline_iterations_reaches_the_packing_report() -> None:
    """--offline-iterations sets the offline reference's search limit (a tiny workload)."""
    out = run_json([sys.executable, "-m", "dra_affinity", "bench", "--packing", "--nodes", "4",
                    "--devices-per-node", "2", "--values", "3", "--seed", "2",
                    "--offline-iterations", "7", "--output", "json"])
    offline = out["reference"]["offline"]  # type: ignore[index]
    assert offline["iterationLimit"] == 7
    assert offline["iterations"] <= 7
    assert out["workload"]["nodes"] == 4  # type: ignore[index]


def test_tune_gc_reaches_the_bench_and_is_rejected_with_packing(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from dra_affinity.bench import throughput
    from dra_affinity.cli import main

    asked: list[bool] = []

    def fake(spec: object, **kwargs: Any) -> dict[str, Any]:
        asked.append(kwargs["tune_gc"])
        return {"workload": {}, "timedSchedulingSeconds": 1.0}

    monkeypatch.setattr(throughput, "bench", fake)
    for args, expected in (([], True), (["--tune-gc"], True), (["--no-tune-gc"], False)):
        r = CliRunner().invoke(main, ["bench", *args, "--output", "json"])
        assert r.exit_code == 0, r.output
        assert asked.pop() is expected
    r = CliRunner().invoke(main, ["bench", "--packing", "--no-tune-gc"])
    assert r.exit_code == 2 and "--tune-gc/--no-tune-gc: not used by --packing" in r.output


def test_offline_iterations_without_packing_is_rejected() -> None:
    p = subprocess.run([sys.executable, "-m", "dra_affinity", "bench", "--offline-iterations", "3"],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 2
    assert "--offline-iterations applies only with --packing" in p.stderr
