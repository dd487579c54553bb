"""DeviceClass, ResourceClaim and ResourceClaimTemplate validation."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from dra_affinity.api.resource import (
    ALLOCATION_RESULTS_MAX,
    DEVICE_CONFIG_MAX,
    DEVICE_CONSTRAINTS_MAX,
    DEVICE_REQUESTS_MAX,
    FIRST_AVAILABLE_MAX,
    RESERVED_FOR_MAX,
    AllocationResult,
    CapacityRequirements,
    DeviceClaim,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    subrequest_name,
)
from dra_affinity.validation._common import (
    _REQUEST_REF_MSG,
    _TAINT_EFFECTS,
    _VALUE_OMITTED,
    DEVICE_TOLERATIONS_MAX,
    Errors,
    _dns_label,
    _dns_subdomain,
    _driver_name,
    _int64,
    _labels,
    _max_items,
    _node_selector,
    _non_negative,
    _opaque,
    _pool_name,
    _qualified_name,
    _selector_expressions,
    _selectors,
    _unique,
    validate_object_meta,
)
from dra_affinity.validation._errors import (
    ROOT,
    Path,
    at,
    forbidden,
    immutable,
    invalid,
    label_value_problems,
    not_supported,
    qualified_label_key_problems,
    required,
    too_many,
)


# ============================================================== DeviceClass
def validate_device_class(new: DeviceClass, old: DeviceClass | None = None) -> Errors:
    """Selectors (CEL returning bool in the device environment) and opaque config."""
    errs = validate_object_meta(new.metadata)
    spec = at((ROOT, "spec"))
    stored = _selector_expressions(old.spec.selectors) if old is not None else set()
    errs += _selectors(new.spec.selectors, at((spec, "selectors")), stored)
    config = at((spec, "config"))
    if len(new.spec.config) > DEVICE_CONFIG_MAX:
        errs.append(too_many(config, len(new.spec.config), DEVICE_CONFIG_MAX))
    for i, c in enumerate(new.spec.config):
        errs += _opaque(c.opaque, at((config.index(i), "opaque")))
    if new.spec.extended_resource_name is not None:
        name = new.spec.extended_resource_name
        path = at((spec, "extendedResourceName"))
        errs += (
            [required(path)]
            if not name
            else [invalid(path, name, m) for m in qualified_label_key_problems(name)]
        )
    return errs


# ============================================================== claims
def _request_names(claim: DeviceClaim) -> set[str]:
    """Names a constraint, config or result may reference: ``req`` and ``req/sub``."""
    names: set[str] = set()
    for r in claim.requests:
        names.add(r.name)
        names.update(subrequest_name(r.name, s.name) for s in r.first_available)
    return names


def _request_ref(name: str, path: Path, names: Collection[str]) -> Errors:
    segments = name.split("/")
    if len(segments) > 2:
        return [invalid(path, name, _REQUEST_REF_MSG)]
    errs: Errors = []
    for seg in segments:
        errs += _dns_label(seg, path)
    if not errs and name not in names:
        errs.append(invalid(path, name, _REQUEST_REF_MSG))
    return errs


def _request_refs(refs: Sequence[str], path: Path, names: Collection[str]) -> Errors:
    errs = _max_items(refs, DEVICE_REQUESTS_MAX, path)
    for i, ref in enumerate(refs):
        errs += _request_ref(ref, path.index(i), names)
    return errs + _unique(refs, lambda r: r, path)


def _claim_spec(spec: ResourceClaimSpec, path: Path, stored: Collection[str]) -> Errors:
    devices = at((path, "devices"))
    claim = spec.devices
    requests = at((devices, "requests"))
    errs: Errors = []
    for i, r in enumerate(claim.requests):
        errs += _device_request(r, requests.index(i), stored)
    if len(claim.requests) > DEVICE_REQUESTS_MAX:
        errs.append(too_many(requests, len(claim.requests), DEVICE_REQUESTS_MAX))
    errs += _unique(claim.requests, lambda r: r.name, requests, "name")
    names = _request_names(claim)

    constraints = at((devices, "constraints"))
    if len(claim.constraints) > DEVICE_CONSTRAINTS_MAX:
        errs.append(too_many(constraints, len(claim.constraints), DEVICE_CONSTRAINTS_MAX))
    for i, c in enumerate(claim.constraints):
        errs += _constraint(c, constraints.index(i), names)

    config = at((devices, "config"))
    if len(claim.config) > DEVICE_CONFIG_MAX:
        errs.append(too_many(config, len(claim.config), DEVICE_CONFIG_MAX))
    for i, cfg in enumerate(claim.config):
        errs += _request_refs(cfg.requests, at((config.index(i), "requests")), names)
        errs += _opaque(cfg.opaque, at((config.index(i), "opaque")))
    return errs


def _device_request(r: DeviceRequest, path: Path, stored: Collection[str]) -> Errors:
    errs = _dns_label(r.name, at((path, "name")))
    kinds = (r.exactly is not None) + bool(r.first_available)
    if kinds == 0:
        errs.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif kinds > 1:
        errs.append(
            invalid(
                path,
                None,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )
        )
    if r.exactly is not None:
        errs += _exact_or_sub(r.exactly, at((path, "exactly")), stored)
    if r.first_available:
        subs = at((path, "firstAvailable"))
        for i, sub in enumerate(r.first_available):
            errs += _dns_label(sub.name, at((subs.index(i), "name")))
            errs += _exact_or_sub(sub, subs.index(i), stored)
        if len(r.first_available) > FIRST_AVAILABLE_MAX:
            errs.append(too_many(subs, len(r.first_available), FIRST_AVAILABLE_MAX))
        errs += _unique(r.first_available, lambda s: s.name, subs, "name")
    return errs


def _exact_or_sub(
    r: ExactDeviceRequest | DeviceSubRequest, path: Path, stored: Collection[str]
) -> Errors:
    errs = _dns_subdomain(r.device_class_name, at((path, "deviceClassName")))
    errs += _selectors(r.selectors, at((path, "selectors")), stored)
    mode = r.allocation_mode or "ExactCount"  # the API server defaults it
    count = at((path, "count"))
    if r.count is not None:
        errs += _int64(r.count, count)
    if mode == "All":
        if r.count is not None:
            errs.append(
                invalid(count, r.count, "must not be specified when allocationMode is 'All'")
            )
    elif r.count is not None and r.count <= 0:
        errs.append(invalid(count, r.count, "must be greater than zero"))
    tolerations = at((path, "tolerations"))
    if len(r.tolerations) > DEVICE_TOLERATIONS_MAX:
        errs.append(too_many(tolerations, len(r.tolerations), DEVICE_TOLERATIONS_MAX))
    for i, t in enumerate(r.tolerations):
        errs += _toleration(t, tolerations.index(i))
    if r.capacity is not None:
        errs += _capacity_requirements(r.capacity, at((path, "capacity")))
    return errs


def _capacity_requirements(cap: CapacityRequirements, path: Path) -> Errors:
    errs: Errors = []
    requests = at((path, "requests"))
    for name, amount in cap.requests.items():
        errs += _qualified_name(name, requests.key(name))
        if amount.sign() <= 0:
            errs.append(invalid(requests.key(name), str(amount), "must be greater than zero"))
    return errs


def _toleration(t: DeviceToleration, path: Path) -> Errors:
    errs: Errors = []
    op = t.operator or "Equal"
    if op not in ("Exists", "Equal"):
        errs.append(not_supported(at((path, "operator")), op, ("Equal", "Exists")))
    if t.key:
        errs += [invalid(at((path, "key")), t.key, m) for m in qualified_label_key_problems(t.key)]
    elif op != "Exists":
        errs.append(invalid(at((path, "operator")), op, "value must be Exists when `key` is empty"))
    if op == "Exists" and t.value:
        errs.append(
            invalid(at((path, "operator")), op, "value must be empty when `operator` is 'Exists'")
        )
    elif t.value:
        errs += [invalid(at((path, "value")), t.value, m) for m in label_value_problems(t.value)]
    if t.effect and t.effect not in _TAINT_EFFECTS:
        errs.append(not_supported(at((path, "effect")), t.effect, _TAINT_EFFECTS))
    if t.toleration_seconds is not None:
        errs += _int64(t.toleration_seconds, at((path, "tolerationSeconds")))
        if t.effect != "NoExecute":
            errs.append(
                invalid(
                    at((path, "effect")),
                    t.effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
    return errs


def _constraint(c: DeviceConstraint, path: Path, names: Collection[str]) -> Errors:
    errs = _request_refs(c.requests, at((path, "requests")), names)
    if c.match_attribute is not None and c.distinct_attribute is not None:
        errs.append(
            invalid(path, None, "at most one of `matchAttribute` or `distinctAttribute` may be set")
        )
    elif c.match_attribute is not None:
        errs += _qualified_name(c.match_attribute, at((path, "matchAttribute")), need_domain=True)
    elif c.distinct_attribute is not None:
        errs += _qualified_name(
            c.distinct_attribute, at((path, "distinctAttribute")), need_domain=True
        )
    else:
        errs.append(required(at((path, "matchAttribute"))))
    return errs


def _claim_status(status: ResourceClaimStatus, claim: DeviceClaim, path: Path) -> Errors:
    errs: Errors = []
    if status.allocation is not None:
        errs += _allocation(status.allocation, _request_names(claim), at((path, "allocation")))
    reserved = at((path, "reservedFor"))
    if status.reserved_for and status.allocation is None:
        errs.append(forbidden(reserved, "may not be specified when `allocation` is not set"))
    if len(status.reserved_for) > RESERVED_FOR_MAX:
        errs.append(too_many(reserved, len(status.reserved_for), RESERVED_FOR_MAX))
    for i, ref in enumerate(status.reserved_for):
        if not ref.resource:
            errs.append(required(at((reserved.index(i), "resource"))))
        if not ref.name:
            errs.append(required(at((reserved.index(i), "name"))))
    # Kubernetes keys reservedFor by UID; without UIDs, by what the reference names.
    errs += _unique(
        status.reserved_for,
        lambda r: r.uid or (r.api_group or "", r.resource, r.name),
        reserved,
        "uid",
        shown=lambda r: r.uid or r.name,
    )
    return errs


def _allocation(alloc: AllocationResult, names: Collection[str], path: Path) -> Errors:
    errs: Errors = []
    results = path.child("devices", "results")
    if len(alloc.devices.results) > ALLOCATION_RESULTS_MAX:
        errs.append(too_many(results, len(alloc.devices.results), ALLOCATION_RESULTS_MAX))
    for i, r in enumerate(alloc.devices.results):
        rp = results.index(i)
        errs += _request_ref(r.request, at((rp, "request")), names)
        errs += _driver_name(r.driver, at((rp, "driver")))
        errs += _pool_name(r.pool, at((rp, "pool")))
        errs += _dns_label(r.device, at((rp, "device")))
        consumed = at((rp, "consumedCapacity"))
        for name, amount in r.consumed_capacity.items():
            errs += _qualified_name(name, consumed.key(name))
            errs += _non_negative(amount, consumed.key(name))
    config = path.child("devices", "config")
    if len(alloc.devices.config) > 2 * DEVICE_CONFIG_MAX:  # class + claim config
        errs.append(too_many(config, len(alloc.devices.config), 2 * DEVICE_CONFIG_MAX))
    for i, cfg in enumerate(alloc.devices.config):
        errs += _request_refs(cfg.requests, at((config.index(i), "requests")), names)
        errs += _opaque(cfg.opaque, at((config.index(i), "opaque")))
    if alloc.node_selector is not None:
        errs += _node_selector(alloc.node_selector, at((path, "nodeSelector")))
    return errs


def validate_resource_claim(new: ResourceClaim, old: ResourceClaim | None = None) -> Errors:
    """Spec (requests, constraints, config), status.allocation, and spec immutability."""
    errs = validate_object_meta(new.metadata)
    spec = at((ROOT, "spec"))
    if old is not None and new.spec != old.spec:
        errs.append(immutable(spec, _VALUE_OMITTED))
    if old is None:
        errs += _new_claim_spec(new.spec, spec)
    else:
        errs += _claim_spec(new.spec, spec, _claim_selectors(old.spec))
    errs += _claim_status(new.status, new.spec.devices, at((ROOT, "status")))
    return errs


#: Specs of created claims found valid, by their JSON (those of at most
#: ``_VALID_SPEC_MAX_CHARS``; at most ``_VALID_SPECS_MAX`` of them, then afresh).
_VALID_SPECS: dict[str, None] = {}
_VALID_SPEC_MAX_CHARS = 4096
_VALID_SPECS_MAX = 1024


def _new_claim_spec(spec: ResourceClaimSpec, path: Path) -> Errors:
    """:func:`_claim_spec` of a claim being created, remembered for valid specs by
    content: claims stamped from one template (or one workload's manifest) repeat
    their spec, whose validation is a pure function of it (no stored selectors to
    ratchet on create), and its JSON costs a fraction of checking it again. An invalid
    spec is checked every time (its errors name its own paths); a large one too, so
    what is remembered stays small whatever claims hold."""
    try:
        key: str | None = spec.model_dump_json()
    except Exception:  # an object built around validation: just check it
        key = None
    if key is not None and len(key) > _VALID_SPEC_MAX_CHARS:
        key = None
    if key is not None and key in _VALID_SPECS:
        return []
    errs = _claim_spec(spec, path, set())
    if key is not None and not errs:
        if len(_VALID_SPECS) >= _VALID_SPECS_MAX:
            _VALID_SPECS.clear()
        _VALID_SPECS[key] = None
    return errs


def validate_resource_claim_template(
    new: ResourceClaimTemplate, old: ResourceClaimTemplate | None = None
) -> Errors:
    """The template's claim spec at ``spec.spec``; the spec is immutable once created."""
    errs = validate_object_meta(new.metadata)
    spec = at((ROOT, "spec"))
    if old is not None and new.spec != old.spec:
        errs.append(immutable(spec, _VALUE_OMITTED))
    errs += _labels(new.spec.metadata.labels, spec.child("metadata", "labels"))
    stored = _claim_selectors(old.spec.spec) if old is not None else set()
    errs += _claim_spec(new.spec.spec, at((spec, "spec")), stored)
    return errs


def _claim_selectors(spec: ResourceClaimSpec) -> set[str]:
    out: set[str] = set()
    for r in spec.devices.requests:
        if r.exactly is not None:
            out |= _selector_expressions(r.exactly.selectors)
        for s in r.first_available:
            out |= _selector_expressions(s.selectors)
    return out
