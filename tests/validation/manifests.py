"""Shared manifests, expression builders and helpers for the validation tests.

Every base manifest here is valid; a test case copies one, applies a small
mutation and checks the exact field path of the error it expects.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable
from typing import Any

from dra_affinity import cel
from dra_affinity.api.io import Document, FieldError, parse_object
from dra_affinity.api.resource import SHARING_AFFINITY_CEL_MAX_COST

DRIVER = "networking.example.com"

SUBNET_EXPR = (
    'object.apiVersion == "networking.example.com/v1" && object.kind == "NicConfig"'
    ' ? object.subnetID : ""'
)
PKEY_EXPR = (
    'object.apiVersion == "networking.example.com/v1" && object.kind == "NicConfig"'
    ' ? object.ibPKey : ""'
)

Manifest = dict[str, Any]
Mutation = Callable[[Manifest], Any]


def meta_slice(
    name: str = "node-1-meta",
    *,
    pool: str = "node-1",
    generation: int = 1,
    count: int = 2,
    extractors: Iterable[tuple[str, str]] = (("subnet", SUBNET_EXPR),),
) -> Manifest:
    """A metadata slice: sharingAffinity, no devices."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-1",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "sharingAffinity": [{"name": n, "expression": e} for n, e in extractors],
        },
    }


def device_slice(
    name: str = "node-1-nics",
    *,
    pool: str = "node-1",
    generation: int = 1,
    count: int = 2,
    devices: Iterable[str] = ("eth1", "eth2"),
) -> Manifest:
    """A device slice with attributes, a consumable capacity and counters."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-1",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": [
                {
                    "name": d,
                    "attributes": {
                        "model": {"string": "cx7"},
                        "networking.example.com/numa": {"int": 0},
                        "firmware": {"version": "1.2.3-rc.1+build.5"},
                        "sriov": {"bool": True},
                    },
                    "capacity": {
                        "networking.example.com/slots": {
                            "value": "4",
                            "requestPolicy": {
                                "default": "1",
                                "validRange": {"min": "1", "max": "4", "step": "1"},
                            },
                        },
                        "bandwidth": {
                            "value": "100G",
                            "requestPolicy": {
                                "default": "10G",
                                "validValues": ["10G", "25G", "100G"],
                            },
                        },
                    },
                    "allowMultipleAllocations": True,
                }
                for d in devices
            ],
        },
    }


def device_class() -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "nic.example.com"},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"mtu": 9000}}}],
        },
    }


def claim_spec() -> Manifest:
    return {
        "devices": {
            "requests": [
                {
                    "name": "nic",
                    "exactly": {
                        "deviceClassName": "nic.example.com",
                        "selectors": [
                            {
                                "cel": {
                                    "expression": 'device.attributes["networking.example.com"].model == "cx7"'
                                }
                            }
                        ],
                        "capacity": {"requests": {"networking.example.com/slots": "1"}},
                    },
                },
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.example.com"},
                        {
                            "name": "small",
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": 2,
                        },
                    ],
                },
            ],
            "constraints": [
                {"requests": ["nic", "gpu/big"], "matchAttribute": "networking.example.com/numa"}
            ],
            "config": [
                {
                    "requests": ["nic"],
                    "opaque": {
                        "driver": DRIVER,
                        "parameters": {
                            "apiVersion": "networking.example.com/v1",
                            "kind": "NicConfig",
                            "subnetID": "subnet-a",
                        },
                    },
                }
            ],
        }
    }


def resource_claim() -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "pod-a-nic", "namespace": "default"},
        "spec": claim_spec(),
    }


def claim_template() -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "nic-template", "namespace": "team-a"},
        "spec": {"metadata": {"labels": {"app": "web"}}, "spec": claim_spec()},
    }


def pod() -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod-a", "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "node-1"},
            "resourceClaims": [
                {"name": "nic", "resourceClaimName": "pod-a-nic"},
                {"name": "gpu", "resourceClaimTemplateName": "gpu-template"},
            ],
            "containers": [{"name": "app", "image": "busybox"}],
        },
    }


def node() -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
    }


def parse(data: Manifest) -> Any:
    """The typed object for a manifest (raises ManifestError on shape errors)."""
    return parse_object(Document("test", 1, 1, data))


def mutated(base: Manifest, mutation: Mutation | None) -> Manifest:
    out = copy.deepcopy(base)
    if mutation is not None:
        mutation(out)
    return out


def paths(errors: Iterable[FieldError]) -> list[str]:
    return [e.path for e in errors]


def expect(errors: list[FieldError], path: str | None, fragment: str = "") -> None:
    """``path`` None: no errors at all. Otherwise an error exactly at ``path`` containing ``fragment``."""
    rendered = [e.render() for e in errors]
    if path is None:
        assert errors == [], rendered
        return
    hits = [e for e in errors if e.path == path]
    assert hits, f"no error at {path!r}; got {rendered}"
    assert any(fragment in e.message for e in hits), f"no {fragment!r} at {path!r}; got {rendered}"


# ------------------------------------------------------------ expressions
def string_literal_expr(nbytes: int, char: str = "a") -> str:
    """A valid expression ``"..."`` of exactly ``nbytes`` UTF-8 bytes."""
    width = len(char.encode())
    body, rest = divmod(nbytes - 2, width)
    return '"' + char * body + "a" * rest + '"'


# Comprehensions whose data-independent cost is fixed by literal lists:
# nested map() cannot short-circuit, so its minimum cost is its full cost.
def nested_map_expr(depth: int, size: int = 100, result: str = "heavy") -> str:
    """``depth`` nested ``map()`` over a literal list of ``size`` ints, returning a string."""
    lst = "[" + ", ".join(str(i) for i in range(size)) + "]"
    inner = f"x{depth}"
    for d in range(depth, 0, -1):
        inner = f"{lst}.map(x{d}, {inner})"
    return f'size({inner}) > 0 ? "{result}" : ""'


@functools.cache
def expensive_expr(result: str = "heavy") -> str:
    """A triple-nested comprehension whose min cost is over half the budget but within it.

    The list length is found for the engine's cost model rather than hard-coded.
    """
    for size in range(2, 200):
        expr = nested_map_expr(3, size, result)
        cost = cel.EXTRACTOR_ENV.compile(expr).cost_estimate.min
        if SHARING_AFFINITY_CEL_MAX_COST // 2 < cost <= SHARING_AFFINITY_CEL_MAX_COST:
            return expr
        if cost > SHARING_AFFINITY_CEL_MAX_COST:
            break
    raise AssertionError("no list length gives a cost between half and all of the budget")
