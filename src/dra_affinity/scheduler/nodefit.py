"""The kube-scheduler's node filters that are not about devices.

A secondary scheduler on a real cluster must place pods where the stock
scheduler could: a pod that tolerates no taint must not land on a tainted node,
one with required node affinity only on matching nodes, and one that requests
CPU or memory only where it fits, or the kubelet refuses it at admission. This
module holds those checks, in the order and with the meaning of upstream's
filter plugins (1.37): NodeUnschedulable, TaintToleration, NodeAffinity
(``nodeSelector``, then required node affinity), NodePorts and NodeResourcesFit.
The plugins that look at other pods' labels (InterPodAffinity, PodTopologySpread)
are in :mod:`.placement`.

Everything is computed twice at most: :class:`PodPlacement` once per pod per
cycle (PreFilter), :class:`NodeFacts` once per Node object; a check is then a
few comparisons. :class:`NodeUsage` keeps what the pods bound to each node
request and which host ports they hold (upstream's NodeInfo), updated from pod
events, so it never rescans pods; the placement index listens to the same events.

Pod and Node fields are opaque JSON in this project's API model (only DRA is
typed); malformed content here raises :class:`PlacementError` naming the field,
which the scheduler reports as an unresolvable pod (a real API server would
have refused such a pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from pydantic import ValidationError

from dra_affinity.api.core import Node, Pod
from dra_affinity.api.meta import NodeSelector
from dra_affinity.api.quantity import Quantity
from dra_affinity.structured import reasons
from dra_affinity.structured.nodes import node_selector_matches

from .placement.errors import PlacementError as PlacementError  # re-exported: callers catch it here
from .placement.terms import ALL_ADDRESSES, NO_TERMS, HostPort, PodTerms, terms_of

#: Taint effects that keep pods off a node at scheduling time.
SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
#: The taint effect the TaintToleration score counts.
PREFER_NO_SCHEDULE = "PreferNoSchedule"
#: The taint NodeUnschedulable lets a pod tolerate in place of ``spec.unschedulable``.
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
#: Resources counted in millis (all others in whole units), as upstream's Resource type does.
MILLI_RESOURCES = frozenset({"cpu"})
PODS = "pods"
#: Pod-level ``spec.resources`` can set these (PodLevelResources, on by default at 1.37).
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})

#: What a container that does not say counts for scoring (upstream's non-zero requests).
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024

Requests = Mapping[str, int]


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


def _phases(spec: Any, defaults: Mapping[str, int] | None,
            present: set[str] | None = None) -> dict[str, int]:
    """The containers' requests as the pod runs them: app containers and restartable
    init containers (sidecars) add up; each ordinary init container runs alone next to
    the sidecars started before it; the larger of the two phases. ``defaults`` replace
    what a container does not request (upstream's NonMissingContainerRequests);
    ``present`` collects every resource some container names, zero included."""
    def requests(c: Any, where: str) -> dict[str, int]:
        reqs = _container_requests(c, where)
        if present is not None:
            present.update(reqs)
        if defaults:
            for k, v in defaults.items():
                reqs.setdefault(k, v)
        return reqs

    apps: dict[str, int] = {}
    for i, c in enumerate(spec.containers):
        _add(apps, requests(c, f"spec.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(spec.init_containers):
        reqs = requests(c, f"spec.initContainers[{i}]")
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
    return total


def _pod_level(spec: Any) -> dict[str, int]:
    """Pod-level ``spec.resources.requests`` of the resources they may set (cpu, memory)."""
    level = spec.resources or {}
    if not isinstance(level, Mapping):
        raise PlacementError("spec.resources", "must be an object")
    level_reqs = level.get("requests") or {}
    if not isinstance(level_reqs, Mapping):
        raise PlacementError("spec.resources.requests", "must be an object")
    return {k: _amount(k, v, f"spec.resources.requests.{k}")
            for k, v in level_reqs.items() if k in POD_LEVEL_RESOURCES}


def _with_pod_level_and_overhead(spec: Any, total: dict[str, int], level: Mapping[str, int]) -> None:
    total.update(level)
    overhead = spec.overhead or {}
    if not isinstance(overhead, Mapping):
        raise PlacementError("spec.overhead", "must be an object")
    _add(total, {str(k): _amount(str(k), v, f"spec.overhead.{k}") for k, v in overhead.items()})


def pod_requests(pod: Pod) -> dict[str, int]:
    """What the pod asks of a node, as upstream's ``PodRequests`` computes it.

    The containers' phases (:func:`_phases`), pod-level ``spec.resources.requests``
    in place of their sum for cpu and memory, plus ``overhead``. Resources requested
    at zero are left out."""
    spec = pod.spec
    if not spec.init_containers and spec.resources is None and spec.overhead is None:
        # The common case, decided without parsing: no container says ``resources``.
        for c in spec.containers:
            if type(c) is not dict or c.get("resources") is not None:
                break
        else:
            return {}
    total = _phases(spec, None)
    _with_pod_level_and_overhead(spec, total, _pod_level(spec))
    return {k: v for k, v in sorted(total.items()) if v > 0}


def nonzero_requests(pod: Pod) -> tuple[int, int]:
    """(milli-cpu, memory) as the scoring plugins count a pod: a container that does
    not request cpu counts 100m, one that does not request memory 200 MiB (an explicit
    zero stays zero); with pod-level requests only the resources the pod names nowhere
    get the default (upstream's non-zero requests, ``NodeInfo.NonZeroRequested``)."""
    spec = pod.spec
    level = _pod_level(spec)
    defaults = {"cpu": DEFAULT_MILLI_CPU, "memory": DEFAULT_MEMORY}
    if level:
        present: set[str] = set(level) | set(spec.overhead or {})
        _phases(spec, None, present)
        defaults = {k: v for k, v in defaults.items() if k not in present}
    total = _phases(spec, defaults)
    _with_pod_level_and_overhead(spec, total, level)
    return total.get("cpu", 0), total.get("memory", 0)


# ------------------------------------------------------------------ the pod's side
@dataclass(frozen=True, slots=True)
class PodPlacement:
    """What the node filters read of one pod, parsed once per cycle."""

    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: NodeSelector | None = None
    requests: Mapping[str, int] = field(default_factory=dict)
    # inter-pod affinity, topology spread, host ports, preferred node affinity
    terms: PodTerms = NO_TERMS

    def node_affinity_signature(self) -> str:
        """The nodeSelector and required node affinity, as content (a key for what
        depends only on them, e.g. which nodes a spread constraint counts)."""
        aff = self.required_affinity.model_dump_json() if self.required_affinity else ""
        return f"{self.node_selector!r}\x00{aff}"

    def signature(self) -> str:
        """Content that decides these filters' verdicts on a node, for fast-path memos
        (resource fit is not memoizable: it depends on what else is bound)."""
        return f"{self.tolerations!r}\x00{self.node_affinity_signature()}"

    def matches_node(self, name: str, labels: Mapping[str, str]) -> bool:
        """nodeSelector and required node affinity (upstream's RequiredNodeAffinity)."""
        for k, v in self.node_selector:
            if labels.get(k) != v:
                return False
        return self.required_affinity is None or node_selector_matches(self.required_affinity, name, labels)

    @property
    def depends_on_pods(self) -> bool:
        """Whether a node's verdict can change with the pods bound anywhere (resources,
        ports, inter-pod affinity, spread): no fast-path memo then."""
        t = self.terms
        return bool(self.requests or t.ports or t.affinity or t.anti_affinity or t.spread)


NO_PLACEMENT = PodPlacement()


def placement_of(pod: Pod) -> PodPlacement:
    """Parse the pod's tolerations, required node affinity, resource requests and the
    terms of :mod:`.placement.terms`; raises :class:`PlacementError`."""
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
    terms = terms_of(pod)
    if not tolerations and not selector and required is None and not requests and terms is NO_TERMS:
        return NO_PLACEMENT
    return PodPlacement(tolerations, selector, required, requests, terms)


# ------------------------------------------------------------------ the node's side
@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the node filters and scores read of one Node object."""

    name: str
    unschedulable: bool = False
    taints: tuple[Mapping[str, Any], ...] = ()  # NoSchedule and NoExecute
    # None: the Node reports no status.allocatable (see docs/decisions.md).
    allocatable: Mapping[str, int] | None = None
    # PreferNoSchedule taints: no filter reads them, the TaintToleration score does.
    prefer_taints: tuple[Mapping[str, Any], ...] = ()
    # (milli-cpu, memory) allocatable as the resource scores read it: a Node that
    # reports none has zero (upstream).
    scored: tuple[int, int] = field(init=False)

    def __post_init__(self) -> None:
        alloc = self.allocatable or {}
        object.__setattr__(self, "scored", (alloc.get("cpu", 0), alloc.get("memory", 0)))

    @property
    def trivial(self) -> bool:
        """No node filter can reject any pod here, and no node score tells it apart."""
        return (not self.unschedulable and not self.taints and self.allocatable is None
                and not self.prefer_taints)


def node_facts(node: Node) -> NodeFacts:
    """Parse a Node; unparsable allocatable entries count as zero (fail closed)."""
    taints = tuple(t for t in node.spec.taints
                   if isinstance(t, Mapping) and t.get("effect") in SCHEDULING_EFFECTS)
    prefer = tuple(t for t in node.spec.taints
                   if isinstance(t, Mapping) and t.get("effect") == PREFER_NO_SCHEDULE)
    raw = node.status.get("allocatable") if isinstance(node.status, Mapping) else None
    allocatable: dict[str, int] | None = None
    if isinstance(raw, Mapping):
        allocatable = {}
        for k, v in raw.items():
            try:
                allocatable[str(k)] = _amount(str(k), v, f"status.allocatable.{k}")
            except PlacementError:
                allocatable[str(k)] = 0
    return NodeFacts(node.name, bool(node.spec.unschedulable), taints, allocatable, prefer)


def same_but_node(before: Pod, after: Pod) -> bool:
    """Whether ``after`` is ``before`` bound: the same in everything a node's record of
    it reads (namespace, labels, deletion, phase, the spec but for ``nodeName``); what
    the API server stamps (resourceVersion and the like) may differ."""
    if before is after:
        return True
    m0, m1 = before.metadata, after.metadata
    if (m0.namespace != m1.namespace or m0.labels != m1.labels
            or m0.deletion_timestamp != m1.deletion_timestamp or _phase(before) != _phase(after)):
        return False
    # The specs' fields as dicts, compared whole (in C) with nodeName set alike.
    return {**vars(before.spec), "node_name": None} == {**vars(after.spec), "node_name": None}


def _phase(pod: Pod) -> Any:
    return pod.status.get("phase") if isinstance(pod.status, Mapping) else None


#: Phases of a pod that counts nothing on its node.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_ONE_POD: Mapping[str, int] = {PODS: 1}  # shared by every pod that requests nothing else
_NO_TERMS_POD_NONZERO = (DEFAULT_MILLI_CPU, DEFAULT_MEMORY)


@dataclass(frozen=True, slots=True)
class BoundPod:
    """What the scheduler keeps of a pod bound to a node (its part of upstream's NodeInfo)."""

    key: str
    node: str
    namespace: str
    labels: Mapping[str, str]
    terminating: bool  # metadata.deletionTimestamp set: topology spread no longer counts it
    requests: Mapping[str, int]  # with ``pods: 1``
    nonzero: tuple[int, int]  # (milli-cpu, memory) as scoring counts them
    terms: PodTerms


class PodListener(Protocol):
    """Told when a bound pod starts or stops counting (the placement index)."""

    def pod_added(self, pod: BoundPod) -> None: ...

    def pod_removed(self, pod: BoundPod) -> None: ...


@dataclass
class NodeUsage:
    """Per node, what its bound pods request, how many there are and which host ports
    they hold, kept from pod events as upstream's NodeInfo is. Terminal pods count
    nothing; pods bound by any scheduler count alike."""

    requested: dict[str, dict[str, int]] = field(default_factory=dict)
    # node -> [milli-cpu, memory] of non-zero requests (the scoring plugins' view)
    nonzero: dict[str, list[int]] = field(default_factory=dict)
    # node -> (ip, protocol, port) -> how many bound pods hold it
    ports: dict[str, dict[HostPort, int]] = field(default_factory=dict)
    pods: dict[str, BoundPod] = field(default_factory=dict)  # live bound pods by key
    # pods with any pod (anti-)affinity term (upstream's PodsWithAffinity)
    with_affinity: dict[str, BoundPod] = field(default_factory=dict)
    listeners: list[PodListener] = field(default_factory=list)
    version: int = 0  # bumps on every change
    # Pods assumed on a node (Reserve), by key: the object their record was made from.
    assumed: dict[str, Pod] = field(default_factory=dict)

    def update(self, key: str, pod: Pod | None) -> None:
        """The pod ``key`` is now ``pod`` (None: deleted). A pod that stays on its node
        and would be recorded as it is keeps its record, and no listener is told: an
        assumed pod confirmed where it was assumed, or a bound pod whose status moved
        (kubelets write it often; the informer keeps bound pods as a slim projection,
        so the confirmation of a binding is such an update too). Listeners drop what
        they derived from the node, so each needless word costs them a recomputation."""
        node = pod.spec.node_name if pod is not None else None
        source = self.assumed.pop(key, None)
        prev = self.pods.get(key)
        if prev is not None and pod is not None and node == prev.node:
            if source is not None and same_but_node(source, pod):
                return
            if _phase(pod) not in TERMINAL_PHASES and self._record(key, pod, node, None) == prev:
                return
        self._set(key, pod, node)

    def assume(self, key: str, pod: Pod, node: str, placement: PodPlacement | None = None) -> None:
        """The pod counts on ``node`` before it is bound there (Reserve, as kube-scheduler's
        assumed pods): until :meth:`update` says what became of it. ``placement``: the
        pod's, as the cycle parsed it (:func:`placement_of`), not parsed again."""
        self.assumed.pop(key, None)
        self._set(key, pod, node, placement)
        if key in self.pods:
            self.assumed[key] = pod

    def _set(self, key: str, pod: Pod | None, node: str | None,
             placement: PodPlacement | None = None) -> None:
        prev = self.pods.pop(key, None)
        if prev is not None:
            self._remove(prev)
        if pod is None or not node:
            return
        if _phase(pod) in TERMINAL_PHASES:
            return
        bound = self._record(key, pod, node, placement)
        self.pods[key] = bound
        node = bound.node
        self.version += 1
        _add(self.requested.setdefault(node, {}), bound.requests)
        nz = self.nonzero.setdefault(node, [0, 0])
        nz[0] += bound.nonzero[0]
        nz[1] += bound.nonzero[1]
        if bound.terms.ports:
            held = self.ports.setdefault(node, {})
            for hp in bound.terms.ports:
                held[hp] = held.get(hp, 0) + 1
        if bound.terms.any_affinity:
            self.with_affinity[key] = bound
        for li in self.listeners:
            li.pod_added(bound)

    @staticmethod
    def _record(key: str, pod: Pod, node: str, placement: PodPlacement | None) -> BoundPod:
        # Accepted by a server, so what cannot be read counts as nothing.
        asked: Mapping[str, int]
        if placement is not None:
            asked = placement.requests
        else:
            try:
                asked = pod_requests(pod)
            except PlacementError:
                asked = {}
        try:
            nonzero = nonzero_requests(pod) if asked or pod.spec.init_containers or \
                len(pod.spec.containers) != 1 else _NO_TERMS_POD_NONZERO
        except PlacementError:
            nonzero = (0, 0)
        if placement is not None:
            terms = placement.terms
        else:
            try:
                terms = terms_of(pod)
            except PlacementError:
                terms = NO_TERMS
        meta = pod.metadata
        return BoundPod(key, node, pod.namespace, meta.labels,
                        meta.deletion_timestamp is not None,
                        {**asked, PODS: 1} if asked else _ONE_POD, nonzero, terms)

    def _remove(self, prev: BoundPod) -> None:
        self.version += 1
        node = prev.node
        used = self.requested.get(node, {})
        for k, v in prev.requests.items():
            used[k] = used.get(k, 0) - v
        nz = self.nonzero.get(node)
        if nz is not None:
            nz[0] -= prev.nonzero[0]
            nz[1] -= prev.nonzero[1]
        if used.get(PODS, 0) <= 0:
            self.requested.pop(node, None)
            self.nonzero.pop(node, None)
        if prev.terms.ports:
            held = self.ports.get(node, {})
            for hp in prev.terms.ports:
                n = held.get(hp, 0) - 1
                if n > 0:
                    held[hp] = n
                else:
                    held.pop(hp, None)
            if not held:
                self.ports.pop(node, None)
        self.with_affinity.pop(prev.key, None)
        for li in self.listeners:
            li.pod_removed(prev)

    def on(self, node: str) -> Requests:
        return self.requested.get(node, {})

    def __len__(self) -> int:
        return len(self.pods)


# ------------------------------------------------------------------ Filter
class Rejection(NamedTuple):
    """Why a filter plugin rejects a node: our reason ``code`` and a ``message`` naming
    the node and the constraint; the upstream ``plugin`` and its FitError ``reasons``
    (the short texts kube-scheduler counts in "0/6 nodes are available: ...")."""

    code: str
    message: str
    plugin: str
    reasons: tuple[str, ...]


NODE_UNSCHEDULABLE_PLUGIN, TAINT_TOLERATION, NODE_AFFINITY, NODE_PORTS, NODE_RESOURCES_FIT = (
    "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit")


def port_conflict(wanted: Iterable[HostPort], held: Mapping[HostPort, int]) -> HostPort | None:
    """The first wanted host port a bound pod holds (upstream's HostPortInfo rules: the
    same protocol and port, and an address equal to it or either being 0.0.0.0)."""
    for w in wanted:
        for h in held:
            if h.port == w.port and h.protocol == w.protocol and (
                    h.ip == w.ip or h.ip == ALL_ADDRESSES or w.ip == ALL_ADDRESSES):
                return w
    return None


def check_node(p: PodPlacement, n: NodeFacts, labels: Mapping[str, str], used: Requests,
               ports: Mapping[HostPort, int] | None = None) -> Rejection | None:
    """The first failing node filter, or None when the node passes NodeUnschedulable,
    TaintToleration, NodeAffinity, NodePorts and NodeResourcesFit (upstream's order).
    ``ports``: the host ports the node's bound pods hold."""
    if n.unschedulable and not any(t.tolerates(UNSCHEDULABLE_TAINT) for t in p.tolerations):
        return Rejection(reasons.NODE_UNSCHEDULABLE, f"node {n.name} is unschedulable (cordoned)",
                         NODE_UNSCHEDULABLE_PLUGIN, ("node(s) were unschedulable",))
    if n.taints:
        t = untolerated(n.taints, p.tolerations)
        if t is not None:
            shown = t.get("key", "") + (f"={t['value']}" if t.get("value") else "")
            return Rejection(reasons.TAINT_NOT_TOLERATED,
                             f"node {n.name} has taint {shown}:{t.get('effect')} that the pod does not tolerate",
                             TAINT_TOLERATION, ("node(s) had untolerated taint(s)",))
    for k, v in p.node_selector:
        if labels.get(k) != v:
            return Rejection(reasons.NODE_SELECTOR_MISMATCH,
                             f"node {n.name} does not match the pod's nodeSelector {k}={v}",
                             NODE_AFFINITY, (NODE_AFFINITY_REASON,))
    if p.required_affinity is not None and not node_selector_matches(p.required_affinity, n.name, labels):
        return Rejection(reasons.NODE_AFFINITY_MISMATCH,
                         f"node {n.name} does not match the pod's required node affinity",
                         NODE_AFFINITY, (NODE_AFFINITY_REASON,))
    if p.terms.ports and ports:
        taken = port_conflict(p.terms.ports, ports)
        if taken is not None:
            return Rejection(reasons.HOST_PORT_CONFLICT,
                             f"node {n.name}: host port {taken} is held by a pod bound there",
                             NODE_PORTS, ("node(s) didn't have free ports for the requested pod ports",))
    if n.allocatable is not None:
        alloc = n.allocatable
        fit_reasons: list[str] = []
        if used.get(PODS, 0) + 1 > alloc.get(PODS, 0):
            fit_reasons.append("Too many pods")
        short = [k for k, v in p.requests.items() if v > alloc.get(k, 0) - used.get(k, 0)]
        if short:
            fit_reasons += [f"Insufficient {k}" for k in _upstream_order(short)]
        if fit_reasons:
            what = (f"too many pods ({alloc.get(PODS, 0)} allowed)" if fit_reasons[0] == "Too many pods"
                    else f"insufficient {', '.join(short)}")
            return Rejection(reasons.INSUFFICIENT_NODE_RESOURCES, f"node {n.name}: {what}",
                             NODE_RESOURCES_FIT, tuple(fit_reasons))
    return None


NODE_AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
_FIRST = ("cpu", "memory", "ephemeral-storage")


def _upstream_order(names: Iterable[str]) -> list[str]:
    """cpu, memory, ephemeral-storage first, as NodeResourcesFit reports them."""
    names = list(names)
    return [n for n in _FIRST if n in names] + [n for n in names if n not in _FIRST]
