"""Each kind's apiVersion and kind are written once, on its model, and read from there."""

from __future__ import annotations

from dra_affinity.api.io import KINDS
from dra_affinity.api.resource import GROUP_VERSION, ResourceSlice
from dra_affinity.kube.convert import API_VERSIONS, KIND_MODELS


def test_type_meta_is_what_an_object_of_the_kind_carries() -> None:
    for (api_version, kind), model in KINDS.items():
        obj = model.model_construct()  # the fields' defaults, as a manifest omits them
        assert (obj.api_version, obj.kind) == (api_version, kind) == model.type_meta()
    assert {kind for _, kind in KINDS} == set(KIND_MODELS)
    assert {kind: v for v, kind in KINDS} == API_VERSIONS
    assert ResourceSlice.type_meta() == (GROUP_VERSION, "ResourceSlice") == ("resource.k8s.io/v1",
                                                                             "ResourceSlice")
