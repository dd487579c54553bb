"""distinctAttribute and matchAttribute: admission (exactly one of the two) and what
``claim_spec`` hands the allocator."""

from __future__ import annotations

from typing import Any

import pytest
from alloc_harness import GPU, dclass, exact, rclaim

from dra_affinity.scheduler.cycle import claim_spec
from dra_affinity.structured.claims import Constraint
from dra_affinity.validation import validate_object


def claim_with(constraint: dict[str, Any]) -> Any:
    return rclaim("c", exact("r1"), exact("r2"), constraints=[constraint])


@pytest.mark.parametrize(("constraint", "path", "text"), [
    ({"requests": ["r1", "r2"], "matchAttribute": f"{GPU}/numa",
      "distinctAttribute": f"{GPU}/numa"},
     "spec.devices.constraints[0]", "at most one of `matchAttribute` or `distinctAttribute`"),
    ({"requests": ["r1", "r2"]}, "spec.devices.constraints[0].matchAttribute", "Required value"),
    ({"requests": ["r1", "r2"], "distinctAttribute": "numa"},
     "spec.devices.constraints[0].distinctAttribute", "must include a domain"),
    ({"requests": ["r1", "r3"], "distinctAttribute": f"{GPU}/numa"},
     "spec.devices.constraints[0].requests[1]", "must be the name of a request"),
], ids=["both", "neither", "distinct-without-domain", "distinct-unknown-request"])
def test_admission_rejects(constraint: dict[str, Any], path: str, text: str) -> None:
    errs = validate_object(claim_with(constraint))
    assert any(str(e.path) == path and text in str(e) for e in errs), [str(e) for e in errs]


@pytest.mark.parametrize("field", ["matchAttribute", "distinctAttribute"])
def test_admission_accepts_one(field: str) -> None:
    assert validate_object(claim_with({"requests": ["r1"], field: f"{GPU}/numa"})) == []


def test_claim_spec_keeps_both_kinds_in_order() -> None:
    c = rclaim("c", exact("r1"), exact("r2"), constraints=[
        {"requests": ["r1", "r2"], "distinctAttribute": f"{GPU}/port"},
        {"matchAttribute": f"{GPU}/numa"}])
    spec = claim_spec(c, {"gpu": dclass("gpu")})
    assert spec.constraints == (
        Constraint(("r1", "r2"), f"{GPU}/port", distinct=True),
        Constraint((), f"{GPU}/numa", distinct=False),
    )
    assert [k.field for k in spec.constraints] == ["distinctAttribute", "matchAttribute"]
