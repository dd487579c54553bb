"""How an object is named in a store: one rule for the simulator, the informers, the
scheduler and files.

As client-go's ``MetaNamespaceKeyFunc``: ``namespace/name`` for namespaced kinds,
``name`` for cluster-scoped ones. An object without a namespace is in ``default``, as
kubectl puts it there.
"""

from __future__ import annotations

from dra_affinity.api.meta import TypedObject

#: The kinds without a namespace.
CLUSTER_SCOPED = frozenset({"Namespace", "Node", "DeviceClass", "ResourceSlice"})


def object_key(kind: str, name: str, namespace: str | None = None) -> str:
    """The store key of an object of ``kind``."""
    if kind in CLUSTER_SCOPED:
        return name
    return f"{namespace or 'default'}/{name}"


def key_of(obj: TypedObject) -> str:
    """The store key of ``obj``."""
    return object_key(obj.kind, obj.metadata.name, obj.metadata.namespace)


def namespaced_key(ref: str) -> str:
    """A reference to a namespaced object as a file or a command line writes it (``name``
    or ``namespace/name``), as a store key."""
    return ref if "/" in ref else f"default/{ref}"
