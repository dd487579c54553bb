"""How a pod's ``resourceClaims`` entries name their claims."""

from __future__ import annotations

from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.podclaims import claim_key, claim_name, recorded_claim_names


def _pod(status: dict[str, Any]) -> Pod:
    return Pod.model_validate({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": [
            {"name": "direct", "resourceClaimName": "shared"},
            {"name": "nic", "resourceClaimTemplateName": "nic-t"},
            {"name": "gpu", "resourceClaimTemplateName": "gpu-t"}]},
        "status": status})


def test_a_template_entry_names_the_claim_recorded_for_it_else_the_generated_one() -> None:
    pod = _pod({"resourceClaimStatuses": [{"name": "nic", "resourceClaimName": "p-nic-7h2k"}]})
    direct, nic, gpu = pod.spec.resource_claims
    assert [claim_name(pod, e) for e in (direct, nic, gpu)] == ["shared", "p-nic-7h2k", "p-gpu"]
    assert claim_key(pod, nic) == "ns/p-nic-7h2k"


def test_recorded_names_skip_entries_without_a_claim_and_malformed_ones() -> None:
    status = {"resourceClaimStatuses": [
        {"name": "nic", "resourceClaimName": "p-nic-1"},
        {"name": "gpu"},  # the controller made none (yet)
        {"resourceClaimName": "orphan"},
        "not an object"]}
    assert recorded_claim_names(status) == {"nic": "p-nic-1"}
    assert recorded_claim_names({}) == {}
    assert recorded_claim_names({"resourceClaimStatuses": None}) == {}
