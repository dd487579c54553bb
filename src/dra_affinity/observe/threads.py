"""CPU seconds per thread of this process, as a Prometheus collector.

A long-running scheduler splits its work over threads (informers, the scheduling
loop, binding workers, the event sink): which one is busy says where to look when
a scheduler keeps up badly. Python's thread names are not the kernel's, so the
collector joins the two: every live :class:`threading.Thread` by its
``native_id``, its CPU from ``/proc/self/task/<tid>/stat`` (user + system). Where
there is no ``/proc`` (not Linux) it yields nothing.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

__all__ = ["ThreadCpuCollector", "thread_cpu_seconds"]

THREAD_CPU = "dra_affinity_thread_cpu_seconds"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Threads nobody named ("Thread-7 (process_request_thread)", one per HTTP request): one
# label for all of them, or every scrape would add a series.
_UNNAMED = re.compile(r"Thread-\d+( \(.*\))?")


def _task_cpu(tid: int) -> float | None:
    try:
        with open(f"/proc/self/task/{tid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3, utime 14 and stime 15 (1-based, man proc).
    return (int(fields[11]) + int(fields[12])) / _TICK


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds by thread name (threads sharing a name are summed; unnamed threads
    count as ``unnamed``)."""
    out: dict[str, float] = {}
    for t in threading.enumerate():
        tid = t.native_id
        if tid is None:
            continue
        cpu = _task_cpu(tid)
        if cpu is not None:
            name = "unnamed" if _UNNAMED.fullmatch(t.name) else t.name
            out[name] = out.get(name, 0.0) + cpu
    return out


class ThreadCpuCollector(Collector):
    """``dra_affinity_thread_cpu_seconds_total{thread}`` read at each scrape."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(THREAD_CPU, "CPU seconds (user + system) used by each "
                                     "live thread of the process, by thread name.",
                                     labels=["thread"])
        for name, seconds in sorted(thread_cpu_seconds().items()):
            family.add_metric([name], seconds)
        yield family
