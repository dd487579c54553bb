"""The measurement scripts under benchmarks/ keep running (tiny workloads)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ._run import run_json

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, *args: str) -> dict[str, object]:
    return run_json([sys.executable, str(ROOT / "benchmarks" / name), *args])


def test_interleaved_and_its_knock_out() -> None:
    normal = script("interleaved.py", "--nodes", "10", "--pods", "60")
    knocked = script("interleaved.py", "--nodes", "10", "--pods", "60", "--precomputed-extraction")
    assert normal["attempts"] == knocked["attempts"] == 60
    for out in (normal, knocked):
        assert isinstance(out["withAffinityPodsPerSecond"], float) and out["withAffinityPodsPerSecond"] > 0
        assert isinstance(out["overheadRatio"], float) and out["overheadRatio"] > 0
    assert knocked["precomputedExtraction"] is True and normal["precomputedExtraction"] is False
    assert normal["gc"] is True
    assert normal["warmConfig"] is False and normal["warmedConfigValues"] == 0


def test_interleaved_warms_every_claims_config_in_both_variants() -> None:
    out = script("interleaved.py", "--nodes", "10", "--pods", "30", "--warm-config",
                 "--precomputed-extraction")
    assert out["warmConfig"] is True and out["attempts"] == 30
    # Both variants' claims carry one config of five parameters (the bench workload):
    # every one read, for every attempt of both.
    assert out["warmedConfigValues"] == 2 * 30 * 5


def test_interleaved_without_gc() -> None:
    out = script("interleaved.py", "--nodes", "10", "--pods", "40", "--no-gc")
    assert out["gc"] is False and out["attempts"] == 40 and out["withoutAffinityPodsPerSecond"] > 0


def test_attr_reads_reports_each_kind_of_object() -> None:
    from dra_affinity.api._getattr import plain_reads_possible

    out = script("attr_reads.py", "--reads", "20000")
    assert out["plainReadsPossible"] is plain_reads_possible()
    assert out["apiModelHasPlainReads"] is plain_reads_possible()
    per = out["nsPerRead"]
    assert isinstance(per, dict) and set(per) == {"apiModel", "pydanticModelWithFallback", "plainObject"}
    assert all(isinstance(v, float) and v > 0 for v in per.values())


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


def _load_script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), ROOT / "benchmarks" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ANNOTATE = """\
--------------------------------------------------------------------------------
Ir                     I1mr                 D1mr                 D1mw                ILmr             DLmr               DLmw
--------------------------------------------------------------------------------
8,234,068,978 (100.0%) 158,626,941 (100.0%) 108,966,323 (100.0%) 33,035,920 (100.0%) 369,190 (100.0%) 3,314,122 (100.0%) 1,251,047 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                      I1mr                 D1mr                 D1mw                ILmr             DLmr               DLmw                file:function
--------------------------------------------------------------------------------
   147,441,074 ( 1.72%)         691 ( 0.00%)   5,329,240 ( 4.40%)     57,250 ( 0.16%)     691 ( 0.21%)  4,310,942 (67.10%)    42,027 ( 2.83%)  /tmp/b/Python-3.11.7/Modules/gcmodule.c:gc_collect_main [/lib/libpython3.11.so]
         1,186 ( 0.00%)           2 ( 0.00%)          11 ( 0.00%)          0                2 ( 0.00%)         10 ( 0.00%)         .           /tmp/b/Python-3.11.7/./Include/object.h:gc_collect_main [/lib/libpython3.11.so]
   217,413,791 ( 2.54%)     377,484 ( 0.23%)   5,329,525 ( 4.40%)    166,449 ( 0.48%)     733 ( 0.22%)  4,311,062 (67.10%)    47,820 ( 3.22%)  /tmp/b/Python-3.11.7/Modules/gcmodule.c:_PyObject_GC_Link [/lib/libpython3.11.so]
