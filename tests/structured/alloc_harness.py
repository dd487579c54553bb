"""A table harness for the per-node allocator, run without a scheduler around it.

Modelled on upstream's ``TestAllocator``: one list of named cases (slices,
classes, claims, what is already allocated, the node) with the expected
outcome (devices per request, or the node's reason codes, or an abort), run
against every allocator variant that supports the case's features. Here the
variants are the stable allocator (``NodeAllocator`` with ``hooks=None``) and
the experimental one (``NodeAllocator`` with :class:`ExperimentHooks`): a case
that uses no experiment must give the same answer on both.

Objects are real API models (validated by the same pydantic models the
simulator reads), built by the small helpers below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_affinity.api.quantity import Quantity
from dra_affinity.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from dra_affinity.cel import SELECTOR_ENV, CELError
from dra_affinity.scheduler.cycle import claim_spec
from dra_affinity.structured import reasons
from dra_affinity.structured.allocator import NodeAllocator
from dra_affinity.structured.claims import ClaimSpec, RequestSpec
from dra_affinity.structured.experiments import ExperimentHooks
from dra_affinity.structured.extraction import ExtractionMemo
from dra_affinity.structured.model import Abort, DeviceInfo, Reason, Result
from dra_affinity.structured.snapshot import Snapshot
from dra_affinity.structured.state import AllocatedState, Share

GPU = "gpu.example.com"
NIC = "networking.example.com"
SLOTS = f"{NIC}/slots"
NODES = ("node-1", "node-2")

SUBNET = (
    'has(object.apiVersion) && object.apiVersion == "networking.example.com/v1" '
    '&& has(object.subnetID) ? object.subnetID : ""'
)
PKEY = (
    'has(object.apiVersion) && object.apiVersion == "networking.example.com/v1" '
    '&& has(object.ibPKey) ? object.ibPKey : ""'
)
UNGUARDED = "object.subnetID"  # a missing field is a CEL runtime error


# ---------------------------------------------------------------------- object builders
def device(name: str, *, multi: bool = False, attrs: Mapping[str, Any] | None = None,
           caps: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A device; ``attrs`` values are typed by Python type (str, int, bool) or
    ``("version", "1.2.3")``; ``caps`` values are a quantity or a full DeviceCapacity."""
    d: dict[str, Any] = {"name": name}
    if multi:
        d["allowMultipleAllocations"] = True
    if attrs:
        out: dict[str, Any] = {}
        for k, v in attrs.items():
            if isinstance(v, tuple):
                out[k] = {v[0]: v[1]}
            elif isinstance(v, bool):
                out[k] = {"bool": v}
            elif isinstance(v, int):
                out[k] = {"int": v}
            else:
                out[k] = {"string": v}
        d["attributes"] = out
    if caps:
        d["capacity"] = {k: v if isinstance(v, dict) else {"value": v} for k, v in caps.items()}
    return d


def rslice(name: str, devices: Sequence[dict[str, Any]] = (), *, node: str = "node-1",
           driver: str = GPU, pool: str | None = None, generation: int = 1, count: int = 1,
           affinity: Mapping[str, str] | None = None) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": driver, "nodeName": node,
        "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
    }
    if devices:
        spec["devices"] = list(devices)
    if affinity is not None:
        spec["sharingAffinity"] = [{"name": k, "expression": v} for k, v in affinity.items()]
    return ResourceSlice.model_validate({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                         "metadata": {"name": name}, "spec": spec})


def dclass(name: str, driver: str = GPU, *, expr: str | None = None) -> DeviceClass:
    sels = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
    if expr:
        sels.append({"cel": {"expression": expr}})
    return DeviceClass.model_validate({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                       "metadata": {"name": name}, "spec": {"selectors": sels}})


def exact(name: str, cls: str = "gpu", *, count: int | None = None, all_: bool = False,
          expr: str | None = None, capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A request with ``exactly``."""
    return {"name": name, "exactly": _sub(cls, count=count, all_=all_, expr=expr, capacity=capacity)}


def sub(name: str, cls: str = "gpu", *, count: int | None = None, all_: bool = False,
        expr: str | None = None, capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One subrequest of ``firstAvailable``."""
    return {"name": name, **_sub(cls, count=count, all_=all_, expr=expr, capacity=capacity)}


def first(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def _sub(cls: str, *, count: int | None, all_: bool, expr: str | None,
         capacity: Mapping[str, str] | None) -> dict[str, Any]:
    r: dict[str, Any] = {"deviceClassName": cls}
    if all_:
        r["allocationMode"] = "All"
    elif count is not None:
        r["count"] = count
    if expr:
        r["selectors"] = [{"cel": {"expression": expr}}]
    if capacity:
        r["capacity"] = {"requests": dict(capacity)}
    return r


def nic_config(subnet: str | None = "X", pkey: str | None = None,
               requests: Sequence[str] = ()) -> dict[str, Any]:
    params: dict[str, Any] = {"apiVersion": "networking.example.com/v1", "kind": "NICConfig"}
    if subnet is not None:
        params["subnetID"] = subnet
    if pkey is not None:
        params["ibPKey"] = pkey
    return {"requests": list(requests), "opaque": {"driver": NIC, "parameters": params}}


def rclaim(name: str, *requests: dict[str, Any], constraints: Sequence[dict[str, Any]] = (),
           config: Sequence[dict[str, Any]] = ()) -> ResourceClaim:
    return ResourceClaim.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": list(requests), "constraints": list(constraints),
                             "config": list(config)}}})


