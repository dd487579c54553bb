"""Server JSON to models (projection) and the sharingAffinity annotation bridge."""

from __future__ import annotations

import json

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.api.resource import ResourceSlice
from dra_affinity.kube.convert import (
    ConversionError,
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


def test_unknown_kind_is_an_error() -> None:
    with pytest.raises(ConversionError, match="unsupported kind 'Secret'"):
        to_model("Secret", {"metadata": {"name": "x"}})


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
