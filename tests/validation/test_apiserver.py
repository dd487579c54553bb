"""The DRASharingAffinity gate on the API server's write path (KEP-5981 Upgrade/Downgrade)."""

from __future__ import annotations

import pytest

from dra_affinity.api.resource import ResourceSlice
from dra_affinity.features import Features
from dra_affinity.validation import AdmissionResult, admit

from .manifests import (
    PKEY_EXPR,
    SUBNET_EXPR,
    device_slice,
    meta_slice,
    mutated,
    parse,
    resource_claim,
)

ON = Features.parse(apiserver={"DRASharingAffinity": True})
OFF = Features.parse(apiserver={"DRASharingAffinity": False})


def _slice(result: AdmissionResult) -> ResourceSlice:
    assert result.errors == [], [e.render() for e in result.errors]
    assert isinstance(result.object, ResourceSlice)
    return result.object


def test_gate_off_create_drops_field_with_warning() -> None:
    obj = parse(meta_slice())
    before = obj.to_dict()
    res = admit(obj, features=OFF)
    stored = _slice(res)
    assert stored.spec.sharing_affinity is None
    assert "sharingAffinity" not in stored.to_dict()["spec"]
    assert len(res.warnings) == 1
    assert "DRASharingAffinity" in res.warnings[0]
    assert "spec.sharingAffinity" in res.warnings[0]
    assert obj.to_dict() == before  # the input is never mutated


def test_gate_off_create_drops_even_an_invalid_field() -> None:
    entries = [(f"k{i}", "1 +") for i in range(9)]
    res = admit(parse(meta_slice(extractors=entries)), features=OFF)
    assert _slice(res).spec.sharing_affinity is None
    assert res.warnings


def test_gate_off_create_without_the_field_is_silent() -> None:
    res = admit(parse(device_slice()), features=OFF)
    assert _slice(res).to_dict() == parse(device_slice()).to_dict()
    assert res.warnings == []


def test_gate_off_update_keeps_existing_field_including_changes() -> None:
    old = _slice(admit(parse(meta_slice()), features=ON))
    changed = parse(meta_slice(extractors=[("subnet", SUBNET_EXPR), ("pkey", PKEY_EXPR)]))
    res = admit(changed, old, features=OFF)
    stored = _slice(res)
    assert stored.spec.sharing_affinity is not None
    assert [e.name for e in stored.spec.sharing_affinity] == ["subnet", "pkey"]
    assert res.warnings == []


def test_gate_off_update_kept_field_is_still_validated() -> None:
    old = _slice(admit(parse(meta_slice()), features=ON))
    bad = parse(meta_slice(extractors=[("subnet", "1 + 2")]))
    res = admit(bad, old, features=OFF)
    assert res.object is None
    assert [e.path for e in res.errors] == ["spec.sharingAffinity[0].expression"]


@pytest.mark.parametrize("value", [None, []])
def test_gate_off_update_to_null_clears(value: object) -> None:
    old = _slice(admit(parse(meta_slice()), features=ON))
    cleared = mutated(meta_slice(), lambda m: m["spec"].__setitem__("sharingAffinity", value))
    stored = _slice(admit(parse(cleared), old, features=OFF))
    assert not stored.spec.sharing_affinity


def test_gate_off_update_absent_clears() -> None:
    old = _slice(admit(parse(meta_slice()), features=ON))
    cleared = mutated(meta_slice(), lambda m: m["spec"].pop("sharingAffinity"))
    stored = _slice(admit(parse(cleared), old, features=OFF))
    assert stored.spec.sharing_affinity is None


def test_gate_off_update_of_slice_without_field_drops_with_warning() -> None:
    plain = mutated(meta_slice(), lambda m: m["spec"].pop("sharingAffinity"))
    old = _slice(admit(parse(plain), features=OFF))
    res = admit(parse(meta_slice()), old, features=OFF)
    assert _slice(res).spec.sharing_affinity is None
    assert any("DRASharingAffinity" in w and "spec.sharingAffinity" in w for w in res.warnings)


def test_gate_off_update_of_slice_with_empty_list_drops() -> None:
    empty = mutated(meta_slice(), lambda m: m["spec"].__setitem__("sharingAffinity", []))
    old = _slice(admit(parse(empty), features=ON))
    res = admit(parse(meta_slice()), old, features=OFF)
    assert _slice(res).spec.sharing_affinity is None
    assert res.warnings


def test_gate_on_stores_as_is_as_a_deep_copy() -> None:
    obj = parse(meta_slice())
    res = admit(obj, features=ON)
    stored = _slice(res)
    assert stored == obj and stored is not obj
    assert stored.spec.sharing_affinity is not obj.spec.sharing_affinity
    assert res.warnings == []


def test_gate_defaults_to_enabled() -> None:
    stored = _slice(admit(parse(meta_slice()), features=Features()))
    assert stored.spec.sharing_affinity


def test_validation_errors_store_nothing() -> None:
    bad = mutated(device_slice(), lambda m: m["spec"].__setitem__("driver", ""))
    res = admit(parse(bad), features=ON)
    assert res.object is None and not res.ok
    assert [e.path for e in res.errors] == ["spec.driver"]


def test_other_kinds_are_validated_and_copied() -> None:
    claim = parse(resource_claim())
    res = admit(claim, features=OFF)
    assert res.ok and res.object == claim and res.object is not claim
    bad = mutated(
        resource_claim(),
        lambda m: m["spec"]["devices"]["requests"][0]["exactly"].__setitem__("deviceClassName", ""),
    )
    res = admit(parse(bad), features=ON)
    assert res.object is None
    assert [e.path for e in res.errors] == ["spec.devices.requests[0].exactly.deviceClassName"]


