"""The kube-scheduler's node filters that are not about devices.

A secondary scheduler on a real cluster must place pods where the stock
scheduler could: a pod that tolerates no taint must not land on a tainted node,
one with required node affinity only on matching nodes, and one that requests
CPU or memory only where it fits, or the kubelet refuses it at admission. This
module holds those checks, in the order and with the meaning of upstream's
filter plugins (1.37): NodeUnschedulable, TaintToleration, NodeAffinity
(``nodeSelector``, then required node affinity) and NodeResourcesFit.

Everything is computed twice at most: :class:`PodPlacement` once per pod per
cycle (PreFilter), :class:`NodeFacts` once per Node object; a check is then a
few comparisons. :class:`NodeUsage` keeps what the pods bound to each node
request, updated from pod events, so it never rescans pods.

Pod and Node fields are opaque JSON in this project's API model (only DRA is
typed); malformed content here raises :class:`PlacementError` naming the field,
which the scheduler reports as an unresolvable pod (a real API server would
have refused such a pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.meta import NodeSelector
from dra_affinity.api.quantity import Quantity
from dra_affinity.structured import reasons
from dra_affinity.structured.nodes import node_selector_matches

#: Taint effects that keep pods off a node at scheduling time.
SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
#: The taint NodeUnschedulable lets a pod tolerate in place of ``spec.unschedulable``.
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
#: Resources counted in millis (all others in whole units), as upstream's Resource type does.
MILLI_RESOURCES = frozenset({"cpu"})
PODS = "pods"
#: Pod-level ``spec.resources`` can set these (PodLevelResources, on by default at 1.37).
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})

Requests = Mapping[str, int]


class PlacementError(ValueError):
    """A pod's placement fields (tolerations, affinity, resources) are malformed.

    ``field`` is the path within the pod, e.g. ``spec.tolerations[1].operator``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


# ------------------------------------------------------------------ tolerations
@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # Equal | Exists
    value: str
    effect: str  # "" tolerates every effect

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        """core/v1 Toleration.ToleratesTaint for the fields scheduling reads."""
        if self.effect and self.effect != taint.get("effect"):
            return False
        if self.key and self.key != taint.get("key"):
            return False
        if self.operator == "Exists":
            return True
        return self.value == (taint.get("value") or "")


def _tolerations(raw: Iterable[Any]) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(raw):
        where = f"spec.tolerations[{i}]"
        if not isinstance(t, Mapping):
            raise PlacementError(where, "must be an object")
        for k in ("key", "operator", "value", "effect"):
            if t.get(k) is not None and not isinstance(t.get(k), str):
                raise PlacementError(f"{where}.{k}", "must be a string")
        op = t.get("operator") or "Equal"
        key, value, effect = t.get("key") or "", t.get("value") or "", t.get("effect") or ""
        if op not in ("Equal", "Exists"):
            raise PlacementError(f"{where}.operator", f"unsupported value {op!r}: Equal or Exists")
        if op == "Exists" and value:
            raise PlacementError(f"{where}.value", "must be empty when operator is Exists")
        if not key and op != "Exists":
            raise PlacementError(f"{where}.operator", "must be Exists when key is empty")
        if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise PlacementError(f"{where}.effect", f"unsupported value {effect!r}")
        out.append(Toleration(key, op, value, effect))
    return tuple(out)


