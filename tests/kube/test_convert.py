"""Server JSON to models (projection) and the sharingAffinity annotation bridge."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.api.resource import ResourceClaim, ResourceSlice
from dra_affinity.kube.convert import (
    ConversionError,
    SharedParts,
    to_model,
)
from dra_affinity.structured.snapshot import Snapshot

from .world import EXTRACTORS, meta_slice, nic_slice


def _server_pod() -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "selfLink": "/x",
                     "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
        "spec": {"schedulerName": "dra-affinity", "priority": 5,
                 "containers": [{"name": "c", "image": "i"}],
                 "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "t"}],
                 "someFutureField": {"a": 1}},
        "status": {"phase": "Pending", "resourceClaimStatuses": [
            {"name": "nic", "resourceClaimName": "p-nic-x7k2"}]},
    }


def test_projection_drops_unknown_fields_and_keeps_declared_ones() -> None:
    conv = to_model("Pod", _server_pod())
    pod = conv.model
    assert isinstance(pod, Pod)
    assert pod.spec.scheduler_name == "dra-affinity"
    assert pod.spec.priority == 5
    assert pod.spec.resource_claims[0].resource_claim_template_name == "t"
    assert pod.status["resourceClaimStatuses"][0]["resourceClaimName"] == "p-nic-x7k2"
    assert sorted(conv.dropped) == ["metadata.selfLink", "spec.someFutureField"]
    assert conv.problem is None


def test_projection_recurses_into_lists_and_maps() -> None:
    raw = nic_slice("n1")
    raw["spec"]["devices"][0]["futureDeviceField"] = True
    raw["spec"]["devices"][0]["capacity"]["networking.example.com/slots"]["futureCap"] = 1
    conv = to_model("ResourceSlice", raw)
    assert sorted(conv.dropped) == [
        "spec.devices[0].capacity.networking.example.com/slots.futureCap",
        "spec.devices[0].futureDeviceField"]
    s = conv.model
    assert isinstance(s, ResourceSlice)
    assert [d.name for d in s.spec.devices] == ["eth1", "eth2"]


def test_malformed_value_is_an_error_naming_object_and_field() -> None:
    raw = {"metadata": {"name": "c", "namespace": "team"},
           "spec": {"devices": {"requests": [{"name": 3}]}}}
    with pytest.raises(ConversionError) as e:
        to_model("ResourceClaim", raw)
    assert "ResourceClaim team/c" in str(e.value)
    assert "spec.devices.requests[0].name" in str(e.value)


@pytest.mark.parametrize("metadata", ["c", ["c"], {"name": "c", "namespace": 7}])
def test_malformed_metadata_is_an_error_naming_the_field(metadata: object) -> None:
    with pytest.raises(ConversionError) as e:
        to_model("ResourceClaim", {"metadata": metadata, "spec": {}})
    assert "metadata" in str(e.value)


def test_unknown_kind_is_an_error() -> None:
    with pytest.raises(ConversionError, match="unsupported kind 'Secret'"):
        to_model("Secret", {"metadata": {"name": "x"}})


# ----------------------------------------------------------------------------- shared parts
def _allocated_claim(name: str, subnet: str, node: str, device: str) -> dict[str, Any]:
    params = {"apiVersion": "networking.example.com/v1", "kind": "NICConfig", "subnetID": subnet}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "9",
                     "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
            "deviceClassName": "nic", "allocationMode": "ExactCount", "count": 1}}],
            "config": [{"requests": ["nic"], "opaque": {"driver": "networking.example.com",
                                                        "parameters": params}}]}},
        "status": {"allocation": {
            "devices": {"results": [{"request": "nic", "driver": "networking.example.com",
                                     "pool": node, "device": device, "shareID": f"s-{name}"}],
                        "config": [{"source": "FromClaim", "requests": ["nic"], "opaque": {
                            "driver": "networking.example.com", "parameters": params}}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-pod-{name}"}]}}


def _claim(raw: dict[str, Any], shared: SharedParts | None = None) -> ResourceClaim:
    c = to_model("ResourceClaim", raw, shared).model
    assert isinstance(c, ResourceClaim)
    return c


def test_claims_alike_share_their_spec_and_allocation_parts_and_read_the_same() -> None:
    shared = SharedParts()
    raws = [_allocated_claim(f"c{i}", f"net-{i % 2}", f"node-{i % 3}", f"eth{i}") for i in range(6)]
    sent = copy.deepcopy(raws)
    got = [_claim(r, shared) for r in raws]
    assert raws == sent  # the server's JSON is not changed
    alone = [_claim(r) for r in raws]
    assert got == alone and [c.to_dict() for c in got] == [c.to_dict() for c in alone]
    assert [c.model_fields_set for c in got] == [c.model_fields_set for c in alone]
    assert got[0].spec is got[2].spec and got[0].spec is not got[1].spec
    a0, a3, a1 = (got[i].status.allocation for i in (0, 3, 1))
    assert a0 is not None and a3 is not None and a1 is not None
    assert a0.node_selector is a3.node_selector and a0.node_selector is not a1.node_selector
    assert a0.devices.config[0] is got[2].status.allocation.devices.config[0]  # type: ignore[union-attr]
    assert a0.devices.results[0] is not a3.devices.results[0]  # each claim's own
    assert len(shared) == 2 + 3 + 2  # specs, node selectors, configs
    # A claim alike of a shared spec but for one field gets a spec of its own.
    other = copy.deepcopy(raws[0])
    other["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    assert _claim(other, shared).spec.devices.requests[0].exactly.count == 2  # type: ignore[union-attr]
    assert got[0].spec.devices.requests[0].exactly.count == 1  # type: ignore[union-attr]


def test_a_shared_part_is_checked_and_its_dropped_fields_told_as_an_unshared_one() -> None:
    shared = SharedParts()
    raw = _allocated_claim("c", "net", "node-1", "eth1")
    raw["spec"]["devices"]["requests"][0]["futureField"] = 1
    raw["status"]["allocation"]["nodeSelector"]["futureField"] = 2
    conv = to_model("ResourceClaim", raw, shared)
    assert sorted(conv.dropped) == sorted(to_model("ResourceClaim", raw).dropped) == [
        "spec.devices.requests[0].futureField", "status.allocation.nodeSelector.futureField"]
    bad = _allocated_claim("d", "net", "node-1", "eth1")
    bad["status"]["allocation"]["devices"]["config"][0]["source"] = "Elsewhere"
    with pytest.raises(ConversionError) as e:
        to_model("ResourceClaim", bad, shared)
    with pytest.raises(ConversionError) as e_alone:
        to_model("ResourceClaim", bad)
    assert str(e.value) == str(e_alone.value)
    assert "status.allocation.devices.config[0].source" in str(e.value)


def test_shared_parts_are_bounded_and_start_afresh() -> None:
    shared = SharedParts(limit=4)
    first = [_claim(_allocated_claim(f"c{i}", f"net-{i}", "node-1", "eth1"), shared) for i in range(3)]
    assert len(shared) <= 4
    again = _claim(_allocated_claim("x", "net-0", "node-1", "eth1"), shared)
    assert again.spec == first[0].spec and again.spec is not first[0].spec  # started afresh
    assert len(shared) <= 4


# ----------------------------------------------------------------------------- bridge
def _extractors(s: object) -> list[tuple[str, str]]:
    assert isinstance(s, ResourceSlice)
    return [(e.name, e.expression) for e in s.spec.sharing_affinity or []]


def test_annotation_becomes_sharing_affinity() -> None:
    conv = to_model("ResourceSlice", meta_slice("n1"))
    assert conv.problem is None
    assert _extractors(conv.model) == [(e["name"], e["expression"]) for e in EXTRACTORS]


def test_field_alone_is_used_as_served() -> None:
    conv = to_model("ResourceSlice", meta_slice("n1", annotation=None, field=EXTRACTORS))
    assert conv.problem is None
    assert _extractors(conv.model) == [(e["name"], e["expression"]) for e in EXTRACTORS]


def test_field_and_annotation_agreeing_is_fine() -> None:
    conv = to_model("ResourceSlice", meta_slice("n1", field=EXTRACTORS))
    assert conv.problem is None
    assert _extractors(conv.model) == [(e["name"], e["expression"]) for e in EXTRACTORS]


def _pool_reason(*slices: dict) -> str | None:
    convs = [to_model("ResourceSlice", s) for s in slices]
    problems = {c.model.metadata.name: c.problem for c in convs if c.problem and c.model is not None}
    snap = Snapshot.build([c.model for c in convs], ["n1"], {"n1": {}},  # type: ignore[misc]
                          slice_problems=problems)
    pool = snap.pools[("networking.example.com", "n1")]
    assert pool.declares_sharing_affinity  # read or not, the pool meant to declare it
    return pool.affinity_invalid_reason


@pytest.mark.parametrize(("annotation", "field", "expect"), [
    (EXTRACTORS, [{"name": "vlan", "expression": "object.vlan"}], "disagree"),
    ("[{not json", None, "not JSON"),
    ('{"name": "subnet"}', None, "must be a JSON list"),
    ([{"name": "Bad_Name", "expression": '"x"'}], None, "extractors][0].name"),
    ([{"name": "subnet", "expression": "1"}], None, "must return string"),
    ([{"name": "subnet", "expression": '"x"', "extra": 1}], None, "unknown field"),
    ([{"name": "a", "expression": '"x"'}, {"name": "a", "expression": '"y"'}], None, "Duplicate"),
])
def test_unusable_annotation_makes_the_pool_invalid(annotation: object, field: object,
                                                    expect: str) -> None:
    raw = meta_slice("n1", annotation=annotation, field=field)
    conv = to_model("ResourceSlice", raw)
    assert conv.problem is not None
    assert expect.lower() in conv.problem.lower()
    assert "ResourceSlice n1-meta" in conv.problem
    assert "sharingAffinity" not in (conv.model.spec.model_dump(by_alias=True, exclude_none=True)
                                     if conv.model is not None else {})
    reason = _pool_reason(raw, nic_slice("n1"))
    assert reason is not None and conv.problem in reason  # the real problem, not a stand-in


def test_valid_bridge_leaves_the_pool_valid() -> None:
    assert _pool_reason(meta_slice("n1"), nic_slice("n1")) is None


def test_annotation_on_a_slice_with_devices_is_rejected() -> None:
    raw = nic_slice("n1")
    raw["metadata"]["annotations"] = {"sharing-affinity.dra-affinity.io/extractors":
                                      json.dumps(EXTRACTORS)}
    conv = to_model("ResourceSlice", raw)
    assert conv.problem is not None and "devices" in conv.problem
