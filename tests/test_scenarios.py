"""Black-box tests of `dra-affinity simulate` against the scenarios in tests/scenarios/.

Each scenario file is run once, exactly as a user would run it:

    python -m dra_affinity simulate FILE --output json

and the JSON on stdout is checked field by field against the documented scenario
interface: the expectations the file states itself, plus the outcomes listed in
the CASES table below (results, nodes, allocated devices, reason codes, device states,
metrics). Bad input is written to tmp_path and must exit with status 2 and a readable
message on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
TIMEOUT = 120

NET = "networking.example.com"
SLOTS = f"{NET}/slots"

TOP_LEVEL_KEYS = {"scenario", "steps", "devices", "metrics", "events", "expectationsFailed"}
METRICS = {
    "sharing_affinity_locked_devices",
    "sharing_affinity_unreconstructable_devices",
    "sharing_affinity_extractor_evaluations_total",
    "sharing_affinity_lock_conflict_total",
    "sharing_affinity_no_keys_extracted_total",
    "sharing_affinity_compatible_reuse_total",
}
SCHEDULE_RESULTS = {"Scheduled", "Unschedulable", "UnschedulableAndUnresolvable", "Error"}
DEVICE_STATUSES = {"Clean", "Locked", "Unreconstructable"}
SINGLE_ENTRY_ACTIONS = (
    "schedule",
    "apply",
    "delete",
    "deleteObject",
    "restart",
    "apiserverFeatureGates",
)

LOCKED = "sharing_affinity_locked_devices"
UNRECON = "sharing_affinity_unreconstructable_devices"
EVALS = "sharing_affinity_extractor_evaluations_total"
CONFLICT = "sharing_affinity_lock_conflict_total"
NOKEYS = "sharing_affinity_no_keys_extracted_total"
REUSE = "sharing_affinity_compatible_reuse_total"


def dev(name: str, node: str = "node-1", driver: str = NET) -> str:
    return f"{driver}/{node}/{name}"


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    path: Path
    returncode: int
    stdout: str
    stderr: str

    @property
    def out(self) -> dict[str, Any]:
        try:
            data = json.loads(self.stdout)
        except json.JSONDecodeError as exc:  # pragma: no cover - failure path
            raise AssertionError(
                f"stdout of {self.path.name} is not JSON ({exc}); stderr:\n{self.stderr}\n"
                f"stdout:\n{self.stdout[:2000]}"
            ) from None
        assert isinstance(data, dict), "the JSON output must be one object"
        return data

    def describe(self) -> str:
        return f"{self.path.name}: exit {self.returncode}\nstderr:\n{self.stderr[-4000:]}"


def run_cli(path: Path, *extra: str, env: dict[str, str] | None = None) -> Run:
    cmd = [sys.executable, "-m", "dra_affinity", "simulate", str(path), "--output", "json", *extra]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{path.name}: simulate did not finish within {TIMEOUT}s")
    return Run(path, proc.returncode, proc.stdout, proc.stderr)


_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
_RUNS: dict[Path, Future[Run]] = {}
_LOCK = threading.Lock()


def _submit(path: Path) -> Future[Run]:
    with _LOCK:
        fut = _RUNS.get(path)
        if fut is None:
            fut = _RUNS[path] = _POOL.submit(run_cli, path)
        return fut


def simulate(path: Path) -> Run:
    """Run a scenario file once per test session (results are shared by the tests)."""
    return _submit(path).result()


# --------------------------------------------------------------------------- output checks


def scenario_doc(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    scen = [d for d in docs if d.get("kind") == "Scenario"]
    assert len(scen) == 1
    return scen[0]


def entries(out: dict[str, Any], index: int) -> list[dict[str, Any]]:
    return [s for s in out["steps"] if s.get("index") == index]


def entry(out: dict[str, Any], index: int, pod: str | None = None) -> dict[str, Any]:
    found = entries(out, index)
    if pod is not None:
        found = [s for s in found if s.get("pod") == pod]
    assert len(found) == 1, f"expected one output step with index {index} (pod {pod}), got {found}"
    return found[0]


def codes(step: dict[str, Any]) -> list[str]:
    return [r["code"] for r in step["reasons"]]


def device_entry(out: dict[str, Any], device_id: str) -> dict[str, Any]:
    found = [d for d in out["devices"] if d["device"] == device_id]
    assert len(found) == 1, f"{device_id} must be listed once in devices[], got {found}"
    return found[0]


def all_claims(out: dict[str, Any]) -> set[str]:
    return {c for d in out["devices"] for c in d["claims"]}


def check_schedule_entry(step: dict[str, Any], spec_step: dict[str, Any] | None) -> None:
    for key in ("pod", "result", "node", "allocations", "reasons"):
        assert key in step, f"schedule step {step.get('index')} lacks {key!r}: {step}"
    if (spec_step or {}).get("expect") is not None:
        assert step.get("expectations"), (
            f"step {step.get('index')} has an expect: its checks are reported"
        )
    assert isinstance(step["pod"], str) and "/" in step["pod"], step["pod"]
    assert step["result"] in SCHEDULE_RESULTS, step["result"]
    if step["result"] == "Scheduled":
        assert isinstance(step["node"], str) and step["node"], step
        assert step["allocations"], f"a scheduled pod with claims has allocations: {step}"
    else:
        assert step["node"] is None, step
        if not (spec_step or {}).get("failBind"):
            assert step["allocations"] == [], step
    for alloc in step["allocations"]:
        for key in ("claim", "request", "device", "shareID", "consumedCapacity"):
            assert key in alloc, f"allocation lacks {key!r}: {alloc}"
        assert "/" in alloc["claim"], alloc
        assert alloc["device"].count("/") >= 2, alloc
        assert isinstance(alloc["consumedCapacity"], dict), alloc
    for reason in step["reasons"]:
        for key in ("code", "node", "device", "message"):
            assert key in reason, f"reason lacks {key!r}: {reason}"
        assert isinstance(reason["code"], str) and reason["code"], reason
    if step["result"] != "Scheduled":
        assert step["reasons"], f"a pod that is not scheduled carries reasons: {step}"
    for exp in step.get("expectations") or []:
        assert isinstance(exp.get("ok"), bool) and isinstance(exp.get("message"), str), exp


def check_output(out: dict[str, Any], path: Path) -> None:
    """Structure of the JSON output, as the scenario interface documents it."""
    scen = scenario_doc(path)
    assert set(out) >= TOP_LEVEL_KEYS, f"missing top-level keys: {TOP_LEVEL_KEYS - set(out)}"
    assert out["scenario"] == scen["metadata"]["name"]
    assert isinstance(out["steps"], list)
    assert isinstance(out["expectationsFailed"], int)
    for step in out["steps"]:
        assert isinstance(step.get("index"), int) and isinstance(step.get("action"), str), step
    indexes = [s["index"] for s in out["steps"]]
    assert indexes == sorted(indexes), "steps are reported in timeline order"

    for i, spec_step in enumerate(scen["spec"]["steps"]):
        got = entries(out, i)
        kind = next(k for k in spec_step if k not in ("expect", "failBind", "failPrepare"))
        if kind in SINGLE_ENTRY_ACTIONS:
            assert len(got) == 1, f"step {i} ({kind}) gives one entry, got {got}"
            assert got[0]["action"] == kind, got[0]
            assert "result" in got[0], got[0]
        if kind == "schedule":
            check_schedule_entry(got[0], spec_step)
            assert got[0]["pod"].split("/")[-1] == spec_step["schedule"].split("/")[-1]
        if kind == "scheduleConcurrently":
            pods = spec_step["scheduleConcurrently"]
            assert [g.get("pod") for g in got] == [f"default/{p}" for p in pods], got
            for g in got:
                assert g["action"] in ("scheduleConcurrently", "schedule"), g
                check_schedule_entry(g, spec_step)
        if kind == "apply":
            assert got[0]["result"] in ("Applied", "Rejected"), got[0]
            if got[0]["result"] == "Rejected":
                assert got[0].get("errors"), f"a rejected apply carries errors: {got[0]}"

    for d in out["devices"]:
        for key in ("device", "status", "lock", "claims"):
            assert key in d, f"device entry lacks {key!r}: {d}"
        assert d["status"] in DEVICE_STATUSES, d
        assert isinstance(d["lock"], dict) and isinstance(d["claims"], list), d
        if d["status"] == "Locked":
            assert d["lock"], f"a Locked device has a non-empty lock: {d}"
        else:
            assert d["lock"] == {}, f"lock is {{}} unless Locked: {d}"
    ids = [d["device"] for d in out["devices"]]
    assert len(ids) == len(set(ids)), "each device is listed once"

    assert set(out["metrics"]) >= METRICS, f"missing metrics: {METRICS - set(out['metrics'])}"
    for name in METRICS:
        value = out["metrics"][name]
        assert isinstance(value, int | float) and not isinstance(value, bool), (name, value)
        assert value >= 0, (name, value)

    assert isinstance(out["events"], list)
    for ev in out["events"]:
        for key in ("object", "type", "reason", "message"):
            assert key in ev, f"event lacks {key!r}: {ev}"


def failed_expectations(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"index": s["index"], **e}
        for s in out["steps"]
        for e in s.get("expectations") or []
        if not e.get("ok")
    ]


# --------------------------------------------------------------------------- table


@dataclass(frozen=True)
class S:
    """Expected outcome of one output step (selected by index, and pod for concurrent steps)."""

    index: int
    result: str | None = None
    node: str | None = None
    devices: tuple[str, ...] | None = None  # exact set of devices allocated to the pod
    codes: tuple[str, ...] = ()  # reason codes that must appear
    absent: tuple[str, ...] = ()  # reason codes that must not appear
    on: dict[str, tuple[str, ...]] = field(default_factory=dict)  # code -> devices reported with it
    once: tuple[str, ...] = ()  # codes reported exactly once (not per device)
    pod: str | None = None
    alloc: dict[str, str] | None = None  # request -> device
    claim: str | None = None  # every allocation belongs to this claim
    warnings: bool | None = None  # apply steps: warnings present (True) / absent (False)


@dataclass(frozen=True)
class D:
    """Expected final state of one device in devices[]."""

    device: str
    status: str | None = None
    lock: dict[str, str] | None = None
    claims: tuple[str, ...] | None = None  # exact set (namespace/name)
    not_status: str | None = None


@dataclass(frozen=True)
class Case:
    file: str
    steps: tuple[S, ...] = ()
    devices: tuple[D, ...] = ()
    metrics: dict[str, int] = field(default_factory=dict)
    extra: Callable[[dict[str, Any]], None] | None = None
    base: Path = SCENARIOS

    @property
    def path(self) -> Path:
        return self.base / self.file


def check_step(out: dict[str, Any], exp: S) -> None:
    step = entry(out, exp.index, exp.pod)
    where = f"step {exp.index} {step.get('pod', '')}"
    if exp.result is not None:
        assert step["result"] == exp.result, f"{where}: {step}"
    if exp.node is not None:
        assert step["node"] == exp.node, f"{where}: {step}"
    if exp.devices is not None:
        assert {a["device"] for a in step["allocations"]} == set(exp.devices), f"{where}: {step}"
    got = codes(step) if "reasons" in step else []
    for c in exp.codes:
        assert c in got, f"{where}: reason {c} expected in {step.get('reasons')}"
    for c in exp.absent:
        assert c not in got, f"{where}: reason {c} not expected in {step.get('reasons')}"
    for c, devs in exp.on.items():
        reported = {r["device"] for r in step["reasons"] if r["code"] == c}
        for d in devs:
            assert d in reported, f"{where}: {c} expected for {d}; reasons {step['reasons']}"
    for c in exp.once:
        assert got.count(c) == 1, f"{where}: {c} must be reported once; reasons {step['reasons']}"
    if exp.alloc is not None:
        assert {a["request"]: a["device"] for a in step["allocations"]} == exp.alloc, (
            f"{where}: {step}"
        )
    if exp.claim is not None:
        assert step["allocations"]
        assert {a["claim"] for a in step["allocations"]} == {exp.claim}, f"{where}: {step}"
    if exp.warnings is True:
        assert step.get("warnings"), f"{where}: warnings expected: {step}"
    if exp.warnings is False:
        assert not step.get("warnings"), f"{where}: no warnings expected: {step}"


def check_device(out: dict[str, Any], exp: D) -> None:
    d = device_entry(out, exp.device)
    if exp.status is not None:
        assert d["status"] == exp.status, d
    if exp.not_status is not None:
        assert d["status"] != exp.not_status, d
    if exp.lock is not None:
        assert d["lock"] == exp.lock, d
    if exp.claims is not None:
        assert set(d["claims"]) == set(exp.claims), d
        assert len(d["claims"]) == len(exp.claims), d


# Extra checks --------------------------------------------------------------------


def _first_alloc(index: int, pod: str | None = None) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        a = entry(out, index, pod)["allocations"][0]
        assert a["request"] == "nic"
        assert a["consumedCapacity"] == {SLOTS: "1"}, a
        assert isinstance(a["shareID"], str) and a["shareID"], a

    return check


def _evaluations_positive(out: dict[str, Any]) -> None:
    assert out["metrics"][EVALS] > 0


def _events_for(out: dict[str, Any], pod: str) -> list[dict[str, Any]]:
    return [e for e in out["events"] if e["object"] == f"Pod {pod}"]


def _failed_scheduling_event(pod: str) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        evs = _events_for(out, pod)
        assert any(e["type"] == "Warning" and e["reason"] == "FailedScheduling" for e in evs), out[
            "events"
        ]

    return check


def _no_event_spam(pod: str) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        assert len(_events_for(out, pod)) <= 1, f"one attempt, at most one event: {out['events']}"

    return check


def _all(*checks: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        for c in checks:
            c(out)

    return check


def _first_fit_device_order(out: dict[str, Any]) -> None:
    # devices[] is in input order: eth2 (slice node-1-nics-b, first in the file), then eth0, eth1.
    ids = [d["device"] for d in out["devices"]]
    wanted = [dev("eth2"), dev("eth0"), dev("eth1")]
    assert [i for i in ids if i in wanted] == wanted, ids


def _reserve_conflict(out: dict[str, Any]) -> None:
    first, second = entries(out, 0)
    assert first["pod"] == "default/pod-e" and second["pod"] == "default/pod-f"
    assert "default/pod-f-nic" not in all_claims(out), "the losing claim is not allocated"


def _no_ghost(out: dict[str, Any]) -> None:
    claims = all_claims(out)
    assert "default/pod-a-nic" not in claims and "default/pod-c-nic" not in claims, claims
    for d in out["devices"]:
        if d["status"] == "Locked":
            assert d["lock"] == {"subnet": "subnet-Y"}, d


def _not_object(out: dict[str, Any]) -> None:
    for i in (0, 1):  # the API server refuses parameters that are not a JSON object
        step = entry(out, i)
        assert step["result"] == "Rejected", step
        assert [e["field"] for e in step["errors"]] == ["spec.devices.config[0].opaque.parameters"]
        assert "must be a JSON object" in step["errors"][0]["message"], step
    for i in (2, 3):  # so their pods' claims do not exist
        step = entry(out, i)
        assert step["result"] == "UnschedulableAndUnresolvable", step
        assert step["allocations"] == []
    assert {"default/bad-string", "default/bad-list"}.isdisjoint(all_claims(out))


def _rejected_mentions(
    *indexes: int, word: str = "sharingAffinity"
) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        for i in indexes:
            step = entry(out, i)
            assert step["result"] == "Rejected", step
            assert word in json.dumps(step["errors"]), step["errors"]

    return check


def _devices_absent(*ids: str) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        listed = {d["device"] for d in out["devices"]}
        for i in ids:
            assert i not in listed, f"{i} was never stored, it must not be listed"

    return check


def _feature_disabled_on_node_1(out: dict[str, Any]) -> None:
    step = entry(out, 0)
    nodes = {r["node"] for r in step["reasons"] if r["code"] == "AffinityFeatureDisabled"}
    assert "node-1" in nodes, step["reasons"]


def _dropped_warning(index: int) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        step = entry(out, index)
        assert step["result"] == "Applied", step
        assert "sharingaffinity" in json.dumps(step.get("warnings")).lower(), step

    return check


def _capacity_claims(out: dict[str, Any]) -> None:
    d = device_entry(out, dev("eth1"))
    assert set(d["claims"]) == {f"default/pod-{i:02d}-nic" for i in range(2, 18)}, d


X = {"subnet": "subnet-X"}
Y = {"subnet": "subnet-Y"}
M = "AffinityLockMismatch"
NK = "AffinityNoKeys"
UR = "AffinityUnreconstructable"
CE = "AffinityCELError"
N1 = "node-1"
N2 = "node-2"
E1, E2, E3 = dev("eth1"), dev("eth2"), dev("eth3")


def _node_filter_reasons(out: dict[str, Any]) -> None:
    """Each node is turned away by its own filter, in upstream's order."""
    by_node = {r["node"]: r for r in entry(out, 3)["reasons"]}
    assert by_node["node-1"]["code"] == "NodeAffinityMismatch"  # cordon tolerated
    assert by_node["node-2"]["code"] == "NodeAffinityMismatch"  # taint tolerated
    assert by_node["node-3"]["code"] == "InsufficientNodeResources"
    assert "insufficient cpu" in by_node["node-3"]["message"]

