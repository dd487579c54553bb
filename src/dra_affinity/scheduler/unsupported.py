"""Placement constraints this scheduler does not evaluate: a pod using one fails closed.

kube-scheduler's default profile filters nodes with plugins this project does not
implement yet. A pod that states such a hard constraint and were placed as if it
had none could land where the stock scheduler never puts it (two replicas of an
anti-affine set on one node, a host port taken twice, a zonal volume out of
reach). So PreFilter rejects it instead: ``UnsupportedPlacement``, naming the
field, never placed.

:func:`unsupported_placement` is the one place that lists those fields; a field
leaves the list when its filter is implemented. Only *hard* constraints are
listed: a preference (``preferredDuringScheduling...`` terms, a spread constraint
with ``whenUnsatisfiable: ScheduleAnyway``) only ranks nodes, and every node it
would rank lower is still one the stock scheduler may choose.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dra_affinity.api.core import Pod

__all__ = ["unsupported_placement"]

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
#: Volume sources whose filters (VolumeBinding, VolumeZone, NodeVolumeLimits,
#: VolumeRestrictions) restrict the nodes a pod may run on.
_NODE_BOUND_VOLUMES = ("persistentVolumeClaim", "ephemeral")


def unsupported_placement(pod: Pod) -> list[str]:
    """The pod's fields stating hard placement constraints this scheduler does not
    evaluate, as JSON paths (empty: every constraint the pod states is evaluated)."""
    spec = pod.spec
    out: list[str] = []
    affinity = spec.affinity if isinstance(spec.affinity, Mapping) else {}
    for kind in ("podAffinity", "podAntiAffinity"):  # InterPodAffinity
        terms = affinity.get(kind)
        if isinstance(terms, Mapping) and terms.get(_REQUIRED):
            out.append(f"spec.affinity.{kind}.{_REQUIRED}")
    for i, tsc in enumerate(spec.topology_spread_constraints):  # PodTopologySpread
        # whenUnsatisfiable is required by the API; a missing one counts as the hard kind.
        if not (isinstance(tsc, Mapping) and tsc.get("whenUnsatisfiable") == "ScheduleAnyway"):
            out.append(f"spec.topologySpreadConstraints[{i}]")
    for field, containers in (("containers", spec.containers),
                              ("initContainers", spec.init_containers)):  # NodePorts
        out.extend(_host_ports(field, containers))
    for i, volume in enumerate(spec.volumes):
        if isinstance(volume, Mapping):
            out.extend(f"spec.volumes[{i}].{source}" for source in _NODE_BOUND_VOLUMES
                       if volume.get(source) is not None)
    return out


def _host_ports(field: str, containers: Iterable[Any]) -> list[str]:
    out = []
    for i, container in enumerate(containers):
        ports = container.get("ports") if isinstance(container, Mapping) else None
        for j, port in enumerate(ports if isinstance(ports, list) else ()):
            if isinstance(port, Mapping) and port.get("hostPort"):
                out.append(f"spec.{field}[{i}].ports[{j}].hostPort")
    return out
