"""A small cluster in the fake API server: nodes with shared NICs gated by subnet.

Two nodes, each with one pool: a device-less metadata slice carrying the
extractor in the bridge annotation, and a slice with ``nics`` NICs of ``slots``
slots each. Claims select a NIC and carry a NICConfig opaque config with the
subnet; pods name their claim.
"""

from __future__ import annotations

import json
from typing import Any

from dra_affinity.kube.api import RESOURCES
from dra_affinity.kube.convert import SHARING_AFFINITY_ANNOTATION
from dra_affinity.kube.informer import Change, Reflector
from dra_affinity.kube.view import WATCHED_KINDS, KubeView

from .fakeapi import FakeApi

DRIVER = "networking.example.com"
EXTRACTORS = [{"name": "subnet", "expression":
               'object.kind == "NICConfig" ? object.subnetID : ""'}]


def meta_slice(node: str, *, annotation: Any = EXTRACTORS, field: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{node}-meta"}
    if annotation is not None:
        meta["annotations"] = {SHARING_AFFINITY_ANNOTATION:
                               annotation if isinstance(annotation, str) else json.dumps(annotation)}
    spec: dict[str, Any] = {"driver": DRIVER, "nodeName": node,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": 2}}
    if field is not None:
        spec["sharingAffinity"] = field
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec}


def nic_slice(node: str, nics: int = 2, slots: int = 4) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-nics"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 2},
                     "devices": [{"name": f"eth{i}", "allowMultipleAllocations": True,
                                  "capacity": {f"{DRIVER}/slots": {"value": str(slots)}}}
                                 for i in range(1, nics + 1)]}}


def claim(name: str, subnet: str | None, ns: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"devices": {"requests": [{"name": "nic", "exactly": {
        "deviceClassName": "shared-nic",
        "capacity": {"requests": {f"{DRIVER}/slots": "1"}}}}]}}
    if subnet is not None:
        spec["devices"]["config"] = [{"requests": ["nic"], "opaque": {
            "driver": DRIVER, "parameters": {"apiVersion": f"{DRIVER}/v1", "kind": "NICConfig",
                                             "subnetID": subnet}}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def pod(name: str, claim_name: str, ns: str = "default", scheduler: str = "dra-affinity") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": scheduler,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                     "resourceClaims": [{"name": "nic", "resourceClaimName": claim_name}]},
            "status": {"phase": "Pending"}}


def build(api: FakeApi, nodes: tuple[str, ...] = ("node-1", "node-2"), nics: int = 2,
          slots: int = 4) -> None:
    api.create("DeviceClass", {"metadata": {"name": "shared-nic"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    for n in nodes:
        api.create("Node", {"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
                            "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        api.create("ResourceSlice", meta_slice(n))
        api.create("ResourceSlice", nic_slice(n, nics, slots))


class ListSink:
    def __init__(self) -> None:
        self.items: list[Change] = []

    def put(self, ch: Change) -> None:
        self.items.append(ch)


def sync(api: FakeApi, view: KubeView, kinds: tuple[str, ...] = WATCHED_KINDS) -> None:
    """Bring the view up to date: one list per kind, applied in order."""
    for kind in kinds:
        sink: Any = ListSink()
        Reflector(api, kind, sink).list_once()
        for ch in sink.items:
            view.apply(ch)


__all__ = ["RESOURCES", "build", "claim", "meta_slice", "nic_slice", "pod", "sync"]
