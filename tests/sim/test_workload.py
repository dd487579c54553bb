"""The generated workload's objects equal what validating their manifests gives."""

from __future__ import annotations

import pytest

from dra_affinity.api.core import Pod
from dra_affinity.api.resource import ResourceClaim, ResourceSlice
from dra_affinity.sim import workload


@pytest.mark.parametrize("spec", [
    workload.WorkloadSpec(nodes=3), workload.WorkloadSpec(nodes=3, affinity=False),
    workload.WorkloadSpec(nodes=3, devices_per_node=2, slots=16),
])
def test_slices_equal_their_validated_manifests(spec: workload.WorkloadSpec) -> None:
    for i in (0, 2, 12345):
        made = workload.slices(spec, i)
        want = [ResourceSlice.model_validate(m) for m in workload.slice_manifests(spec, i)]
        assert made == want
        assert [s.to_dict() for s in made] == [s.to_dict() for s in want]
        assert [s.model_fields_set for s in made] == [s.model_fields_set for s in want]
    a, b = workload.slices(spec, 1), workload.slices(spec, 2)
    assert a[0].metadata is not b[0].metadata and a[0].spec.pool is not b[0].spec.pool


def test_pod_objects_equal_their_validated_manifests() -> None:
    claim, pod = workload.pod_objects("pod-1", 5)
    want_claim = ResourceClaim.model_validate(workload._claim_manifest("pod-1", 5))
    want_pod = Pod.model_validate(workload._pod_manifest("pod-1"))
    assert claim == want_claim and claim.to_dict() == want_claim.to_dict()
    assert pod == want_pod and pod.to_dict() == want_pod.to_dict()
