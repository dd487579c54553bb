"""Generated workloads for benchmarks and property tests.

N nodes, each with one metadata slice (subnet and pkey extractors) and one
device slice of D multi-allocatable NICs with S slots; a stream of pods whose
subnets follow a Zipf-like distribution over V values, with churn
(deletions). Seeded and deterministic: the same spec gives the same stream.
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import asdict, dataclass
from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.resource import DeviceClass, ResourceClaim, ResourceSlice

DRIVER = "networking.example.com"
SLOTS = f"{DRIVER}/slots"
GUARD = 'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig"'
EXTRACTORS = (
    ("subnet", f'{GUARD} ? object.subnetID : ""'),
    ("pkey", f'{GUARD} ? object.ibPKey : ""'),
)


@dataclass(frozen=True)
class WorkloadSpec:
    nodes: int = 500
    devices_per_node: int = 8
    slots: int = 4
    values: int = 64  # distinct subnets (V)
    zipf: float = 1.1  # skew exponent
    churn: float = 0.05  # probability, after each placement, that a random running pod is deleted
    fill: float = 0.9  # stop when this fraction of all slots is allocated
    seed: int = 1
    affinity: bool = True  # publish sharingAffinity (False: the baseline)
    max_pods: int | None = None  # cap on scheduling attempts (scaling runs)

    def as_dict(self) -> dict[str, Any]:
        """camelCase, as the bench JSON reports the parameters used."""
        d = asdict(self)
        return {"nodes": d["nodes"], "devicesPerNode": d["devices_per_node"], "slots": d["slots"],
                "values": d["values"], "zipf": d["zipf"], "churn": d["churn"], "fill": d["fill"],
                "seed": d["seed"]}

    @property
    def total_slots(self) -> int:
        return self.nodes * self.devices_per_node * self.slots


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def device_class() -> DeviceClass:
    return DeviceClass.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "shared-nic"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})


def slice_manifests(spec: WorkloadSpec, i: int) -> list[dict[str, Any]]:
    """Node ``i``'s slices as manifests: the metadata slice (with ``spec.affinity``) and
    the device slice of ``devices_per_node`` NICs with ``slots`` slots each."""
    node = node_name(i)
    count = 2 if spec.affinity else 1
    out: list[dict[str, Any]] = []
    if spec.affinity:
        out.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-meta"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
                     "sharingAffinity": [{"name": n, "expression": e} for n, e in EXTRACTORS]}})
    out.append({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-nics"},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
                 "devices": [{"name": f"nic{d}", "allowMultipleAllocations": True,
                              "capacity": {SLOTS: {"value": str(spec.slots)}}}
                             for d in range(spec.devices_per_node)]}})
    return out


#: Validated slices of a node named ``_``, by (affinity, devices per node, slots).
_SLICE_PROTOTYPES: dict[tuple[bool, int, int], list[ResourceSlice]] = {}


def slices(spec: WorkloadSpec, i: int) -> list[ResourceSlice]:
    """Node ``i``'s slices, equal to validating :func:`slice_manifests` (the tests
    check), made by renaming copies of validated prototypes as :func:`pod_objects` does."""
    shape = (spec.affinity, spec.devices_per_node, spec.slots)
    protos = _SLICE_PROTOTYPES.get(shape)
    if protos is None:
        protos = _SLICE_PROTOTYPES[shape] = [
            ResourceSlice.model_validate(m) for m in slice_manifests(spec, _PROTO_NODE)]
    node = node_name(i)
    proto_node = node_name(_PROTO_NODE)
    out = []
    for p in protos:
        meta = p.metadata.model_copy(update={"name": p.metadata.name.replace(proto_node, node, 1)})
        pool = p.spec.pool.model_copy(update={"name": node})
        slice_spec = p.spec.model_copy(update={"node_name": node, "pool": pool})
        out.append(p.model_copy(update={"metadata": meta, "spec": slice_spec}))
    return out


#: The node number prototypes are validated for (any valid one; its name is replaced).
_PROTO_NODE = 0


def zipf_weights(n: int, s: float) -> list[float]:
    w = [1.0 / (k ** s) for k in range(1, n + 1)]
    total = sum(w)
    return [x / total for x in w]


def _claim_manifest(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-nic", "namespace": "default"},
        "spec": {"devices": {
            "requests": [{"name": "nic", "exactly": {"deviceClassName": "shared-nic",
                                                     "capacity": {"requests": {SLOTS: "1"}}}}],
            "config": [{"requests": ["nic"], "opaque": {"driver": DRIVER, "parameters": {
                "apiVersion": "networking.example.com/v1", "kind": "NICConfig",
                "subnetID": f"subnet-{value:03d}", "ibPKey": f"0x{0x8000 + value:04x}",
                "mtu": 9000}}}]}}}


def _pod_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"resourceClaims": [{"name": "nic", "resourceClaimName": f"{name}-nic"}],
                 "containers": [{"name": "app", "image": "registry.example/app"}]}}


#: Validated claims by value and one validated pod, named ``_``: ``pod_objects`` renames
#: copies of them, which is several times cheaper than validating a manifest per pod.
_CLAIM_PROTOTYPES: dict[int, ResourceClaim] = {}
_POD_PROTOTYPE: list[Pod] = []


def pod_objects(name: str, value: int) -> tuple[ResourceClaim, Pod]:
    """A pod and the claim it names (``<name>-nic``) for one affinity value.

    Equal to validating the manifests above (the tests check), but made by copying a
    validated prototype and setting the names: the objects still go through admission
    when applied, like any client's."""
    proto = _CLAIM_PROTOTYPES.get(value)
    if proto is None:
        proto = _CLAIM_PROTOTYPES[value] = ResourceClaim.model_validate(_claim_manifest("_", value))
    if not _POD_PROTOTYPE:
        _POD_PROTOTYPE.append(Pod.model_validate(_pod_manifest("_")))
    # Shallow copies down to the renamed fields; the rest is shared with the prototypes,
    # which nothing mutates (admission stores a deep copy of what it is given).
    # Every renamed field is set in the prototypes, so the copies' set fields are theirs.
    claim = proto.model_copy(update={
        "metadata": proto.metadata.model_copy(update={"name": f"{name}-nic"})})
    p = _POD_PROTOTYPE[0]
    ref = p.spec.resource_claims[0].model_copy(update={"resource_claim_name": f"{name}-nic"})
    pod = p.model_copy(update={
        "metadata": p.metadata.model_copy(update={"name": name}),
        "spec": p.spec.model_copy(update={"resource_claims": [ref]})})
    return claim, pod


@dataclass(frozen=True)
class Arrival:
    pod: str
    value: int


@dataclass(frozen=True)
class Departure:
    pod: str


def stream(spec: WorkloadSpec) -> Generator[Arrival | Departure, bool | None, None]:
    """Arrivals, with a departure after an arrival with probability ``churn``.

    Departures pick a uniformly random earlier arrival still running (the
    caller reports which are running through the generator's ``send``)."""
    rng = random.Random(spec.seed)
    weights = zipf_weights(spec.values, spec.zipf)
    cum: list[float] = []
    acc = 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    running: list[str] = []
    n = 0
    while True:
        r = rng.random()
        lo, hi = 0, len(cum) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if cum[mid] < r:
                lo = mid + 1
            else:
                hi = mid
        name = f"pod-{n:07d}"
        n += 1
        placed = yield Arrival(name, lo)
        if placed:
            running.append(name)
        if running and rng.random() < spec.churn:
            j = rng.randrange(len(running))
            running[j], running[-1] = running[-1], running[j]
            yield Departure(running.pop())
