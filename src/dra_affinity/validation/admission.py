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

import json
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from dra_affinity import cel
from dra_affinity.api.core import Node, Pod, PodResourceClaim
from dra_affinity.api.io import FieldError
from dra_affinity.api.meta import NodeSelector, NodeSelectorRequirement, ObjectMeta
from dra_affinity.api.quantity import Quantity
from dra_affinity.api.resource import (
    ALLOCATION_RESULTS_MAX,
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    DEVICE_ATTRIBUTES_AND_CAPACITIES_MAX,
    DEVICE_CONFIG_MAX,
    DEVICE_CONSTRAINTS_MAX,
    DEVICE_REQUESTS_MAX,
    FIRST_AVAILABLE_MAX,
    OPAQUE_PARAMETERS_MAX_LENGTH,
    RESERVED_FOR_MAX,
    RESOURCE_SLICE_MAX_DEVICES,
    SHARING_AFFINITY_CEL_MAX_COST,
    SHARING_AFFINITY_MAX_ENTRIES,
    AllocationResult,
    CapacityRequestPolicy,
    CapacityRequirements,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaim,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ExactDeviceRequest,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    ResourceSlice,
    ResourceSliceSpec,
    SharingAffinityExtractor,
)
from dra_affinity.validation._errors import (
    ROOT,
    Path,
    c_identifier_problems,
    dns_label_problems,
    dns_subdomain_problems,
    duplicate,
    forbidden,
    immutable,
    invalid,
    is_semver,
    label_value_problems,
    nbytes,
    not_supported,
    qualified_label_key_problems,
    required,
    too_long,
    too_many,
)

__all__ = [
    "DRIVER_NAME_MAX_LENGTH",
    "POOL_NAME_MAX_LENGTH",
    "validate_device_class",
    "validate_node",
    "validate_object",
    "validate_object_meta",
    "validate_pod",
    "validate_resource_claim",
    "validate_resource_claim_template",
    "validate_resource_slice",
]

Errors = list[FieldError]
T = TypeVar("T")

# Limits from k8s.io/api/resource/v1 not (yet) exported by dra_affinity.api.
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
DEVICE_MAX_ID_LENGTH = 32  # the C-identifier part of a qualified attribute name
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
DEVICE_SELECTORS_MAX = 32
DEVICE_TOLERATIONS_MAX = 16
DEVICE_TAINTS_MAX = 4
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_REQUEST_REF_MSG = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)
_NODE_SELECTION_FIELDS = "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
_VALUE_OMITTED = "<value omitted>"


# ============================================================== generic helpers
def _unique(
    items: Sequence[T],
    key: Callable[[T], Hashable],
    path: Path,
    child: str | None = None,
    shown: Callable[[T], Any] | None = None,
) -> Errors:
    """``Duplicate value`` for every item whose key was seen earlier in the list."""
    errs: Errors = []
    seen: set[Hashable] = set()
    for i, item in enumerate(items):
        k = key(item)
        if k in seen:
            where = path.index(i).child(child) if child else path.index(i)
            errs.append(duplicate(where, shown(item) if shown else k))
        seen.add(k)
    return errs


def _max_items(items: Collection[Any], limit: int, path: Path) -> Errors:
    return [too_many(path, len(items), limit)] if len(items) > limit else []


def _int64(value: int, path: Path) -> Errors:
    # Go stores these as int64; a bigger YAML integer would not even decode there.
    if not _INT64_MIN <= value <= _INT64_MAX:
        return [invalid(path, value, "must fit in a 64-bit signed integer")]
    return []


def _non_negative(value: Quantity, path: Path) -> Errors:
    if value.sign() < 0:
        return [invalid(path, str(value), "must be greater than or equal to 0")]
    return []


def _dns_label(value: str, path: Path) -> Errors:
    if not value:
        return [required(path)]
    return [invalid(path, value, m) for m in dns_label_problems(value)]


def _dns_subdomain(value: str, path: Path) -> Errors:
    if not value:
        return [required(path)]
    return [invalid(path, value, m) for m in dns_subdomain_problems(value)]


def _driver_name(name: str, path: Path) -> Errors:
    """A driver name: DNS subdomain of at most 63 bytes (Kubernetes lower-cases first)."""
    if not name:
        return [required(path)]
    errs: Errors = []
    if nbytes(name) > DRIVER_NAME_MAX_LENGTH:
        errs.append(too_long(path, DRIVER_NAME_MAX_LENGTH))
    errs += [invalid(path, name, m) for m in dns_subdomain_problems(name.lower())]
    return errs


