"""Packing benchmark: the lower bound, the recorded stream, lock invariants on the final
scheduler state, the JSON interface the CLI and scripts read, and the plots.

One tiny workload (10 nodes x 4 devices x 4 slots, 8 values, 300 arrivals) keeps the
whole file to a few seconds; it is evaluated once per module.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dra_affinity.bench.packing import (
    POLICIES,
    PolicyRun,
    best_fit_model,
    clairvoyant_model,
    evaluate,
    events,
    lower_bound_timeline,
    packing_report,
)
from dra_affinity.sim.workload import Arrival, Departure, WorkloadSpec, stream

TINY = WorkloadSpec(nodes=10, devices_per_node=4, slots=4, values=8, zipf=1.1, churn=0.2,
                    fill=0.6, seed=1, max_pods=300)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[dict[str, Any], dict[str, PolicyRun], Path]:
    folder = tmp_path_factory.mktemp("plots")
    out, runs, _off = evaluate(TINY, str(folder), parallel=False, offline_iterations=50)
    return out, runs, folder


# ---------------------------------------------------------------- lower bound and stream
def test_lower_bound_on_a_hand_made_timeline() -> None:
    # Two slots per device: the bound is sum over values of ceil(running / 2) after each event.
    evs = [Arrival("a", 0), Arrival("b", 0), Arrival("c", 1), Arrival("d", 0),
           Departure("a"), Departure("c"), Arrival("e", 2), Departure("b")]
    assert lower_bound_timeline(evs, 2) == [1, 1, 2, 3, 2, 1, 2, 2]
    assert lower_bound_timeline(evs, 4) == [1, 1, 2, 2, 2, 1, 2, 2]
    assert lower_bound_timeline([], 4) == []


def test_ramp_is_the_workload_stream_then_demand_holds_at_the_target() -> None:
    es = events(TINY)
    assert es.steady_from is not None
    gen = stream(TINY)
    ev = next(gen)
    for got in es.events[:es.steady_from]:
        assert got == ev
        ev = gen.send(True) if isinstance(ev, Arrival) else gen.send(None)
    running: set[str] = set()
    for i, e in enumerate(es.events):
        if isinstance(e, Arrival):
            running.add(e.pod)
        else:
            running.remove(e.pod)  # departures only ever name running pods
        if i >= es.steady_from:
            assert len(running) <= es.target
    assert sum(isinstance(e, Arrival) for e in es.events) == es.arrivals == TINY.max_pods
    assert events(TINY) == es  # deterministic in the seed


# ---------------------------------------------------------------- invariants on final state
@pytest.mark.parametrize("policy", POLICIES)
def test_no_device_holds_two_values(evaluated: tuple[dict[str, Any], dict[str, PolicyRun], Path],
                                    policy: str) -> None:
    _, runs, _ = evaluated
    r = runs[policy]
    assert r.shares, "the run should end with allocations"
    for dev, keys in r.shares.items():
        distinct = set(keys)
        assert len(distinct) == 1 and None not in distinct, (dev, distinct)
        assert r.locks[dev] == keys[0], dev  # the lock is the shares' common value
    assert set(r.locks) == set(r.shares)  # no lock without an allocation, and vice versa
    # The lock map agrees: every allocated device shows one value, clean devices hold nothing.
    used = sum(u for row in r.lock_map for _v, u in row)
    assert used == sum(len(k) for k in r.shares.values())
    assert all((v is None) == (u == 0) for row in r.lock_map for v, u in row)


def test_stranded_slots_are_extra_devices_times_slots(
        evaluated: tuple[dict[str, Any], dict[str, PolicyRun], Path]) -> None:
    out, runs, _ = evaluated
    for name, r in runs.items():
        # Per-policy bound at the end, from the pods it holds (one slot each).
        per_value = Counter(v for row in r.lock_map for v, u in row for _ in range(u))
        need = sum(-(-n // TINY.slots) for n in per_value.values())
        assert r.stranded_end == TINY.slots * (r.devices_at_end - need), name
        assert 0 <= r.stranded_end <= r.stranded_peak
        if r.unschedulable == 0:
            assert need == out["lowerBoundAtEnd"]


def test_affinity_packs_no_worse_than_first_fit(
        evaluated: tuple[dict[str, Any], dict[str, PolicyRun], Path]) -> None:
    out, _, _ = evaluated
    p = out["policies"]
    assert p["affinity"]["ratio"] <= p["firstfit"]["ratio"]
    assert p["affinity"]["unschedulable"] <= p["firstfit"]["unschedulable"]
    for name in POLICIES:
        assert p[name]["devicesUsed"] >= out["lowerBound"]  # it is a lower bound


def test_clairvoyant_model_uses_departure_times() -> None:
    # 2 slots per device. After p2 leaves, dev0 holds p1 (leaves soon) and dev1 holds p3
    # (runs to the end). p4 also runs to the end: best-fit breaks the tie by order and
    # pairs it with p1 on dev0, so when p1 leaves both devices stay locked to value 0 and
    # p5 (value 1) needs a third. Knowing departures, p4 joins p3 on dev1, dev0 drains
    # with p1, and p5 takes it: two devices.
    spec = WorkloadSpec(nodes=1, devices_per_node=3, slots=2, values=2)
    evs = [Arrival("p1", 0), Arrival("p2", 0), Arrival("p3", 0), Departure("p2"),
           Arrival("p4", 0), Departure("p1"), Arrival("p5", 1)]
    assert best_fit_model(spec, evs) == (3, 0)
    assert clairvoyant_model(spec, evs) == (2, 0)
    # With one device fewer, best-fit cannot place p5 and the clairvoyant model can.
    small = WorkloadSpec(nodes=1, devices_per_node=2, slots=2, values=2)
    assert best_fit_model(small, evs) == (2, 1)
    assert clairvoyant_model(small, evs) == (2, 0)


def test_clairvoyant_is_reported_and_bounded(
        evaluated: tuple[dict[str, Any], dict[str, PolicyRun], Path]) -> None:
    out, _, _ = evaluated
    cv = out["reference"]["clairvoyantModel"]
    assert cv["devicesUsed"] >= out["lowerBound"]
    assert cv["ratio"] == round(cv["devicesUsed"] / out["lowerBound"], 4)


# ---------------------------------------------------------------- interface
def test_json_interface(evaluated: tuple[dict[str, Any], dict[str, PolicyRun], Path]) -> None:
    out, _, _ = evaluated
    data = json.loads(json.dumps(out))
    assert {"lowerBound", "policies", "workload"} <= set(data)
    assert isinstance(data["lowerBound"], int) and data["lowerBound"] > 0
    assert set(data["policies"]) == {"firstfit", "affinity"}
    for p in data["policies"].values():
        assert {"devicesUsed", "unschedulable", "strandedSlots", "ratio"} <= set(p)
        for k in ("devicesUsed", "unschedulable", "strandedSlots"):
            assert isinstance(p[k], int)
        assert isinstance(p["ratio"], float)
        assert p["ratio"] == round(p["devicesUsed"] / data["lowerBound"], 4)
    w = data["workload"]
    assert (w["nodes"], w["devicesPerNode"], w["slots"], w["values"], w["arrivals"]) == \
        (10, 4, 4, 8, 300)
    t = data["timeline"]
    assert len(t["event"]) == len(t["lowerBound"]) == len(t["firstfit"]) == len(t["affinity"])


def test_seed_argument_overrides_the_spec() -> None:
    small = WorkloadSpec(nodes=3, devices_per_node=2, slots=2, values=3, churn=0.2, fill=0.5,
                         seed=99, max_pods=12)
    out = packing_report(seed=4, spec=small, parallel=False, offline_iterations=10)
    assert out["workload"]["seed"] == 4
    assert "plots" not in out


# ---------------------------------------------------------------- plots
def _chunks(data: bytes) -> list[bytes]:
    """PNG chunk types, in order."""
    out, i = [], len(PNG_MAGIC)
    while i < len(data):
        (length,) = struct.unpack(">I", data[i:i + 4])
        out.append(data[i + 4:i + 8])
        i += 12 + length
    return out


def test_plots_are_written_as_valid_pngs(
        evaluated: tuple[dict[str, Any], dict[str, PolicyRun], Path]) -> None:
    out, _, folder = evaluated
    names = ["devices-in-use.png", "lock-maps.png", "surplus-by-value.png"]
    assert out["plots"] == names
    for name in names:
        data = (folder / name).read_bytes()
        assert len(data) > 10_000, name  # a drawn figure, not an empty canvas
        assert data.startswith(PNG_MAGIC)
        chunks = _chunks(data)
        assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and b"IDAT" in chunks
        # Reproducible bytes: no time stamp, no software/version text.
        assert b"tIME" not in chunks and b"tEXt" not in chunks, name
