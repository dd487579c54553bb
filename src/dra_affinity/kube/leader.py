"""Leader election over a coordination.k8s.io/v1 Lease, with client-go's semantics.

One replica holds the Lease and renews it every ``retry_period``; the others try
to take it every ``retry_period``. The rules that keep two replicas from
writing at once (see docs/decisions.md, "Leader election and fencing"):

* **Expiry is judged on this replica's monotonic clock**, from the moment it
  last *observed a change* of the Lease record (holder, renew time, transitions),
  never from the ``renewTime`` the holder wrote: the two machines' wall clocks
  need not agree, and a paused process's clock keeps running meanwhile. A
  candidate takes the Lease only when the record stayed unchanged for
  ``lease_duration`` by its own clock. A Lease never observed (first read after
  start) counts as just changed.
* **Every Lease request has a timeout below** ``retry_period`` (:attr:`request_timeout`).
* **Fencing.** The holder may write only while ``renew_deadline`` has not passed
  since the *start* of its last successful acquire or renew (:meth:`may_write`);
  the other replicas wait ``lease_duration`` from *after* that write, so a
  replica that stops writing at its deadline has ``lease_duration -
  renew_deadline`` of margin for a write already sent. The scheduler checks
  :meth:`may_write` immediately before each write, not once per loop.
* Every Lease write carries the resourceVersion read, so two candidates never
  both win. A leader past its deadline steps down for good (``lost``: the
  process exits); on a clean shutdown it releases the Lease.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .api import RESOURCES, Api, ApiError

log = logging.getLogger("dra_affinity.kube.leader")

__all__ = ["LeaderElector", "fenced"]


def fenced(may_write: Callable[[], bool] | None, method: str, path: str) -> bool:
    """Whether a write may leave now (``may_write``: the leader's fence; None: always),
    checked immediately before the request. A write let through is logged (debug,
    ``write``) on the monotonic clock the renewals are logged on (``lease renewed``), so
    that an audit can hold every write against the renew deadline it was sent under."""
    if may_write is not None and not may_write():
        return False
    log.debug("write", extra={"fields": {"method": method, "path": path,
                                         "monotonic": time.monotonic()}})
    return True


def _micro(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(lease: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What a change of the Lease is judged by (client-go compares the record)."""
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    return (spec.get("holderIdentity"), spec.get("leaseDurationSeconds"), spec.get("acquireTime"),
            spec.get("renewTime"), spec.get("leaseTransitions"))


class LeaderElector:
    def __init__(self, api: Api, *, namespace: str, name: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0,
                 now: Callable[[], datetime.datetime] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        #: Every Lease request gives up before the next retry is due.
        self.request_timeout = retry_period * 0.75
        # Wall clock: only for the timestamps written into the Lease (informational).
        self.now = now or (lambda: datetime.datetime.now(datetime.UTC))
        self.monotonic = monotonic
        self.is_leader = threading.Event()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0  # monotonic time the record was last seen to change
        # Monotonic start of the last successful acquire/renew; None: not leading.
        self._renewed_at: float | None = None

    @property
    def _path(self) -> str:
        return RESOURCES["Lease"].item(self.name, self.namespace)

    # ------------------------------------------------------------------ the fence
    def may_write(self) -> bool:
        """Whether this replica may write now: it holds the Lease and its renew deadline,
        counted from the start of its last successful renewal, has not passed."""
        renewed = self._renewed_at
        if renewed is None or self.lost.is_set():
            return False
        return self.monotonic() - renewed < self.renew_deadline

    def _observe(self, lease: dict[str, Any] | None, at: float) -> None:
        record = _record(lease)
        if record != self._observed:
            self._observed = record
            self._observed_at = at

    # ------------------------------------------------------------------ one step
    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this identity holds the Lease afterwards (and then
        the renew deadline runs from this attempt's start)."""
        started = self.monotonic()
        now = self.now()
        try:
            lease: dict[str, Any] | None = self.api.request("GET", self._path,
                                                            timeout=self.request_timeout)
        except ApiError as e:
            if not e.not_found:
                log.info("lease %s/%s: %s", self.namespace, self.name, e)
                return False
            lease = None
        self._observe(lease, started)
        spec_new = {"holderIdentity": self.identity,
                    "leaseDurationSeconds": max(1, round(self.lease_duration)),
                    "acquireTime": _micro(now), "renewTime": _micro(now), "leaseTransitions": 0}
        try:
            if lease is None:
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": spec_new}
                stored = self.api.request("POST", RESOURCES["Lease"].collection(self.namespace),
                                          body=body, timeout=self.request_timeout)
            else:
                spec = dict(lease.get("spec") or {})
                holder = spec.get("holderIdentity") or ""
                duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
                expired = started - self._observed_at >= duration
                if holder and holder != self.identity and not expired:
                    return False
                if holder == self.identity:
                    spec["renewTime"] = _micro(now)
                    spec["leaseDurationSeconds"] = spec_new["leaseDurationSeconds"]
                else:
                    spec = {**spec_new,
                            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + 1}
                stored = self.api.request("PUT", self._path, body={**lease, "spec": spec},
                                          timeout=self.request_timeout)
        except ApiError as e:
            if not e.conflict:
                log.info("lease %s/%s: %s", self.namespace, self.name, e)
            return False
        self._observe(stored if isinstance(stored, dict) else None, started)
        self._renewed_at = started
        log.debug("lease renewed", extra={"fields": {
            "monotonic": started, "writesUntil": started + self.renew_deadline}})
        return True

    def release(self) -> None:
        """Give the Lease up (clean shutdown), if this identity still holds it."""
        self._renewed_at = None
        try:
            lease = self.api.request("GET", self._path, timeout=self.request_timeout)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update({"holderIdentity": "", "leaseDurationSeconds": 1,
                         "renewTime": _micro(self.now())})
            self.api.request("PUT", self._path, body={**lease, "spec": spec},
                             timeout=self.request_timeout)
        except ApiError as e:
            log.info("lease %s/%s: release failed: %s", self.namespace, self.name, e)

    # ------------------------------------------------------------------ the loop
    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.retry_period * 2 + 5)

    def step_down(self, why: str) -> None:
        """Leadership is over for this process: no further write leaves it."""
        self._renewed_at = None
        if self.is_leader.is_set() or not self.lost.is_set():
            log.error("leadership lost: %s", why)
        self.is_leader.clear()
        self.lost.set()

    def run(self) -> None:
        while not self._stop.is_set():
            if self.try_acquire_or_renew():
                break
            if self._stop.wait(self.retry_period):
                return
        log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}",
                                          "identity": self.identity})
        self.is_leader.set()
        while not self._stop.wait(self.retry_period):
            if not self.may_write():
                # Includes a process paused past its deadline: it must not renew and go on.
                self.step_down(f"no renewal of the lease within {self.renew_deadline:g}s")
                return
            self.try_acquire_or_renew()
        if self.is_leader.is_set():
            self.release()