def untolerated(taints: Iterable[Mapping[str, Any]],
                tolerations: Iterable[Toleration]) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates, or None."""
    tols = tuple(tolerations)
    for t in taints:
        if t.get("effect") in SCHEDULING_EFFECTS and not any(x.tolerates(t) for x in tols):
            return t
    return None


# ------------------------------------------------------------------ resources
def _amount(name: str, raw: Any, where: str) -> int:
    try:
        q = Quantity.parse(raw)
    except ValueError as e:
        raise PlacementError(where, str(e)) from None
    if q.sign() < 0:
        raise PlacementError(where, "must not be negative")
    return q.milli_value() if name in MILLI_RESOURCES else q.ceil_int()


def _container_requests(c: Any, where: str) -> dict[str, int]:
    if not isinstance(c, Mapping):
        raise PlacementError(where, "must be an object")
    res = c.get("resources")
    res = {} if res is None else res
    if not isinstance(res, Mapping):
        raise PlacementError(f"{where}.resources", "must be an object")
    out: dict[str, int] = {}
    # The API server defaults each request to its limit where only the limit is set.
    for part in ("limits", "requests"):
        raw = res.get(part)
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise PlacementError(f"{where}.resources.{part}", "must be an object")
        for k, v in raw.items():
            out[str(k)] = _amount(str(k), v, f"{where}.resources.{part}.{k}")
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(pod: Pod) -> dict[str, int]:
    """What the pod asks of a node, as upstream's ``PodRequests`` computes it.

    App containers and restartable init containers (sidecars) run together and add
    up; each ordinary init container runs alone, next to the sidecars started
    before it; the pod needs the larger of the two phases, plus ``overhead``.
    Pod-level ``spec.resources.requests`` replace the containers' sum for cpu and
    memory. Resources requested at zero are left out."""
    spec = pod.spec
    if not spec.init_containers and spec.resources is None and spec.overhead is None:
        # The common case, decided without parsing: no container says ``resources``.
        for c in spec.containers:
            if type(c) is not dict or c.get("resources") is not None:
                break
        else:
            return {}
    apps: dict[str, int] = {}
    for i, c in enumerate(spec.containers):
        _add(apps, _container_requests(c, f"spec.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(spec.init_containers):
        where = f"spec.initContainers[{i}]"
        reqs = _container_requests(c, where)
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            _add(sidecars, reqs)
            _max(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, reqs)
            _max(init_peak, running)
    total = dict(apps)
    _add(total, sidecars)
    _max(total, init_peak)
    level = spec.resources or {}
    if not isinstance(level, Mapping):
        raise PlacementError("spec.resources", "must be an object")
    level_reqs = level.get("requests") or {}
    if not isinstance(level_reqs, Mapping):
        raise PlacementError("spec.resources.requests", "must be an object")
    for k, v in level_reqs.items():
        if k in POD_LEVEL_RESOURCES:
            total[k] = _amount(k, v, f"spec.resources.requests.{k}")
    overhead = spec.overhead or {}
    if not isinstance(overhead, Mapping):
        raise PlacementError("spec.overhead", "must be an object")
    _add(total, {str(k): _amount(str(k), v, f"spec.overhead.{k}") for k, v in overhead.items()})
    return {k: v for k, v in sorted(total.items()) if v > 0}


# ------------------------------------------------------------------ the pod's side
@dataclass(frozen=True, slots=True)
class PodPlacement:
    """What the node filters read of one pod, parsed once per cycle."""

    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: NodeSelector | None = None
    requests: Mapping[str, int] = field(default_factory=dict)

    def signature(self) -> str:
        """Content that decides these filters' verdicts on a node, for fast-path memos
        (resource fit is not memoizable: it depends on what else is bound)."""
        aff = self.required_affinity.model_dump_json() if self.required_affinity else ""
        return f"{self.tolerations!r}\x00{self.node_selector!r}\x00{aff}"


NO_PLACEMENT = PodPlacement()


def placement_of(pod: Pod) -> PodPlacement:
    """Parse the pod's tolerations, required node affinity and resource requests."""
    spec = pod.spec
    tolerations = _tolerations(spec.tolerations)
    required: NodeSelector | None = None
    aff = spec.affinity
    if aff is not None:
        if not isinstance(aff, Mapping):
            raise PlacementError("spec.affinity", "must be an object")
        node_aff = aff.get("nodeAffinity")
        node_aff = {} if node_aff is None else node_aff
        if not isinstance(node_aff, Mapping):
            raise PlacementError("spec.affinity.nodeAffinity", "must be an object")
        raw = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
        if raw is not None:
            where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            try:
                required = NodeSelector.model_validate(raw)
            except ValidationError as e:
                first = e.errors()[0]
                loc = ".".join(str(p) for p in first["loc"])
                raise PlacementError(f"{where}.{loc}" if loc else where, first["msg"]) from None
    requests = pod_requests(pod)
    selector = tuple(spec.node_selector.items())
    if not tolerations and not selector and required is None and not requests:
        return NO_PLACEMENT
    return PodPlacement(tolerations, selector, required, requests)


