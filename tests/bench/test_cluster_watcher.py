"""The throughput harness's pod watcher: it cannot miss a binding, and cannot die unseen."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dra_affinity.kube.api import ApiError

ROOT = Path(__file__).resolve().parents[2]


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_throughput",
                                                  ROOT / "benchmarks" / "cluster_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cluster_throughput", module)
    spec.loader.exec_module(module)
    return module


def _pod(name: str, node: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": {"nodeName": node}}


class _Api:
    """Lists and watches scripted in order; records what was asked."""

    def __init__(self, lists: list[list[dict[str, Any]]], watches: list[Any]) -> None:
        self.lists, self.watches = lists, watches
        self.listed = 0

    def request(self, method: str, path: str, query: Mapping[str, str] | None = None) -> dict[str, Any]:
        items = self.lists[min(self.listed, len(self.lists) - 1)]
        self.listed += 1
        return {"metadata": {"resourceVersion": str(self.listed)}, "items": items}

    def watch(self, path: str, query: Mapping[str, str], timeout: float) -> Iterator[dict[str, Any]]:
        if not self.watches:
            time.sleep(0.05)
            return iter(())
        step = self.watches.pop(0)
        if isinstance(step, BaseException):
            raise step
        return iter(step)


def _wait(pred: Any) -> None:
    deadline = time.monotonic() + 10
    while not pred():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_pod_bound_while_the_watch_was_gone_is_found_by_the_next_list() -> None:
    harness = _harness()
    api = _Api(lists=[[_pod("a")], [_pod("a", "n1"), _pod("b", "n2")]],
               watches=[[{"type": "ERROR", "object": {"code": 410}}],
                        [{"type": "MODIFIED", "object": _pod("c", "n3")}]])
    watcher = harness._Watcher(api, "bench")
    try:
        _wait(lambda: {"a", "b", "c"} <= set(watcher.bound))
        assert api.listed >= 2
        watcher.check()
    finally:
        watcher.stop.set()


def test_a_410_or_a_dropped_stream_lists_again() -> None:
    harness = _harness()
    api = _Api(lists=[[], [_pod("x", "n1")], [_pod("x", "n1"), _pod("y", "n1")]],
               watches=[ApiError(410, "Gone", "too old", {}), ApiError(0, "ProtocolError", "reset", {})])
    watcher = harness._Watcher(api, "bench")
    try:
        _wait(lambda: {"x", "y"} <= set(watcher.bound))
        assert api.listed >= 3
    finally:
        watcher.stop.set()


def test_a_watcher_that_died_is_reported_with_its_cause() -> None:
    harness = _harness()
    api = _Api(lists=[[]], watches=[KeyError("metadata")])
    watcher = harness._Watcher(api, "bench")
    watcher.thread.join(5)
    with pytest.raises(RuntimeError, match="pod watcher stopped: KeyError"):
        watcher.check()


def test_the_wait_stops_with_the_log_tail_when_the_scheduler_exited(tmp_path: Path) -> None:
    import subprocess
    from types import SimpleNamespace

    harness = _harness()
    (tmp_path / "sched.log").write_text("starting\nleader election lost\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    run = SimpleNamespace(sched=SimpleNamespace(proc=proc), tmp=tmp_path)
    watcher = harness._Watcher(_Api(lists=[[]], watches=[]), "bench")
    try:
        with pytest.raises(RuntimeError, match=r"exited with 3(.|\n)*leader election lost"):
            harness._Run.check_alive(run, watcher)
        run.sched = None  # the stock variant: nothing of ours to watch
        harness._Run.check_alive(run, watcher)
    finally:
        watcher.stop.set()
