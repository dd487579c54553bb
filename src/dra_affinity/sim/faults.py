"""A :class:`~dra_affinity.scheduler.view.ClusterView` that fails chosen writes.

Failures reach the scheduler the way a real cluster's do: through its port. The
view delegates every read to an embedded :class:`~dra_affinity.sim.cluster.Cluster`
and, for a write it was told to fail, answers as an API server would:

=================  =======================================  =====================
fault              the API server                            the scheduler sees
=================  =======================================  =====================
``conflict``       409: the object changed, nothing stored   ``WriteConflict``
``invalid``        422: the write is refused                  ``WriteFailed``
``server-error``   500, nothing stored                        ``WriteFailed``
``timeout``        no answer; stored or not (``applied``)     ``WriteFailed``, maybe applied
``reset``          connection reset; stored or not            ``WriteFailed``, maybe applied
=================  =======================================  =====================

Writes are named as the port names them: ``claim`` (PreBind's
``write_claim_status``), ``bind``, ``unreserve`` and ``read`` (a read-back of a
claim). A failure is planned for one object (:meth:`FaultInjectingView.fail`)
or drawn from a seeded generator for a fraction of all writes
(:meth:`FaultInjectingView.fail_randomly`); every injected failure is logged in
:attr:`FaultInjectingView.injected`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.keys import key_of
from dra_affinity.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from dra_affinity.scheduler.view import Listener, WriteConflict, WriteError, WriteFailed

from .cluster import Cluster

__all__ = ["WRITES", "Failure", "Fault", "FaultInjectingView"]

#: The writes a failure can be planned for.
WRITES = ("claim", "bind", "unreserve", "read")


class Fault(Enum):
    CONFLICT = "conflict"
    INVALID = "invalid"
    SERVER_ERROR = "server-error"
    TIMEOUT = "timeout"
    RESET = "reset"

    @property
    def answer_lost(self) -> bool:
        """No answer came back: the write may have been stored."""
        return self in (Fault.TIMEOUT, Fault.RESET)


_MESSAGES = {
    Fault.CONFLICT: "409 Conflict: the object has been modified (injected)",
    Fault.INVALID: "422 Invalid: the write was refused (injected)",
    Fault.SERVER_ERROR: "500 InternalError (injected)",
    Fault.TIMEOUT: "timed out waiting for the API server's answer (injected)",
    Fault.RESET: "connection reset by peer (injected)",
}


@dataclass(frozen=True)
class Failure:
    """One injected failure: the fault, and for a lost answer whether the write was
    stored before the answer was lost."""

    fault: Fault
    applied: bool = False

    def error(self) -> WriteError:
        msg = _MESSAGES[self.fault]
        if self.fault is Fault.CONFLICT:
            return WriteConflict(msg)
        return WriteFailed(msg, maybe_applied=self.fault.answer_lost)


class FaultInjectingView:
    """The embedded cluster as the scheduler's view, with failures on chosen writes."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._planned: dict[tuple[str, str], list[Failure]] = {}
        self._rng: random.Random | None = None
        self._rate = 0.0
        self._faults: tuple[Fault, ...] = ()
        #: (write, object key, failure) of every failure injected, in order.
        self.injected: list[tuple[str, str, Failure]] = []

    # ------------------------------------------------------------------ planning
    def fail(self, write: str, key: str, failure: Failure, times: int = 1) -> None:
        """Fail the next ``times`` writes ``write`` of object ``key`` (namespace/name)."""
        if write not in WRITES:
            raise ValueError(f"unknown write {write!r} (one of {', '.join(WRITES)})")
        self._planned.setdefault((write, key), []).extend([failure] * times)

    def fail_randomly(self, seed: int, rate: float,
                      faults: Sequence[Fault] = tuple(Fault)) -> None:
        """Fail a fraction ``rate`` of all writes with faults drawn from ``faults``
        (a lost answer is stored or not at random), reproducibly from ``seed``."""
        self._rng = random.Random(seed)
        self._rate = rate
        self._faults = tuple(faults)

    def _inject(self, write: str, key: str) -> Failure | None:
        planned = self._planned.get((write, key))
        failure: Failure | None = None
        if planned:
            failure = planned.pop(0)
        elif self._rng is not None and self._rng.random() < self._rate:
            fault = self._rng.choice(self._faults)
            failure = Failure(fault, applied=fault.answer_lost and self._rng.random() < 0.5)
        if failure is not None:
            self.injected.append((write, key, failure))
        return failure

    # ------------------------------------------------------------------ writes
    def write_claim_status(self, claim: ResourceClaim) -> ResourceClaim:
        failure = self._inject("claim", key_of(claim))
        if failure is None:
            return self.cluster.write_claim_status(claim)
        if failure.applied:
            self.cluster.write_claim_status(claim)
        raise failure.error()

    def bind_pod(self, pod: Pod, node: str) -> None:
        failure = self._inject("bind", key_of(pod))
        if failure is None:
            self.cluster.bind_pod(pod, node)
            return
        if failure.applied:
            self.cluster.bind_pod(pod, node)
        raise failure.error()

    def unreserve_claim(self, written: ResourceClaim, pod: Pod, *,
                        allocated: bool) -> ResourceClaim | None:
        failure = self._inject("unreserve", key_of(written))
        if failure is None:
            return self.cluster.unreserve_claim(written, pod, allocated=allocated)
        if failure.applied:
            self.cluster.unreserve_claim(written, pod, allocated=allocated)
        raise failure.error()

    def read_claim(self, key: str) -> ResourceClaim | None:
        failure = self._inject("read", key)
        if failure is not None:
            raise failure.error()
        return self.cluster.read_claim(key)

    # ------------------------------------------------------------------ reads
    def nodes(self) -> Sequence[str]:
        return self.cluster.nodes()

    def node_labels(self, name: str) -> Mapping[str, str]:
        return self.cluster.node_labels(name)

    def node(self, name: str) -> Node | None:
        return self.cluster.node(name)

    def pods(self) -> Sequence[Pod]:
        return self.cluster.pods()

    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        return self.cluster.namespaces()

    def slices(self) -> Sequence[ResourceSlice]:
        return self.cluster.slices()

    def slice_problems(self) -> Mapping[str, str]:
        return self.cluster.slice_problems()

    def classes(self) -> Mapping[str, DeviceClass]:
        return self.cluster.classes()

    def claims(self) -> Sequence[ResourceClaim]:
        return self.cluster.claims()

    def claim(self, key: str) -> ResourceClaim | None:
        return self.cluster.claim(key)

    def pod(self, key: str) -> Pod | None:
        return self.cluster.pod(key)

    def subscribe(self, listener: Listener) -> None:
        self.cluster.subscribe(listener)

    def unsubscribe(self, listener: Listener) -> None:
        self.cluster.unsubscribe(listener)
