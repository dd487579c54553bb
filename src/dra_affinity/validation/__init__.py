"""API-server rules: per-object admission and the feature-gate write path.

Cross-slice pool rules live beside the allocator that uses them, in
:mod:`dra_affinity.structured.pools`.

* :mod:`.admission` — ``validate_object(obj, old=None)``, dispatching to one function per
  kind (pods and nodes there, :mod:`.claims`, :mod:`.slices`).
* :mod:`.apiserver` — ``admit(obj, old=None, *, features=...)``: a pod's label keys
  merged on create (:mod:`.pod_strategy`), gate field dropping, then validation;
  returns the object as stored, errors and warnings.
"""

from dra_affinity.validation._common import validate_object_meta
from dra_affinity.validation.admission import validate_node, validate_object, validate_pod
from dra_affinity.validation.apiserver import AdmissionResult, admit
from dra_affinity.validation.claims import (
    validate_device_class,
    validate_resource_claim,
    validate_resource_claim_template,
)
from dra_affinity.validation.slices import validate_resource_slice

__all__ = [
    "AdmissionResult",
    "admit",
    "validate_device_class",
    "validate_node",
    "validate_object",
    "validate_object_meta",
    "validate_pod",
    "validate_resource_claim",
    "validate_resource_claim_template",
    "validate_resource_slice",
]
