"""Claim authoring errors end the attempt as UnschedulableAndUnresolvable, never as a match."""

from __future__ import annotations

import pytest

from builders import Env, device_slice, meta_slice, nic_class, nic_params
from dra_affinity.cel.extract import MAX_AFFINITY_VALUE_LENGTH
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result


@pytest.mark.parametrize(("length", "result"), [
    (MAX_AFFINITY_VALUE_LENGTH, Result.SCHEDULED),
    (MAX_AFFINITY_VALUE_LENGTH + 1, Result.UNRESOLVABLE),
])
def test_affinity_value_length_bound(length: int, result: Result) -> None:
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.add_pod("a", nic_params(subnet="s" * length))
    a = env.schedule("a")
    assert a.result is result, a.message
    if result is Result.UNRESOLVABLE:
        assert [r.code for r in a.reasons] == [reasons.AFFINITY_VALUE_TOO_LONG]
        assert env.status("networking.example.com/node-1/eth1") == ("Clean", {})
    else:
        assert env.status("networking.example.com/node-1/eth1") == ("Locked", {"subnet": "s" * length})
