"""DeviceClass, ResourceClaim(Template), Pod, Node and metadata rules, table-driven."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dra_affinity.api.resource import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    OPAQUE_PARAMETERS_MAX_LENGTH,
)
from dra_affinity.validation import validate_object

from .manifests import (
    Manifest,
    Mutation,
    claim_template,
    device_class,
    expect,
    mutated,
    node,
    parse,
    pod,
    resource_claim,
)


def at(path: list[Any], value: Any) -> Mutation:
    def apply(m: Manifest) -> None:
        cur: Any = m
        for p in path[:-1]:
            cur = cur[p]
        cur[path[-1]] = value

    return apply


def drop(path: list[Any]) -> Mutation:
    def apply(m: Manifest) -> None:
        cur: Any = m
        for p in path[:-1]:
            cur = cur[p]
        del cur[path[-1]]

    return apply


def params_of_size(n: int) -> dict[str, str]:
    """Parameters whose compact JSON encoding is exactly ``n`` bytes."""
    overhead = len(json.dumps({"k": ""}, separators=(",", ":")))
    return {"k": "x" * (n - overhead)}


R = ["spec", "devices", "requests"]


def extra_requests(n: int) -> Mutation:
    def apply(m: Manifest) -> None:
        m["spec"]["devices"]["requests"] += [
            {"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(n)
        ]

    return apply


NIC = [*R, 0, "exactly"]
GPU = [*R, 1, "firstAvailable"]
CFG = ["spec", "devices", "config", 0]

CLAIM_CASES: list[tuple[str, Mutation | None, str | None, str]] = [
    ("base is valid", None, None, ""),
    (
        "32 requests",
        extra_requests(30),
        None,
        "",
    ),
    (
        "33 requests",
        extra_requests(31),
        "spec.devices.requests",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "duplicate request names",
        at([*R, 1, "name"], "nic"),
        "spec.devices.requests[1].name",
        'Duplicate value: "nic"',
    ),
    (
        "request name not a DNS label",
        at([*R, 0, "name"], "my_nic"),
        "spec.devices.requests[0].name",
        "RFC 1123 label",
    ),
    (
        "neither exactly nor firstAvailable",
        drop([*R, 0, "exactly"]),
        "spec.devices.requests[0]",
        "Required value: exactly one of `exactly` or `firstAvailable`",
    ),
    (
        "both exactly and firstAvailable",
        at([*R, 1, "exactly"], {"deviceClassName": "c"}),
        "spec.devices.requests[1]",
        "but multiple fields are set",
    ),
    (
        "8 subrequests",
        at(
            GPU,
            [{"name": n, "deviceClassName": "c"} for n in ["big", *(f"s{i}" for i in range(7))]],
        ),
        None,
        "",
    ),
    (
        "9 subrequests",
        at(GPU, [{"name": f"s{i}", "deviceClassName": "c"} for i in range(9)]),
        "spec.devices.requests[1].firstAvailable",
        "Too many: 9: must have at most 8 items",
    ),
    (
        "duplicate subrequest names",
        at([*GPU, 1, "name"], "big"),
        "spec.devices.requests[1].firstAvailable[1].name",
        'Duplicate value: "big"',
    ),
    (
        "deviceClassName missing",
        at([*NIC, "deviceClassName"], ""),
        "spec.devices.requests[0].exactly.deviceClassName",
        "Required value",
    ),
    (
        "subrequest deviceClassName invalid",
        at([*GPU, 0, "deviceClassName"], "GPU!"),
        "spec.devices.requests[1].firstAvailable[0].deviceClassName",
        "Invalid value",
    ),
    ("allocationMode All without count", at([*NIC, "allocationMode"], "All"), None, ""),
    (
        "allocationMode All with count",
        lambda m: (at([*NIC, "allocationMode"], "All")(m), at([*NIC, "count"], 1)(m)),
        "spec.devices.requests[0].exactly.count",
        "must not be specified when allocationMode is 'All'",
    ),
    ("ExactCount count 1", at([*NIC, "count"], 1), None, ""),
    (
        "ExactCount count 0",
        at([*NIC, "count"], 0),
        "spec.devices.requests[0].exactly.count",
        "must be greater than zero",
    ),
    (
        "subrequest count -1",
        at([*GPU, 1, "count"], -1),
        "spec.devices.requests[1].firstAvailable[1].count",
        "must be greater than zero",
    ),
    (
        "selector does not compile",
        at([*NIC, "selectors", 0, "cel", "expression"], "device.driver =="),
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "compilation failed",
    ),
    (
        "selector returns string",
        at([*NIC, "selectors", 0, "cel", "expression"], "device.driver"),
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "must return bool",
    ),
    (
        "selector without cel",
        at([*NIC, "selectors", 0], {}),
        "spec.devices.requests[0].exactly.selectors[0].cel",
        "Required value",
    ),
    (
        "selector in subrequest",
        at([*GPU, 0, "selectors"], [{"cel": {"expression": "object.x"}}]),
        "spec.devices.requests[1].firstAvailable[0].selectors[0].cel.expression",
        "compilation failed",
    ),
    (
        "capacity request zero",
        at([*NIC, "capacity", "requests", "networking.example.com/slots"], "0"),
        "spec.devices.requests[0].exactly.capacity.requests[networking.example.com/slots]",
        "must be greater than zero",
    ),
    (
        "capacity request name invalid",
        at([*NIC, "capacity", "requests"], {"a/b/c": "1"}),
        "spec.devices.requests[0].exactly.capacity.requests[a/b/c]",
        "must be either a C identifier",
    ),
    (
        "toleration ok",
        at(
            [*NIC, "tolerations"],
            [
                {
                    "key": "example.com/broken",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 30,
                }
            ],
        ),
        None,
        "",
    ),
    (
        "toleration seconds without NoExecute",
        at(
            [*NIC, "tolerations"],
            [{"key": "broken", "operator": "Exists", "tolerationSeconds": 30}],
        ),
        "spec.devices.requests[0].exactly.tolerations[0].effect",
        "NoExecute",
    ),
    # constraints
    ("constraint on subrequest", None, None, ""),
    (
        "constraint on unknown request",
        at(["spec", "devices", "constraints", 0, "requests", 1], "tpu"),
        "spec.devices.constraints[0].requests[1]",
        'Invalid value: "tpu": must be the name of a request',
    ),
    (
        "constraint on unknown subrequest",
        at(["spec", "devices", "constraints", 0, "requests", 1], "gpu/huge"),
        "spec.devices.constraints[0].requests[1]",
        "must be the name of a request",
    ),
    (
        "constraint reference with two slashes",
        at(["spec", "devices", "constraints", 0, "requests", 1], "gpu/big/x"),
        "spec.devices.constraints[0].requests[1]",
        "must be the name of a request",
    ),
    (
        "constraint duplicate reference",
        at(["spec", "devices", "constraints", 0, "requests", 1], "nic"),
        "spec.devices.constraints[0].requests[1]",
        'Duplicate value: "nic"',
    ),
    (
        "constraint attribute without domain",
        at(["spec", "devices", "constraints", 0, "matchAttribute"], "numa"),
        "spec.devices.constraints[0].matchAttribute",
        "must include a domain",
    ),
    (
        "constraint without attribute",
        drop(["spec", "devices", "constraints", 0, "matchAttribute"]),
        "spec.devices.constraints[0].matchAttribute",
        "Required value",
    ),
    # config
    ("config for all requests", at([*CFG, "requests"], []), None, ""),
    ("config for subrequest", at([*CFG, "requests"], ["gpu/small"]), None, ""),
    (
        "config for unknown request",
        at([*CFG, "requests"], ["tpu"]),
        "spec.devices.config[0].requests[0]",
        "must be the name of a request",
    ),
    (
        "config without opaque",
        drop([*CFG, "opaque"]),
        "spec.devices.config[0].opaque",
        "Required value",
    ),
    (
        "opaque driver missing",
        at([*CFG, "opaque", "driver"], ""),
        "spec.devices.config[0].opaque.driver",
        "Required value",
    ),
    (
        "opaque parameters missing",
        drop([*CFG, "opaque", "parameters"]),
        "spec.devices.config[0].opaque.parameters",
        "Required value",
    ),
    (
        "opaque parameters a list",
        at([*CFG, "opaque", "parameters"], [1, 2]),
        "spec.devices.config[0].opaque.parameters",
        'Invalid value: "<value omitted>": must be a JSON object',
    ),
    (
        "opaque parameters a string",
        at([*CFG, "opaque", "parameters"], "subnet-a"),
        "spec.devices.config[0].opaque.parameters",
        "must be a JSON object",
    ),
    (
        "opaque parameters NaN",
        at([*CFG, "opaque", "parameters"], {"x": float("nan")}),
        "spec.devices.config[0].opaque.parameters",
        "must be a JSON object",
    ),
    (
        "opaque parameters exactly 10 Ki",
        at([*CFG, "opaque", "parameters"], params_of_size(OPAQUE_PARAMETERS_MAX_LENGTH)),
        None,
        "",
    ),
    (
        "opaque parameters 10 Ki + 1",
        at([*CFG, "opaque", "parameters"], params_of_size(OPAQUE_PARAMETERS_MAX_LENGTH + 1)),
        "spec.devices.config[0].opaque.parameters",
        "Too long: may not be more than 10240 bytes",
    ),
    # status
    (
        "allocation of a subrequest",
        at(
            ["status"],
            {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu/big",
                                "driver": "gpu.example.com",
                                "pool": "node-1",
                                "device": "gpu-0",
                            }
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": "pod-a", "uid": "1"}],
            },
        ),
        None,
        "",
    ),
    (
        "allocation of an unknown request",
        at(
            ["status"],
            {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "tpu",
                                "driver": "gpu.example.com",
                                "pool": "node-1",
                                "device": "gpu-0",
                            }
                        ]
                    }
                }
            },
        ),
        "status.allocation.devices.results[0].request",
        "must be the name of a request",
    ),
    (
        "allocation with a bad device name",
        at(
            ["status"],
            {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "nic",
                                "driver": "networking.example.com",
                                "pool": "node-1",
                                "device": "Eth1",
                            }
                        ]
                    }
                }
            },
        ),
        "status.allocation.devices.results[0].device",
        "RFC 1123 label",
    ),
    (
        "reservedFor without allocation",
        at(["status"], {"reservedFor": [{"resource": "pods", "name": "pod-a", "uid": "1"}]}),
        "status.reservedFor",
        "Forbidden",
    ),
    (
        "namespace invalid",
        at(["metadata", "namespace"], "Team.A"),
        "metadata.namespace",
        "RFC 1123 label",
    ),
    (
        "label value invalid",
        at(["metadata", "labels"], {"app": "-web"}),
        "metadata.labels",
        "a valid label",
    ),
]


@pytest.mark.parametrize(
    ("mutation", "path", "fragment"), [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES]
)
def test_resource_claim_rules(mutation: Mutation | None, path: str | None, fragment: str) -> None:
    expect(validate_object(parse(mutated(resource_claim(), mutation))), path, fragment)


def test_claim_spec_is_immutable() -> None:
    old = parse(resource_claim())
    same = parse(mutated(resource_claim(), at(["metadata", "labels"], {"a": "b"})))
    expect(validate_object(same, old), None)
    changed = parse(mutated(resource_claim(), at([*NIC, "count"], 2)))
    expect(validate_object(changed, old), "spec", "field is immutable")


def _template_path(mutation: Mutation) -> Mutation:
    """Apply a claim mutation (written for ``spec.devices``) inside a template."""

    def apply(m: Manifest) -> None:
        inner = {"spec": m["spec"]["spec"]}
        mutation(inner)
        m["spec"]["spec"] = inner["spec"]

    return apply


TEMPLATE_CASES: list[tuple[str, Mutation | None, str | None, str]] = [
    ("base is valid", None, None, ""),
    (
        "request name invalid",
        _template_path(at([*R, 0, "name"], "NIC")),
        "spec.spec.devices.requests[0].name",
        "RFC 1123 label",
    ),
    (
        "opaque parameters a list",
        _template_path(at([*CFG, "opaque", "parameters"], [])),
        "spec.spec.devices.config[0].opaque.parameters",
        "must be a JSON object",
    ),
    (
        "template label invalid",
        at(["spec", "metadata", "labels"], {"a b": "c"}),
        "spec.metadata.labels",
        "Invalid value",
    ),
]


@pytest.mark.parametrize(
    ("mutation", "path", "fragment"),
    [c[1:] for c in TEMPLATE_CASES],
    ids=[c[0] for c in TEMPLATE_CASES],
)
def test_claim_template_rules(mutation: Mutation | None, path: str | None, fragment: str) -> None:
    expect(validate_object(parse(mutated(claim_template(), mutation))), path, fragment)


SEL = ["spec", "selectors", 0, "cel", "expression"]
CLASS_CASES: list[tuple[str, Mutation | None, str | None, str]] = [
    ("base is valid", None, None, ""),
    (
        "selector returns dyn",
        at(SEL, 'device.attributes["networking.example.com"].sriov'),
        None,
        "",
    ),
    ("selector returns int", at(SEL, "1"), "spec.selectors[0].cel.expression", "must return bool"),
    (
        "selector does not compile",
        at(SEL, "device.driver == )"),
        "spec.selectors[0].cel.expression",
        "compilation failed",
    ),
    (
        "selector uses object",
        at(SEL, 'object.kind == "x"'),
        "spec.selectors[0].cel.expression",
        "compilation failed",
    ),
    ("selector empty", at(SEL, ""), "spec.selectors[0].cel.expression", "Required value"),
    (
        "selector exactly 10 Ki",
        at(SEL, "true" + " " * (CEL_SELECTOR_EXPRESSION_MAX_LENGTH - 4)),
        None,
        "",
    ),
    (
        "selector 10 Ki + 1",
        at(SEL, "true" + " " * (CEL_SELECTOR_EXPRESSION_MAX_LENGTH - 3)),
        "spec.selectors[0].cel.expression",
        "Too long: may not be more than 10240 bytes",
    ),
    (
        "33 selectors",
        at(["spec", "selectors"], [{"cel": {"expression": "true"}}] * 33),
        "spec.selectors",
        "Too many: 33",
    ),
    (
        "config parameters a list",
        at(["spec", "config", 0, "opaque", "parameters"], ["x"]),
        "spec.config[0].opaque.parameters",
        "must be a JSON object",
    ),
    (
        "config parameters 10 Ki + 1",
        at(
            ["spec", "config", 0, "opaque", "parameters"],
            params_of_size(OPAQUE_PARAMETERS_MAX_LENGTH + 1),
        ),
        "spec.config[0].opaque.parameters",
        "Too long",
    ),
    (
        "config driver invalid",
        at(["spec", "config", 0, "opaque", "driver"], "net_example"),
        "spec.config[0].opaque.driver",
        "Invalid value",
    ),
    (
        "config without opaque",
        at(["spec", "config", 0], {}),
        "spec.config[0].opaque",
        "Required value",
    ),
    ("name invalid", at(["metadata", "name"], "NIC"), "metadata.name", "RFC 1123 subdomain"),
]


@pytest.mark.parametrize(
    ("mutation", "path", "fragment"), [c[1:] for c in CLASS_CASES], ids=[c[0] for c in CLASS_CASES]
)
def test_device_class_rules(mutation: Mutation | None, path: str | None, fragment: str) -> None:
    expect(validate_object(parse(mutated(device_class(), mutation))), path, fragment)


def test_device_class_selector_ratcheting() -> None:
    stored = parse(mutated(device_class(), at(SEL, "1")))  # stored under an older, looser rule
    unchanged = parse(mutated(device_class(), at(SEL, "1")))
    expect(validate_object(unchanged, stored), None)
    changed = parse(mutated(device_class(), at(SEL, "2")))
    expect(validate_object(changed, stored), "spec.selectors[0].cel.expression", "must return bool")


RC = ["spec", "resourceClaims"]
POD_CASES: list[tuple[str, Mutation | None, str | None, str]] = [
    ("base is valid", None, None, ""),
    (
        "claim with both sources",
        at([*RC, 0, "resourceClaimTemplateName"], "t"),
        "spec.resourceClaims[0]",
        "at most one of `resourceClaimName` or `resourceClaimTemplateName`",
    ),
    (
        "claim with no source",
        drop([*RC, 0, "resourceClaimName"]),
        "spec.resourceClaims[0]",
        "Required value: must specify one of",
    ),
    (
        "duplicate claim names",
        at([*RC, 1, "name"], "nic"),
        "spec.resourceClaims[1].name",
        'Duplicate value: "nic"',
    ),
    (
        "claim name not a DNS label",
        at([*RC, 0, "name"], "my.nic"),
        "spec.resourceClaims[0].name",
        "RFC 1123 label",
    ),
    (
        "claim name reference invalid",
        at([*RC, 0, "resourceClaimName"], "Pod_A"),
        "spec.resourceClaims[0].resourceClaimName",
        "Invalid value",
    ),
    ("nodeName invalid", at(["spec", "nodeName"], "Node 1"), "spec.nodeName", "Invalid value"),
    (
        "nodeSelector key invalid",
        at(["spec", "nodeSelector"], {"bad key": "x"}),
        "spec.nodeSelector",
        "Invalid value",
    ),
    ("pod name missing", at(["metadata", "name"], ""), "metadata.name", "Required value"),
]


@pytest.mark.parametrize(
    ("mutation", "path", "fragment"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_pod_rules(mutation: Mutation | None, path: str | None, fragment: str) -> None:
    expect(validate_object(parse(mutated(pod(), mutation))), path, fragment)


NODE_CASES: list[tuple[str, Mutation | None, str | None, str]] = [
    ("base is valid", None, None, ""),
    ("name 253 bytes", at(["metadata", "name"], ".".join(["n" * 63] * 4)[:253]), None, ""),
    (
        "name over 253 bytes",
        at(["metadata", "name"], ".".join(["n" * 63] * 4) + "n" * 2),
        "metadata.name",
        "must be no more than 253 characters",
    ),
    (
        "label key invalid",
        at(["metadata", "labels"], {"example.com/": "x"}),
        "metadata.labels",
        "name part must be non-empty",
    ),
]


@pytest.mark.parametrize(
    ("mutation", "path", "fragment"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES]
)
def test_node_rules(mutation: Mutation | None, path: str | None, fragment: str) -> None:
    expect(validate_object(parse(mutated(node(), mutation))), path, fragment)


def test_update_of_a_different_kind_is_rejected() -> None:
    expect(validate_object(parse(pod()), parse(node())), "kind", "field is immutable")


def test_unknown_model_is_an_error_not_an_exception() -> None:
    from dra_affinity.api.meta import ObjectMeta

    expect(validate_object(ObjectMeta(name="x")), "kind", "no validation is defined")


def test_manifests_are_not_mutated() -> None:
    base = resource_claim()
    snapshot = copy.deepcopy(base)
    obj = parse(base)
    before = obj.to_dict()
    validate_object(obj)
    assert obj.to_dict() == before and base == snapshot
