"""``ClusterView``: what the scheduler reads from a cluster and the writes it makes.

The scheduler core never imports a cluster implementation. The embedded
simulator (:class:`dra_affinity.sim.cluster.Cluster`) implements this
protocol over its in-memory store; a real-cluster implementation does it over
informer caches and API calls. Like the kube-scheduler's listers, reads return
the cache's current objects and must not be mutated; writes go through
:meth:`write_claim_status` (PreBind), :meth:`bind_pod` (Bind) and
:meth:`unreserve_claim` (Unreserve).

A write either succeeds (the server stored it) or raises one of two errors, and
the scheduler's answer differs:

* :class:`WriteConflict`: the write lost a race and was not stored (the object
  changed, was allocated elsewhere, was deleted): the attempt is Unschedulable
  and the pod is retried;
* :class:`WriteFailed`: the API server refused or could not be reached (5xx,
  timeout, connection reset, a rejected write, leadership lost): the attempt is
  an Error with backoff. ``maybe_applied`` says the server may have stored it
  anyway (the answer was lost): then the scheduler keeps accounting it.

Failures are injected through this port in tests (a view that fails chosen
writes), never through switches on the scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.resource import DeviceClass, ResourceClaim, ResourceSlice


class Listener(Protocol):
    """Told about every change of a watched object, as an informer handler is."""

    def on_change(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None: ...


class WriteError(Exception):
    """A write of the scheduler's that did not (certainly) take effect.

    ``maybe_applied``: part of it may be stored all the same (an answer was lost, or
    a first step of it, such as a finalizer, was stored before the rest failed)."""

    def __init__(self, message: str, *, maybe_applied: bool = False) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


class WriteConflict(WriteError):
    """A write lost a race (the object changed, was allocated elsewhere, or is gone):
    the attempt fails as unschedulable and the pod is retried."""


class WriteFailed(WriteError):
    """The API server refused the write or could not be reached (a 5xx, a timeout, a
    reset connection, a rejected write): an error, retried with backoff."""


class ClusterView(Protocol):
    """Listers over the cluster's objects plus the scheduler's writes."""

    # ---- listers
    def nodes(self) -> Sequence[str]:
        """Node names in the order the scheduler tries them."""
        ...

    def node_labels(self, name: str) -> Mapping[str, str]: ...

    def node(self, name: str) -> Node | None:
        """The Node object (None for a node known only from slices), for the node
        filters: taints, ``spec.unschedulable``, ``status.allocatable``."""
        ...

    def pods(self) -> Sequence[Pod]:
        """Every pod (those bound to a node count against its allocatable)."""
        ...

    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """Namespace name -> its labels, for pod affinity's ``namespaceSelector`` (a
        namespace without an object has no labels and no selector picks it)."""
        ...

    def slices(self) -> Sequence[ResourceSlice]: ...

    def slice_problems(self) -> Mapping[str, str]:
        """Slices (by name) whose sharing-affinity metadata could not be read, with why
        (a real cluster's bridge annotation that does not validate): their pools fail
        closed for sharing affinity. Empty where the field is read directly."""
        ...

    def classes(self) -> Mapping[str, DeviceClass]: ...

    def claims(self) -> Sequence[ResourceClaim]: ...

    def claim(self, key: str) -> ResourceClaim | None:
        """A claim by ``namespace/name``."""
        ...

    def pod(self, key: str) -> Pod | None:
        """A pod by ``namespace/name``."""
        ...

    # ---- change notification
    def subscribe(self, listener: Listener) -> None: ...

    def unsubscribe(self, listener: Listener) -> None: ...

    # ---- writes (each raises WriteConflict or WriteFailed)
    def write_claim_status(self, claim: ResourceClaim) -> ResourceClaim:
        """PreBind: store a claim's ``status.allocation`` and ``status.reservedFor`` as
        ``claim`` has them, on the resourceVersion ``claim`` was read at (the claim's
        ``delete-protection`` finalizer first, where the cluster keeps one); returns the
        claim as stored. :class:`WriteConflict` when it changed since it was read."""
        ...

    def bind_pod(self, pod: Pod, node: str) -> None:
        """Bind: bind this pod (by UID) to the node (the ``pods/binding`` subresource)."""
        ...

    def unreserve_claim(self, written: ResourceClaim, pod: Pod, *,
                        allocated: bool) -> ResourceClaim | None:
        """Unreserve: undo on the server what one attempt's :meth:`write_claim_status`
        of ``written`` stored (or may have), and nothing else: the pod's reservation
        (by UID) and, when ``allocated`` (the attempt set the allocation), the
        allocation too if the server still holds exactly ``written``'s and no other
        consumer reserved the claim since. Returns the claim as the server has it
        afterwards (None: deleted). :class:`WriteFailed` when that cannot be known."""
        ...

    def read_claim(self, key: str) -> ResourceClaim | None:
        """The server's current copy of a claim (a quorum read, not the cache): how the
        outcome of a write whose answer was lost is learnt. The listers return it (or
        something newer) from then on. :class:`WriteFailed` when unreachable."""
        ...
