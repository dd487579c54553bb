"""Per-object validation as the API server does it.

Follows ``k8s.io/kubernetes/pkg/apis/resource/validation`` (and the parts of
core validation DRA touches) plus KEP-5981's rules for
``ResourceSlice.spec.sharingAffinity``. Every function returns a list of
:class:`~dra_affinity.api.io.FieldError` with Kubernetes field paths
(``spec.sharingAffinity[2].expression``) and ``kubectl``-style messages
(``Too many: 9: must have at most 8 items``); an empty list means "valid".
Nothing here raises on bad data: the objects have already passed the shape
checks of :mod:`dra_affinity.api`, and every semantic problem is an error
entry.

Updates: pass the stored object as ``old``. Following the DRA convention
("validation happens only when an expression is set or changed"), CEL
expressions that are unchanged from ``old`` are not re-checked, so tightening
a limit in a future release never invalidates what is already stored.
See docs/validation.md for every rule and the choices made where Kubernetes
and the KEP are silent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from dra_affinity.api.core import Namespace, Node, Pod, PodResourceClaim
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from dra_affinity.validation._common import (
    Errors,
    _dns_label,
    _dns_subdomain,
    _labels,
    _unique,
    validate_object_meta,
)
from dra_affinity.validation._errors import (
    ROOT,
    Path,
    at,
    invalid,
    required,
)
from dra_affinity.validation.claims import (
    validate_device_class,
    validate_resource_claim,
    validate_resource_claim_template,
)
from dra_affinity.validation.slices import (
    validate_resource_slice,
)


# ============================================================== core
def validate_pod(new: Pod, old: Pod | None = None) -> Errors:
    """Pod fields DRA reads: resourceClaims, nodeName, nodeSelector."""
    errs = validate_object_meta(new.metadata)
    spec = at((ROOT, "spec"))
    if new.spec.node_name:
        errs += _dns_subdomain(new.spec.node_name, at((spec, "nodeName")))
    errs += _labels(new.spec.node_selector, at((spec, "nodeSelector")))
    claims = at((spec, "resourceClaims"))
    for i, c in enumerate(new.spec.resource_claims):
        errs += _pod_claim(c, claims.index(i))
    errs += _unique(new.spec.resource_claims, lambda c: c.name, claims, "name")
    return errs


def _pod_claim(c: PodResourceClaim, path: Path) -> Errors:
    errs = _dns_label(c.name, at((path, "name")))
    sources: list[tuple[str, str]] = []
    if c.resource_claim_name is not None:
        sources.append(("resourceClaimName", c.resource_claim_name))
    if c.resource_claim_template_name is not None:
        sources.append(("resourceClaimTemplateName", c.resource_claim_template_name))
    if not sources:
        errs.append(
            required(path, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        )
    elif len(sources) > 1:
        errs.append(
            invalid(
                path,
                c.to_dict(),
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
            )
        )
    for field, value in sources:
        errs += _dns_subdomain(value, path.child(field))
    return errs


def validate_node(new: Node, old: Node | None = None) -> Errors:
    """Nodes need nothing beyond valid metadata."""
    return validate_object_meta(new.metadata)


def validate_namespace(new: Namespace, old: Namespace | None = None) -> Errors:
    """A namespace needs valid metadata (its labels are what namespace selectors read)."""
    return validate_object_meta(new.metadata)


# ============================================================== dispatch
def validate_object(obj: BaseModel, old: BaseModel | None = None) -> Errors:
    """Validate any supported object; ``old`` is the stored version on update."""
    if old is not None and type(old) is not type(obj):
        return [
            invalid(
                at((ROOT, "kind")), getattr(obj, "kind", type(obj).__name__), "field is immutable"
            )
        ]
    validate = _VALIDATORS.get(type(obj))
    if validate is None:  # a subclass of a kind's model
        validate = next((v for cls, v in _VALIDATORS.items() if isinstance(obj, cls)), None)
    if validate is None:
        return [
            invalid(
                at((ROOT, "kind")),
                getattr(obj, "kind", type(obj).__name__),
                "no validation is defined for this kind",
            )
        ]
    return validate(obj, old)


#: Each kind's validation (``old``, when given, is of the same type: checked first).
_VALIDATORS: dict[type[BaseModel], Callable[[Any, Any], Errors]] = {
    ResourceSlice: validate_resource_slice,
    DeviceClass: validate_device_class,
    ResourceClaim: validate_resource_claim,
    ResourceClaimTemplate: validate_resource_claim_template,
    Pod: validate_pod,
    Node: validate_node,
    Namespace: validate_namespace,
}
