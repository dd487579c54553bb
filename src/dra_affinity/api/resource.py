"""``resource.k8s.io/v1`` objects with KEP-5981's ``sharingAffinity``.

Field names and nesting follow the Kubernetes Go types so a manifest written
for a cluster loads unchanged. Only shape is checked here; the API server's
semantic rules live in :mod:`dra_affinity.validation`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dra_affinity.api.meta import K8sModel, NodeSelector, TypedObject
from dra_affinity.api.quantity import Quantity

# Limits from k8s.io/api/resource/v1 and KEP-5981.
SHARING_AFFINITY_MAX_ENTRIES = 8
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
SHARING_AFFINITY_CEL_MAX_COST = 1_000_000
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024
RESOURCE_SLICE_MAX_DEVICES = 128
DEVICE_ATTRIBUTES_AND_CAPACITIES_MAX = 32
DEVICE_REQUESTS_MAX = 32
DEVICE_CONFIG_MAX = 32
DEVICE_CONSTRAINTS_MAX = 32
ALLOCATION_RESULTS_MAX = 32
RESERVED_FOR_MAX = 256
FIRST_AVAILABLE_MAX = 8


# --------------------------------------------------------------------------- slices
class DeviceAttribute(K8sModel):
    """Exactly one of int, bool, string, version (checked by validation)."""

    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None

    def value(self) -> int | bool | str | None:
        for v in (self.int_, self.bool_, self.string, self.version):
            if v is not None:
                return v
        return None


class CapacityRequestPolicyRange(K8sModel):
    min: Quantity
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(K8sModel):
    default: Quantity | None = None
    valid_values: list[Quantity] = Field(default_factory=list)
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(K8sModel):
    value: Quantity
    request_policy: CapacityRequestPolicy | None = None


class Counter(K8sModel):
    value: Quantity


class CounterSet(K8sModel):
    name: str
    counters: dict[str, Counter]


class DeviceCounterConsumption(K8sModel):
    counter_set: str
    counters: dict[str, Counter]


class DeviceTaint(K8sModel):
    key: str
    value: str | None = None
    effect: str
    time_added: str | None = None


class Device(K8sModel):
    name: str
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    consumes_counters: list[DeviceCounterConsumption] = Field(default_factory=list)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] = Field(default_factory=list)
    binds_to_node: bool | None = None
    binding_conditions: list[str] = Field(default_factory=list)
    binding_failure_conditions: list[str] = Field(default_factory=list)
    allow_multiple_allocations: bool | None = None


class ResourcePool(K8sModel):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


class SharingAffinityExtractor(K8sModel):
    """One affinity key and the CEL that extracts it from a claim's opaque config."""

    name: str
    expression: str


class ResourceSliceSpec(K8sModel):
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = Field(default_factory=list)
    shared_counters: list[CounterSet] = Field(default_factory=list)
    # KEP-5981. None (absent or null) and [] both mean "no sharing affinity";
    # None is kept distinct so that an update setting it to null clears it.
    sharing_affinity: list[SharingAffinityExtractor] | None = None


class ResourceSlice(TypedObject):
    api_version: Literal["resource.k8s.io/v1"] = "resource.k8s.io/v1"
    kind: Literal["ResourceSlice"] = "ResourceSlice"
    spec: ResourceSliceSpec

    @property
    def namespace(self) -> str:  # cluster-scoped
        return ""


# --------------------------------------------------------------------------- classes
class CELDeviceSelector(K8sModel):
    expression: str


class DeviceSelector(K8sModel):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(K8sModel):
    driver: str
    parameters: Any = None


class DeviceClassConfiguration(K8sModel):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(K8sModel):
    selectors: list[DeviceSelector] = Field(default_factory=list)
    config: list[DeviceClassConfiguration] = Field(default_factory=list)
    extended_resource_name: str | None = None


class DeviceClass(TypedObject):
    api_version: Literal["resource.k8s.io/v1"] = "resource.k8s.io/v1"
    kind: Literal["DeviceClass"] = "DeviceClass"
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)

    @property
    def namespace(self) -> str:  # cluster-scoped
        return ""


# --------------------------------------------------------------------------- claims
class CapacityRequirements(K8sModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)


