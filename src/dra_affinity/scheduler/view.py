"""``ClusterView``: what the scheduler reads from a cluster and the writes it makes.

The scheduler core never imports a cluster implementation. The embedded
simulator (:class:`dra_affinity.sim.cluster.Cluster`) implements this
protocol over its in-memory store; a real-cluster implementation does it over
informer caches and API calls. Like the kube-scheduler's listers, reads return
the cache's current objects and must not be mutated; writes go through
:meth:`write_claim_status` (PreBind) and :meth:`bind_pod` (Bind).
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


class WriteConflict(Exception):
    """A write lost a race (the object changed, or was allocated elsewhere): the
    attempt fails as unschedulable and the pod is retried."""


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

    # ---- writes
    def write_claim_status(self, claim: ResourceClaim) -> ResourceClaim:
        """Store a claim's status (allocation, reservedFor); returns it as stored.
        Raises :class:`WriteConflict` when the claim changed since it was read."""
        ...

    def bind_pod(self, pod: Pod, node: str) -> None:
        """Bind the pod to the node (the pods/binding subresource)."""
        ...
