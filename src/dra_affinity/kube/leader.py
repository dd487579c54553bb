"""Leader election over a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

One replica holds the Lease and renews it every ``retry_period``; the others try
to take it every ``retry_period`` and succeed once ``renewTime + leaseDurationSeconds``
has passed. Every write carries the resourceVersion read, so two candidates
never both win. A leader that cannot renew within ``renew_deadline`` steps down
(the process exits: a scheduler that may have lost its lock must not keep
binding). On a clean shutdown the holder releases the Lease so a standby takes
over without waiting for it to expire.
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

__all__ = ["LeaderElector"]


def _micro(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(s: str | None) -> datetime.datetime | None:
    if not s:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(s, fmt).replace(tzinfo=datetime.UTC)
        except ValueError:
            continue
    return None


class LeaderElector:
    def __init__(self, api: Api, *, namespace: str, name: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0,
                 now: Callable[[], datetime.datetime] | None = None) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.now = now or (lambda: datetime.datetime.now(datetime.UTC))
        self.is_leader = threading.Event()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._observed: dict[str, Any] | None = None

    @property
    def _path(self) -> str:
        return RESOURCES["Lease"].item(self.name, self.namespace)

    # ------------------------------------------------------------------ one step
    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this identity holds the Lease afterwards."""
        now = self.now()
        try:
            lease: dict[str, Any] | None = self.api.request("GET", self._path)
        except ApiError as e:
            if not e.not_found:
                log.info("lease %s/%s: %s", self.namespace, self.name, e)
                return False
            lease = None
        spec_new = {"holderIdentity": self.identity,
                    "leaseDurationSeconds": max(1, round(self.lease_duration)),
                    "acquireTime": _micro(now), "renewTime": _micro(now), "leaseTransitions": 0}
        try:
            if lease is None:
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": spec_new}
                self._observed = self.api.request(
                    "POST", RESOURCES["Lease"].collection(self.namespace), body=body)
                return True
            spec = dict(lease.get("spec") or {})
            holder = spec.get("holderIdentity") or ""
            renewed = _parse(spec.get("renewTime"))
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            expired = renewed is None or now > renewed + datetime.timedelta(seconds=duration)
            if holder and holder != self.identity and not expired:
                return False
            if holder == self.identity:
                spec["renewTime"] = _micro(now)
                spec["leaseDurationSeconds"] = spec_new["leaseDurationSeconds"]
            else:
                spec = {**spec_new, "leaseTransitions": int(spec.get("leaseTransitions") or 0) + 1}
            self._observed = self.api.request("PUT", self._path, body={**lease, "spec": spec})
            return True
        except ApiError as e:
            if not e.conflict:
                log.info("lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def release(self) -> None:
        """Give the Lease up (clean shutdown), if this identity still holds it."""
        try:
            lease = self.api.request("GET", self._path)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update({"holderIdentity": "", "leaseDurationSeconds": 1,
                         "renewTime": _micro(self.now())})
            self.api.request("PUT", self._path, body={**lease, "spec": spec})
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

    def run(self) -> None:
        while not self._stop.is_set():
            if self.try_acquire_or_renew():
                break
            if self._stop.wait(self.retry_period):
                return
        log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}",
                                          "identity": self.identity})
        self.is_leader.set()
        last_renew = time.monotonic()
        while not self._stop.wait(self.retry_period):
            if self.try_acquire_or_renew():
                last_renew = time.monotonic()
                continue
            if time.monotonic() - last_renew > self.renew_deadline:
                log.error("leadership lost: could not renew the lease within %.0fs",
                          self.renew_deadline)
                self.is_leader.clear()
                self.lost.set()
                return
        if self.is_leader.is_set():
            self.release()
