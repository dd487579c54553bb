"""The parts of core/v1 Pod, Node and Namespace that scheduling reads.

Real manifests carry many more PodSpec fields (containers, volumes, ...). They
are accepted and kept as opaque data so a pod written for a cluster loads, but
any key that is not a PodSpec field at all is still an error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dra_affinity.api.meta import K8sModel, TypedObject


class PodResourceClaim(K8sModel):
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSpec(K8sModel):
    node_name: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    priority: int | None = None
    priority_class_name: str | None = None
    scheduler_name: str | None = None
    resource_claims: list[PodResourceClaim] = Field(default_factory=list)
    # Accepted, not interpreted by the DRA simulation.
    containers: list[dict[str, Any]] = Field(default_factory=list)
    init_containers: list[dict[str, Any]] = Field(default_factory=list)
    ephemeral_containers: list[dict[str, Any]] = Field(default_factory=list)
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] | None = None
    topology_spread_constraints: list[dict[str, Any]] = Field(default_factory=list)
    restart_policy: str | None = None
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    dns_policy: str | None = None
    dns_config: dict[str, Any] | None = None
    service_account_name: str | None = None
    service_account: str | None = None
    automount_service_account_token: bool | None = None
    security_context: dict[str, Any] | None = None
    image_pull_secrets: list[dict[str, Any]] = Field(default_factory=list)
    hostname: str | None = None
    subdomain: str | None = None
    host_network: bool | None = None
    host_pid: bool | None = Field(default=None, alias="hostPID")
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    runtime_class_name: str | None = None
    preemption_policy: str | None = None
    overhead: dict[str, Any] | None = None
    readiness_gates: list[dict[str, Any]] = Field(default_factory=list)
    enable_service_links: bool | None = None
    os: dict[str, Any] | None = None
    scheduling_gates: list[dict[str, Any]] = Field(default_factory=list)
    resources: dict[str, Any] | None = None


class Pod(TypedObject):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    spec: PodSpec = Field(default_factory=PodSpec)
    status: dict[str, Any] = Field(default_factory=dict)


class NodeSpec(K8sModel):
    unschedulable: bool | None = None
    taints: list[dict[str, Any]] = Field(default_factory=list)
    pod_cidr: str | None = Field(default=None, alias="podCIDR")
    pod_cidrs: list[str] = Field(default_factory=list, alias="podCIDRs")
    provider_id: str | None = Field(default=None, alias="providerID")


class Node(TypedObject):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Node"] = "Node"
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: dict[str, Any] = Field(default_factory=dict)

    @property
    def namespace(self) -> str:  # cluster-scoped
        return ""


class Namespace(TypedObject):
    """A namespace: its labels are what pod affinity's ``namespaceSelector`` selects."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    spec: dict[str, Any] = Field(default_factory=dict)
    status: dict[str, Any] = Field(default_factory=dict)

    @property
    def namespace(self) -> str:  # cluster-scoped
        return ""
