"""What the pod informer keeps of pods this scheduler will never schedule.

The scheduler watches every non-terminal pod of the cluster: its own pending pods,
and every pod bound to a node (whoever bound it), whose requests NodeResourcesFit
counts. Of a pod it will not schedule (bound already, or another scheduler's) it
needs only that: names, labels, node, phase, claims, and what the node filters
count against its node: the container resources and overhead (NodeResourcesFit),
host ports and host network (NodePorts), its pod (anti-)affinity (InterPodAffinity);
its labels and namespace serve the incoming pods' affinity and spread terms. A real pod's
JSON is mostly other things (env, volumes, probes, images, status); keeping all of
it for every pod of a large cluster was most of the process's memory. The
projection is applied in the reflector's thread, before the change is queued (as
client-go's informer transform), so neither the queue nor the cache ever holds the
rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["POD_FIELDS", "pod_transform", "slim_pod"]

# The fields kept, by section. Containers keep only name, resources and ports (init
# containers their restartPolicy too: a sidecar's requests and ports add up).
POD_FIELDS: dict[str, tuple[str, ...]] = {
    "metadata": ("name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp"),
    "spec": ("nodeName", "schedulerName", "priority", "resourceClaims", "overhead", "resources",
             "affinity", "hostNetwork"),
    "status": ("phase", "resourceClaimStatuses"),
}
_CONTAINER_FIELDS = ("name", "resources", "ports")
_INIT_CONTAINER_FIELDS = ("name", "resources", "ports", "restartPolicy")


def _pick(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(obj, Mapping):
        return {}
    return {k: obj[k] for k in names if k in obj}


def slim_pod(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The pod with only :data:`POD_FIELDS` (and its kind and apiVersion)."""
    out: dict[str, Any] = {k: raw[k] for k in ("apiVersion", "kind") if k in raw}
    for section, names in POD_FIELDS.items():
        out[section] = _pick(raw.get(section), names)
    spec = raw.get("spec")
    if isinstance(spec, Mapping):
        for name, fields in (("containers", _CONTAINER_FIELDS),
                             ("initContainers", _INIT_CONTAINER_FIELDS)):
            items = spec.get(name)
            if isinstance(items, list):
                out["spec"][name] = [_pick(c, fields) for c in items]
    return out


def pod_transform(scheduler_name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The pod informer's transform: a pod this scheduler may still schedule (its own,
    not bound) is kept whole; any other is :func:`slim_pod`."""

    def transform(raw: dict[str, Any]) -> dict[str, Any]:
        spec = raw.get("spec")
        if isinstance(spec, Mapping) and spec.get("schedulerName") == scheduler_name \
                and not spec.get("nodeName"):
            return raw
        return slim_pod(raw)

    return transform
