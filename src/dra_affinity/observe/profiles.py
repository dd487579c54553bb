"""CPU profiles of a process's own threads (``dra-affinity scheduler --profile-dir``).

Where a long-running scheduler spends its CPU is split over threads that mostly
wait (on sockets, locks, a queue, the GIL). A sampling profiler must tell waiting
from working, and one that stops the process at each sample changes how the
threads hand the GIL over. Here each thread that is profiled keeps a deterministic
profile (``cProfile``) clocked by its own CPU time (``time.thread_time``): a thread
that waits adds nothing, whatever it waits on. The cost is cProfile's (every call
is counted, so profiled code runs slower); it is off unless asked for.

A thread's profile is written as ``<thread name>.prof`` (:mod:`pstats` format) when
the wrapped function returns, and every :attr:`ThreadProfiles.every` seconds at the
points the thread passes :meth:`ThreadProfiles.tick` (a thread killed with the
process leaves its last one). :func:`summary` reads a folder of them back.
"""

from __future__ import annotations

import cProfile
import pstats
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ThreadProfiles", "summary"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class ThreadProfiles:
    """Profiles of the threads that run through :meth:`thread`, one file per thread
    name in ``folder``."""

    def __init__(self, folder: str | Path, every: float = 10.0) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.every = every
        self._local = threading.local()

    def _profile(self) -> cProfile.Profile:
        prof: cProfile.Profile | None = getattr(self._local, "prof", None)
        if prof is None:
            prof = self._local.prof = cProfile.Profile(time.thread_time)
            self._local.written = time.monotonic()
        return prof

    def _write(self, prof: cProfile.Profile) -> None:
        name = _UNSAFE.sub("_", threading.current_thread().name)
        prof.dump_stats(self.folder / f"{name}.prof")
        self._local.written = time.monotonic()

    def thread(self, target: Callable[[], None]) -> Callable[[], None]:
        """``target`` profiled whole in the thread that runs it (waits cost no CPU of
        the thread, so they add nothing); it should call :meth:`tick` at safe points of
        its loop."""

        def run() -> None:
            prof = self._profile()
            prof.enable()
            try:
                target()
            finally:
                prof.disable()
                self._write(prof)

        return run

    def tick(self) -> None:
        """In a thread run by :meth:`thread`: write its profile when :attr:`every`
        seconds have passed since the last time (elsewhere: nothing)."""
        prof: cProfile.Profile | None = getattr(self._local, "prof", None)
        if prof is None or time.monotonic() - self._local.written < self.every:
            return
        prof.disable()
        self._write(prof)
        prof.enable()


def _group(stem: str) -> str:
    """Threads of one pool under one name: ``binding-3`` -> ``binding``."""
    return re.sub(r"-\d+$", "", stem)


def summary(folder: str | Path, top: int = 12) -> dict[str, Any]:
    """Per group of threads (numbered workers together): profiled CPU seconds, and the
    functions with the most CPU of their own and in all they call, as shares of the
    group's seconds. Functions are named ``file:line(name)`` relative to the package."""
    groups: dict[str, list[Path]] = {}
    for path in sorted(Path(folder).glob("*.prof")):
        groups.setdefault(_group(path.stem), []).append(path)
    out: dict[str, Any] = {}
    for group, paths in groups.items():
        stats = pstats.Stats(*(str(p) for p in paths))
        table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
        total = float(stats.total_tt)  # type: ignore[attr-defined]
        if total <= 0:
            continue

        def label(func: tuple[str, int, str]) -> str:
            file, line, name = func
            file = file.split("site-packages/")[-1].split("dra_affinity/")[-1]
            return f"{file}:{line}({name})"

        own = sorted(table.items(), key=lambda kv: -kv[1][2])[:top]
        inclusive = sorted(table.items(), key=lambda kv: -kv[1][3])[:top]
        out[group] = {
            "threads": len(paths),
            "cpuSeconds": round(total, 3),
            "self": {label(f): round(v[2] / total, 3) for f, v in own},
            "inclusive": {label(f): round(min(v[3] / total, 1.0), 3) for f, v in inclusive},
        }
    return out
