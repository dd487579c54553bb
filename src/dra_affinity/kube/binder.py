"""Binding cycles off the scheduling thread, at most a fixed number in flight.

kube-scheduler runs each pod's binding cycle (PreBind, Bind) in a goroutine of its
own once Reserve has assumed the pod, and schedules the next pod at once against
the assumed state. Here a fixed pool of worker threads does that: :meth:`Binder.submit`
hands a binding to a free worker and blocks while ``limit`` bindings are in flight,
so a slow API server holds the scheduling loop back instead of piling up pods that
count on their nodes but are not bound (``--max-in-flight-bindings``).

With ``limit`` 0, or before :meth:`Binder.start` (tests that drive the loop by
hand), :meth:`Binder.submit` runs the binding on the caller's thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from dra_affinity.observe.profiles import ThreadProfiles

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "Binder"]

log = logging.getLogger("dra_affinity.kube.binder")

#: Bindings in flight at most (see docs/decisions.md for the choice).
DEFAULT_MAX_IN_FLIGHT = 16

T = TypeVar("T")


class Binder(Generic[T]):
    """A bounded pool of binding workers; ``run`` is called once per submitted item."""

    def __init__(self, limit: int, run: Callable[[T], None], *, name: str = "binding",
                 profiles: ThreadProfiles | None = None) -> None:
        if limit < 0:
            raise ValueError(f"bindings in flight: need >= 0, got {limit}")
        self.limit = limit
        self.name = name
        self._run = run
        self._profiles = profiles  # each worker's CPU profile (--profile-dir), or None
        self._slots = threading.BoundedSemaphore(max(limit, 1))
        self._work: queue.SimpleQueue[T | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._count_lock = threading.Lock()
        self._in_flight = 0

    @property
    def running(self) -> bool:
        return bool(self._threads)

    def in_flight(self) -> int:
        """Bindings submitted and not finished."""
        with self._count_lock:
            return self._in_flight

    def start(self) -> None:
        """Start the workers (none with ``limit`` 0: bindings run on the caller's thread)."""
        if self._threads or not self.limit:
            return
        for i in range(self.limit):
            target = self._profiles.thread(self._worker) if self._profiles else self._worker
            t = threading.Thread(target=target, name=f"{self.name}-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def submit(self, item: T) -> None:
        """Run ``item``'s binding on a worker; block while ``limit`` are in flight."""
        if not self._threads:
            self._run(item)
            return
        self._slots.acquire()
        with self._count_lock:
            self._in_flight += 1
        self._work.put(item)

    def stop(self, timeout: float) -> bool:
        """Let the bindings in flight finish (each has its own request timeouts), then stop
        the workers. Returns False if some worker is still busy after ``timeout``."""
        threads, self._threads = self._threads, []
        for _ in threads:
            self._work.put(None)
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)

    def _worker(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            try:
                self._run(item)
            except Exception:  # a bug in one binding must not take its worker down
                log.exception("binding cycle failed")
            finally:
                with self._count_lock:
                    self._in_flight -= 1
                self._slots.release()
                if self._profiles is not None:
                    self._profiles.tick()
