"""API models read attributes through the generic lookup on CPython 3.11, and behave as
pydantic models do: only the speed of a read changes (``dra_affinity.api._getattr``)."""

from __future__ import annotations

import copy
import pickle
import sys
from typing import Any

import pytest
from pydantic import BaseModel, PrivateAttr

import dra_affinity.api.core  # (defines the core models)
import dra_affinity.api.resource  # (defines the resource.k8s.io models)
import dra_affinity.sim.scenario  # noqa: F401  (scenario files are models too)
from dra_affinity.api import _getattr
from dra_affinity.api.meta import K8sModel, ObjectMeta
from dra_affinity.api.resource import ResourceClaim

needs_311 = pytest.mark.skipif(
    not _getattr.plain_reads_possible(),
    reason="plain reads are set up on CPython before 3.12 only (3.12 specialises reads itself)")


def _models() -> list[type[K8sModel]]:
    out: list[type[K8sModel]] = []
    todo = list(K8sModel.__subclasses__())
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def _claim() -> ResourceClaim:
    return ResourceClaim.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}}})


def test_the_slot_is_located_where_the_interpreter_has_it() -> None:
    """On CPython 3.11 the check on ``object`` and on a hooked class passes (else every
    model would silently keep the slow path)."""
    if sys.implementation.name == "cpython" and sys.version_info < (3, 12):
        assert _getattr.plain_reads_possible()
        assert _getattr.has_plain_reads(object)
    else:
        assert not _getattr.plain_reads_possible()


@needs_311
def test_every_api_model_reads_plainly() -> None:
    models = _models()
    assert len(models) > 40
    assert [m.__name__ for m in models if not _getattr.has_plain_reads(m)] == []


@needs_311
def test_pydantic_models_of_others_keep_their_fallback() -> None:
    class Other(BaseModel):
        x: int = 1
        _p: int = PrivateAttr(default=3)

    class Plain(BaseModel):
        x: int = 1

    assert not _getattr.has_plain_reads(Other) and not _getattr.has_plain_reads(Plain)
    assert not _getattr.has_plain_reads(BaseModel)
    assert Other()._p == 3


@needs_311
def test_a_model_of_ours_with_its_own_fallback_keeps_it() -> None:
    class WithPrivate(K8sModel):
        x: int = 1
        _p: int = PrivateAttr(default=7)

    class WithGetattr(K8sModel):
        x: int = 1

        def __getattr__(self, name: str) -> Any:
            return f"computed {name}"

    class Extra(K8sModel):
        model_config = {**K8sModel.model_config, "extra": "allow"}
        x: int = 1

    assert not _getattr.has_plain_reads(WithPrivate) and WithPrivate()._p == 7
    assert not _getattr.has_plain_reads(WithGetattr)
    assert WithGetattr().anything == "computed anything"
    assert not _getattr.has_plain_reads(Extra)
    assert Extra.model_validate({"x": 1, "y": 2}).y == 2  # type: ignore[attr-defined]
    # A subclass of a plain-read model defined later reads plainly too.

    class Later(ObjectMeta):
        pass

    assert _getattr.has_plain_reads(Later)


def test_reads_behave_as_pydantic_reads() -> None:
    claim = _claim()
    assert claim.spec.devices.requests[0].name == "r"
    assert claim.name == "c" and claim.namespace == "default"  # properties still work
    with pytest.raises(AttributeError, match="'ResourceClaim' object has no attribute 'nope'"):
        claim.nope  # type: ignore[attr-defined]  # noqa: B018
    assert getattr(claim, "nope", 5) == 5
    assert hasattr(claim, "spec") and not hasattr(claim, "nope")
    # Writes, copies, pickling and dumps are untouched.
    claim.metadata.labels = {"a": "b"}
    assert claim.metadata.labels == {"a": "b"}
    c2 = copy.deepcopy(claim)
    assert c2 == claim and c2.metadata is not claim.metadata
    assert pickle.loads(pickle.dumps(claim)) == claim
    assert claim.to_dict()["metadata"]["labels"] == {"a": "b"}
    # A private-looking name that is not a field is missing, as pydantic says too.
    with pytest.raises(AttributeError):
        claim._hidden  # type: ignore[attr-defined]  # noqa: B018
