"""benchmarks/soak.py: steady occupancy, RSS sampled, a slope and a verdict."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOAK = ROOT / "benchmarks" / "soak.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak", SOAK)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fit_slope() -> None:
    fit = _module().fit_slope
    assert fit([(0, 1.0), (10, 21.0), (20, 41.0)]) == pytest.approx(2.0)
    assert fit([(0, 5.0), (10, 5.0)]) == 0.0
    assert fit([(3, 1.0)]) == 0.0 and fit([]) == 0.0
    assert fit([(4, 1.0), (4, 9.0)]) == 0.0  # no spread in x: no slope


@pytest.mark.parametrize(("max_growth", "verdict"), [("1e9", "PASS"), ("-1e9", "FAIL")])
def test_a_tiny_soak_reaches_steady_state_and_reports_its_structures(
        tmp_path: Path, max_growth: str, verdict: str) -> None:
    trace = tmp_path / "new" / "trace.txt"  # its folder is made
    p = subprocess.run([sys.executable, str(SOAK), "--nodes", "4", "--devices-per-node", "2",
                        "--attempts", "300", "--sample-every", "20", "--trace", str(trace),
                        f"--max-growth-mb={max_growth}"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == (0 if verdict == "PASS" else 1), p.stderr  # FAIL exits 1
    out = json.loads(p.stdout)
    lines = [ln.split() for ln in trace.read_text().splitlines()]
    assert [[int(a), float(r)] for a, r in lines] == out["rssSamplesMB"]
    assert out["fillAttempts"] is not None and 0 < out["fillAttempts"] < 300
    assert out["workload"]["targetPods"] == 22  # floor(0.7 * 32)
    # Held there: a departure before each arrival, and an arrival that finds no room leaves one less.
    assert out["livePods"] in (21, 22)
    assert out["scheduled"] + out["unschedulable"] == 300
    assert [x for x, _ in out["rssSamplesMB"]] == list(range(20, 301, 20))
    s = out["structures"]
    assert s["storedPods"] == s["storedClaims"] == out["livePods"] and s["events"] == 0
    # Any real growth passes a bound of 1e9 MB and fails one of -1e9 MB.
    assert out["verdict"] == verdict and "flat RSS" in out["criterion"]
    assert out["maxGrowthMB"] == float(max_growth)


@pytest.mark.parametrize(("args", "message"), [
    (["--attempts", "0"], "--attempts must be at least 1"),
    (["--occupancy", "1.5"], "--occupancy must be between 0 and 1"),
    (["--sample-every", "0"], "--sample-every must be at least 1"),
    (["--trace", "/proc/no/such/trace"], "/proc/no/such/trace: cannot be written"),
])
def test_bad_options_are_refused(args: list[str], message: str) -> None:
    p = subprocess.run([sys.executable, str(SOAK), *args], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr


def test_the_scale_variable_shortens_the_run_and_says_so() -> None:
    p = subprocess.run([sys.executable, str(SOAK), "--nodes", "300", "--devices-per-node", "2",
                        "--attempts", "4000", "--sample-every", "1000"],
                       capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "DRA_AFFINITY_BENCH_SCALE": "0.01"})
    assert "--nodes 300 -> 3, --attempts 4000 -> 40, --sample-every 1000 -> 10" in p.stderr
    assert '"attempts": 40' in p.stdout and '"nodes": 3' in p.stdout
    bad = subprocess.run([sys.executable, str(SOAK)], capture_output=True, text=True, timeout=120,
                         check=False, env={**os.environ, "DRA_AFFINITY_BENCH_SCALE": "2"})
    assert bad.returncode == 2 and "must be a number greater than 0" in bad.stderr