def _pool_name(name: str, path: Path) -> Errors:
    """Pool names are DNS subdomains joined by ``/`` (at most 253 bytes overall)."""
    if not name:
        return [required(path)]
    errs: Errors = []
    if nbytes(name) > POOL_NAME_MAX_LENGTH:
        errs.append(too_long(path, POOL_NAME_MAX_LENGTH))
    for part in name.split("/"):
        errs += [invalid(path, part, m) for m in dns_subdomain_problems(part)]
    return errs


def _c_identifier(name: str, path: Path) -> Errors:
    errs: Errors = []
    if nbytes(name) > DEVICE_MAX_ID_LENGTH:
        errs.append(too_long(path, DEVICE_MAX_ID_LENGTH))
    errs += [invalid(path, name, m) for m in c_identifier_problems(name)]
    return errs


def _qualified_name(name: str, path: Path, *, need_domain: bool = False) -> Errors:
    """An attribute / capacity name: ``name`` or ``domain/name``, name a C identifier."""
    if not name:
        return [required(path, "name required")]
    parts = name.split("/")
    if len(parts) == 1:
        if need_domain:
            return [invalid(path, name, "must include a domain")]
        return _c_identifier(parts[0], path)
    if len(parts) == 2:
        domain, ident = parts
        errs: Errors = []
        errs += (
            [required(path, "the domain must not be empty")]
            if not domain
            else _driver_name(domain, path)
        )
        errs += (
            [required(path, "the name must not be empty")]
            if not ident
            else _c_identifier(ident, path)
        )
        return errs
    return [
        invalid(
            path,
            name,
            "must be either a C identifier or a domain followed by a slash and a C identifier",
        )
    ]


def _labels(labels: Mapping[str, str], path: Path) -> Errors:
    errs: Errors = []
    for k, v in labels.items():
        errs += [invalid(path, k, m) for m in qualified_label_key_problems(k)]
        errs += [invalid(path, v, m) for m in label_value_problems(v)]
    return errs


# ============================================================== CEL
def _describe_compile_error(err: cel.CELCompileError) -> str:
    """The CEL message; its ``str`` already ends with "(at offset N)" when the position is known."""
    return str(err) or type(err).__name__