class DeviceToleration(K8sModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class ExactDeviceRequest(K8sModel):
    device_class_name: str
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: Literal["ExactCount", "All"] | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(K8sModel):
    name: str
    device_class_name: str
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: Literal["ExactCount", "All"] | None = None
    count: int | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None


class DeviceRequest(K8sModel):
    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = Field(default_factory=list)


class DeviceConstraint(K8sModel):
    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(K8sModel):
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(K8sModel):
    requests: list[DeviceRequest] = Field(default_factory=list)
    constraints: list[DeviceConstraint] = Field(default_factory=list)
    config: list[DeviceClaimConfiguration] = Field(default_factory=list)


class ResourceClaimSpec(K8sModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


def subrequest_name(request: str, subrequest: str) -> str:
    """How constraints, configs and allocation results name a ``firstAvailable`` entry."""
    return f"{request}/{subrequest}"


def device_id(driver: str, pool: str, device: str) -> str:
    """A device's ID as Kubernetes' ``DeviceID`` prints it: ``driver/pool/device``."""
    return f"{driver}/{pool}/{device}"


def parse_device_id(did: str) -> tuple[str, str, str]:
    """(driver, pool, device) of a :func:`device_id`. A pool name may hold ``/`` (DNS
    subdomains joined by it); a driver name (a DNS subdomain) and a device name (a DNS
    label) never do, so the driver ends at the first ``/`` and the device follows the last."""
    driver, _, rest = did.partition("/")
    pool, _, device = rest.rpartition("/")
    return driver, pool, device


class DeviceRequestAllocationResult(K8sModel):
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    binding_conditions: list[str] = Field(default_factory=list)
    binding_failure_conditions: list[str] = Field(default_factory=list)
    share_id: str | None = Field(default=None, alias="shareID")
    consumed_capacity: dict[str, Quantity] = Field(default_factory=dict)

    @property
    def device_id(self) -> str:
        return device_id(self.driver, self.pool, self.device)


class DeviceAllocationConfiguration(K8sModel):
    source: Literal["FromClass", "FromClaim"]
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(K8sModel):
    results: list[DeviceRequestAllocationResult] = Field(default_factory=list)
    config: list[DeviceAllocationConfiguration] = Field(default_factory=list)


class AllocationResult(K8sModel):
    devices: DeviceAllocationResult = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(K8sModel):
    api_group: str | None = None
    resource: str
    name: str
    uid: str = ""


class ResourceClaimStatus(K8sModel):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = Field(default_factory=list)
    devices: list[dict[str, Any]] = Field(default_factory=list)


class ResourceClaim(TypedObject):
    api_version: Literal["resource.k8s.io/v1"] = "resource.k8s.io/v1"
    kind: Literal["ResourceClaim"] = "ResourceClaim"
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)


class ResourceClaimTemplateMeta(K8sModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ResourceClaimTemplateSpec(K8sModel):
    metadata: ResourceClaimTemplateMeta = Field(default_factory=ResourceClaimTemplateMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(TypedObject):
    api_version: Literal["resource.k8s.io/v1"] = "resource.k8s.io/v1"
    kind: Literal["ResourceClaimTemplate"] = "ResourceClaimTemplate"
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)


#: The group/version of this module's kinds, as their models say.
GROUP_VERSION = ResourceClaim.type_meta()[0]

__all__ = [
    "ALLOCATION_RESULTS_MAX",
    "CEL_SELECTOR_EXPRESSION_MAX_LENGTH",
    "DEVICE_ATTRIBUTES_AND_CAPACITIES_MAX",
    "DEVICE_CONFIG_MAX",
    "DEVICE_CONSTRAINTS_MAX",
    "DEVICE_REQUESTS_MAX",
    "FIRST_AVAILABLE_MAX",
    "GROUP_VERSION",
    "OPAQUE_PARAMETERS_MAX_LENGTH",
    "RESERVED_FOR_MAX",
    "RESOURCE_SLICE_MAX_DEVICES",
    "SHARING_AFFINITY_CEL_MAX_COST",
    "SHARING_AFFINITY_MAX_ENTRIES",
    "AllocationResult",
    "CELDeviceSelector",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "CapacityRequirements",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAllocationConfiguration",
    "DeviceAllocationResult",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClaim",
    "DeviceClaimConfiguration",
    "DeviceClass",
    "DeviceClassConfiguration",
    "DeviceClassSpec",
    "DeviceConstraint",
    "DeviceCounterConsumption",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "ExactDeviceRequest",
    "OpaqueDeviceConfiguration",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimSpec",
    "ResourceClaimStatus",
    "ResourceClaimTemplate",
    "ResourceClaimTemplateMeta",
    "ResourceClaimTemplateSpec",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceSpec",
    "SharingAffinityExtractor",
    "device_id",
    "parse_device_id",
    "subrequest_name",
]
