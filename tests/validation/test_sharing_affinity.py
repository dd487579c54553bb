"""KEP-5981 admission rules for ResourceSlice.spec.sharingAffinity.

Covers every Validation bullet of the KEP Test Plan (max 8 entries, duplicate
names, CEL checked at admission, devices/sharingAffinity mutual exclusion,
round trip of SharingAffinityExtractor) and the Integration bullet on
expression limits (10 Ki boundary, combined cost), plus ratcheting on update.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity import cel
from dra_affinity.api.io import dump_json, dump_yaml, load_objects
from dra_affinity.api.resource import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    SHARING_AFFINITY_CEL_MAX_COST,
    ResourceSlice,
)
from dra_affinity.validation import validate_object, validate_resource_slice

from .manifests import (
    PKEY_EXPR,
    SUBNET_EXPR,
    Manifest,
    Mutation,
    device_slice,
    expect,
    expensive_expr,
    meta_slice,
    mutated,
    nested_map_expr,
    parse,
    string_literal_expr,
)


def _entries(n: int) -> list[dict[str, str]]:
    return [{"name": f"key-{i}", "expression": SUBNET_EXPR} for i in range(n)]


def _set_affinity(entries: Any) -> Mutation:
    def apply(m: Manifest) -> None:
        m["spec"]["sharingAffinity"] = entries

    return apply


CASES: list[tuple[str, Mutation | None, str | None, str]] = [
    ("metadata slice is valid", None, None, ""),
    (
        "two keys",
        _set_affinity(
            [
                {"name": "subnet", "expression": SUBNET_EXPR},
                {"name": "pkey", "expression": PKEY_EXPR},
            ]
        ),
        None,
        "",
    ),
    # KEP: sharingAffinity exceeding max 8 entries is rejected
    ("8 entries", _set_affinity(_entries(8)), None, ""),
    (
        "9 entries",
        _set_affinity(_entries(9)),
        "spec.sharingAffinity",
        "Too many: 9: must have at most 8 items",
    ),
    # KEP: duplicate name values within a slice are rejected
    (
        "duplicate name",
        _set_affinity(
            [
                {"name": "subnet", "expression": SUBNET_EXPR},
                {"name": "pkey", "expression": PKEY_EXPR},
                {"name": "subnet", "expression": PKEY_EXPR},
            ]
        ),
        "spec.sharingAffinity[2]",
        'Duplicate value: {"name": "subnet"}',
    ),
    # key name format (a DNS label, see docs/validation.md)
    (
        "name empty",
        _set_affinity([{"name": "", "expression": SUBNET_EXPR}]),
        "spec.sharingAffinity[0].name",
        "Required value",
    ),
    (
        "name with underscore",
        _set_affinity([{"name": "sub_net", "expression": SUBNET_EXPR}]),
        "spec.sharingAffinity[0].name",
        "RFC 1123 label",
    ),
    ("name 63 bytes", _set_affinity([{"name": "k" * 63, "expression": SUBNET_EXPR}]), None, ""),
    (
        "name 64 bytes",
        _set_affinity([{"name": "k" * 64, "expression": SUBNET_EXPR}]),
        "spec.sharingAffinity[0].name",
        "must be no more than 63 characters",
    ),
    # KEP: CEL expressions are checked at admission
    (
        "expression empty",
        _set_affinity([{"name": "subnet", "expression": ""}]),
        "spec.sharingAffinity[0].expression",
        "Required value",
    ),
    (
        "expression does not parse",
        _set_affinity([{"name": "subnet", "expression": "object.subnetID + ("}]),
        "spec.sharingAffinity[0].expression",
        "compilation failed",
    ),
    (
        "unknown variable",
        _set_affinity([{"name": "subnet", "expression": "device.driver"}]),
        "spec.sharingAffinity[0].expression",
        "compilation failed",
    ),
    (
        "returns int",
        _set_affinity([{"name": "subnet", "expression": "1 + 2"}]),
        "spec.sharingAffinity[0].expression",
        "must return string",
    ),
    (
        "returns bool",
        _set_affinity([{"name": "subnet", "expression": 'object.kind == "NicConfig"'}]),
        "spec.sharingAffinity[0].expression",
        "must return string",
    ),
    ("returns dyn", _set_affinity([{"name": "subnet", "expression": "object.subnetID"}]), None, ""),
    (
        "returns string literal",
        _set_affinity([{"name": "subnet", "expression": '"fixed"'}]),
        None,
        "",
    ),
    # KEP: devices and sharingAffinity are mutually exclusive
    ("empty list with devices", None, None, ""),
    # KEP Integration: exactly 10 Ki accepted, one byte more rejected
    (
        "expression exactly 10 Ki",
        _set_affinity(
            [
                {
                    "name": "subnet",
                    "expression": string_literal_expr(CEL_SELECTOR_EXPRESSION_MAX_LENGTH),
                }
            ]
        ),
        None,
        "",
    ),
    (
        "expression 10 Ki + 1",
        _set_affinity(
            [
                {
                    "name": "subnet",
                    "expression": string_literal_expr(CEL_SELECTOR_EXPRESSION_MAX_LENGTH + 1),
                }
            ]
        ),
        "spec.sharingAffinity[0].expression",
        "Too long: may not be more than 10240 bytes",
    ),
    (
        "10 Ki counted in bytes, not characters",
        _set_affinity(
            [
                {
                    "name": "subnet",
                    "expression": string_literal_expr(CEL_SELECTOR_EXPRESSION_MAX_LENGTH, "é"),
                }
            ]
        ),
        None,
        "",
    ),
    (
        "10 Ki + 1 bytes of multi-byte characters",
        _set_affinity(
            [
                {
                    "name": "subnet",
                    "expression": string_literal_expr(CEL_SELECTOR_EXPRESSION_MAX_LENGTH + 1, "é"),
                }
            ]
        ),
        "spec.sharingAffinity[0].expression",
        "Too long",
    ),
]


@pytest.mark.parametrize(
    ("mutation", "path", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_sharing_affinity_rules(mutation: Mutation | None, path: str | None, fragment: str) -> None:
    expect(validate_object(parse(mutated(meta_slice(), mutation))), path, fragment)


def test_compile_error_names_position() -> None:
    errors = validate_object(
        parse(
            mutated(
                meta_slice(), _set_affinity([{"name": "subnet", "expression": "object.subnetID +"}])
            )
        )
    )
    expect(errors, "spec.sharingAffinity[0].expression", "offset")


def test_too_many_is_reported_once_and_not_compiled() -> None:
    entries = [{"name": f"k{i}", "expression": "1 +"} for i in range(50)]
    errors = validate_object(parse(mutated(meta_slice(), _set_affinity(entries))))
    assert [e.path for e in errors] == ["spec.sharingAffinity"], [e.render() for e in errors]


@pytest.mark.parametrize("entries", [[], None])
def test_devices_with_empty_or_null_sharing_affinity(entries: Any) -> None:
    expect(validate_object(parse(mutated(device_slice(), _set_affinity(entries)))), None)


def test_devices_and_sharing_affinity_are_exclusive() -> None:
    data = mutated(device_slice(), _set_affinity([{"name": "subnet", "expression": SUBNET_EXPR}]))
    expect(
        validate_object(parse(data)),
        "spec.sharingAffinity",
        "Forbidden: may not be set together with `devices`",
    )


def test_combined_cost_over_budget_within_one_slice() -> None:
    heavy, other = expensive_expr(), expensive_expr("other")
    expect(validate_object(parse(meta_slice(extractors=[("a", heavy)]))), None)
    two = parse(meta_slice(extractors=[("a", heavy), ("b", other)]))
    errors = validate_object(two)
    total = sum(cel.EXTRACTOR_ENV.compile(e).cost_estimate.min for e in (heavy, other))
    assert total > SHARING_AFFINITY_CEL_MAX_COST
    expect(
        errors,
        "spec.sharingAffinity",
        f"combined estimated cost of the sharingAffinity expressions is {total}, "
        f"more than the limit of {SHARING_AFFINITY_CEL_MAX_COST}",
    )
    assert [e.path for e in errors] == ["spec.sharingAffinity"]


def test_two_triple_nested_comprehensions_over_100_elements() -> None:
    expr = nested_map_expr(3, 100)
    cost = cel.EXTRACTOR_ENV.compile(expr).cost_estimate.min
    alone = validate_object(parse(meta_slice(extractors=[("a", expr)])))
    # One alone is rejected exactly when it is over budget by itself.
    assert bool(alone) == (cost > SHARING_AFFINITY_CEL_MAX_COST)
    pair = validate_object(
        parse(meta_slice(extractors=[("a", expr), ("b", expr.replace("heavy", "b"))]))
    )
    expect(pair, "spec.sharingAffinity", "combined estimated cost")


# ------------------------------------------------------------------ ratcheting
def _stored(extractors: list[tuple[str, str]]) -> ResourceSlice:
    """A slice as already stored (built without admission, e.g. under older limits)."""
    obj = parse(meta_slice(extractors=extractors))
    assert isinstance(obj, ResourceSlice)
    return obj


TOO_LONG = string_literal_expr(CEL_SELECTOR_EXPRESSION_MAX_LENGTH + 100)


def test_unchanged_over_long_expression_is_accepted_on_update() -> None:
    old = _stored([("subnet", TOO_LONG)])
    assert validate_resource_slice(old) != []  # it would not be admitted today
    new = parse(
        mutated(
            meta_slice(extractors=[("subnet", TOO_LONG)]),
            lambda m: m["metadata"].update(labels={"a": "b"}),
        )
    )
    expect(validate_resource_slice(new, old), None)


def test_unchanged_entry_may_move_and_others_may_be_added() -> None:
    old = _stored([("subnet", TOO_LONG)])
    new = parse(meta_slice(extractors=[("pkey", PKEY_EXPR), ("subnet", TOO_LONG)]))
    expect(validate_resource_slice(new, old), None)


def test_changed_over_long_expression_is_rejected() -> None:
    old = _stored([("subnet", TOO_LONG)])
    new = parse(meta_slice(extractors=[("subnet", TOO_LONG + " ")]))
    expect(validate_resource_slice(new, old), "spec.sharingAffinity[0].expression", "Too long")


def test_renamed_entry_counts_as_changed() -> None:
    old = _stored([("subnet", TOO_LONG)])
    new = parse(meta_slice(extractors=[("subnet-v2", TOO_LONG)]))
    expect(validate_resource_slice(new, old), "spec.sharingAffinity[0].expression", "Too long")


def test_unchanged_non_compiling_expression_is_accepted() -> None:
    old = _stored([("subnet", "object.subnetID +")])
    new = parse(meta_slice(extractors=[("subnet", "object.subnetID +")]))
    expect(validate_resource_slice(new, old), None)


def test_combined_cost_is_checked_only_when_an_expression_changes() -> None:
    heavy = expensive_expr()
    trio = [("a", heavy), ("b", heavy), ("c", heavy)]
    old = _stored(trio)  # over budget, as if stored under a looser limit
    assert validate_resource_slice(old) != []
    unchanged = parse(
        mutated(meta_slice(extractors=trio), lambda m: m["metadata"].update(labels={"x": "y"}))
    )
    expect(validate_resource_slice(unchanged, old), None)
    removed = parse(meta_slice(extractors=trio[:2]))  # still over, but nothing changed
    expect(validate_resource_slice(removed, old), None)
    added = parse(meta_slice(extractors=[*trio[:2], ("d", '"x"')]))
    expect(validate_resource_slice(added, old), "spec.sharingAffinity", "combined estimated cost")
    edited = parse(meta_slice(extractors=[*trio[:2], ("c", heavy + " ")]))
    expect(validate_resource_slice(edited, old), "spec.sharingAffinity", "combined estimated cost")


def test_ratcheting_does_not_skip_name_or_exclusivity_rules() -> None:
    old = _stored([("subnet", SUBNET_EXPR)])
    new = parse(meta_slice(extractors=[("subnet", SUBNET_EXPR), ("subnet", SUBNET_EXPR)]))
    expect(validate_resource_slice(new, old), "spec.sharingAffinity[1]", "Duplicate value")


# ------------------------------------------------------------------ round trip
YAML = f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node1-nics-meta
spec:
  driver: networking.example.com
  nodeName: node1
  pool:
    name: node1
    generation: 3
    resourceSliceCount: 2
  sharingAffinity:
  - name: subnet
    expression: |
      object.apiVersion == "networking.example.com/v1" && object.kind == "NicConfig"
        ? object.subnetID : ""
  - name: pkey
    expression: '{PKEY_EXPR}'
"""