def test_a_handed_over_object_is_stored_as_it_is() -> None:
    obj = parse(resource_claim())
    res = admit(obj, copy=False)
    assert res.errors == [] and res.object is obj
    copied = admit(obj)
    assert copied.object == obj and copied.object is not obj
    assert copied.object.spec is not obj.spec  # type: ignore[attr-defined]


def test_a_handed_over_slice_is_copied_before_a_field_is_dropped() -> None:
    obj = parse(meta_slice())
    before = obj.to_dict()
    stored = _slice(admit(obj, features=OFF, copy=False))
    assert stored is not obj and stored.spec.sharing_affinity is None
    assert obj.to_dict() == before  # parts may be shared with the caller's: never changed
    kept = _slice(admit(obj, features=ON, copy=False))
    assert kept is obj  # nothing to drop: nothing copied


def test_an_invalid_handed_over_object_is_refused_and_left_alone() -> None:
    obj = parse(resource_claim())
    bad = obj.model_copy(update={"metadata": obj.metadata.model_copy(update={"name": "Not_A_Name"})})
    before = bad.to_dict()
    res = admit(bad, copy=False)
    assert res.object is None and res.errors
    assert bad.to_dict() == before


def test_field_paths_render_like_the_api_server_s() -> None:
    from dra_affinity.validation._errors import ROOT, Path, at

    p = ROOT.child("spec", "devices").child("requests").index(0).key("k")
    assert str(p) == "spec.devices.requests[0][k]" and p.text == str(p)
    assert str(ROOT.index(2)) == "[2]" and str(ROOT.key("a").child("b")) == "[a].b"
    assert str(Path("metadata").child("name")) == "metadata.name"
    assert p == Path("spec.devices.requests[0][k]") and hash(p) == hash(Path(p.text))
    assert p != "spec.devices.requests[0][k]" and repr(ROOT.child("x")) == "Path('x')"
    # ``at`` is ``child`` for one name, made in C: the same path, of the same type.
    q = at((at((ROOT, "spec")), "devices"))
    assert type(q) is Path and q == ROOT.child("spec", "devices") and str(q) == "spec.devices"
    assert str(at((q.index(1), "name"))) == "spec.devices[1].name"


def test_name_checks_remember_short_values_only() -> None:
    from dra_affinity.validation import _errors

    check = _errors.dns_label_problems
    memo = check.__self__  # type: ignore[attr-defined]
    assert check("nic") == () and check("Not_A_Label") == (_errors.DNS_LABEL_MSG,)
    assert memo["nic"] == () and "Not_A_Label" in memo
    size = len(memo)
    long_bad = "x" * (_errors._MEMO_MAX_LEN + 1)
    assert check(long_bad) == (f"must be no more than {_errors.DNS_LABEL_MAX} characters",)
    assert check(long_bad + "y") and len(memo) == size  # not remembered
    # Bounded: a memo that is full starts afresh, and still answers right.
    for i in range(_errors._MEMO_SIZE + 10):
        assert check(f"n{i}") == ()
    assert 0 < len(memo) <= _errors._MEMO_SIZE and check("Not_A_Label") == (_errors.DNS_LABEL_MSG,)


def test_a_valid_claim_spec_is_checked_once_by_content(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims stamped from one template repeat their spec: a created claim's spec found
    valid is remembered by its content; anything else is checked every time."""
    from dra_affinity.api.resource import ResourceClaim
    from dra_affinity.validation import claims

    checked: list[object] = []
    real = claims._claim_spec

    def counting(spec, path, stored):  # type: ignore[no-untyped-def]
        checked.append(spec)
        return real(spec, path, stored)

    monkeypatch.setattr(claims, "_claim_spec", counting)
    monkeypatch.setattr(claims, "_VALID_SPECS", {})

    def claim(name: str, request: str = "gpu", params: str = "x") -> ResourceClaim:
        m = resource_claim()
        m["metadata"]["name"] = name
        m["spec"] = {"devices": {
            "requests": [{"name": request, "exactly": {"deviceClassName": "gpu"}}],
            "config": [{"requests": [request], "opaque": {
                "driver": "gpu.example.com", "parameters": {"p": params}}}]}}
        return ResourceClaim.model_validate(m)

    assert admit(claim("a")).ok and admit(claim("b")).ok  # same spec, another claim
    assert len(checked) == 1
    assert admit(claim("c", params="y")).ok and len(checked) == 2  # other content
    # Invalid specs are not remembered: the errors come every time, naming their paths.
    for _ in range(2):
        res = admit(claim("d", request="Not_A_Label"))
        assert [e.path for e in res.errors][:1] == ["spec.devices.requests[0].name"]
    assert len(checked) == 4
    # Updates check against the stored version (selectors ratchet): never remembered.
    stored = admit(claim("a")).object
    assert stored is not None and len(checked) == 4
    assert admit(claim("a"), stored).ok and len(checked) == 5
    # A spec too large to remember is checked each time; the memo is bounded.
    big = "z" * claims._VALID_SPEC_MAX_CHARS
    assert admit(claim("e", params=big)).ok and admit(claim("f", params=big)).ok
    assert len(checked) == 7
    monkeypatch.setattr(claims, "_VALID_SPECS_MAX", 2)
    for i in range(5):
        assert admit(claim(f"g{i}", params=f"v{i}")).ok
    assert 0 < len(claims._VALID_SPECS) <= 2
