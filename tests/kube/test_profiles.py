"""Thread CPU profiles (``--profile-dir``): each thread's own CPU time, one file per
thread, written at the end and on ticks; what waits counts nothing; the summary
groups numbered workers."""

from __future__ import annotations

import pstats
import threading
import time
from pathlib import Path

from dra_affinity.observe.profiles import ThreadProfiles, summary


def busy(seconds: float) -> int:
    """Spend ``seconds`` of this thread's CPU."""
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def idle(seconds: float) -> None:
    threading.Event().wait(seconds)


def _run(name: str, target: object) -> None:
    t = threading.Thread(target=target, name=name)  # type: ignore[arg-type]
    t.start()
    t.join(30)


def _seconds(path: Path, function: str) -> tuple[float, float]:
    """(own, inclusive) seconds of ``function`` in a pstats file."""
    table = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    own = sum(v[2] for k, v in table.items() if k[2] == function)
    inclusive = sum(v[3] for k, v in table.items() if k[2] == function)
    return own, inclusive


def test_a_thread_is_profiled_on_its_own_cpu_time(tmp_path: Path) -> None:
    profiles = ThreadProfiles(tmp_path)

    def work() -> None:
        busy(0.15)
        idle(0.4)  # waiting: no CPU of this thread

    _run("worker", profiles.thread(work))
    path = tmp_path / "worker.prof"
    assert path.exists()
    _, spent = _seconds(path, "busy")
    _, waited = _seconds(path, "idle")
    assert spent >= 0.1
    assert waited < spent / 4


def test_workers_waiting_between_items_count_only_the_items(tmp_path: Path) -> None:
    profiles = ThreadProfiles(tmp_path, every=0.0)

    def worker() -> None:
        for _ in range(3):
            busy(0.03)
            profiles.tick()
            idle(0.1)

    _run("binding-0", profiles.thread(worker))
    _run("binding-1", profiles.thread(worker))
    groups = summary(tmp_path)
    assert set(groups) == {"binding"} and groups["binding"]["threads"] == 2
    assert 0.15 <= groups["binding"]["cpuSeconds"] < 0.6
    assert any("(busy)" in f for f in groups["binding"]["inclusive"])


def test_ticks_write_the_profile_as_the_thread_goes(tmp_path: Path) -> None:
    profiles = ThreadProfiles(tmp_path, every=0.0)
    seen: list[bool] = []

    def loop() -> None:
        busy(0.02)
        profiles.tick()
        seen.append((tmp_path / "loop.prof").exists())  # written before the thread ends

    _run("loop", profiles.thread(loop))
    assert seen == [True]


def test_a_tick_outside_a_profiled_thread_does_nothing(tmp_path: Path) -> None:
    profiles = ThreadProfiles(tmp_path, every=0.0)
    profiles.tick()
    assert not list(tmp_path.iterdir())


def test_thread_names_become_safe_file_names(tmp_path: Path) -> None:
    profiles = ThreadProfiles(tmp_path)
    _run("a/b c", profiles.thread(lambda: None))
    assert [p.name for p in tmp_path.iterdir()] == ["a_b_c.prof"]


def test_summary_of_an_empty_folder_is_empty(tmp_path: Path) -> None:
    assert summary(tmp_path) == {}
