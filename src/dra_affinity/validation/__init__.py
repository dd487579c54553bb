"""API-server rules: per-object admission, the feature-gate write path, pool validation.

* :mod:`.admission` — ``validate_object(obj, old=None)`` and one function per kind.
* :mod:`.apiserver` — ``admit(obj, old=None, *, gates=...)``: gate field dropping,
  then validation; returns the object as stored, errors and warnings.
* :mod:`.pool` — ``gather_pools(slices)``: completeness and cross-slice rules.
"""

from dra_affinity.validation.admission import (
    validate_device_class,
    validate_node,
    validate_object,
    validate_object_meta,
    validate_pod,
    validate_resource_claim,
    validate_resource_claim_template,
    validate_resource_slice,
)
from dra_affinity.validation.apiserver import (
    DEFAULT_GATES,
    GATE_SHARING_AFFINITY,
    AdmissionResult,
    admit,
)
from dra_affinity.validation.pool import Pool, PoolID, gather_pools

__all__ = [
    "DEFAULT_GATES",
    "GATE_SHARING_AFFINITY",
    "AdmissionResult",
    "Pool",
    "PoolID",
    "admit",
    "gather_pools",
    "validate_device_class",
    "validate_node",
    "validate_object",
    "validate_object_meta",
    "validate_pod",
    "validate_resource_claim",
    "validate_resource_claim_template",
    "validate_resource_slice",
]
