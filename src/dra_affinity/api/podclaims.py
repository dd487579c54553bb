"""How a pod names its ResourceClaims, and how a claim names the pods it is reserved for.

Both directions are needed by the scheduler, the embedded cluster and the
real-cluster adapter; each rule is written here once.

* A pod's ``spec.resourceClaims`` entry names a claim directly
  (``resourceClaimName``) or through a template, whose claim the resourceclaim
  controller records in the pod's ``status.resourceClaimStatuses``.
* A claim's ``status.reservedFor`` lists its consumers. A pod is one of them only
  when an entry carries its **UID**: a pod deleted and created again under the same
  name (a StatefulSet's pod) is another pod, and a reservation of the old one is not
  the new one's, as kubelet and the resourceclaim controller see it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_affinity.api.core import Pod, PodResourceClaim
from dra_affinity.api.resource import ResourceClaim, ResourceClaimConsumerReference

__all__ = [
    "claim_key",
    "claim_name",
    "generated_claim_name",
    "is_reserved_for",
    "pod_claim_keys",
    "recorded_claim_name",
    "recorded_claim_names",
    "reservation",
    "reservation_fields",
    "reserved_for_others",
]

#: ``reservedFor`` entries of pods carry this resource (and the core API group, "").
PODS = "pods"


def generated_claim_name(pod: Pod, prc: PodResourceClaim) -> str:
    """The name the embedded cluster's resourceclaim controller gives the claim it
    creates from a template: ``<pod>-<entry>`` (a real controller adds a random
    suffix and records the name in the pod's status)."""
    return f"{pod.name}-{prc.name}"


def recorded_claim_names(status: Mapping[str, Any]) -> dict[str, str]:
    """Entry name -> the claim the resourceclaim controller recorded for that template
    entry in a pod's ``status.resourceClaimStatuses`` (the pod's status as the server
    sends it)."""
    return {str(st["name"]): str(st["resourceClaimName"])
            for st in status.get("resourceClaimStatuses") or ()
            if isinstance(st, Mapping) and st.get("name") and st.get("resourceClaimName")}


def recorded_claim_name(pod: Pod, prc: PodResourceClaim) -> str | None:
    """The claim recorded for a template entry (:func:`recorded_claim_names`), or None
    while the controller has recorded none."""
    return recorded_claim_names(pod.status).get(prc.name)


def claim_name(pod: Pod, prc: PodResourceClaim) -> str:
    """The claim a pod's ``resourceClaims`` entry refers to: the named claim, or for a
    template the claim recorded in the pod's ``status.resourceClaimStatuses``
    (:func:`generated_claim_name` when none is recorded)."""
    if prc.resource_claim_name:
        return prc.resource_claim_name
    return recorded_claim_name(pod, prc) or generated_claim_name(pod, prc)


def claim_key(pod: Pod, prc: PodResourceClaim) -> str:
    """``namespace/name`` of the claim a pod's entry refers to."""
    return f"{pod.namespace}/{claim_name(pod, prc)}"


def pod_claim_keys(pod: Pod) -> list[str]:
    """Every claim of the pod, in the pod's order, as ``namespace/name``."""
    return [claim_key(pod, prc) for prc in pod.spec.resource_claims]


def _is_pod_ref(ref: ResourceClaimConsumerReference, uid: str) -> bool:
    return ref.resource == PODS and not ref.api_group and bool(uid) and ref.uid == uid


def is_reserved_for(claim: ResourceClaim, pod: Pod) -> bool:
    """Whether ``claim.status.reservedFor`` holds this very pod (by UID, never by name)."""
    uid = pod.metadata.uid or ""
    return any(_is_pod_ref(r, uid) for r in claim.status.reserved_for)


def reserved_for_others(claim: ResourceClaim, pod: Pod) -> list[ResourceClaimConsumerReference]:
    """The claim's consumers other than this pod (an older pod of the same name included)."""
    uid = pod.metadata.uid or ""
    return [r for r in claim.status.reserved_for if not _is_pod_ref(r, uid)]


def reservation(pod: Pod) -> ResourceClaimConsumerReference:
    """The ``reservedFor`` entry that reserves a claim for this pod."""
    return ResourceClaimConsumerReference(**reservation_fields(pod))


def reservation_fields(pod: Pod) -> dict[str, str]:
    """:func:`reservation`'s fields by name, for a caller that validates a whole status
    at once (the entry is then made inside that one validation)."""
    return {"resource": PODS, "name": pod.metadata.name, "uid": pod.metadata.uid or ""}