# ------------------------------------------------------------------ the node's side
@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the node filters read of one Node object."""

    name: str
    unschedulable: bool = False
    taints: tuple[Mapping[str, Any], ...] = ()
    # None: the Node reports no status.allocatable (see docs/decisions.md).
    allocatable: Mapping[str, int] | None = None

    @property
    def trivial(self) -> bool:
        """No node filter can reject any pod here."""
        return not self.unschedulable and not self.taints and self.allocatable is None


def node_facts(node: Node) -> NodeFacts:
    """Parse a Node; unparsable allocatable entries count as zero (fail closed)."""
    taints = tuple(t for t in node.spec.taints
                   if isinstance(t, Mapping) and t.get("effect") in SCHEDULING_EFFECTS)
    raw = node.status.get("allocatable") if isinstance(node.status, Mapping) else None
    allocatable: dict[str, int] | None = None
    if isinstance(raw, Mapping):
        allocatable = {}
        for k, v in raw.items():
            try:
                allocatable[str(k)] = _amount(str(k), v, f"status.allocatable.{k}")
            except PlacementError:
                allocatable[str(k)] = 0
    return NodeFacts(node.name, bool(node.spec.unschedulable), taints, allocatable)


_ONE_POD: Mapping[str, int] = {PODS: 1}  # shared by every pod that requests nothing else


@dataclass
class NodeUsage:
    """Per node, what its bound pods request (and how many there are), kept from
    pod events as upstream's NodeInfo.Requested is. Terminal pods count nothing."""

    requested: dict[str, dict[str, int]] = field(default_factory=dict)
    _counted: dict[str, tuple[str, Mapping[str, int]]] = field(default_factory=dict)  # live pods only

    def update(self, key: str, pod: Pod | None) -> None:
        """The pod ``key`` is now ``pod`` (None: deleted)."""
        prev = self._counted.pop(key, None)
        if prev is not None:
            node, reqs = prev
            used = self.requested.get(node, {})
            for k, v in reqs.items():
                used[k] = used.get(k, 0) - v
            if used.get(PODS, 0) <= 0:
                self.requested.pop(node, None)
        if pod is None or not pod.spec.node_name:
            return
        if isinstance(pod.status, Mapping) and pod.status.get("phase") in ("Succeeded", "Failed"):
            return
        try:
            asked = pod_requests(pod)
        except PlacementError:
            asked = {}  # accepted by a server, so counted as requesting nothing we can read
        reqs = {**asked, PODS: 1} if asked else _ONE_POD
        node = pod.spec.node_name
        _add(self.requested.setdefault(node, {}), reqs)
        self._counted[key] = (node, reqs)

    def on(self, node: str) -> Requests:
        return self.requested.get(node, {})

    def __len__(self) -> int:
        return len(self._counted)


# ------------------------------------------------------------------ Filter
def check_node(p: PodPlacement, n: NodeFacts, labels: Mapping[str, str],
               used: Requests) -> tuple[str, str] | None:
    """The first failing node filter as (reason code, message), or None when the node
    passes NodeUnschedulable, TaintToleration, NodeAffinity and NodeResourcesFit."""
    if n.unschedulable and not any(t.tolerates(UNSCHEDULABLE_TAINT) for t in p.tolerations):
        return reasons.NODE_UNSCHEDULABLE, f"node {n.name} is unschedulable (cordoned)"
    if n.taints:
        t = untolerated(n.taints, p.tolerations)
        if t is not None:
            shown = t.get("key", "") + (f"={t['value']}" if t.get("value") else "")
            return (reasons.TAINT_NOT_TOLERATED,
                    f"node {n.name} has taint {shown}:{t.get('effect')} that the pod does not tolerate")
    for k, v in p.node_selector:
        if labels.get(k) != v:
            return reasons.NODE_SELECTOR_MISMATCH, f"node {n.name} does not match the pod's nodeSelector {k}={v}"
    if p.required_affinity is not None and not node_selector_matches(p.required_affinity, n.name, labels):
        return reasons.NODE_AFFINITY_MISMATCH, f"node {n.name} does not match the pod's required node affinity"
    if n.allocatable is not None:
        alloc = n.allocatable
        if used.get(PODS, 0) + 1 > alloc.get(PODS, 0):
            return reasons.INSUFFICIENT_NODE_RESOURCES, f"node {n.name}: too many pods ({alloc.get(PODS, 0)} allowed)"
        short = [k for k, v in p.requests.items() if v > alloc.get(k, 0) - used.get(k, 0)]
        if short:
            return (reasons.INSUFFICIENT_NODE_RESOURCES,
                    f"node {n.name}: insufficient {', '.join(short)}")
    return None