def _cel_expression(
    expression: str,
    path: Path,
    env: cel.Environment,
    returns: tuple[str, ...],
) -> tuple[Errors, cel.Program | None]:
    """Length, compilation and result type of one expression; the program if all pass."""
    if not expression:
        return [required(path)], None
    if nbytes(expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
        # Too long is not even compiled: the limit exists to bound that work.
        return [too_long(path, CEL_SELECTOR_EXPRESSION_MAX_LENGTH)], None
    try:
        program = env.compile(expression)
    except cel.CELCompileError as e:
        return [
            invalid(path, expression, f"compilation failed: {_describe_compile_error(e)}")
        ], None
    except Exception as e:  # an API server turns a crash into a rejection, not a 500
        return [invalid(path, expression, f"compilation failed: {type(e).__name__}: {e}")], None
    if program.result_type not in (*returns, "dyn"):
        return [
            invalid(path, expression, f"must return {returns[0]}, not {program.result_type}")
        ], None
    return [], program


def _min_cost(expression: str) -> int | None:
    """Data-independent cost of an extractor that is already stored, None if it no longer compiles."""
    try:
        return int(cel.EXTRACTOR_ENV.compile(expression).cost_estimate.min)
    except Exception:  # ratcheted entries are not re-judged; unknown cost counts as 0
        return None


def _selector(selector: DeviceSelector, path: Path, stored: Collection[str]) -> Errors:
    if selector.cel is None:
        return [required(path.child("cel"))]
    expression = selector.cel.expression
    if expression in stored:  # ratcheting: unchanged expressions are not re-checked
        return []
    errs, _ = _cel_expression(
        expression, path.child("cel", "expression"), cel.SELECTOR_ENV, ("bool",)
    )
    return errs


def _selectors(selectors: Sequence[DeviceSelector], path: Path, stored: Collection[str]) -> Errors:
    errs = _max_items(selectors, DEVICE_SELECTORS_MAX, path)
    for i, s in enumerate(selectors):
        errs += _selector(s, path.index(i), stored)
    return errs


def _selector_expressions(selectors: Iterable[DeviceSelector]) -> set[str]:
    return {s.cel.expression for s in selectors if s.cel is not None}


# ============================================================== opaque config
def _parameters(parameters: Any, path: Path) -> Errors:
    """Opaque parameters: a JSON object whose compact JSON encoding is at most 10 Ki."""
    if parameters is None:
        return [required(path)]
    if not isinstance(parameters, Mapping):
        return [invalid(path, _VALUE_OMITTED, "must be a JSON object")]
    try:
        encoded = json.dumps(parameters, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        return [invalid(path, _VALUE_OMITTED, f"must be a JSON object: {e}")]
    if nbytes(encoded) > OPAQUE_PARAMETERS_MAX_LENGTH:
        return [too_long(path, OPAQUE_PARAMETERS_MAX_LENGTH)]
    return []


def _opaque(opaque: OpaqueDeviceConfiguration | None, path: Path) -> Errors:
    if opaque is None:
        return [required(path)]
    return _driver_name(opaque.driver, path.child("driver")) + _parameters(
        opaque.parameters, path.child("parameters")
    )


# ============================================================== node selection
def _node_selector(selector: NodeSelector, path: Path) -> Errors:
    terms = path.child("nodeSelectorTerms")
    errs: Errors = []
    if not selector.node_selector_terms:
        errs.append(required(terms, "must have at least one node selector term"))
    for i, term in enumerate(selector.node_selector_terms):
        for j, req in enumerate(term.match_expressions):
            errs += _node_requirement(req, terms.index(i).child("matchExpressions").index(j), False)
        for j, req in enumerate(term.match_fields):
            errs += _node_requirement(req, terms.index(i).child("matchFields").index(j), True)
    return errs


def _node_requirement(req: NodeSelectorRequirement, path: Path, is_field: bool) -> Errors:
    errs: Errors = []
    ops = ("In", "NotIn") if is_field else ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
    if is_field:
        if req.key != "metadata.name":
            errs.append(not_supported(path.child("key"), req.key, ["metadata.name"]))
    elif not req.key:
        errs.append(required(path.child("key")))
    else:
        errs += [
            invalid(path.child("key"), req.key, m) for m in qualified_label_key_problems(req.key)
        ]
    values = path.child("values")
    if req.operator not in ops:
        errs.append(not_supported(path.child("operator"), req.operator, ops))
    elif is_field and len(req.values) != 1:
        errs.append(
            required(
                values,
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )
        )
    elif req.operator in ("In", "NotIn") and not req.values:
        errs.append(required(values, "must be specified when `operator` is 'In' or 'NotIn'"))
    elif req.operator in ("Exists", "DoesNotExist") and req.values:
        errs.append(
            forbidden(values, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        )
    elif req.operator in ("Gt", "Lt"):
        if len(req.values) != 1:
            errs.append(
                required(values, "must be specified single value when `operator` is 'Lt' or 'Gt'")
            )
        elif not req.values[0].lstrip("-").isdigit():
            errs.append(invalid(values.index(0), req.values[0], "must be an integer"))
    return errs


# ============================================================== metadata
_METADATA = ROOT.child("metadata")


def validate_object_meta(meta: ObjectMeta, path: Path = _METADATA) -> Errors:
    """Name (required, DNS subdomain), namespace (DNS label where present), labels."""
    errs = _dns_subdomain(meta.name, path.child("name"))
    if meta.namespace:
        errs += _dns_label(meta.namespace, path.child("namespace"))
    errs += _labels(meta.labels, path.child("labels"))
    return errs


# ============================================================== ResourceSlice
def validate_resource_slice(new: ResourceSlice, old: ResourceSlice | None = None) -> Errors:
    """A ResourceSlice on create (``old`` None) or update (``old`` the stored slice)."""
    errs = validate_object_meta(new.metadata)
    errs += _slice_spec(new.spec, old.spec if old is not None else None, ROOT.child("spec"))
    return errs


def _slice_spec(spec: ResourceSliceSpec, old: ResourceSliceSpec | None, path: Path) -> Errors:
    errs = _driver_name(spec.driver, path.child("driver"))
    pool = path.child("pool")
    errs += _pool_name(spec.pool.name, pool.child("name"))
    errs += _int64(spec.pool.generation, pool.child("generation"))
    if spec.pool.generation < 0:
        errs.append(
            invalid(
                pool.child("generation"), spec.pool.generation, "must be greater than or equal to 0"
            )
        )
    errs += _int64(spec.pool.resource_slice_count, pool.child("resourceSliceCount"))
    if spec.pool.resource_slice_count < 1:
        errs.append(
            invalid(
                pool.child("resourceSliceCount"),
                spec.pool.resource_slice_count,
                "must be greater than 0",
            )
        )
    if old is not None:
        if spec.driver != old.driver:
            errs.append(immutable(path.child("driver"), spec.driver))
        if spec.pool.name != old.pool.name:
            errs.append(immutable(pool.child("name"), spec.pool.name))
        if (spec.node_name or None) != (old.node_name or None):
            errs.append(immutable(path.child("nodeName"), spec.node_name))
    errs += _node_selection(spec, path)

    devices = path.child("devices")
    per_device = spec.per_device_node_selection is True
    for i, device in enumerate(spec.devices):
        errs += _device(device, devices.index(i), per_device)
    errs += _max_items(spec.devices, RESOURCE_SLICE_MAX_DEVICES, devices)
    errs += _unique(spec.devices, lambda d: d.name, devices, "name")

    counters = path.child("sharedCounters")
    for i, cs in enumerate(spec.shared_counters):
        errs += _counter_set(cs, counters.index(i))
    errs += _unique(spec.shared_counters, lambda c: c.name, counters, "name")

    errs += _sharing_affinity(spec, old, path.child("sharingAffinity"))
    return errs


def _node_selection(spec: ResourceSliceSpec, path: Path) -> Errors:
    errs: Errors = []
    chosen: list[str] = []
    if spec.node_name:
        chosen.append("`nodeName`")
        errs += _dns_subdomain(spec.node_name, path.child("nodeName"))
    if spec.node_selector is not None:
        chosen.append("`nodeSelector`")
        errs += _node_selector(spec.node_selector, path.child("nodeSelector"))
        if len(spec.node_selector.node_selector_terms) > 1:
            # Kubernetes: simplifies merging selectors of devices from different slices.
            errs.append(
                invalid(
                    path.child("nodeSelector", "nodeSelectorTerms"),
                    _VALUE_OMITTED,
                    "must have exactly one node selector term",
                )
            )
    if spec.all_nodes is True:
        chosen.append("`allNodes`")
    if spec.per_device_node_selection is True:
        chosen.append("`perDeviceNodeSelection`")
    if not chosen:
        errs.append(required(path, f"exactly one of {_NODE_SELECTION_FIELDS} is required"))
    elif len(chosen) > 1:
        errs.append(
            invalid(
                path,
                "{" + ", ".join(chosen) + "}",
                f"exactly one of {_NODE_SELECTION_FIELDS} is required, but multiple fields are set",
            )
        )
    return errs


def _device(device: Device, path: Path, per_device: bool) -> Errors:
    errs = _dns_label(device.name, path.child("name"))
    combined = len(device.attributes) + len(device.capacity)
    if combined > DEVICE_ATTRIBUTES_AND_CAPACITIES_MAX:
        errs.append(
            invalid(
                path,
                combined,
                "the total number of attributes and capacities must not exceed "
                f"{DEVICE_ATTRIBUTES_AND_CAPACITIES_MAX}",
            )
        )
    attributes = path.child("attributes")
    for name, attr in device.attributes.items():
        errs += _qualified_name(name, attributes.key(name))
        errs += _attribute(attr, attributes.key(name))
    capacity = path.child("capacity")
    for name, cap in device.capacity.items():
        errs += _qualified_name(name, capacity.key(name))
        errs += _capacity(cap, capacity.key(name))

    consumes = path.child("consumesCounters")
    for i, consumption in enumerate(device.consumes_counters):
        errs += _counter_consumption(consumption, consumes.index(i))
    errs += _unique(device.consumes_counters, lambda c: c.counter_set, consumes, "counterSet")

    taints = path.child("taints")
    errs += _max_items(device.taints, DEVICE_TAINTS_MAX, taints)
    for i, taint in enumerate(device.taints):
        errs += _taint(taint, taints.index(i))

    chosen = [
        f
        for f, on in (
            ("`nodeName`", bool(device.node_name)),
            ("`nodeSelector`", device.node_selector is not None),
            ("`allNodes`", device.all_nodes is True),
        )
        if on
    ]
    if per_device:
        if not chosen:
            errs.append(
                required(path, "exactly one of `nodeName`, `nodeSelector`, `allNodes` is required")
            )
        elif len(chosen) > 1:
            errs.append(
                invalid(
                    path,
                    "{" + ", ".join(chosen) + "}",
                    "exactly one of `nodeName`, `nodeSelector`, `allNodes` is required, "
                    "but multiple fields are set",
                )
            )
        if device.node_name:
            errs += _dns_subdomain(device.node_name, path.child("nodeName"))
        if device.node_selector is not None:
            errs += _node_selector(device.node_selector, path.child("nodeSelector"))
    elif chosen or device.node_name is not None or device.all_nodes is not None:
        errs.append(
            invalid(
                path,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
        )
    return errs


def _attribute(attr: DeviceAttribute, path: Path) -> Errors:
    errs: Errors = []
    set_count = sum(v is not None for v in (attr.int_, attr.bool_, attr.string, attr.version))
    if attr.int_ is not None:
        errs += _int64(attr.int_, path.child("int"))
    if attr.string is not None and nbytes(attr.string) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
        errs.append(too_long(path.child("string"), DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
    if attr.version is not None:
        if not is_semver(attr.version):
            errs.append(
                invalid(
                    path.child("version"),
                    attr.version,
                    "must be a string compatible with semver.org spec 2.0.0",
                )
            )
        if nbytes(attr.version) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
            errs.append(too_long(path.child("version"), DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
    if set_count == 0:
        errs.append(required(path, "exactly one value must be specified"))
    elif set_count > 1:
        errs.append(invalid(path, attr.to_dict(), "exactly one value must be specified"))
    return errs


def _capacity(cap: DeviceCapacity, path: Path) -> Errors:
    errs = _non_negative(cap.value, path.child("value"))
    if cap.request_policy is not None:
        errs += _request_policy(cap.value, cap.request_policy, path.child("requestPolicy"))
    return errs


def _request_policy(capacity: Quantity, policy: CapacityRequestPolicy, path: Path) -> Errors:
    """KEP-5075 request policy: a default plus either discrete values or a range."""
    errs: Errors = []
    default = policy.default
    dpath = path.child("default")
    if default is not None:
        errs += _non_negative(default, dpath)
        if default > capacity:
            errs.append(
                invalid(dpath, str(default), f"must not exceed the capacity value {capacity}")
            )
    if policy.valid_values and policy.valid_range is not None:
        errs.append(
            forbidden(
                path,
                "exactly one policy can be specified, cannot specify `validValues` and "
                "`validRange` at the same time",
            )
        )
    elif policy.valid_values:
        values = path.child("validValues")
        for i, v in enumerate(policy.valid_values):
            errs += _non_negative(v, values.index(i))
            if v > capacity:
                errs.append(
                    invalid(
                        values.index(i), str(v), f"option is larger than capacity value: {capacity}"
                    )
                )
            if i > 0 and policy.valid_values[i - 1] >= v:
                errs.append(
                    invalid(
                        values.index(i),
                        str(v),
                        "values must be sorted in ascending order and unique",
                    )
                )
        if default is None:
            errs.append(required(dpath, "required when `validValues` is set"))
        elif default not in policy.valid_values:
            errs.append(invalid(dpath, str(default), "must be one of `validValues`"))
    elif policy.valid_range is not None:
        rng = policy.valid_range
        rpath = path.child("validRange")
        errs += _non_negative(rng.min, rpath.child("min"))
        if rng.min > capacity:
            errs.append(
                invalid(
                    rpath.child("min"),
                    str(rng.min),
                    f"must not exceed the capacity value {capacity}",
                )
            )
        if rng.max is not None:
            if rng.max < rng.min:
                errs.append(
                    invalid(
                        rpath.child("max"),
                        str(rng.max),
                        f"must be greater than or equal to `min` ({rng.min})",
                    )
                )
            if rng.max > capacity:
                errs.append(
                    invalid(
                        rpath.child("max"),
                        str(rng.max),
                        f"must not exceed the capacity value {capacity}",
                    )
                )
        step_ok = rng.step is None or rng.step.sign() > 0
        if not step_ok:
            errs.append(invalid(rpath.child("step"), str(rng.step), "must be greater than zero"))
        if default is not None:
            upper = rng.max if rng.max is not None else capacity
            if default < rng.min or default > upper:
                errs.append(
                    invalid(
                        dpath, str(default), f"must be within `validRange` [{rng.min}, {upper}]"
                    )
                )
            elif (
                rng.step is not None and step_ok and (default - rng.min).value % rng.step.value != 0
            ):
                errs.append(
                    invalid(
                        dpath, str(default), f"must be `min` plus a multiple of `step` ({rng.step})"
                    )
                )
    return errs


def _counters(counters: Mapping[str, Any], path: Path) -> Errors:
    errs: Errors = []
    if not counters:
        errs.append(required(path))
    for name, counter in counters.items():
        errs += _dns_label(name, path.key(name))
        errs += _non_negative(counter.value, path.key(name).child("value"))
    return errs


def _counter_set(cs: CounterSet, path: Path) -> Errors:
    return _dns_label(cs.name, path.child("name")) + _counters(cs.counters, path.child("counters"))


def _counter_consumption(c: DeviceCounterConsumption, path: Path) -> Errors:
    # The counter set may be published in another slice of the pool, so only the
    # form is checked here; references are resolved by pool validation.
    return _dns_label(c.counter_set, path.child("counterSet")) + _counters(
        c.counters, path.child("counters")
    )


def _taint(taint: DeviceTaint, path: Path) -> Errors:
    errs: Errors = []
    if not taint.key:
        errs.append(required(path.child("key")))
    else:
        errs += [
            invalid(path.child("key"), taint.key, m)
            for m in qualified_label_key_problems(taint.key)
        ]
    if taint.value:
        errs += [
            invalid(path.child("value"), taint.value, m) for m in label_value_problems(taint.value)
        ]
    if taint.effect not in _TAINT_EFFECTS:
        errs.append(not_supported(path.child("effect"), taint.effect, _TAINT_EFFECTS))
    return errs


def _sharing_affinity(spec: ResourceSliceSpec, old: ResourceSliceSpec | None, path: Path) -> Errors:
    """KEP-5981: at most 8 uniquely named extractors, metadata slices only, bounded CEL.

    An entry whose (name, expression) pair is also in the stored object is not
    re-checked for length, compilation or result type; the combined cost check
    runs only when at least one entry is new or changed (and then counts all).
    """
    entries = spec.sharing_affinity or []
    if not entries:
        return []
    errs: Errors = []
    if spec.devices:
        errs.append(
            forbidden(
                path,
                "may not be set together with `devices`: sharing affinity is published in "
                "dedicated metadata slices of the pool",
            )
        )
    over_limit = len(entries) > SHARING_AFFINITY_MAX_ENTRIES
    if over_limit:
        errs.append(too_many(path, len(entries), SHARING_AFFINITY_MAX_ENTRIES))
    stored = {(e.name, e.expression) for e in (old.sharing_affinity or [])} if old else set()

    changed = False
    costs: list[int] = []
    unchanged: list[SharingAffinityExtractor] = []
    for i, entry in enumerate(entries):
        errs += _dns_label(entry.name, path.index(i).child("name"))
        if (entry.name, entry.expression) in stored:
            unchanged.append(entry)
            continue
        changed = True
        if over_limit:  # bound the work an oversized list can cause
            continue
        e_errs, program = _cel_expression(
            entry.expression, path.index(i).child("expression"), cel.EXTRACTOR_ENV, ("string",)
        )
        errs += e_errs
        if program is not None:
            costs.append(int(program.cost_estimate.min))
    errs += _unique(entries, lambda e: e.name, path, shown=lambda e: {"name": e.name})

    if changed and not over_limit:
        costs += [c for c in (_min_cost(e.expression) for e in unchanged) if c is not None]
        total = sum(costs)
        if total > SHARING_AFFINITY_CEL_MAX_COST:
            errs.append(
                forbidden(
                    path,
                    f"the combined estimated cost of the sharingAffinity expressions is {total}, "
                    f"more than the limit of {SHARING_AFFINITY_CEL_MAX_COST}",
                )
            )
    return errs


# ============================================================== DeviceClass
def validate_device_class(new: DeviceClass, old: DeviceClass | None = None) -> Errors:
    """Selectors (CEL returning bool in the device environment) and opaque config."""
    errs = validate_object_meta(new.metadata)
    spec = ROOT.child("spec")
    stored = _selector_expressions(old.spec.selectors) if old is not None else set()
    errs += _selectors(new.spec.selectors, spec.child("selectors"), stored)
    config = spec.child("config")
    errs += _max_items(new.spec.config, DEVICE_CONFIG_MAX, config)
    for i, c in enumerate(new.spec.config):
        errs += _opaque(c.opaque, config.index(i).child("opaque"))
    if new.spec.extended_resource_name is not None:
        name = new.spec.extended_resource_name
        path = spec.child("extendedResourceName")
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
        names.update(f"{r.name}/{s.name}" for s in r.first_available)
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
    devices = path.child("devices")
    claim = spec.devices
    requests = devices.child("requests")
    errs: Errors = []
    for i, r in enumerate(claim.requests):
        errs += _device_request(r, requests.index(i), stored)
    errs += _max_items(claim.requests, DEVICE_REQUESTS_MAX, requests)
    errs += _unique(claim.requests, lambda r: r.name, requests, "name")
    names = _request_names(claim)

    constraints = devices.child("constraints")
    errs += _max_items(claim.constraints, DEVICE_CONSTRAINTS_MAX, constraints)
    for i, c in enumerate(claim.constraints):
        errs += _constraint(c, constraints.index(i), names)

    config = devices.child("config")
    errs += _max_items(claim.config, DEVICE_CONFIG_MAX, config)
    for i, cfg in enumerate(claim.config):
        errs += _request_refs(cfg.requests, config.index(i).child("requests"), names)
        errs += _opaque(cfg.opaque, config.index(i).child("opaque"))
    return errs


def _device_request(r: DeviceRequest, path: Path, stored: Collection[str]) -> Errors:
    errs = _dns_label(r.name, path.child("name"))
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
        errs += _exact_or_sub(r.exactly, path.child("exactly"), stored)
    if r.first_available:
        subs = path.child("firstAvailable")
        for i, sub in enumerate(r.first_available):
            errs += _dns_label(sub.name, subs.index(i).child("name"))
            errs += _exact_or_sub(sub, subs.index(i), stored)
        errs += _max_items(r.first_available, FIRST_AVAILABLE_MAX, subs)
        errs += _unique(r.first_available, lambda s: s.name, subs, "name")
    return errs


def _exact_or_sub(
    r: ExactDeviceRequest | DeviceSubRequest, path: Path, stored: Collection[str]
) -> Errors:
    errs = _dns_subdomain(r.device_class_name, path.child("deviceClassName"))
    errs += _selectors(r.selectors, path.child("selectors"), stored)
    mode = r.allocation_mode or "ExactCount"  # the API server defaults it
    count = path.child("count")
    if r.count is not None:
        errs += _int64(r.count, count)
    if mode == "All":
        if r.count is not None:
            errs.append(
                invalid(count, r.count, "must not be specified when allocationMode is 'All'")
            )
    elif r.count is not None and r.count <= 0:
        errs.append(invalid(count, r.count, "must be greater than zero"))
    tolerations = path.child("tolerations")
    errs += _max_items(r.tolerations, DEVICE_TOLERATIONS_MAX, tolerations)
    for i, t in enumerate(r.tolerations):
        errs += _toleration(t, tolerations.index(i))
    if r.capacity is not None:
        errs += _capacity_requirements(r.capacity, path.child("capacity"))
    return errs


def _capacity_requirements(cap: CapacityRequirements, path: Path) -> Errors:
    errs: Errors = []
    requests = path.child("requests")
    for name, amount in cap.requests.items():
        errs += _qualified_name(name, requests.key(name))
        if amount.sign() <= 0:
            errs.append(invalid(requests.key(name), str(amount), "must be greater than zero"))
    return errs


def _toleration(t: DeviceToleration, path: Path) -> Errors:
    errs: Errors = []
    op = t.operator or "Equal"
    if op not in ("Exists", "Equal"):
        errs.append(not_supported(path.child("operator"), op, ("Equal", "Exists")))
    if t.key:
        errs += [invalid(path.child("key"), t.key, m) for m in qualified_label_key_problems(t.key)]
    elif op != "Exists":
        errs.append(invalid(path.child("operator"), op, "value must be Exists when `key` is empty"))
    if op == "Exists" and t.value:
        errs.append(
            invalid(path.child("operator"), op, "value must be empty when `operator` is 'Exists'")
        )
    elif t.value:
        errs += [invalid(path.child("value"), t.value, m) for m in label_value_problems(t.value)]
    if t.effect and t.effect not in _TAINT_EFFECTS:
        errs.append(not_supported(path.child("effect"), t.effect, _TAINT_EFFECTS))
    if t.toleration_seconds is not None:
        errs += _int64(t.toleration_seconds, path.child("tolerationSeconds"))
        if t.effect != "NoExecute":
            errs.append(
                invalid(
                    path.child("effect"),
                    t.effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
    return errs


def _constraint(c: DeviceConstraint, path: Path, names: Collection[str]) -> Errors:
    errs = _request_refs(c.requests, path.child("requests"), names)
    if c.match_attribute is not None and c.distinct_attribute is not None:
        errs.append(
            invalid(path, None, "at most one of `matchAttribute` or `distinctAttribute` may be set")
        )
    elif c.match_attribute is not None:
        errs += _qualified_name(c.match_attribute, path.child("matchAttribute"), need_domain=True)
    elif c.distinct_attribute is not None:
        errs += _qualified_name(
            c.distinct_attribute, path.child("distinctAttribute"), need_domain=True
        )
    else:
        errs.append(required(path.child("matchAttribute")))
    return errs


def _claim_status(status: ResourceClaimStatus, claim: DeviceClaim, path: Path) -> Errors:
    errs: Errors = []
    if status.allocation is not None:
        errs += _allocation(status.allocation, _request_names(claim), path.child("allocation"))
    reserved = path.child("reservedFor")
    if status.reserved_for and status.allocation is None:
        errs.append(forbidden(reserved, "may not be specified when `allocation` is not set"))
    errs += _max_items(status.reserved_for, RESERVED_FOR_MAX, reserved)
    for i, ref in enumerate(status.reserved_for):
        if not ref.resource:
            errs.append(required(reserved.index(i).child("resource")))
        if not ref.name:
            errs.append(required(reserved.index(i).child("name")))
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
    errs += _max_items(alloc.devices.results, ALLOCATION_RESULTS_MAX, results)
    for i, r in enumerate(alloc.devices.results):
        rp = results.index(i)
        errs += _request_ref(r.request, rp.child("request"), names)
        errs += _driver_name(r.driver, rp.child("driver"))
        errs += _pool_name(r.pool, rp.child("pool"))
        errs += _dns_label(r.device, rp.child("device"))
        consumed = rp.child("consumedCapacity")
        for name, amount in r.consumed_capacity.items():
            errs += _qualified_name(name, consumed.key(name))
            errs += _non_negative(amount, consumed.key(name))
    config = path.child("devices", "config")
    errs += _max_items(alloc.devices.config, 2 * DEVICE_CONFIG_MAX, config)  # class + claim config
    for i, cfg in enumerate(alloc.devices.config):
        errs += _request_refs(cfg.requests, config.index(i).child("requests"), names)
        errs += _opaque(cfg.opaque, config.index(i).child("opaque"))
    if alloc.node_selector is not None:
        errs += _node_selector(alloc.node_selector, path.child("nodeSelector"))
    return errs


def validate_resource_claim(new: ResourceClaim, old: ResourceClaim | None = None) -> Errors:
    """Spec (requests, constraints, config), status.allocation, and spec immutability."""
    errs = validate_object_meta(new.metadata)
    spec = ROOT.child("spec")
    if old is not None and new.spec != old.spec:
        errs.append(immutable(spec, _VALUE_OMITTED))
    stored = _claim_selectors(old.spec) if old is not None else set()
    errs += _claim_spec(new.spec, spec, stored)
    errs += _claim_status(new.status, new.spec.devices, ROOT.child("status"))
    return errs


def validate_resource_claim_template(
    new: ResourceClaimTemplate, old: ResourceClaimTemplate | None = None
) -> Errors:
    """The template's claim spec at ``spec.spec``; the spec is immutable once created."""
    errs = validate_object_meta(new.metadata)
    spec = ROOT.child("spec")
    if old is not None and new.spec != old.spec:
        errs.append(immutable(spec, _VALUE_OMITTED))
    errs += _labels(new.spec.metadata.labels, spec.child("metadata", "labels"))
    stored = _claim_selectors(old.spec.spec) if old is not None else set()
    errs += _claim_spec(new.spec.spec, spec.child("spec"), stored)
    return errs


def _claim_selectors(spec: ResourceClaimSpec) -> set[str]:
    out: set[str] = set()
    for r in spec.devices.requests:
        if r.exactly is not None:
            out |= _selector_expressions(r.exactly.selectors)
        for s in r.first_available:
            out |= _selector_expressions(s.selectors)
    return out


# ============================================================== core
def validate_pod(new: Pod, old: Pod | None = None) -> Errors:
    """Pod fields DRA reads: resourceClaims, nodeName, nodeSelector."""
    errs = validate_object_meta(new.metadata)
    spec = ROOT.child("spec")
    if new.spec.node_name:
        errs += _dns_subdomain(new.spec.node_name, spec.child("nodeName"))
    errs += _labels(new.spec.node_selector, spec.child("nodeSelector"))
    claims = spec.child("resourceClaims")
    for i, c in enumerate(new.spec.resource_claims):
        errs += _pod_claim(c, claims.index(i))
    errs += _unique(new.spec.resource_claims, lambda c: c.name, claims, "name")
    return errs


def _pod_claim(c: PodResourceClaim, path: Path) -> Errors:
    errs = _dns_label(c.name, path.child("name"))
    sources = [
        (field, value)
        for field, value in (
            ("resourceClaimName", c.resource_claim_name),
            ("resourceClaimTemplateName", c.resource_claim_template_name),
        )
        if value is not None
    ]
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


# ============================================================== dispatch
def validate_object(obj: BaseModel, old: BaseModel | None = None) -> Errors:
    """Validate any supported object; ``old`` is the stored version on update."""
    if old is not None and type(old) is not type(obj):
        return [
            invalid(
                ROOT.child("kind"), getattr(obj, "kind", type(obj).__name__), "field is immutable"
            )
        ]
    if isinstance(obj, ResourceSlice):
        return validate_resource_slice(obj, old if isinstance(old, ResourceSlice) else None)
    if isinstance(obj, DeviceClass):
        return validate_device_class(obj, old if isinstance(old, DeviceClass) else None)
    if isinstance(obj, ResourceClaim):
        return validate_resource_claim(obj, old if isinstance(old, ResourceClaim) else None)
    if isinstance(obj, ResourceClaimTemplate):
        return validate_resource_claim_template(
            obj, old if isinstance(old, ResourceClaimTemplate) else None
        )
    if isinstance(obj, Pod):
        return validate_pod(obj, old if isinstance(old, Pod) else None)
    if isinstance(obj, Node):
        return validate_node(obj, old if isinstance(old, Node) else None)
    return [
        invalid(
            ROOT.child("kind"),
            getattr(obj, "kind", type(obj).__name__),
            "no validation is defined for this kind",
        )
    ]