CASES: list[Case] = [
    Case(
        "filter-matching-lock.yaml",
        steps=(S(1, "Scheduled", N1, (E1,), claim="default/pod-b-nic"),),
        devices=(D(E1, "Locked", X, ("default/pod-a-nic", "default/pod-b-nic")),),
        metrics={LOCKED: 1, UNRECON: 0, REUSE: 1, CONFLICT: 0, NOKEYS: 0},
        extra=_first_alloc(1),
    ),
    Case(
        "filter-conflicting-lock.yaml",
        steps=(
            S(0, "Scheduled", N1, (E2,)),
            S(1, "Unschedulable", on={M: (E1, E2)}, absent=("InsufficientCapacity", NK, CE)),
        ),
        devices=(
            D(E1, "Locked", X, ("default/pod-a-nic",)),
            D(E2, "Locked", Y, ("default/pod-y-nic",)),
        ),
        # pod-y's Filter never meets eth1 (the lock index rules it out); pod-z's full
        # scan for its reasons meets both.
        metrics={LOCKED: 2, CONFLICT: 2, REUSE: 0},
        extra=_failed_scheduling_event("default/pod-z"),
    ),
    Case(
        "filter-unlocked-passes.yaml",
        steps=(S(1, "Scheduled", N1, (E1,), claim="default/pod-a-nic"),),
        devices=(D(E1, "Locked", X, ("default/pod-a-nic",)),),
        metrics={LOCKED: 1, REUSE: 0, CONFLICT: 0, NOKEYS: 0, UNRECON: 0},
        extra=_all(_first_alloc(1), _evaluations_positive),
    ),
    Case(
        "filter-no-keys.yaml",
        steps=(
            S(0, "Unschedulable", on={NK: (E1, E2)}, absent=(CE, M)),
            S(1, "Unschedulable", on={NK: (E1, E2)}, absent=(CE, M)),
            S(2, "Scheduled", N2, (dev("eth1", N2),)),
        ),
        devices=(
            D(E1, "Clean", {}, ()),
            D(E2, "Clean", {}, ()),
            D(dev("eth1", N2), not_status="Locked", lock={}, claims=("default/pod-free-nic",)),
        ),
        metrics={NOKEYS: 6, LOCKED: 0},
    ),
    Case(
        "filter-extra-fields-ignored.yaml",
        steps=(S(0, "Scheduled", N1, (E1,)), S(1, "Scheduled", N1, (E1,))),
        devices=(D(E1, "Locked", X, ("default/pod-a-nic", "default/pod-b-nic")),),
        metrics={REUSE: 1, CONFLICT: 0},
    ),
    Case(
        "self-inconsistent-configs.yaml",
        steps=(
            S(0, "UnschedulableAndUnresolvable", codes=("AffinitySelfInconsistent",)),
            S(1, "UnschedulableAndUnresolvable", codes=("AffinitySelfInconsistent",)),
            S(2, "Scheduled", N1, (E1,), absent=("AffinitySelfInconsistent",)),
            S(3, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(
                E1,
                "Locked",
                {"subnet": "subnet-A"},
                ("default/pod-same-twice-nic", "default/pod-class-agrees-nic"),
            ),
            D(E2, "Clean", {}, ()),
        ),
        metrics={LOCKED: 1},
    ),
    Case(
        "cel-runtime-error.yaml",
        steps=(S(0, "Error", once=(CE,), absent=(M, NK)), S(3, "Scheduled", N1, (E1,))),
        devices=(
            D(E1, "Locked", {"subnet": "subnet-data"}, ("default/pod-ok-nic",)),
            D(E2, "Clean", {}, ()),
        ),
        metrics={LOCKED: 1},
        extra=_no_event_spam("default/pod-bad"),
    ),
    Case(
        "cel-missing-field.yaml",
        steps=(
            S(0, "Error", once=(CE,)),
            S(1, "Unschedulable", on={NK: (E1, E2)}, absent=(CE,)),
            S(2, "Scheduled", N1, (E1,)),
        ),
        devices=(D(E1, "Locked", X, ("default/pod-ok-nic",)), D(E2, "Clean", {}, ())),
        extra=_no_event_spam("default/pod-typo"),
    ),
    Case(
        "cel-non-string.yaml",
        steps=(S(0, "Error", once=(CE,)), S(2, "Scheduled", N1, (E1,))),
        devices=(
            D(E1, "Locked", {"vlan": "100"}, ("default/pod-string-nic",)),
            D(E2, "Clean", {}, ()),
        ),
    ),
    Case(
        "cel-cost-exceeded.yaml",
        steps=(
            S(0, "Error", once=("AffinityCostExceeded",), absent=(CE,)),
            S(2, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(E1, "Locked", {"mode": "x"}, ("default/pod-small-nic",)),
            D(E2, "Clean", {}, ()),
        ),
    ),
    Case(
        "unreconstructable-excluded.yaml",
        steps=(
            S(2, "Scheduled", N1, (E3,)),
            S(3, "Unschedulable", on={UR: (E1, E2), M: (E3,)}),
            S(6, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(E1, "Locked", Y, ("default/pod-y-nic",)),
            D(E2, "Unreconstructable", {}, ("default/legacy-b-nic",)),
            D(E3, "Locked", X, ("default/pod-x-nic",)),
        ),
        metrics={UNRECON: 1, LOCKED: 2},
    ),
    Case(
        "first-fit-order.yaml",
        steps=(
            S(1, "Scheduled", N1, (dev("eth0"),)),
            S(2, "Scheduled", N1, (E2,)),
            S(3, "Scheduled", N1, (dev("eth0"),)),
        ),
        devices=(
            D(dev("eth0"), "Locked", X, ("default/pod-x-nic", "default/pod-x2-nic")),
            D(E1, "Locked", X, ("default/pod-holder-nic",)),
            D(E2, "Locked", Y, ("default/pod-y-nic",)),
        ),
        # Only devices that can take the request are met: no conflict is counted.
        metrics={REUSE: 1, CONFLICT: 0, LOCKED: 3},
        extra=_first_fit_device_order,
    ),
    Case(
        "reserve-lock-then-join.yaml",
        steps=(
            S(0, "Scheduled", N1, (E1,)),
            S(2, "Scheduled", N1, (E1,)),
            S(3, "Unschedulable", on={M: (E1,)}),
        ),
        devices=(D(E1, "Locked", X, ("default/pod-a-nic", "default/pod-b-nic")),),
        metrics={REUSE: 1, CONFLICT: 1, LOCKED: 1},
    ),
    Case(
        "reserve-conflict-concurrent.yaml",
        steps=(
            S(0, "Scheduled", N1, (E1,), pod="default/pod-e"),
            S(0, "Unschedulable", pod="default/pod-f", codes=("ReserveConflict",)),
            S(2, "Unschedulable", on={M: (E1,)}),
            S(3, "Scheduled", N1, (E1,), pod="default/pod-g"),
            S(3, "Scheduled", N1, (E1,), pod="default/pod-h"),
        ),
        devices=(
            D(E1, "Locked", X, ("default/pod-e-nic", "default/pod-g-nic", "default/pod-h-nic")),
        ),
        metrics={LOCKED: 1},
        extra=_reserve_conflict,
    ),
    Case(
        "bind-failure-no-ghost-lock.yaml",
        steps=(
            S(0, "Unschedulable", codes=("BindFailed",)),
            S(2, "Scheduled", N1, (E1,)),
            S(4, "Unschedulable", codes=("BindFailed",)),
            S(6, "Unschedulable", on={M: (E1,)}),
        ),
        devices=(D(E1, "Locked", Y, ("default/pod-b-nic",)),),
        metrics={LOCKED: 1},
        extra=_no_ghost,
    ),
    Case(
        "prepare-failure-keeps-lock.yaml",
        steps=(S(0, "Scheduled", N1, (E1,)), S(2, "Unschedulable", on={M: (E1,)})),
        devices=(D(E1, "Locked", X, ("default/pod-a-nic",)),),
        metrics={LOCKED: 1},
    ),
    Case(
        "lock-cleared-on-delete.yaml",
        steps=(
            S(4, "Unschedulable", on={M: (E1,)}),
            S(7, "Scheduled", N1, (E1,)),
        ),
        devices=(D(E1, "Locked", Y, ("default/pod-c-nic",)),),
        metrics={LOCKED: 1, REUSE: 1},
    ),
    Case(
        "capacity-interaction.yaml",
        steps=(
            S(16, "Unschedulable", codes=("InsufficientCapacity",), absent=(M, NK)),
            S(18, "Scheduled", N1, (E1,)),
        ),
        devices=(D(E1, "Locked", X),),
        metrics={LOCKED: 1, REUSE: 16, CONFLICT: 0},
        extra=_all(_first_alloc(0), _capacity_claims),
    ),
    Case(
        "restart-reconstruction.yaml",
        steps=(S(6, "Scheduled", N1, (E2,)), S(7, "Unschedulable", on={M: (E1, E2)})),
        devices=(
            D(E1, "Locked", X, ("default/pod-a-nic", "default/pod-c-nic")),
            D(E2, "Locked", Y, ("default/pod-b-nic", "default/pod-d-nic")),
        ),
        metrics={LOCKED: 2, UNRECON: 0},
    ),
    Case(
        "restart-inconsistent-claims.yaml",
        steps=(
            S(3, "Scheduled", N1, (E2,)),
            S(6, "Unschedulable", on={UR: (E1,), M: (E2,)}),
            S(9, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(E1, "Locked", Y, ("default/pod-e-nic",)),
            D(E2, "Locked", X, ("default/pod-c-nic", "default/pod-d-nic")),
        ),
        metrics={LOCKED: 2, UNRECON: 0},
    ),
    Case(
        "slice-mutation-restart.yaml",
        steps=(S(2, "Applied"), S(5, "Scheduled", N1, (E2,)), S(9, "Scheduled", N1, (E1,))),
        devices=(
            D(E1, "Locked", {"subnet": "subnet-X", "pkey": "0x8001"}, ("default/pod-c-nic",)),
            D(E2, "Locked", {"subnet": "subnet-X", "pkey": "0x8001"}, ("default/pod-b-nic",)),
        ),
        metrics={LOCKED: 2, UNRECON: 0},
    ),
    Case(
        "slice-mutation-rename.yaml",
        steps=(S(2, "Applied"), S(4, "Scheduled", N1, (E2,))),
        devices=(
            D(E1, "Unreconstructable", {}, ("default/pod-a-nic",)),
            D(E2, "Locked", {"network": "subnet-X"}, ("default/pod-b-nic",)),
        ),
        metrics={LOCKED: 1, UNRECON: 1},
    ),
    Case(
        "republish-generation-bump.yaml",
        steps=(
            S(2, "Applied"),
            S(4, "Unschedulable", codes=("AffinityPoolIncomplete",), absent=(M,)),
            S(5, "Applied"),
            S(7, "Scheduled", N1, (E2,)),
        ),
        devices=(
            D(E1, "Clean", {}, ()),
            D(E2, "Locked", {"network": "subnet-X"}, ("default/pod-b-nic",)),
        ),
        metrics={LOCKED: 1, UNRECON: 0},
    ),
    Case(
        "gate-scheduler-off.yaml",
        steps=(
            S(0, "Unschedulable", codes=("AffinityFeatureDisabled",), absent=(M, NK, CE)),
            S(1, "Scheduled", N2, (dev("eth1", N2),)),
            S(2, "Scheduled", N2, (dev("eth1", N2),)),
        ),
        devices=(
            D(E1, "Clean", {}, ()),
            D(
                dev("eth1", N2),
                not_status="Locked",
                lock={},
                claims=("default/pod-b-nic", "default/pod-c-nic"),
            ),
        ),
        metrics={EVALS: 0, LOCKED: 0, CONFLICT: 0, NOKEYS: 0},
        extra=_feature_disabled_on_node_1,
    ),
    Case(
        "gate-toggled-on.yaml",
        steps=(
            S(0, "Scheduled", N1, (E1,)),
            S(3, "Applied", warnings=False),
            S(4, "Applied"),
            S(8, "Scheduled", N1, (E3,)),
            S(9, "Scheduled", N1, (E2,)),
            S(15, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(E1, "Locked", {"subnet": "subnet-W"}, ("default/pod-f-nic",)),
            D(E2, "Locked", X, ("default/pod-c-nic", "default/pod-e-nic")),
            D(E3, "Locked", Y, ("default/pod-d-nic",)),
        ),
        metrics={LOCKED: 3, UNRECON: 0},
    ),
    Case(
        "malformed-config-no-gvk.yaml",
        steps=(
            S(0, "Unschedulable", on={NK: (E1,)}, absent=(CE,)),
            S(1, "Unschedulable", on={NK: (E1,)}, absent=(CE,)),
            S(3, "Scheduled", N1, (E1,)),
        ),
        devices=(D(E1, "Locked", X, ("default/pod-ok-nic",)),),
        metrics={NOKEYS: 2},
    ),
    Case(
        "malformed-config-not-object.yaml",
        steps=(S(5, "Scheduled", N1, (E1,)),),
        devices=(D(E1, "Locked", X, ("default/pod-ok-nic",)),),
        extra=_not_object,
    ),
    Case(
        "permissive-sharing.yaml",
        steps=tuple(S(i, "Scheduled", N1, (E1,)) for i in range(4)),
        devices=(
            D(
                E1,
                not_status="Locked",
                lock={},
                claims=(
                    "default/pod-x-nic",
                    "default/pod-y-nic",
                    "default/pod-none-nic",
                    "default/pod-other-nic",
                ),
            ),
        ),
        metrics={EVALS: 0, LOCKED: 0, NOKEYS: 0, CONFLICT: 0, REUSE: 0},
    ),
    Case(
        "partial-key.yaml",
        steps=(
            S(0, "Unschedulable", on={NK: (E1,)}, absent=(CE,)),
            S(1, "Scheduled", N1, (E1,)),
            S(3, "Unschedulable", on={NK: (E1,)}, absent=(M, CE)),
        ),
        devices=(
            D(E1, "Locked", {"subnet": "subnet-X", "pkey": "0x8001"}, ("default/pod-full-nic",)),
        ),
        metrics={NOKEYS: 2},
    ),
    Case(
        "multiple-extractors-all-required.yaml",
        steps=(
            S(0, "Scheduled", N1, (E1,)),
            S(2, "Unschedulable", on={NK: (E1, E2)}, absent=(M, CE)),
            S(3, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(
                E1,
                "Locked",
                {"vendor": "acme", "subnet": "subnet-A"},
                ("default/pod-both-nic", "default/pod-split-nic"),
            ),
            D(E2, "Clean", {}, ()),
        ),
        metrics={NOKEYS: 2, REUSE: 1},
    ),
    Case(
        "duplicate-key-across-slices.yaml",
        steps=(
            S(0, "Unschedulable", codes=("AffinityInvalidPool",), absent=(CE, M)),
            S(1, "Applied"),
            S(2, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(E1, "Locked", {"subnet": "subnet-X", "pkey": "0x8001"}, ("default/pod-a-nic",)),
            D(E2, "Clean"),
        ),
    ),
    Case(
        "admission-validation.yaml",
        steps=(
            S(0, "Rejected"),
            S(1, "Rejected"),
            S(2, "Applied"),
            S(3, "Rejected"),
            S(4, "Rejected"),
            S(5, "Rejected"),
            S(6, "Rejected"),
            S(7, "Rejected"),
            S(8, "Rejected"),
            S(9, "Rejected"),
            S(10, "Applied"),
            S(11, "Scheduled", N1, (E1,)),
        ),
        devices=(D(E1, "Locked", X, ("default/pod-a-nic",)),),
        extra=_all(
            _rejected_mentions(0, 1, 3, 4, 5),
            _rejected_mentions(6, 7, 8, 9, word="expression"),
            _devices_absent(dev("eth1", "node-3"), dev("eth2", "node-3"), dev("eth9")),
        ),
    ),
    Case(
        "multi-request-no-cross-talk.yaml",
        steps=(
            S(
                0,
                "Scheduled",
                N1,
                (dev("mgmt0"), dev("data0")),
                alloc={"mgmt-nic": dev("mgmt0"), "data-nic": dev("data0")},
                claim="default/pod-pair-nics",
            ),
            S(3, "Scheduled", N1, (dev("data0"),)),
            S(4, "Unschedulable", on={M: (dev("mgmt0"),)}),
        ),
        devices=(
            D(dev("mgmt0"), "Locked", {"subnet": "subnet-A"}, ("default/pod-pair-nics",)),
            D(
                dev("data0"),
                "Locked",
                {"subnet": "subnet-B"},
                ("default/pod-pair-nics", "default/pod-data-b-nic"),
            ),
        ),
    ),
    Case(
        "multi-request-same-class.yaml",
        steps=(
            S(
                0,
                "Scheduled",
                N1,
                (E1, E2),
                alloc={"mgmt-nic": E1, "data-nic": E2},
                claim="default/pod-pair-nics",
            ),
        ),
        devices=(
            D(E1, "Locked", {"subnet": "subnet-A"}, ("default/pod-pair-nics",)),
            D(E2, "Locked", {"subnet": "subnet-B"}, ("default/pod-pair-nics",)),
            D(E3, "Clean", {}, ()),
        ),
    ),
    Case(
        "pool-incomplete.yaml",
        steps=(
            S(0, "Unschedulable", codes=("AffinityPoolIncomplete",), absent=(CE,)),
            S(1, "Applied"),
            S(2, "Scheduled", N1, (E1,)),
            S(6, "Unschedulable", codes=("AffinityPoolIncomplete",), absent=(M,)),
        ),
        devices=(D(E1, claims=("default/pod-a-nic",)),),
    ),
    Case(
        "config-scoping.yaml",
        steps=(
            S(0, "Scheduled", N1, (E1,)),
            S(2, "Scheduled", N1, (E1,)),
            S(3, "Scheduled", N1, (E1,), alloc={"nic/fast": E1}),
            S(4, "Scheduled", N1, (E2,)),
        ),
        devices=(
            D(
                E1,
                "Locked",
                {"subnet": "subnet-A"},
                ("default/pod-class-nic", "default/pod-other-driver-nic", "default/pod-sub-nic"),
            ),
            D(E2, "Locked", {"subnet": "subnet-B"}, ("default/pod-whole-nic",)),
        ),
        metrics={REUSE: 2},
    ),
    Case(
        "apiserver-gate-ratchet.yaml",
        steps=(
            S(0, "Scheduled", N1, (E1,)),
            S(3, "Applied"),
            S(4, "Applied", warnings=False),
            S(5, "Scheduled", N1, (E2,)),
            S(6, "Scheduled", N2, (dev("eth1", N2),)),
            S(7, "Scheduled", N2, (dev("eth1", N2),)),
            S(9, "Applied"),
            S(10, "Scheduled", N1, (E1,)),
        ),
        devices=(
            D(E1, not_status="Locked", claims=("default/pod-a-nic", "default/pod-e-nic")),
            D(
                dev("eth1", N2),
                not_status="Locked",
                lock={},
                claims=("default/pod-c-nic", "default/pod-d-nic"),
            ),
        ),
        extra=_dropped_warning(2),
    ),
    Case(
        "node-filters.yaml",
        steps=(
            S(0, "Scheduled", "node-3", (dev("eth0", "node-3"),)),
            S(1, "Scheduled", N2, (dev("eth0", N2),)),
            S(2, "Scheduled", "node-3", (dev("eth0", "node-3"),)),
            S(3, "Unschedulable", codes=("NodeAffinityMismatch", "InsufficientNodeResources"),
              absent=("NodeUnschedulable", "TaintNotTolerated")),
            S(4, "Scheduled", N1, (dev("eth0", N1),)),
        ),
        extra=_node_filter_reasons,
    ),
]



def test_every_scenario_file_has_a_case() -> None:
    files = {p.name for p in SCENARIOS.glob("*.yaml")}
    assert files == {c.file for c in CASES}


@pytest.fixture(scope="module", autouse=True)
def _prefetch(request: pytest.FixtureRequest) -> None:
    """Start the selected scenario runs in parallel; each test then waits for its own."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("case") if callspec else None
        if isinstance(case, Case) and item.module is request.module:
            _submit(case.path)


@pytest.mark.parametrize("case", CASES, ids=[c.file.removesuffix(".yaml") for c in CASES])
def test_scenario(case: Case) -> None:
    run = simulate(case.path)
    assert run.returncode == 0, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    out = run.out
    check_output(out, case.path)
    assert out["expectationsFailed"] == 0, failed_expectations(out)
    assert failed_expectations(out) == []
    for s in case.steps:
        check_step(out, s)
    for d in case.devices:
        check_device(out, d)
    for name, value in case.metrics.items():
        assert out["metrics"][name] == value, f"{name}: {out['metrics']}"
    if case.extra is not None:
        case.extra(out)


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize(
    "file", ["reserve-conflict-concurrent.yaml", "malformed-config-not-object.yaml"]
)
def test_deterministic(file: str) -> None:
    path = SCENARIOS / file
    first = simulate(path)
    second = run_cli(path, env={**os.environ, "PYTHONHASHSEED": "4242"})
    assert first.returncode == second.returncode == 0, second.describe()
    assert first.stdout == second.stdout, "two runs of one file print byte-identical output"


# --------------------------------------------------------------------------- bad input

BASE_OBJECTS = f"""\
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    kubernetes.io/hostname: node-1
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: shared-nic
spec:
  selectors:
  - cel:
      expression: device.driver == "{NET}"
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-meta
spec:
  driver: {NET}
  nodeName: node-1
  pool:
    name: node-1
    generation: 1
    resourceSliceCount: 2
  sharingAffinity:
  - name: subnet
    expression: 'has(object.subnetID) ? object.subnetID : ""'
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-nics
spec:
  driver: {NET}
  nodeName: node-1
  pool:
    name: node-1
    generation: 1
    resourceSliceCount: 2
  devices:
  - name: eth1
    allowMultipleAllocations: true
    capacity:
      {SLOTS}:
        value: "16"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: nic-subnet-x
spec:
  spec:
    devices:
      requests:
      - name: nic
        exactly:
          deviceClassName: shared-nic
          capacity:
            requests:
              {SLOTS}: "1"
      config:
      - requests: [nic]
        opaque:
          driver: {NET}
          parameters:
            apiVersion: {NET}/v1
            kind: NICConfig
            subnetID: subnet-X
---
apiVersion: v1
kind: Pod
metadata:
  name: pod-a
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
  resourceClaims:
  - name: nic
    resourceClaimTemplateName: nic-subnet-x
"""

BASE_SCENARIO = """\
---
apiVersion: simulation.dra-affinity.io/v1alpha1
kind: Scenario
metadata:
  name: base
spec:
  steps:
  - schedule: pod-a
    expect: {result: Scheduled, node: node-1, devices: [networking.example.com/node-1/eth1]}
  - expectDevice: {device: networking.example.com/node-1/eth1, status: Locked, lock: {subnet: subnet-X}}
"""

BASE = BASE_OBJECTS + BASE_SCENARIO

EXTRA_POD_B = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: pod-a
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
  resourceClaims:
  - name: nic
    resourceClaimTemplateName: nic-subnet-x
"""

REJECTED_SLICE = f"""\
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-both
spec:
  driver: {NET}
  nodeName: node-1
  pool:
    name: node-1-both
    generation: 1
    resourceSliceCount: 1
  sharingAffinity:
  - name: subnet
    expression: 'has(object.subnetID) ? object.subnetID : ""'
  devices:
  - name: eth9
    allowMultipleAllocations: true
    capacity:
      {SLOTS}:
        value: "16"
"""

BAD_INPUTS: dict[str, tuple[str, str | None]] = {
    # name: (file text, word the error message must name)
    "unknown-step-key": (
        BASE.replace("  - schedule: pod-a\n", "  - schedule: pod-a\n    retries: 3\n"),
        "retries",
    ),
    "unknown-expect-key": (BASE.replace("{result: Scheduled,", "{reslt: Scheduled,"), "reslt"),
    "unknown-slice-field": (
        BASE.replace("  sharingAffinity:\n", "  sharingAfinity:\n"),
        "sharingAfinity",
    ),
    "wrong-type": (
        BASE.replace(
            "          deviceClassName: shared-nic\n",
            '          deviceClassName: shared-nic\n          count: "two"\n',
        ),
        "count",
    ),
    "malformed-yaml": (
        BASE.replace("metadata:\n  name: pod-a\n", "metadata: {name: pod-a\n"),
        None,
    ),
    "missing-pod": (BASE.replace("  - schedule: pod-a\n", "  - schedule: pod-zzz\n"), "pod-zzz"),
    "two-scenarios": (BASE + BASE_SCENARIO.replace("name: base", "name: base-2"), "Scenario"),
    "no-scenario": (BASE_OBJECTS, "Scenario"),
    "duplicate-names": (BASE_OBJECTS + EXTRA_POD_B + BASE_SCENARIO, "pod-a"),
    "unknown-kind": (
        BASE_OBJECTS
        + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec: {}\n"
        + BASE_SCENARIO,
        "Deployment",
    ),
    "rejected-object": (BASE_OBJECTS + REJECTED_SLICE + BASE_SCENARIO, "sharingAffinity"),
}


def test_base_input_is_valid(tmp_path: Path) -> None:
    """The bad inputs below are each one edit away from this valid file."""
    path = tmp_path / "base.yaml"
    path.write_text(BASE)
    run = run_cli(path)
    assert run.returncode == 0, run.describe()
    out = run.out
    check_output(out, path)
    assert out["expectationsFailed"] == 0


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input(tmp_path: Path, name: str) -> None:
    text, word = BAD_INPUTS[name]
    assert text != BASE
    path = tmp_path / f"bad-{name}.yaml"
    path.write_text(text)
    run = run_cli(path)
    assert run.returncode == 2, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    assert path.name in run.stderr, f"stderr names the file: {run.stderr!r}"
    if word is not None:
        assert word in run.stderr, f"stderr names {word!r}: {run.stderr!r}"


def test_failed_expectations_exit_1(tmp_path: Path) -> None:
    text = BASE.replace(
        "expect: {result: Scheduled, node: node-1,", "expect: {result: Scheduled, node: node-2,"
    )
    text = text.replace("lock: {subnet: subnet-X}", "lock: {subnet: subnet-Q}")
    path = tmp_path / "failing.yaml"
    path.write_text(text)
    run = run_cli(path)
    assert run.returncode == 1, run.describe()
    out = run.out
    check_output(out, path)
    assert out["expectationsFailed"] >= 2, out
    step = entry(out, 0)
    assert step["result"] == "Scheduled" and step["node"] == "node-1", "the run itself is unchanged"
    assert any(not e["ok"] for e in step["expectations"]), step


# --------------------------------------------------------------------------- expression length

MAX_LEN = 10 * 1024


def _expression(length: int) -> str:
    head = 'has(object.subnetID) && object.subnetID != "'
    tail = '" ? object.subnetID : ""'
    expr = head + "z" * (length - len(head) - len(tail)) + tail
    assert len(expr) == length
    return expr


def _meta(name: str, node: str, count: int, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": NET,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
            "sharingAffinity": [{"name": "subnet", "expression": expression}],
        },
    }


def test_expression_length_limit(tmp_path: Path) -> None:
    scenario = {
        "apiVersion": "simulation.dra-affinity.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "expression-length"},
        "spec": {
            "steps": [
                {"apply": _meta("node-1-meta", "node-1", 2, _expression(MAX_LEN + 1))},
                {"apply": _meta("node-2-meta", "node-2", 1, _expression(MAX_LEN + 1))},
                {"apply": _meta("node-1-meta", "node-1", 2, _expression(MAX_LEN))},
                {"schedule": "pod-a", "expect": {"result": "Scheduled", "devices": [dev("eth1")]}},
                {
                    "expectDevice": {
                        "device": dev("eth1"),
                        "status": "Locked",
                        "lock": {"subnet": "subnet-X"},
                    }
                },
            ]
        },
    }
    path = tmp_path / "expression-length.yaml"
    path.write_text(
        BASE_OBJECTS + "---\n" + yaml.safe_dump(scenario, sort_keys=False, width=MAX_LEN * 2)
    )
    run = run_cli(path)
    assert run.returncode == 0, run.describe()
    out = run.out
    check_output(out, path)
    assert out["expectationsFailed"] == 0, failed_expectations(out)
    for i in (0, 1):
        step = entry(out, i)
        assert step["result"] == "Rejected", step
        assert "expression" in json.dumps(step["errors"]), step["errors"]
    assert entry(out, 2)["result"] == "Applied"
    assert entry(out, 3)["result"] == "Scheduled"
