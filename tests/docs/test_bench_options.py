"""`dra-affinity bench`: every option takes effect or is rejected; files and progress are reported.

The README and benchmarks/README.md document these options; a user reported
`--packing --nodes 3` running 50 nodes and `--plots` without `--packing` doing nothing.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dra_affinity.bench.throughput import bench as throughput_bench
from dra_affinity.cli import BENCH_SCALE_ENV, main
from dra_affinity.progress import phase_progress
from dra_affinity.sim.workload import WorkloadSpec


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, ["bench", *args], env={BENCH_SCALE_ENV: "", **(env or {})})


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != BENCH_SCALE_ENV}
    return subprocess.run([sys.executable, "-m", "dra_affinity", "bench", *args],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**full_env, **(env or {})})


@pytest.mark.parametrize(("args", "env", "names"), [
    (["--plots", "out"], {}, ["--plots", "--packing"]),
    (["--packing", "--scaling"], {}, ["--scaling", "--packing"]),
    (["--packing", "--scaling-nodes", "4"], {}, ["--scaling-nodes", "--packing"]),
    (["--packing", "--scaling-pods", "4", "--scaling-devices", "2"], {},
     ["--scaling-pods", "--scaling-devices"]),
    (["--scaling-pods", "4"], {}, ["--scaling-pods", "--scaling"]),
    (["--scaling-devices", "2"], {}, ["--scaling-devices", "--scaling"]),
    (["--scaling", "--scaling-nodes", "a,b"], {}, ["--scaling-nodes", "'a,b'"]),
    (["--scaling", "--scaling-nodes", "0"], {}, ["--scaling-nodes", "positive"]),
    (["--scaling", "--scaling-devices", ","], {}, ["--scaling-devices"]),
    ([], {BENCH_SCALE_ENV: "0"}, [BENCH_SCALE_ENV, "'0'"]),
    ([], {BENCH_SCALE_ENV: "1.5"}, [BENCH_SCALE_ENV]),
    ([], {BENCH_SCALE_ENV: "half"}, [BENCH_SCALE_ENV, "'half'"]),
])
def test_option_that_would_be_ignored_is_rejected(args: list[str], env: dict[str, str],
                                                  names: list[str]) -> None:
    res = invoke(*args, env=env)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert res.stdout == ""
    assert res.stderr.startswith("error: ")
    for name in names:
        assert name in res.stderr, (name, res.stderr)


def test_packing_honours_workload_options() -> None:
    p = cli("--packing", "--nodes", "3", "--values", "2", "--seed", "4", "--offline-iterations", "20",
            "-o", "json")
    assert p.returncode == 0, p.stderr
    w = json.loads(p.stdout)["workload"]
    # given options win; the others keep the packing workload's own defaults
    assert (w["nodes"], w["values"], w["seed"]) == (3, 2, 4)
    assert (w["devicesPerNode"], w["slots"], w["churn"], w["fill"]) == (4, 8, 0.2, 0.75)
    assert w["totalSlots"] == 3 * 4 * 8
    assert "sizeScale" not in w
    assert p.stderr == ""  # piped: no progress, no notes


def test_scale_variable_shrinks_the_run_and_says_so() -> None:
    p = cli("--nodes", "500", "--devices-per-node", "2", "--fill", "0.2", "--values", "4",
            "-o", "json", env={BENCH_SCALE_ENV: "0.01"})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["workload"]["nodes"] == 5 and out["workload"]["sizeScale"] == 0.01
    assert f"{BENCH_SCALE_ENV}=0.01" in p.stderr and "--nodes 500 -> 5" in p.stderr
    assert out["withAffinity"]["finalFill"] >= 0.2


def test_scale_variable_shrinks_packing_arrivals() -> None:
    p = cli("--packing", "-o", "json", env={BENCH_SCALE_ENV: "0.1"})
    assert p.returncode == 0, p.stderr
    w = json.loads(p.stdout)["workload"]
    assert (w["nodes"], w["arrivals"], w["sizeScale"]) == (5, 300, 0.1)
    assert "nodes 50 -> 5" in p.stderr and "arrivals 3000 -> 300" in p.stderr


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="matplotlib (the plots extra) is not installed")
def test_packing_plots_say_where_they_went(tmp_path: Path) -> None:
    folder = tmp_path / "figs"
    p = cli("--packing", "--plots", str(folder), "--offline-iterations", "20",
            env={BENCH_SCALE_ENV: "0.1"})
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stderr.splitlines() if x.startswith("plots written: "))
    written = [Path(x) for x in line.removeprefix("plots written: ").split(", ")]
    assert sorted(x.name for x in written) == sorted(
        ["devices-in-use.png", "lock-maps.png", "surplus-by-value.png"])
    for path in written:
        assert path.parent == folder and path.stat().st_size > 0
    assert "packing" in p.stdout  # the table still goes to stdout


def test_progress_hears_every_phase() -> None:
    """The bench reports build and fill of both variants and each scaling cell."""
    seen: dict[str, list[tuple[int, int]]] = {}
    spec = WorkloadSpec(nodes=6, devices_per_node=2, slots=2, values=3, fill=0.5, seed=2)
    out = throughput_bench(spec, scaling=True, scaling_nodes=(2, 3), scaling_devices=(1,),
                           scaling_pods=5,
                           progress=lambda phase, done, total: seen.setdefault(phase, []).append(
                               (done, total)))
    assert set(seen) == {"with sharingAffinity: build", "baseline: build",
                         "with sharingAffinity: fill", "baseline: fill", "scaling cells"}
    for phase in ("with sharingAffinity: build", "baseline: build"):
        assert seen[phase][-1] == (6, 6)
    target = seen["baseline: fill"][-1][1]
    assert seen["with sharingAffinity: fill"][-1] == (target, target) == seen["baseline: fill"][-1]
    assert seen["scaling cells"] == [(0, 2), (1, 2), (2, 2)]
    for reports in seen.values():  # monotonic: a bar never goes back
        assert [d for d, _ in reports] == sorted(d for d, _ in reports)
    assert len(out["scaling"]) == 2


def test_progress_is_off_unless_asked_or_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    with phase_progress(False) as report:
        assert report is None
    with phase_progress(True) as report:
        assert report is not None
        report("phase", 1, 2)  # renders to stderr, raises nothing
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # piped: not a terminal
    with phase_progress() as report:
        assert report is None
    assert sys.stderr.getvalue() == ""
