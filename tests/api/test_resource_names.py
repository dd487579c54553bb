"""Names built from parts: a device's ID and a firstAvailable entry's request name."""

from __future__ import annotations

import pytest

from dra_affinity.api.resource import (
    DeviceRequestAllocationResult,
    device_id,
    parse_device_id,
    subrequest_name,
)


@pytest.mark.parametrize(("driver", "pool", "device"), [
    ("gpu.example.com", "node-1", "gpu-0"),
    ("gpu.example.com", "node-1/rack-2", "gpu-0"),  # pool names may hold "/"
    ("gpu.example.com", "a/b/c", "d"),
])
def test_device_ids_read_back_into_their_parts(driver: str, pool: str, device: str) -> None:
    did = device_id(driver, pool, device)
    assert did == f"{driver}/{pool}/{device}"
    assert parse_device_id(did) == (driver, pool, device)


def test_an_allocation_result_names_its_device_by_the_same_id() -> None:
    result = DeviceRequestAllocationResult.model_validate(
        {"request": "nic", "driver": "net.example.com", "pool": "n1/p", "device": "eth1"})
    assert result.device_id == device_id("net.example.com", "n1/p", "eth1")


def test_a_subrequest_is_named_after_its_request() -> None:
    assert subrequest_name("nic", "fast") == "nic/fast"