def test_round_trip_serialization_of_extractors() -> None:
    [(_, obj)] = load_objects(YAML, "rt.yaml")
    assert isinstance(obj, ResourceSlice)
    assert obj.spec.sharing_affinity is not None
    assert [e.name for e in obj.spec.sharing_affinity] == ["subnet", "pkey"]
    assert obj.spec.sharing_affinity[0].expression.endswith('? object.subnetID : ""\n')
    expect(validate_object(obj), None)
    [(_, again)] = load_objects(dump_yaml([obj]), "again.yaml")
    assert again == obj
    assert again.to_dict() == obj.to_dict()
    [(_, from_json)] = load_objects(dump_json(obj), "again.json")
    assert from_json == obj
    assert obj.to_dict()["spec"]["sharingAffinity"][1] == {"name": "pkey", "expression": PKEY_EXPR}


def test_round_trip_keeps_absent_and_null_apart() -> None:
    absent = parse(device_slice())
    assert "sharingAffinity" not in absent.to_dict()["spec"]
    null = parse(mutated(device_slice(), _set_affinity(None)))
    [(_, again)] = load_objects(dump_yaml([null]), "null.yaml")
    assert isinstance(again, ResourceSlice)
    assert again.spec.sharing_affinity is None
    assert "sharingAffinity" in again.to_dict()["spec"]