"""


def test_callgrind_split_reads_totals_and_the_collectors_inclusive_cost() -> None:
    cs = _load_script("callgrind_split.py")
    totals, gc = cs._parse_annotate(ANNOTATE)
    assert totals == {"Ir": 8_234_068_978, "I1mr": 158_626_941, "D1mr": 108_966_323,
                      "D1mw": 33_035_920, "ILmr": 369_190, "DLmr": 3_314_122, "DLmw": 1_251_047}
    # Both rows of gc_collect_main (its file, and code inlined from a header) and no other.
    assert gc == {"Ir": 147_442_260, "I1mr": 693, "D1mr": 5_329_251, "D1mw": 57_250,
                  "ILmr": 693, "DLmr": 4_310_952, "DLmw": 42_027}
    assert cs.cycle_estimate(gc) == 147_442_260 + 10 * (693 + 5_329_251 + 57_250) \
        + 100 * (693 + 4_310_952 + 42_027)
    with pytest.raises(SystemExit, match="no totals"):
        cs._parse_annotate(ANNOTATE.split("PROGRAM TOTALS")[1])


def test_callgrind_split_simulates_the_caches_the_machine_describes(tmp_path: Path) -> None:
    # Read from sysfs as Linux lays it out; a cache it does not describe (here the L1
    # instruction cache, and a level-3 cache that is not simulated) keeps the default.
    cs = _load_script("callgrind_split.py")

    def index(n: int, level: str, kind: str, size: str, ways: str) -> None:
        d = tmp_path / f"index{n}"
        d.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size),
                            ("ways_of_associativity", ways), ("coherency_line_size", "64")):
            (d / name).write_text(value + "\n")

    index(0, "1", "Data", "48K", "12")
    index(2, "2", "Unified", "2048K", "16")
    index(3, "3", "Unified", "32768K", "16")
    assert cs.machine_caches(str(tmp_path)) == {
        "I1": cs.CACHES["I1"], "D1": (48 * 1024, 12, 64), "LL": (2048 * 1024, 16, 64)}
    (tmp_path / "index2" / "ways_of_associativity").write_text("many\n")  # unreadable: default
    assert cs.machine_caches(str(tmp_path))["LL"] == cs.CACHES["LL"]
    assert cs.machine_caches(str(tmp_path / "absent")) == cs.CACHES


@pytest.mark.parametrize("values", [None, 1])
def test_callgrind_split_fills_with_the_values_asked_for(
        values: int | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The child runs the bench's fill; --values changes only the workload's subnets.
    cs = _load_script("callgrind_split.py")
    import dra_affinity.sim.workload as workload

    seen: list[Any] = []
    real = workload.stream

    def stream(spec: Any) -> Any:
        seen.append(spec)
        return real(spec)

    monkeypatch.setattr(workload, "stream", stream)
    cs._child("decisions", 3, 12, True, values)
    assert capsys.readouterr().out.split()[-1] == "12"
    assert [(s.nodes, s.values, s.affinity) for s in seen] == [(3, values or cs.WORKLOAD_VALUES, True)]
    assert cs.WORKLOAD_VALUES == 64


def test_callgrind_split_refuses_values_below_one() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "callgrind_split.py"),
                          "--values", "0"], capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "--values must be at least 1" in out.stderr


def test_callgrind_split_turns_instrumentation_on_once_before_the_first_collected_call(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Valgrind starts with instrumentation off; the imports and the set-up before the
    # part's first collected call run uninstrumented, and the hook runs exactly once.
    cs = _load_script("callgrind_split.py")
    import functools

    events: list[str] = []
    real_reduce = functools.reduce

    def reduce(*args: Any) -> Any:
        events.append("collect")
        return real_reduce(*args)

    monkeypatch.setattr(functools, "reduce", reduce)
    cs._child("decisions", 3, 5, True, None, lambda: events.append("on"))
    assert capsys.readouterr().out.split()[-1] == "5"
    assert events == ["on"] + ["collect"] * 5
    events.clear()
    cs._child("setup", 3, 5, True, None, lambda: events.append("on"))
    assert events == ["on", "collect"]


def _control(tmp_path: Path, says: str, code: int = 0) -> str:
    path = tmp_path / "control"
    path.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'args'}\necho '{says}'\nexit {code}\n")
    path.chmod(0o755)
    return str(path)


def test_callgrind_split_asks_for_instrumentation_on_this_process(tmp_path: Path) -> None:
    import os

    cs = _load_script("callgrind_split.py")
    cs.instrument_from_here(_control(tmp_path, "  OK."))
    assert (tmp_path / "args").read_text().split() == ["--instr=on", str(os.getpid())]


@pytest.mark.parametrize(("says", "code"), [
    ("Error: Callgrind task with PID/name 1 not detected.", 0),  # exits 0 all the same
    ("  OK.", 3),
])
def test_callgrind_split_stops_when_instrumentation_did_not_turn_on(
        tmp_path: Path, says: str, code: int) -> None:
    cs = _load_script("callgrind_split.py")
    with pytest.raises(SystemExit, match="could not turn the instrumentation on") as e:
        cs.instrument_from_here(_control(tmp_path, says, code))
    assert says.strip() in str(e.value)


def test_callgrind_split_gives_up_on_a_control_that_never_answers(tmp_path: Path) -> None:
    cs = _load_script("callgrind_split.py")
    path = tmp_path / "control"
    path.write_text("#!/bin/sh\nexec sleep 30\n")
    path.chmod(0o755)
    with pytest.raises(SystemExit, match=r"did not answer in 0\.5 s"):
        cs.instrument_from_here(str(path), timeout=0.5)
