"""PreBind's objects assembled from valid parts equal what validation and model_copy give:
same values, same fields counted as set, same JSON byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from dra_affinity.api.quantity import Quantity
from dra_affinity.api.resource import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
)
from dra_affinity.scheduler.build import built, replaced


def _same(a: BaseModel, b: BaseModel) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump_json(exclude_unset=True) == b.model_dump_json(exclude_unset=True)
    assert a.model_dump_json() == b.model_dump_json()


@pytest.mark.parametrize(("cls", "values"), [
    (DeviceRequestAllocationResult, {"request": "nic", "driver": "d.example.com", "pool": "p",
                                     "device": "nic0", "share_id": "s",
                                     "consumed_capacity": {"d.example.com/slots": Quantity.parse("1")}}),
    (DeviceRequestAllocationResult, {"request": "r", "driver": "d", "pool": "p", "device": "x"}),
    (ResourceClaimConsumerReference, {"resource": "pods", "name": "a", "uid": ""}),
    (DeviceAllocationResult, {}),
])
def test_built_equals_validated(cls: type[BaseModel], values: dict[str, Any]) -> None:
    _same(built(cls, **values), cls(**values))


def test_built_defaults_are_fresh_per_object() -> None:
    a, b = built(DeviceAllocationResult), built(DeviceAllocationResult)
    assert a.results is not b.results  # a default factory runs for each object


def test_replaced_equals_model_copy() -> None:
    c = ResourceClaim.model_validate({"metadata": {"name": "a", "namespace": "default"}})
    alloc = built(AllocationResult, devices=built(DeviceAllocationResult))
    status = replaced(c.status, allocation=alloc)
    _same(status, c.status.model_copy(update={"allocation": alloc}))
    _same(replaced(c, status=status), c.model_copy(update={"status": status}))
    assert c.status.allocation is None  # the original is untouched


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(TypeError, match="unknown fields"):
        built(ResourceClaimConsumerReference, resource="pods", name="a", bogus=1)
    c = ResourceClaim.model_validate({"metadata": {"name": "a"}})
    with pytest.raises(TypeError, match="unknown fields"):
        replaced(c, bogus=1)
