"""Every scenario in examples/ runs cleanly and shows what its README entry promises.

The examples are run exactly as a user runs them (`python -m dra_affinity simulate FILE
--output json`); the output checks are shared with test_scenarios.py.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

_spec = importlib.util.spec_from_file_location(
    "_dra_affinity_scenario_checks", Path(__file__).with_name("test_scenarios.py")
)
assert _spec is not None and _spec.loader is not None
sc = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = sc  # dataclasses resolve their module through sys.modules
_spec.loader.exec_module(sc)

Case, D, S = sc.Case, sc.D, sc.S
EXAMPLES = sc.ROOT / "examples"
NET = sc.NET
RDMA, FPGA = "rdma.example.com", "fpga.example.com"
M, NK, UR, CE = (
    "AffinityLockMismatch",
    "AffinityNoKeys",
    "AffinityUnreconstructable",
    "AffinityCELError",
)
LOCKED, UNRECON, REUSE, CONFLICT, NOKEYS = sc.LOCKED, sc.UNRECON, sc.REUSE, sc.CONFLICT, sc.NOKEYS


def dev(name: str, node: str = "node-1", driver: str = NET) -> str:
    return f"{driver}/{node}/{name}"


def _consumed(index: int, capacity: dict[str, str]) -> Any:
    def check(out: dict[str, Any]) -> None:
        allocs = sc.entry(out, index)["allocations"]
        assert [a["consumedCapacity"] for a in allocs] == [capacity], allocs

    return check


N1, N2, N3 = "node-1", "node-2", "node-3"
X, Y, Z = {"subnet": "subnet-X"}, {"subnet": "subnet-Y"}, {"subnet": "subnet-Z"}
GPU, INF = "gpu-node-1", "infer-node-1"
MLX0, MLX1 = dev("mlx5-0", GPU, RDMA), dev("mlx5-1", GPU, RDMA)
FPGA0, FPGA1 = dev("fpga-0", INF, FPGA), dev("fpga-1", INF, FPGA)
MK0, MK1 = dev("mlx5-0", "node1"), dev("mlx5-1", "node1")

EXAMPLE_CASES: list[Case] = [
    Case(
        "starter.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Scheduled", N1, (dev("eth1"),), claim="default/pod-a-nic"),
            S(1, "Scheduled", N1, (dev("eth1"),), claim="default/pod-b-nic"),
            S(2, "Scheduled", N1, (dev("eth2"),), claim="default/subnet-y-nic"),
        ),
        devices=(
            D(dev("eth1"), "Locked", X, ("default/pod-a-nic", "default/pod-b-nic")),
            D(dev("eth2"), "Clean", {}, ()),
        ),
        metrics={LOCKED: 1, REUSE: 1, CONFLICT: 1},
        # a request for 2 slots takes 2; a request for none takes the requestPolicy default
        extra=sc._all(_consumed(0, {f"{NET}/slots": "2"}), _consumed(2, {f"{NET}/slots": "1"})),
    ),
    Case(
        "story-3-subnet.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Scheduled", N1, (dev("eth1"),), claim="default/pod-a-nic"),
            S(2, "Scheduled", N1, (dev("eth1"),)),
            S(3, "Scheduled", N1, (dev("eth2"),)),
            S(5, "Scheduled", N2, (dev("eth1", N2),)),
            S(
                6,
                "Unschedulable",
                on={M: (dev("eth1"), dev("eth2"))},
                absent=("InsufficientCapacity", NK, CE),
            ),
            S(9, "Scheduled", N1, (dev("eth2"),)),
        ),
        devices=(
            D(dev("eth1"), "Locked", X, ("default/pod-a-nic", "default/pod-b-nic")),
            D(dev("eth2"), "Locked", Z, ("default/pod-e-nic",)),
            D(dev("eth1", N2), "Locked", Z, ("default/pod-d-nic",)),
            D(dev("eth2", N2), "Clean", {}, ()),
        ),
        metrics={LOCKED: 3, UNRECON: 0, REUSE: 1, CONFLICT: 2, NOKEYS: 0},
        extra=sc._all(
            sc._first_alloc(0),
            sc._failed_scheduling_event("default/pod-e"),
        ),
    ),
    Case(
        "story-1-rdma-pkey.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Scheduled", GPU, (MLX0,), claim="default/trainer-a-rdma"),
            S(2, "Scheduled", GPU, (MLX0,)),
            S(3, "Scheduled", GPU, (MLX1,)),
            S(5, "Unschedulable", on={M: (MLX0, MLX1)}),
            S(8, "Scheduled", GPU, (MLX1,)),
        ),
        devices=(
            D(
                MLX0,
                "Locked",
                {"pkey": "0x8001"},
                ("default/trainer-a-rdma", "default/trainer-b-rdma"),
            ),
            D(MLX1, "Locked", {"pkey": "0x8003"}, ("default/trainer-d-rdma",)),
        ),
        metrics={LOCKED: 2, UNRECON: 0, REUSE: 1, CONFLICT: 2, NOKEYS: 0},
        extra=_consumed(0, {f"{RDMA}/vfs": "1"}),
    ),
    Case(
        "story-2-fpga-bitstream.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Scheduled", INF, (FPGA0,), claim="default/infer-ml-a-fpga"),
            S(2, "Scheduled", INF, (FPGA0,)),
            S(3, "Scheduled", INF, (FPGA1,)),
            S(4, "Unschedulable", on={M: (FPGA0, FPGA1)}),
            S(7, "Scheduled", INF, (FPGA1,)),
            S(8, "Scheduled", INF, (FPGA0,)),
            S(9, "Scheduled", INF, (FPGA0,)),
            S(10, "Unschedulable", on={"InsufficientCapacity": (FPGA0,), M: (FPGA1,)}),
        ),
        devices=(
            D(
                FPGA0,
                "Locked",
                {"bitstream": "bitstream-ml-v2"},
                tuple(f"default/infer-ml-{s}-fpga" for s in "abcd"),
            ),
            D(FPGA1, "Locked", {"bitstream": "bitstream-video-v3"}, ("default/infer-video-fpga",)),
        ),
        metrics={LOCKED: 2, UNRECON: 0, REUSE: 3, CONFLICT: 4},
        # infer-crypto's claim names no capacity: the requestPolicy default (1 context) applies.
        extra=sc._all(
            _consumed(0, {f"{FPGA}/contexts": "1"}), _consumed(3, {f"{FPGA}/contexts": "1"})
        ),
    ),
    Case(
        "multi-key.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Scheduled", "node1", (MK0,), claim="default/pod-a-rdma-nic"),
            S(2, "Scheduled", "node1", (MK0,)),
            S(3, "Scheduled", "node1", (MK1,)),
            S(5, "Unschedulable", on={M: (MK0, MK1)}),
            S(6, "Error", once=(CE,), absent=(M,)),
        ),
        devices=(
            D(
                MK0,
                "Locked",
                {"subnet": "subnet-a", "pkey": "0x8001"},
                ("default/pod-a-rdma-nic", "default/pod-b-rdma-nic"),
            ),
            D(MK1, "Locked", {"subnet": "subnet-a", "pkey": "0x8002"}, ("default/pod-c-rdma-nic",)),
        ),
        metrics={LOCKED: 2, REUSE: 1, CONFLICT: 2},
        extra=sc._no_event_spam("default/pod-e"),
    ),
    Case(
        "legacy-migration.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Applied", warnings=False),
            S(1, "Applied"),
            S(4, "Unschedulable", on={UR: (dev("eth1"), dev("eth2"))}, absent=(M, NK)),
            S(7, "Unschedulable", on={UR: (dev("eth1"), dev("eth2"))}),
            S(11, "Scheduled", N1, (dev("eth1"),)),
        ),
        devices=(
            D(dev("eth1"), "Locked", X, ("default/pod-new-nic",)),
            D(dev("eth2"), "Clean", {}, ()),
        ),
        metrics={LOCKED: 1, UNRECON: 0},
    ),
    Case(
        "gate-rollback.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Scheduled", N1, (dev("eth1"),)),
            S(3, "Unschedulable", codes=("AffinityFeatureDisabled",), absent=(M, NK, CE)),
            S(4, "Scheduled", N2, (dev("eth1", N2),)),
            S(7, "Applied"),
            S(8, "Applied", warnings=False),
            S(12, "Scheduled", N1, (dev("eth2"),)),
            S(13, "Scheduled", N3, (dev("eth1", N3),)),
            S(14, "Scheduled", N3, (dev("eth1", N3),)),
        ),
        devices=(
            D(dev("eth1"), "Locked", X, ("default/pod-a-nic",)),
            D(dev("eth2"), "Locked", Y, ("default/pod-d-nic",)),
            D(dev("eth1", N2), not_status="Locked", lock={}, claims=("default/pod-c-nic",)),
            D(
                dev("eth1", N3),
                not_status="Locked",
                lock={},
                claims=("default/pod-e-nic", "default/pod-f-nic"),
            ),
        ),
        metrics={LOCKED: 2, UNRECON: 0},
        extra=sc._dropped_warning(6),
    ),
    Case(
        "experiment-never-set-lock.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Unschedulable", on={"AffinityNeverSetLock": (dev("eth1"), dev("eth2"))}),
            S(1, "Scheduled", N1, (dev("eth1"),), claim="default/service-nic"),
            S(2, "Scheduled", N1, (dev("eth1"),), claim="default/batch-nic"),
        ),
        devices=(
            D(dev("eth1"), "Locked", X, ("default/batch-nic", "default/service-nic")),
            D(dev("eth2"), "Clean", {}, ()),
        ),
        metrics={LOCKED: 1, REUSE: 1},
    ),
    Case(
        "experiment-preferred-keys.yaml",
        base=EXAMPLES,
        steps=(
            S(0, "Scheduled", N1, (dev("eth1"),)),
            S(1, "Scheduled", N1, (dev("eth2"),)),
            S(2, "Scheduled", N1, (dev("eth1"),)),
            S(3, "Scheduled", N1, (dev("eth2"),)),
            S(4, "Unschedulable", codes=("InsufficientCapacity",), absent=(M,)),
        ),
        devices=(
            D(dev("eth1"), "Locked", X, ("default/gold-1-nic", "default/gold-2-nic")),
            D(dev("eth2"), "Locked", X, ("default/bronze-1-nic", "default/bronze-2-nic")),
        ),
        metrics={LOCKED: 2, CONFLICT: 0},
    ),
]


def test_every_example_has_a_case() -> None:
    files = {p.name for p in EXAMPLES.glob("*.yaml")}
    assert files == {c.file for c in EXAMPLE_CASES}


def test_readme_lists_every_example() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    for p in EXAMPLES.glob("*.yaml"):
        assert p.name in readme, f"examples/README.md does not mention {p.name}"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_is_self_contained(path: Path) -> None:
    """Plain Kubernetes objects plus exactly one Scenario that states what it expects."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    scenarios = [d for d in docs if d["kind"] == "Scenario"]
    assert len(scenarios) == 1
    for d in docs:
        assert d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"), d
    steps = scenarios[0]["spec"]["steps"]
    assert any("expect" in s for s in steps) and any("expectDevice" in s for s in steps)


