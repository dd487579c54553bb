"""The only place where the oracle suites touch dra-affinity's internals.

Both suites compare *normalized* results. This module turns our engine's and
our allocator's answers into that normal form; ``normalize_oracle_*`` turn the
oracle's JSON into the same form. When our internals move (the allocator is
being restructured), only the adapters here need updating.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    SELECTOR_ENV,
    SHARING_AFFINITY_CEL_MAX_COST,
    CELCompileError,
    CELCostExceeded,
    CELEvalError,
    CelType,
    Quantity,
    Semver,
    UInt,
)
from dra_affinity.cel.optionals import CelOptional
from dra_affinity.cel.values import cel_type_of

# The runtime cost limits upstream applies: the VAP base environment's
# per-call limit (object) and CELSelectorExpressionMaxCost (device); both 1e6.
OBJECT_COST_LIMIT = 1_000_000
DEVICE_COST_LIMIT = 1_000_000
assert SHARING_AFFINITY_CEL_MAX_COST == OBJECT_COST_LIMIT

# A normalized CEL value: (type name, payload), payload hashable and JSON-able.
Tagged = tuple[str, Any]


@dataclass(frozen=True)
class CelOutcome:
    """One side's answer for one expression, in a comparable normal form.

    ``kind`` is ``value`` or an error class: ``compile``, ``runtime``,
    ``cost``. ``estimate`` is the static (min, max) cost range, ``None`` when
    the expression did not compile or the side does not report it; a ``None``
    min means "not reported". ``cost`` is the actual runtime cost.
    """

    kind: str
    value: Tagged | None = None
    message: str = ""
    estimate: tuple[int | None, int] | None = None
    cost: int | None = None


def _canon_double(f: float) -> str:
    if math.isnan(f):
        return "NaN"
    return repr(float(f))


def _sorted_map(pairs: list[tuple[Tagged, Tagged]]) -> Tagged:
    return ("map", tuple(sorted(pairs, key=lambda kv: json.dumps(kv[0]))))


def tag_ours(v: object) -> Tagged:
    """Our engine's runtime value -> normalized tagged value."""
    if v is None:
        return ("null_type", None)
    if type(v) is bool:
        return ("bool", v)
    if type(v) is int:
        return ("int", str(v))
    if isinstance(v, UInt):
        return ("uint", str(int(v)))
    if type(v) is float:
        return ("double", _canon_double(v))
    if isinstance(v, str):
        return ("string", str(v))
    if isinstance(v, bytes):
        return ("bytes", base64.b64encode(v).decode())
    if isinstance(v, CelType):
        return ("type", v.name)
    if isinstance(v, Quantity):
        return ("kubernetes.Quantity", str(v))
    if isinstance(v, Semver):
        return ("kubernetes.Semver", str(v))
    lib = _tag_library_value(v)
    if lib is not None:
        return lib
    if isinstance(v, Mapping):
        return _sorted_map([(tag_ours(k), tag_ours(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return ("list", tuple(tag_ours(x) for x in v))
    if isinstance(v, CelOptional):
        return ("optional_type", tag_ours(v.value) if v.present else None)
    return (f"python:{type(v).__name__}", repr(v))


def _tag_library_value(v: object) -> Tagged | None:
    """Values of our library modules, in the form the oracle prints them."""
    from dra_affinity.cel.lib_net import CIDR, IP
    from dra_affinity.cel.lib_time import Duration, Timestamp
    from dra_affinity.cel.lib_url import URL

    if isinstance(v, (IP, CIDR, URL)):
        return (cel_type_of(v).name, str(v))
    if isinstance(v, (Timestamp, Duration)):
        return (cel_type_of(v).name, v.go_string())
    return None


def tag_oracle(t: Mapping[str, Any]) -> Tagged:
    """The oracle's ``{"t": type, "v": value}`` -> normalized tagged value."""
    kind, v = t["t"], t.get("v")
    if kind == "double":
        return ("double", _canon_double(float(v)))
    if kind == "list":
        return ("list", tuple(tag_oracle(x) for x in v))
    if kind == "map":
        return _sorted_map([(tag_oracle(k), tag_oracle(x)) for k, x in v])
    if kind == "optional_type":
        return ("optional_type", None if v is None else tag_oracle(v))
    return (kind, v)


def device_activation(device: Mapping[str, Any]) -> dict[str, Any]:
    """``device`` as a DRA selector sees it, from a ResourceSlice-style device JSON.

    Attributes and capacities without a domain get the driver's; unknown
    domains are absent (our engine reports them as an empty map).
    """
    driver = device["driver"]
    attrs: dict[str, dict[str, Any]] = {}
    for q, a in (device.get("attributes") or {}).items():
        domain, _, name = q.partition("/") if "/" in q else (driver, "", q)
        if "version" in a:
            value: Any = Semver.parse(a["version"])
        else:
            (value,) = (a[k] for k in ("string", "int", "bool") if k in a)
        attrs.setdefault(domain, {})[name] = value
    caps: dict[str, dict[str, Any]] = {}
    for q, c in (device.get("capacity") or {}).items():
        domain, _, name = q.partition("/") if "/" in q else (driver, "", q)
        caps.setdefault(domain, {})[name] = Quantity.parse(c["value"])
    return {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
    }


def cel_ours(env: str, expression: str, data: Any) -> CelOutcome:
    """Compile and evaluate with our engine, in the environment ``env`` (object|device)."""
    environment = EXTRACTOR_ENV if env == "object" else SELECTOR_ENV
    try:
        program = environment.compile(expression)
    except CELCompileError as e:
        return CelOutcome("compile", message=str(e))
    est = program.cost_estimate
    estimate: tuple[int | None, int] = (est.min, est.max)
    if env == "device":
        activation = {"device": device_activation(data)}
        limit = DEVICE_COST_LIMIT
    else:
        activation = {"object": data}
        limit = OBJECT_COST_LIMIT
    try:
        value, cost = program.evaluate(activation, limit)
    except CELCostExceeded as e:
        return CelOutcome("cost", message=str(e), estimate=estimate, cost=e.cost)
    except CELEvalError as e:
        return CelOutcome("runtime", message=str(e), estimate=estimate, cost=e.cost)
    if env == "device" and type(value) is not bool:
        # As the scheduler does: a selector must produce a bool.
        return CelOutcome("runtime", message=f"selector result is {tag_ours(value)[0]}, not bool",
                          estimate=estimate, cost=cost)
    return CelOutcome("value", value=tag_ours(value), estimate=estimate, cost=cost)


def cel_oracle_outcome(answer: Mapping[str, Any]) -> CelOutcome:
    """The oracle's answer to a ``cel`` request -> :class:`CelOutcome`."""
    est = answer.get("estimate")
    estimate = (est["min"], est["max"]) if est else None
    err = answer.get("error")
    if err is not None:
        return CelOutcome(err["class"], message=err["message"], estimate=estimate,
                          cost=answer.get("cost"))
    return CelOutcome("value", value=tag_oracle(answer["value"]), estimate=estimate,
                      cost=answer.get("cost"))


# ============================================================== allocation

# A device choice: (request, driver, pool, device, has a share ID, consumed capacity).
Choice = tuple[str, str, str, str, bool, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class AllocOutcome:
    """One side's answer to an allocation problem, normalized.

    ``outcome``: ``allocated``, ``unschedulable``, ``error`` (the allocator
    refused the input, e.g. a failing CEL selector) or ``rejected`` (our API
    validation refused an object; upstream has no such step here).
    ``allocations``: per claim, in claim order, the chosen devices in result
    order. Quantities are compared by exact value.
    """

    outcome: str
    allocations: tuple[tuple[Choice, ...], ...] = ()
    message: str = ""


def _exact(q: object) -> str:
    return str(Quantity.parse(str(q)).value)


def _choice(r: Mapping[str, Any]) -> Choice:
    consumed = tuple(sorted((k, _exact(v)) for k, v in (r.get("consumedCapacity") or {}).items()))
    return (r["request"], r["driver"], r["pool"], r["device"], bool(r.get("shareID")), consumed)


def alloc_oracle_outcome(answer: Mapping[str, Any]) -> AllocOutcome:
    """The oracle's answer to an ``allocate`` request -> :class:`AllocOutcome`."""
    if answer["outcome"] != "allocated":
        return AllocOutcome(answer["outcome"], message=answer.get("error", ""))
    allocs = tuple(
        tuple(_choice(r) for r in (a.get("devices") or {}).get("results") or [])
        for a in answer["allocations"]
    )
    return AllocOutcome("allocated", allocs)


def allocate_ours(problem: Mapping[str, Any]) -> AllocOutcome:
    """Run one allocation problem (the oracle's ``allocate`` request JSON) through our scheduler.

    The simplest stable path through our implementation: an in-memory cluster
    holding the node, classes and slices; claims that already hold devices are
    reserved by a pod bound to the node; the claims to allocate are referenced
    by one pending pod, which the scheduler then schedules. The allocations
    are read back from the claims' status.
    """
    from dra_affinity.api.core import Node, Pod
    from dra_affinity.api.resource import DeviceClass, ResourceClaim, ResourceSlice
    from dra_affinity.features import Features
    from dra_affinity.scheduler.scheduler import Scheduler
    from dra_affinity.sim.cluster import Cluster

    node = problem["node"]["metadata"]["name"]
    cluster = Cluster()

    def apply(model: Any, body: Mapping[str, Any]) -> str | None:
        try:
            obj = model.model_validate(body)
        except ValueError as e:
            return f"{body.get('kind')} {body.get('metadata', {}).get('name')}: {e}"
        res = cluster.apply(obj)
        if not res.applied:
            return "; ".join(e.render() for e in res.errors)
        return None

    def pod(name: str, claims: list[str], bound: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "resourceClaims": [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
            "containers": [{"name": "app", "image": "x"}]}
        if bound:
            spec["nodeName"] = node
        else:  # the problem is about this one node
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}

    objects: list[tuple[Any, Mapping[str, Any]]] = [(Node, problem["node"])]
    objects += [(DeviceClass, c) for c in problem["classes"]]
    objects += [(ResourceSlice, s) for s in problem["slices"]]
    held = problem.get("allocatedClaims") or []
    for c in held:
        status = dict(c["status"])
        status["reservedFor"] = [{"resource": "pods", "name": "holder", "uid": "uid-holder"}]
        objects.append((ResourceClaim, {**c, "status": status}))
    if held:
        objects.append((Pod, pod("holder", [c["metadata"]["name"] for c in held], True)))
    objects += [(ResourceClaim, c) for c in problem["claims"]]
    names = [c["metadata"]["name"] for c in problem["claims"]]
    objects.append((Pod, pod("pending", names, False)))
    for model, body in objects:
        err = apply(model, body)
        if err is not None:
            return AllocOutcome("rejected", message=err)

    scheduler = Scheduler(cluster, Features.parse(scheduler={}))
    scheduler.start()
    try:
        attempt = scheduler.schedule("default/pending")
    finally:
        scheduler.stop()
    result = attempt.result.value
    if result == "Error":
        return AllocOutcome("error", message=attempt.message)
    if result != "Scheduled":
        return AllocOutcome("unschedulable", message=attempt.message)
    allocs = []
    for name in names:
        claim = cluster.claim(f"default/{name}")
        assert claim is not None and claim.status.allocation is not None, name
        rows = [r.model_dump(by_alias=True, exclude_none=True, mode="json")
                for r in claim.status.allocation.devices.results]
        allocs.append(tuple(_choice(r) for r in rows))
    return AllocOutcome("allocated", tuple(allocs))


# ============================================================== placement
@dataclass(frozen=True)
class PlacementOutcome:
    """Feasible nodes (sorted), and per rejected node its first failing plugin and that
    plugin's FitError reasons; ``error`` when the problem could not be set up."""

    feasible: tuple[str, ...]
    rejected: Mapping[str, tuple[str, tuple[str, ...]]]
    error: str = ""
    # feasible node -> score plugin that did not skip -> normalized score
    scores: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    weights: Mapping[str, int] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        """Each feasible node's weighted total (what the node is ranked by)."""
        return {n: sum(self.weights[p] * s for p, s in per.items()) for n, per in self.scores.items()}


def placement_ours(problem: Mapping[str, Any]) -> PlacementOutcome:
    """Run one placement problem (the oracle's ``placement`` request) through our
    scheduler: an in-memory cluster with the namespaces, nodes and bound pods, the
    incoming pod created there, then PreFilter once and every node's filters beside
    DRA (what Filter runs before the allocator), then Score of the feasible nodes
    (DynamicResources, the device score, is left out as the oracle's profile has no
    DRA)."""
    from dra_affinity.api.core import Namespace, Node, Pod
    from dra_affinity.scheduler.filter import node_rejection
    from dra_affinity.scheduler.placement.scores import DYNAMIC_RESOURCES, WEIGHTS, score_nodes
    from dra_affinity.scheduler.scheduler import Scheduler
    from dra_affinity.sim.cluster import Cluster
    from dra_affinity.structured.model import Abort

    cluster = Cluster()
    objects: list[tuple[Any, Mapping[str, Any]]] = [(Namespace, n) for n in problem["namespaces"]]
    objects += [(Node, n) for n in problem["nodes"]]
    objects += [(Pod, p) for p in problem["pods"]]
    objects.append((Pod, problem["pod"]))
    for model, body in objects:
        res = cluster.apply(model.model_validate(body))
        if not res.applied:
            name = body["metadata"]["name"]
            return PlacementOutcome((), {}, f"{body['kind']} {name}: " + "; ".join(e.render() for e in res.errors))
    sched = Scheduler(cluster)
    sched.start()
    incoming = problem["pod"]["metadata"]
    pod = cluster.pod(f"{incoming['namespace']}/{incoming['name']}")
    assert pod is not None
    try:
        cyc = sched.prefilter(pod)
    except Abort as a:
        return PlacementOutcome((), {}, f"{a.result.value}: {a.reason.message}")
    cache = sched.cache
    snap = cache.snapshot()
    feasible = []
    rejected = {}
    for node in snap.nodes:
        bad = node_rejection(cache, cyc, node, snap.labels.get(node, {}))
        if bad is None:
            feasible.append(node)
        else:
            rejected[node] = (bad.plugin, bad.reasons)
    scores: dict[str, dict[str, int]] = {}
    if feasible:
        scored = score_nodes(cache.placement_index(), pod, cyc.placement, cluster.namespaces(),
                             cache.node_facts(), feasible)
        scores = {n: {p: s for p, s in per.items() if p != DYNAMIC_RESOURCES}
                  for n, per in scored.per_node.items()}
    weights = {p: w for p, w in WEIGHTS.items() if p != DYNAMIC_RESOURCES}
    return PlacementOutcome(tuple(sorted(feasible)), rejected, "", scores, weights)


def placement_oracle_outcome(answer: Mapping[str, Any]) -> PlacementOutcome:
    rejected = {n: (r["plugin"], tuple(r["reasons"] or ())) for n, r in (answer.get("rejected") or {}).items()}
    return PlacementOutcome(tuple(sorted(answer.get("feasible") or ())), rejected, "",
                            answer.get("scores") or {}, answer.get("weights") or {})
