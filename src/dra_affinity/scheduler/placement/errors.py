"""The one error of malformed placement fields, shared by :mod:`..nodefit` and this package."""

from __future__ import annotations


class PlacementError(ValueError):
    """A pod's placement fields (tolerations, affinity, spread, ports, resources) are
    malformed. ``field`` is the path within the pod, e.g. ``spec.tolerations[1].operator``.

    A real API server refuses such a pod; the scheduler reports it as unresolvable."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