@pytest.fixture(scope="module", autouse=True)
def _prefetch(request: pytest.FixtureRequest) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for case in EXAMPLE_CASES:
        sc._submit(case.path)


@pytest.mark.parametrize(
    "case", EXAMPLE_CASES, ids=[c.file.removesuffix(".yaml") for c in EXAMPLE_CASES]
)
def test_example(case: Case) -> None:
    run = sc.simulate(case.path)
    assert run.returncode == 0, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    out = run.out
    sc.check_output(out, case.path)
    assert out["expectationsFailed"] == 0, sc.failed_expectations(out)
    assert sc.failed_expectations(out) == []
    for s in case.steps:
        sc.check_step(out, s)
    for d in case.devices:
        sc.check_device(out, d)
    for name, value in case.metrics.items():
        assert out["metrics"][name] == value, f"{name}: {out['metrics']}"
    if case.extra is not None:
        case.extra(out)


def test_story_3_is_deterministic() -> None:
    path = EXAMPLES / "story-3-subnet.yaml"
    first = sc.simulate(path)
    second = sc.run_cli(path, env={**os.environ, "PYTHONHASHSEED": "7"})
    assert first.returncode == second.returncode == 0, second.describe()
    assert first.stdout == second.stdout


def test_default_output_runs() -> None:
    """The README's main command, without --output: exit 0 and something on stdout."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "dra_affinity", "simulate", str(EXAMPLES / "story-3-subnet.yaml")],
        capture_output=True,
        text=True,
        timeout=sc.TIMEOUT,
        cwd=sc.ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert "Traceback" not in proc.stderr