# ---------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Held:
    """One allocation already in the cache: ``keys`` None on a gated share means the
    claim's affinity could not be reconstructed (the device becomes Unreconstructable)."""

    device: str
    claim: str = "default/old"
    request: str = "r"
    consumed: Mapping[str, str] = field(default_factory=dict)
    keys: Mapping[str, str] | None = None
    gated: bool = False
    exclusive: bool = False


@dataclass(frozen=True)
class Case:
    name: str
    slices: Sequence[ResourceSlice]
    classes: Sequence[DeviceClass]
    claims: Sequence[ResourceClaim]
    # Expected: exactly one of these.
    devices: Sequence[tuple[str, str, str]] | None = None  # (claim, request, device), in order
    unschedulable: frozenset[str] | None = None  # the node's reason codes
    abort: tuple[Result, str] | None = None  # (result, reason code)
    # Optional extra expectations.
    message: str | None = None  # a substring of some reason's message
    consumed: Mapping[str, Mapping[str, str]] | None = None  # device -> capacity -> amount
    keys: Mapping[str, Mapping[str, str]] | None = None  # device -> affinity keys of its share
    held: Sequence[Held] = ()
    node: str = "node-1"
    affinity: bool = True  # the scheduler's DRASharingAffinity gate
    # Experiments: a case that sets this runs only on the experimental variant.
    experiment: Callable[[ExtractionMemo], ExperimentHooks] | None = None
    preferred_keys: bool = False


@dataclass(frozen=True)
class Outcome:
    """What one allocator variant did for a case, in comparable form."""

    devices: tuple[tuple[str, str, str], ...] | None = None
    consumed: dict[str, dict[str, str]] = field(default_factory=dict)
    keys: dict[str, dict[str, str]] = field(default_factory=dict)
    codes: frozenset[str] | None = None
    abort: tuple[Result, str] | None = None
    reasons: tuple[Reason, ...] = ()


STABLE, EXPERIMENTAL = "stable", "experimental"
VARIANTS = (STABLE, EXPERIMENTAL)


def supports(case: Case, variant: str) -> bool:
    """Whether the variant has the features the case needs (upstream's rule for
    running one table against several allocator implementations)."""
    return case.experiment is None or variant == EXPERIMENTAL


def _selector(cache: dict[tuple[str, str], bool]) -> Callable[[str, DeviceInfo, ClaimSpec, RequestSpec], bool]:
    def matches(expr: str, d: DeviceInfo, claim: ClaimSpec, alt: RequestSpec) -> bool:
        key = (expr, d.id)
        hit = cache.get(key)
        if hit is None:
            try:
                val, _ = SELECTOR_ENV.compile(expr).evaluate({"device": d.activation}, 1_000_000)
            except CELError as e:
                raise Abort(Result.ERROR, Reason(reasons.SELECTOR_ERROR, str(e), None, d.id)) from e
            hit = cache[key] = val is True
        return hit

    return matches


def _state(case: Case) -> AllocatedState:
    state = AllocatedState()
    for h in case.held:
        consumed = tuple(sorted((k, Quantity.parse(v)) for k, v in h.consumed.items()))
        keys = tuple(sorted(h.keys.items())) if h.keys is not None else None
        share_id = None if h.exclusive else f"share-{h.claim}-{h.request}"
        state.add(h.device, Share(h.claim, h.request, share_id, consumed, keys, gated=h.gated),
                  exclusive=h.exclusive)
    return state


def run(case: Case, variant: str) -> Outcome:
    """Build the snapshot and state of a case and allocate its claims on its node."""
    snap = Snapshot.build(case.slices, NODES, {}, preferred_keys=case.preferred_keys)
    classes = {c.name: c for c in case.classes}
    memo = ExtractionMemo({f"{c.namespace}/{c.name}": c for c in case.claims}, classes)
    hooks: ExperimentHooks | None = None
    if variant == EXPERIMENTAL:
        hooks = case.experiment(memo) if case.experiment is not None else ExperimentHooks()
    try:
        specs = [claim_spec(c, classes) for c in case.claims]
        alloc = NodeAllocator(case.node, snap.by_node.get(case.node, []), _state(case),
                              affinity_enabled=case.affinity, extract=memo,
                              selector_matches=_selector({}), hooks=hooks)
        res = alloc.allocate(specs)
    except Abort as a:
        return Outcome(abort=(a.result, a.reason.code), reasons=(a.reason,))
    if not res.ok:
        found = tuple(res.reasons)
        return Outcome(codes=frozenset(r.code for r in found), reasons=found)
    consumed: dict[str, dict[str, str]] = {}
    keys: dict[str, dict[str, str]] = {}
    for s in res.shares:
        if s.consumed:
            consumed.setdefault(s.device.id, {}).update({k: str(v) for k, v in s.consumed})
        if s.keys is not None:
            keys[s.device.id] = dict(s.keys)
    return Outcome(devices=tuple((s.claim, s.request, s.device.id) for s in res.shares),
                   consumed=consumed, keys=keys)


def check(case: Case, got: Outcome) -> None:
    """Assert the outcome is the case's expectation (with the reasons in the message)."""
    why = f"{case.name}: got {got}"
    if case.devices is not None:
        assert got.devices == tuple(case.devices), why
    elif case.unschedulable is not None:
        assert got.codes == case.unschedulable, why
    else:
        assert case.abort is not None, f"{case.name}: no expectation"
        assert got.abort == case.abort, why
    if case.message is not None:
        assert any(case.message in r.message for r in got.reasons), why
    if case.consumed is not None:
        assert got.consumed == {d: dict(c) for d, c in case.consumed.items()}, why
    if case.keys is not None:
        assert got.keys == {d: dict(k) for d, k in case.keys.items()}, why
