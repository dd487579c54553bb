"""ResourceSlice validation, with KEP-5981's rules for ``spec.sharingAffinity``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_affinity import cel
from dra_affinity.api.quantity import Quantity
from dra_affinity.api.resource import (
    DEVICE_ATTRIBUTES_AND_CAPACITIES_MAX,
    RESOURCE_SLICE_MAX_DEVICES,
    SHARING_AFFINITY_CEL_MAX_COST,
    SHARING_AFFINITY_MAX_ENTRIES,
    CapacityRequestPolicy,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    ResourceSlice,
    ResourceSliceSpec,
    SharingAffinityExtractor,
)
from dra_affinity.validation._common import (
    _NODE_SELECTION_FIELDS,
    _TAINT_EFFECTS,
    _VALUE_OMITTED,
    DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH,
    DEVICE_TAINTS_MAX,
    Errors,
    _cel_expression,
    _dns_label,
    _dns_subdomain,
    _driver_name,
    _int64,
    _min_cost,
    _node_selector,
    _non_negative,
    _pool_name,
    _qualified_name,
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
    is_semver,
    label_value_problems,
    nbytes,
    not_supported,
    qualified_label_key_problems,
    required,
    too_long,
    too_many,
)


# ============================================================== ResourceSlice
def validate_resource_slice(new: ResourceSlice, old: ResourceSlice | None = None) -> Errors:
    """A ResourceSlice on create (``old`` None) or update (``old`` the stored slice)."""
    errs = validate_object_meta(new.metadata)
    errs += _slice_spec(new.spec, old.spec if old is not None else None, at((ROOT, "spec")))
    return errs


def _slice_spec(spec: ResourceSliceSpec, old: ResourceSliceSpec | None, path: Path) -> Errors:
    errs = _driver_name(spec.driver, at((path, "driver")))
    pool = at((path, "pool"))
    errs += _pool_name(spec.pool.name, at((pool, "name")))
    errs += _int64(spec.pool.generation, at((pool, "generation")))
    if spec.pool.generation < 0:
        errs.append(
            invalid(
                at((pool, "generation")), spec.pool.generation, "must be greater than or equal to 0"
            )
        )
    errs += _int64(spec.pool.resource_slice_count, at((pool, "resourceSliceCount")))
    if spec.pool.resource_slice_count < 1:
        errs.append(
            invalid(
                at((pool, "resourceSliceCount")),
                spec.pool.resource_slice_count,
                "must be greater than 0",
            )
        )
    if old is not None:
        if spec.driver != old.driver:
            errs.append(immutable(at((path, "driver")), spec.driver))
        if spec.pool.name != old.pool.name:
            errs.append(immutable(at((pool, "name")), spec.pool.name))
        if (spec.node_name or None) != (old.node_name or None):
            errs.append(immutable(at((path, "nodeName")), spec.node_name))
    errs += _node_selection(spec, path)

    devices = at((path, "devices"))
    per_device = spec.per_device_node_selection is True
    for i, device in enumerate(spec.devices):
        errs += _device(device, devices.index(i), per_device)
    if len(spec.devices) > RESOURCE_SLICE_MAX_DEVICES:
        errs.append(too_many(devices, len(spec.devices), RESOURCE_SLICE_MAX_DEVICES))
    errs += _unique(spec.devices, lambda d: d.name, devices, "name")

    counters = at((path, "sharedCounters"))
    for i, cs in enumerate(spec.shared_counters):
        errs += _counter_set(cs, counters.index(i))
    errs += _unique(spec.shared_counters, lambda c: c.name, counters, "name")

    errs += validate_sharing_affinity(spec, old, at((path, "sharingAffinity")))
    return errs


def _node_selection(spec: ResourceSliceSpec, path: Path) -> Errors:
    errs: Errors = []
    chosen: list[str] = []
    if spec.node_name:
        chosen.append("`nodeName`")
        errs += _dns_subdomain(spec.node_name, at((path, "nodeName")))
    if spec.node_selector is not None:
        chosen.append("`nodeSelector`")
        errs += _node_selector(spec.node_selector, at((path, "nodeSelector")))
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
    errs = _dns_label(device.name, at((path, "name")))
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
    attributes = at((path, "attributes"))
    for name, attr in device.attributes.items():
        errs += _qualified_name(name, attributes.key(name))
        errs += _attribute(attr, attributes.key(name))
    capacity = at((path, "capacity"))
    for name, cap in device.capacity.items():
        errs += _qualified_name(name, capacity.key(name))
        errs += _capacity(cap, capacity.key(name))

    consumes = at((path, "consumesCounters"))
    for i, consumption in enumerate(device.consumes_counters):
        errs += _counter_consumption(consumption, consumes.index(i))
    errs += _unique(device.consumes_counters, lambda c: c.counter_set, consumes, "counterSet")

    taints = at((path, "taints"))
    if len(device.taints) > DEVICE_TAINTS_MAX:
        errs.append(too_many(taints, len(device.taints), DEVICE_TAINTS_MAX))
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
            errs += _dns_subdomain(device.node_name, at((path, "nodeName")))
        if device.node_selector is not None:
            errs += _node_selector(device.node_selector, at((path, "nodeSelector")))
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
        errs += _int64(attr.int_, at((path, "int")))
    if attr.string is not None and nbytes(attr.string) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
        errs.append(too_long(at((path, "string")), DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
    if attr.version is not None:
        if not is_semver(attr.version):
            errs.append(
                invalid(
                    at((path, "version")),
                    attr.version,
                    "must be a string compatible with semver.org spec 2.0.0",
                )
            )
        if nbytes(attr.version) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
            errs.append(too_long(at((path, "version")), DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
    if set_count == 0:
        errs.append(required(path, "exactly one value must be specified"))
    elif set_count > 1:
        errs.append(invalid(path, attr.to_dict(), "exactly one value must be specified"))
    return errs


def _capacity(cap: DeviceCapacity, path: Path) -> Errors:
    errs = _non_negative(cap.value, at((path, "value")))
    if cap.request_policy is not None:
        errs += _request_policy(cap.value, cap.request_policy, at((path, "requestPolicy")))
    return errs


def _within_capacity(value: Quantity, capacity: Quantity, path: Path) -> Errors:
    """A request policy's default or range bound: at most the device's capacity."""
    if value > capacity:
        return [invalid(path, str(value), f"must not exceed the capacity value {capacity}")]
    return []


def _request_policy(capacity: Quantity, policy: CapacityRequestPolicy, path: Path) -> Errors:
    """KEP-5075 request policy: a default plus either discrete values or a range."""
    errs: Errors = []
    default = policy.default
    dpath = at((path, "default"))
    if default is not None:
        errs += _non_negative(default, dpath)
        errs += _within_capacity(default, capacity, dpath)
    if policy.valid_values and policy.valid_range is not None:
        errs.append(
            forbidden(
                path,
                "exactly one policy can be specified, cannot specify `validValues` and "
                "`validRange` at the same time",
            )
        )
    elif policy.valid_values:
        values = at((path, "validValues"))
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
        rpath = at((path, "validRange"))
        errs += _non_negative(rng.min, at((rpath, "min")))
        errs += _within_capacity(rng.min, capacity, at((rpath, "min")))
        if rng.max is not None:
            if rng.max < rng.min:
                errs.append(
                    invalid(
                        at((rpath, "max")),
                        str(rng.max),
                        f"must be greater than or equal to `min` ({rng.min})",
                    )
                )
            errs += _within_capacity(rng.max, capacity, at((rpath, "max")))
        step_ok = rng.step is None or rng.step.sign() > 0
        if not step_ok:
            errs.append(invalid(at((rpath, "step")), str(rng.step), "must be greater than zero"))
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
        errs += _non_negative(counter.value, at((path.key(name), "value")))
    return errs


def _counter_set(cs: CounterSet, path: Path) -> Errors:
    return _dns_label(cs.name, at((path, "name"))) + _counters(cs.counters, at((path, "counters")))


def _counter_consumption(c: DeviceCounterConsumption, path: Path) -> Errors:
    # The counter set may be published in another slice of the pool, so only the
    # form is checked here; references are resolved by pool validation.
    return _dns_label(c.counter_set, at((path, "counterSet"))) + _counters(
        c.counters, at((path, "counters"))
    )


def _taint(taint: DeviceTaint, path: Path) -> Errors:
    errs: Errors = []
    if not taint.key:
        errs.append(required(at((path, "key"))))
    else:
        errs += [
            invalid(at((path, "key")), taint.key, m)
            for m in qualified_label_key_problems(taint.key)
        ]
    if taint.value:
        errs += [
            invalid(at((path, "value")), taint.value, m) for m in label_value_problems(taint.value)
        ]
    if taint.effect not in _TAINT_EFFECTS:
        errs.append(not_supported(at((path, "effect")), taint.effect, _TAINT_EFFECTS))
    return errs


def validate_sharing_affinity(spec: ResourceSliceSpec, old: ResourceSliceSpec | None,
                              path: Path) -> Errors:
    """KEP-5981: at most 8 uniquely named extractors, metadata slices only, bounded CEL.

    ``path`` is where the list is written: ``spec.sharingAffinity``, or the annotation
    that carries it on servers that do not store the field
    (:mod:`dra_affinity.validation.sharing_affinity`).

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
        errs += _dns_label(entry.name, at((path.index(i), "name")))
        if (entry.name, entry.expression) in stored:
            unchanged.append(entry)
            continue
        changed = True
        if over_limit:  # bound the work an oversized list can cause
            continue
        e_errs, program = _cel_expression(
            entry.expression, at((path.index(i), "expression")), cel.EXTRACTOR_ENV, ("string",)
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
