"""The configs PreBind records in a claim's allocation: FromClass before FromClaim,
each scoped to the requests it applies to, as the Kubernetes allocator records them."""

from __future__ import annotations

from typing import Any

from builders import DRIVER, Env, claim, device_slice, meta_slice, nic_class, nic_params, pod
from dra_affinity.api.resource import ResourceClaim
from dra_affinity.structured.model import Result


def opaque(subnet: str) -> dict[str, Any]:
    return {"driver": DRIVER, "parameters": nic_params(subnet)}


def recorded(env: Env, key: str) -> list[tuple[str, list[str], str]]:
    c = env.cluster.claim(key)
    assert isinstance(c, ResourceClaim) and c.status.allocation is not None
    return [(cfg.source, list(cfg.requests), cfg.opaque.parameters["subnetID"] if cfg.opaque else "")
            for cfg in c.status.allocation.devices.config]


def test_class_configs_first_then_claim_configs_in_scope() -> None:
    # No extractors: the configs are only recorded, not read for affinity keys.
    env = Env(nic_class(config=[nic_params("subnet-C")]), nic_class("other-nic", config=[nic_params("subnet-O")]),
              meta_slice("node-1", {}), device_slice("node-1", ["eth1", "eth2", "eth3"]))
    requests = [{"name": "data", "exactly": {"deviceClassName": "shared-nic"}},
                {"name": "mgmt", "firstAvailable": [{"name": "fast", "deviceClassName": "other-nic"},
                                                    {"name": "slow", "deviceClassName": "shared-nic"}]}]
    config = [{"requests": ["data"], "opaque": opaque("subnet-D")},
              {"requests": ["mgmt/slow"], "opaque": opaque("subnet-S")},  # not the one allocated
              {"requests": ["mgmt"], "opaque": opaque("subnet-M")},  # the subrequest's parent
              {"opaque": opaque("subnet-A")}]  # every request
    env.apply(claim("a-nic", requests=requests, config=config))
    env.apply(pod("a"))
    assert env.schedule("a").result is Result.SCHEDULED
    # Classes by name, each with the allocated requests that use it; then the claim's own.
    assert recorded(env, "default/a-nic") == [
        ("FromClass", ["mgmt/fast"], "subnet-O"),
        ("FromClass", ["data"], "subnet-C"),
        ("FromClaim", ["data"], "subnet-D"),
        ("FromClaim", ["mgmt"], "subnet-M"),
        ("FromClaim", [], "subnet-A"),
    ]


def test_no_configs_record_none() -> None:
    env = Env(nic_class(), meta_slice("node-1", {}), device_slice("node-1", ["eth1"]))
    env.add_pod("a", None)
    assert env.schedule("a").result is Result.SCHEDULED
    assert recorded(env, "default/a-nic") == []
