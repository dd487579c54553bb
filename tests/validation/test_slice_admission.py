"""ResourceSlice admission rules other than sharingAffinity: one passing and one failing case each."""

from __future__ import annotations

from typing import Any

import pytest

from dra_affinity.validation import validate_object

from .manifests import Manifest, Mutation, device_slice, expect, mutated, parse


def _spec(m: Manifest) -> Any:
    return m["spec"]


def _dev(m: Manifest, i: int = 0) -> Any:
    return m["spec"]["devices"][i]


def _set(path: list[Any], value: Any) -> Mutation:
    def apply(m: Manifest) -> None:
        cur: Any = m
        for p in path[:-1]:
            cur = cur[p]
        cur[path[-1]] = value

    return apply


def _attrs(n: int) -> dict[str, Any]:
    return {f"a{i}": {"int": i} for i in range(n)}


SLICE_CASES: list[tuple[str, Mutation | None, str | None, str]] = [
    ("base is valid", None, None, ""),
    # driver
    (
        "driver uppercase is lower-cased first",
        _set(["spec", "driver"], "Networking.Example.COM"),
        None,
        "",
    ),
    (
        "driver not a DNS subdomain",
        _set(["spec", "driver"], "networking_example"),
        "spec.driver",
        "Invalid value",
    ),
    ("driver 63 bytes", _set(["spec", "driver"], "a" * 59 + ".com"), None, ""),
    (
        "driver 64 bytes",
        _set(["spec", "driver"], "a" * 60 + ".com"),
        "spec.driver",
        "Too long: may not be more than 63 bytes",
    ),
    ("driver empty", _set(["spec", "driver"], ""), "spec.driver", "Required value"),
    # pool
    ("pool name with slashes", _set(["spec", "pool", "name"], "rack-1/node-1"), None, ""),
    (
        "pool name empty segment",
        _set(["spec", "pool", "name"], "rack-1//node-1"),
        "spec.pool.name",
        "Invalid value",
    ),
    (
        "pool name 253 bytes",
        _set(["spec", "pool", "name"], "/".join(["a" * 62] * 4) + "/a"),
        None,
        "",
    ),
    (
        "pool name 254 bytes",
        _set(["spec", "pool", "name"], "/".join(["a" * 62] * 4) + "/ab"),
        "spec.pool.name",
        "Too long: may not be more than 253 bytes",
    ),
    ("pool name empty", _set(["spec", "pool", "name"], ""), "spec.pool.name", "Required value"),
    ("generation 0", _set(["spec", "pool", "generation"], 0), None, ""),
    (
        "generation negative",
        _set(["spec", "pool", "generation"], -1),
        "spec.pool.generation",
        "must be greater than or equal to 0",
    ),
    ("resourceSliceCount 1", _set(["spec", "pool", "resourceSliceCount"], 1), None, ""),
    (
        "resourceSliceCount 0",
        _set(["spec", "pool", "resourceSliceCount"], 0),
        "spec.pool.resourceSliceCount",
        "must be greater than 0",
    ),
    # node selection
    (
        "allNodes instead of nodeName",
        lambda m: (_spec(m).pop("nodeName"), _spec(m).update(allNodes=True)),
        None,
        "",
    ),
    (
        "no node selection",
        lambda m: _spec(m).pop("nodeName"),
        "spec",
        "Required value: exactly one of `nodeName`",
    ),
    (
        "nodeName and allNodes",
        _set(["spec", "allNodes"], True),
        "spec",
        "but multiple fields are set",
    ),
    (
        "nodeSelector with one term",
        lambda m: (
            _spec(m).pop("nodeName"),
            _spec(m).update(
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                    ]
                }
            ),
        ),
        None,
        "",
    ),
    (
        "nodeSelector with two terms",
        lambda m: (
            _spec(m).pop("nodeName"),
            _spec(m).update(
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}
                    ]
                    * 2
                }
            ),
        ),
        "spec.nodeSelector.nodeSelectorTerms",
        "must have exactly one node selector term",
    ),
    (
        "nodeSelector operator unknown",
        lambda m: (
            _spec(m).pop("nodeName"),
            _spec(m).update(
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "rack", "operator": "Near"}]}
                    ]
                }
            ),
        ),
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
        "Unsupported value",
    ),
    (
        "nodeName not a subdomain",
        _set(["spec", "nodeName"], "Node_1"),
        "spec.nodeName",
        "Invalid value",
    ),
    # devices
    (
        "128 devices",
        lambda m: _spec(m).update(devices=[{"name": f"d{i}"} for i in range(128)]),
        None,
        "",
    ),
    (
        "129 devices",
        lambda m: _spec(m).update(devices=[{"name": f"d{i}"} for i in range(129)]),
        "spec.devices",
        "Too many: 129: must have at most 128 items",
    ),
    (
        "duplicate device name",
        _set(["spec", "devices", 1, "name"], "eth1"),
        "spec.devices[1].name",
        'Duplicate value: "eth1"',
    ),
    (
        "device name not a DNS label",
        _set(["spec", "devices", 0, "name"], "eth.1"),
        "spec.devices[0].name",
        "Invalid value",
    ),
    (
        "device name empty",
        _set(["spec", "devices", 0, "name"], ""),
        "spec.devices[0].name",
        "Required value",
    ),
    ("32 attributes and capacities", lambda m: _dev(m).update(attributes=_attrs(30)), None, ""),
    (
        "33 attributes and capacities",
        lambda m: _dev(m).update(attributes=_attrs(31)),
        "spec.devices[0]",
        "must not exceed 32",
    ),
    # qualified names
    (
        "attribute with domain",
        _set(["spec", "devices", 0, "attributes", "example.com/pci_root"], {"string": "x"}),
        None,
        "",
    ),
    (
        "attribute name not a C identifier",
        _set(["spec", "devices", 0, "attributes", "pci-root"], {"string": "x"}),
        "spec.devices[0].attributes[pci-root]",
        "C identifier",
    ),
    (
        "attribute name two slashes",
        _set(["spec", "devices", 0, "attributes", "a.com/b/c"], {"string": "x"}),
        "spec.devices[0].attributes[a.com/b/c]",
        "must be either a C identifier",
    ),
    (
        "attribute name 32 bytes",
        _set(["spec", "devices", 0, "attributes", "x" * 32], {"bool": False}),
        None,
        "",
    ),
    (
        "attribute name 33 bytes",
        _set(["spec", "devices", 0, "attributes", "x" * 33], {"bool": False}),
        f"spec.devices[0].attributes[{'x' * 33}]",
        "Too long: may not be more than 32 bytes",
    ),
    (
        "attribute empty domain",
        _set(["spec", "devices", 0, "attributes", "/x"], {"bool": False}),
        "spec.devices[0].attributes[/x]",
        "the domain must not be empty",
    ),
    (
        "capacity name invalid",
        _set(["spec", "devices", 0, "capacity", "9slots"], {"value": "1"}),
        "spec.devices[0].capacity[9slots]",
        "C identifier",
    ),
    # attribute values
    (
        "attribute two values",
        _set(["spec", "devices", 0, "attributes", "model"], {"string": "a", "int": 1}),
        "spec.devices[0].attributes[model]",
        "exactly one value must be specified",
    ),
    (
        "attribute no value",
        _set(["spec", "devices", 0, "attributes", "model"], {}),
        "spec.devices[0].attributes[model]",
        "Required value: exactly one value",
    ),
    (
        "version not semver",
        _set(["spec", "devices", 0, "attributes", "firmware"], {"version": "1.2"}),
        "spec.devices[0].attributes[firmware].version",
        "semver.org",
    ),
    (
        "string 64 bytes",
        _set(["spec", "devices", 0, "attributes", "model"], {"string": "m" * 64}),
        None,
        "",
    ),
    (
        "string 65 bytes",
        _set(["spec", "devices", 0, "attributes", "model"], {"string": "m" * 65}),
        "spec.devices[0].attributes[model].string",
        "Too long: may not be more than 64 bytes",
    ),
    (
        "int beyond int64",
        _set(["spec", "devices", 0, "attributes", "model"], {"int": 2**63}),
        "spec.devices[0].attributes[model].int",
        "64-bit",
    ),
    # capacity request policy
    (
        "validValues unsorted",
        _set(
            ["spec", "devices", 0, "capacity", "bandwidth", "requestPolicy", "validValues"],
            ["25G", "10G", "100G"],
        ),
        "spec.devices[0].capacity[bandwidth].requestPolicy.validValues[1]",
        "sorted in ascending order and unique",
    ),
    (
        "validValues duplicate",
        _set(
            ["spec", "devices", 0, "capacity", "bandwidth", "requestPolicy", "validValues"],
            ["10G", "10G", "100G"],
        ),
        "spec.devices[0].capacity[bandwidth].requestPolicy.validValues[1]",
        "unique",
    ),
    (
        "validValues without the default",
        _set(["spec", "devices", 0, "capacity", "bandwidth", "requestPolicy", "default"], "40G"),
        "spec.devices[0].capacity[bandwidth].requestPolicy.default",
        "must be one of `validValues`",
    ),
    (
        "validValues above capacity",
        _set(
            ["spec", "devices", 0, "capacity", "bandwidth", "requestPolicy", "validValues"],
            ["10G", "200G"],
        ),
        "spec.devices[0].capacity[bandwidth].requestPolicy.validValues[1]",
        "larger than capacity value",
    ),
    (
        "validRange min above max",
        _set(
            [
                "spec",
                "devices",
                0,
                "capacity",
                "networking.example.com/slots",
                "requestPolicy",
                "validRange",
            ],
            {"min": "3", "max": "2"},
        ),
        "spec.devices[0].capacity[networking.example.com/slots].requestPolicy.validRange.max",
        "must be greater than or equal to `min`",
    ),
    (
        "validRange step zero",
        _set(
            [
                "spec",
                "devices",
                0,
                "capacity",
                "networking.example.com/slots",
                "requestPolicy",
                "validRange",
                "step",
            ],
            "0",
        ),
        "spec.devices[0].capacity[networking.example.com/slots].requestPolicy.validRange.step",
        "must be greater than zero",
    ),
    (
        "validRange default off step",
        _set(
            [
                "spec",
                "devices",
                0,
                "capacity",
                "networking.example.com/slots",
                "requestPolicy",
                "validRange",
            ],
            {"min": "0", "max": "4", "step": "3"},
        ),
        "spec.devices[0].capacity[networking.example.com/slots].requestPolicy.default",
        "multiple of `step`",
    ),
    (
        "validRange default on step",
        _set(
            [
                "spec",
                "devices",
                0,
                "capacity",
                "networking.example.com/slots",
                "requestPolicy",
                "default",
            ],
            "3",
        ),
        None,
        "",
    ),
    (
        "both validValues and validRange",
        _set(
            ["spec", "devices", 0, "capacity", "bandwidth", "requestPolicy", "validRange"],
            {"min": "1G"},
        ),
        "spec.devices[0].capacity[bandwidth].requestPolicy",
        "Forbidden: exactly one policy",
    ),
    # counters
    (
        "sharedCounters unique",
        lambda m: _spec(m).update(
            sharedCounters=[
                {"name": "a", "counters": {"slots": {"value": "8"}}},
                {"name": "b", "counters": {"slots": {"value": "8"}}},
            ]
        ),
        None,
        "",
    ),
    (
        "sharedCounters duplicate",
        lambda m: _spec(m).update(
            sharedCounters=[{"name": "a", "counters": {"slots": {"value": "8"}}}] * 2
        ),
        "spec.sharedCounters[1].name",
        'Duplicate value: "a"',
    ),
    (
        "consumesCounters of a set in another slice",
        _set(
            ["spec", "devices", 0, "consumesCounters"],
            [{"counterSet": "elsewhere", "counters": {"slots": {"value": "1"}}}],
        ),
        None,
        "",
    ),
    (
        "consumesCounters set name invalid",
        _set(
            ["spec", "devices", 0, "consumesCounters"],
            [{"counterSet": "Else_Where", "counters": {"slots": {"value": "1"}}}],
        ),
        "spec.devices[0].consumesCounters[0].counterSet",
        "Invalid value",
    ),
    (
        "consumesCounters same set twice",
        _set(
            ["spec", "devices", 0, "consumesCounters"],
            [{"counterSet": "s", "counters": {"a": {"value": "1"}}}] * 2,
        ),
        "spec.devices[0].consumesCounters[1].counterSet",
        "Duplicate value",
    ),
    # per-device node selection
    (
        "perDeviceNodeSelection with device nodeName",
        lambda m: (
            _spec(m).pop("nodeName"),
            _spec(m).update(perDeviceNodeSelection=True),
            [d.update(nodeName="node-1") for d in _spec(m)["devices"]],
        ),
        None,
        "",
    ),
    (
        "device nodeName without perDeviceNodeSelection",
        _set(["spec", "devices", 0, "nodeName"], "node-1"),
        "spec.devices[0]",
        "can only be set if `perDeviceNodeSelection`",
    ),
    # taints
    (
        "taint ok",
        _set(
            ["spec", "devices", 0, "taints"],
            [{"key": "example.com/broken", "effect": "NoSchedule"}],
        ),
        None,
        "",
    ),
    (
        "taint effect unknown",
        _set(["spec", "devices", 0, "taints"], [{"key": "broken", "effect": "Sometimes"}]),
        "spec.devices[0].taints[0].effect",
        "Unsupported value",
    ),
    # metadata
    (
        "name not a subdomain",
        _set(["metadata", "name"], "Node_1"),
        "metadata.name",
        "Invalid value",
    ),
    ("name missing", lambda m: m["metadata"].pop("name"), "metadata.name", "Required value"),
]


@pytest.mark.parametrize(
    ("mutation", "path", "fragment"), [c[1:] for c in SLICE_CASES], ids=[c[0] for c in SLICE_CASES]
)
def test_device_slice_rules(mutation: Mutation | None, path: str | None, fragment: str) -> None:
    errors = validate_object(parse(mutated(device_slice(), mutation)))
    expect(errors, path, fragment)


def test_update_keeps_driver_and_pool_name() -> None:
    old = parse(device_slice())
    new = parse(mutated(device_slice(), _set(["spec", "driver"], "other.example.com")))
    expect(validate_object(new, old), "spec.driver", "field is immutable")
    new = parse(mutated(device_slice(), _set(["spec", "pool", "name"], "node-2")))
    expect(validate_object(new, old), "spec.pool.name", "field is immutable")
    new = parse(mutated(device_slice(), _set(["spec", "pool", "generation"], 2)))
    expect(validate_object(new, old), None)
