"""Placement constraints this scheduler does not evaluate: a pod using one fails closed.

kube-scheduler's default profile filters nodes with plugins this project does not
implement: the volume plugins (VolumeBinding, VolumeZone, NodeVolumeLimits,
VolumeRestrictions). A pod that states such a hard constraint and were placed as if
it had none could land where the stock scheduler never puts it (a zonal volume out
of reach). So PreFilter rejects it instead: ``UnsupportedPlacement``, naming the
field, never placed. Inter-pod affinity, topology spread and host ports are
evaluated (:mod:`.placement`).

:func:`unsupported_placement` is the one place that lists those fields; a field
leaves the list when its filter is implemented. Only *hard* constraints are
listed: a preference (``preferredDuringScheduling...`` terms, a spread constraint
with ``whenUnsatisfiable: ScheduleAnyway``) only ranks nodes, and every node it
would rank lower is still one the stock scheduler may choose.
"""

from __future__ import annotations

from collections.abc import Mapping

from dra_affinity.api.core import Pod

__all__ = ["unsupported_placement"]

#: Volume sources whose filters (VolumeBinding, VolumeZone, NodeVolumeLimits,
#: VolumeRestrictions) restrict the nodes a pod may run on.
_NODE_BOUND_VOLUMES = ("persistentVolumeClaim", "ephemeral")


def unsupported_placement(pod: Pod) -> list[str]:
    """The pod's fields stating hard placement constraints this scheduler does not
    evaluate, as JSON paths (empty: every constraint the pod states is evaluated)."""
    spec = pod.spec
    out: list[str] = []
    for i, volume in enumerate(spec.volumes):
        if isinstance(volume, Mapping):
            out.extend(f"spec.volumes[{i}].{source}" for source in _NODE_BOUND_VOLUMES
                       if volume.get(source) is not None)
    return out

