"""A read-only view of slices, pools and devices per node, rebuilt on change.

Built the way the Kubernetes allocator gathers pools: once, deterministically
(pools sorted by driver then name, slices by name, devices in slice order),
with incomplete or invalid pools marked with a reason instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_affinity.api.meta import NodeSelector
from dra_affinity.api.resource import Device, ResourceSlice, device_id
from dra_affinity.structured.experiments import split_preferred
from dra_affinity.structured.model import DeviceInfo, PoolID, PoolInfo
from dra_affinity.structured.nodes import node_selector_matches
from dra_affinity.structured.pools import Pool, gather_pools


def pool_info(p: Pool, preferred_keys: bool = False) -> PoolInfo:
    """The allocator's view of a gathered pool (with the preferred-keys experiment on,
    its preferred extractors set apart)."""
    meta = tuple(s.metadata.name for s in p.slices if s.spec.sharing_affinity)
    required, preferred = split_preferred(p) if preferred_keys else (p.extractors, ())
    return PoolInfo(
        driver=p.driver,
        name=p.name,
        generation=p.generation,
        # A pool whose keys are all preferred gates nothing; one whose extractors could
        # not be read at all (slice_problems) gates every multi-allocatable device.
        declares_sharing_affinity=p.declares_sharing_affinity and (bool(required) or not p.extractors),
        extractors=required,
        preferred_extractors=preferred,
        metadata_slices=meta,
        incomplete_reason=p.incomplete_reason,
        invalid_reason=p.invalid_reason,
        affinity_invalid_reason=p.affinity_invalid_reason,
        affinity_problems=p.affinity_problems,
    )


def _split(qualified: str, driver: str) -> tuple[str, str]:
    if "/" in qualified:
        d, n = qualified.split("/", 1)
        return d, n
    return driver, qualified


def device_activation(driver: str, dev: Device) -> dict[str, Any]:
    """``device`` as DRA CEL selectors see it: attributes and capacity by domain."""
    from dra_affinity.cel import Semver
    from dra_affinity.cel.lib_dra import DomainMap

    # Unknown domains read as empty maps, as in Kubernetes' activation.
    attrs: dict[str, dict[str, Any]] = DomainMap()
    for q, a in dev.attributes.items():
        domain, name = _split(q, driver)
        v: Any = a.value()
        if a.version is not None:
            try:
                v = Semver.parse(a.version)
            except ValueError:
                v = a.version
        attrs.setdefault(domain, {})[name] = v
    caps: dict[str, dict[str, Any]] = DomainMap()
    for q, c in dev.capacity.items():
        domain, name = _split(q, driver)
        caps.setdefault(domain, {})[name] = c.value
    return {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": bool(dev.allow_multiple_allocations),
    }


def _slice_on_node(s: ResourceSlice, node: str, labels: Mapping[str, str]) -> bool:
    spec = s.spec
    picked = _node_selection(spec.node_name, spec.all_nodes, spec.node_selector, node, labels)
    return bool(spec.per_device_node_selection) if picked is None else picked


def _device_on_node(s: ResourceSlice, d: Device, node: str, labels: Mapping[str, str]) -> bool:
    if not s.spec.per_device_node_selection:
        return True
    return bool(_node_selection(d.node_name, d.all_nodes, d.node_selector, node, labels))


def _node_selection(node_name: str | None, all_nodes: bool | None, selector: NodeSelector | None,
                    node: str, labels: Mapping[str, str]) -> bool | None:
    """Whether a slice's or a device's node selection (``nodeName``, ``allNodes``,
    ``nodeSelector``; validation admits one) takes ``node``; None when it sets none."""
    if node_name is not None:
        return node_name == node
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(selector, node, labels)
    return None


@dataclass
class Snapshot:
    nodes: list[str]
    labels: dict[str, dict[str, str]]
    pools: dict[PoolID, PoolInfo]
    devices: dict[str, DeviceInfo]  # by DeviceID, first-fit order
    by_node: dict[str, list[DeviceInfo]] = field(default_factory=dict)
    node_local: dict[str, bool] = field(default_factory=dict)  # DeviceID -> from a nodeName slice
    # (device, request capacity) -> consumption plan or error text; valid for this snapshot
    plan_cache: dict[Any, Any] = field(default_factory=dict)
    _extractor_pools: list[PoolInfo] | None = None

    def extractor_pools(self) -> list[PoolInfo]:
        """One pool per distinct (driver, extractor set) among pools with sharing affinity."""
        if self._extractor_pools is None:
            seen: dict[tuple[str, tuple[tuple[str, str], ...]], PoolInfo] = {}
            for p in self.pools.values():
                if p.declares_sharing_affinity:
                    seen.setdefault((p.driver, p.extractor_set), p)
            self._extractor_pools = list(seen.values())
        return self._extractor_pools

    @classmethod
    def build(cls, slices: Sequence[ResourceSlice], nodes: Sequence[str],
              labels: Mapping[str, Mapping[str, str]], *, preferred_keys: bool = False,
              slice_problems: Mapping[str, str] | None = None) -> Snapshot:
        gathered = gather_pools(slices, slice_problems)
        pools: dict[PoolID, PoolInfo] = {}
        ordered: list[tuple[ResourceSlice, Device, PoolInfo]] = []
        for pid in sorted(gathered):
            p = gathered[pid]
            pi = pool_info(p, preferred_keys)
            pools[pid] = pi
            for s in sorted(p.slices, key=lambda s: s.metadata.name):
                for d in s.spec.devices:
                    ordered.append((s, d, pi))
        devices: dict[str, DeviceInfo] = {}
        slice_of: dict[str, ResourceSlice] = {}
        node_local: dict[str, bool] = {}
        for i, (s, d, pi) in enumerate(ordered):
            did = device_id(pi.driver, pi.name, d.name)
            if did in devices:
                continue  # duplicate device names: the pool is marked invalid by gathering
            devices[did] = DeviceInfo(did, pi.driver, pi.name, d.name, s.metadata.name, d, pi, i,
                                      device_activation(pi.driver, d))
            slice_of[did] = s
            node_local[did] = s.spec.node_name is not None or (
                bool(s.spec.per_device_node_selection) and d.node_name is not None)
        labels_c = {n: dict(labels.get(n, {})) for n in nodes}
        snap = cls(list(nodes), labels_c, pools, devices, {}, node_local)
        # Index node-local devices by nodeName; others are checked per node.
        by_name: dict[str, list[DeviceInfo]] = {}
        shared: list[DeviceInfo] = []
        for did, info in devices.items():
            s = slice_of[did]
            if s.spec.node_name is not None:
                by_name.setdefault(s.spec.node_name, []).append(info)
            else:
                shared.append(info)
        for n in nodes:
            lab = labels_c[n]
            local = list(by_name.get(n, []))
            for info in shared:
                s = slice_of[info.id]
                if _slice_on_node(s, n, lab) and _device_on_node(s, info.device, n, lab):
                    local.append(info)
            local.sort(key=lambda x: x.order)
            snap.by_node[n] = local
        return snap
