"""A pod's inter-pod affinity terms, topology spread constraints and host ports.

Parsed once per pod, with upstream's meanings (kube-scheduler 1.37,
``framework.AffinityTerm``, ``podtopologyspread`` and ``util.GetHostPorts``):

* an affinity term with neither ``namespaces`` nor ``namespaceSelector`` selects
  pods of the pod's own namespace; a ``namespaceSelector`` of ``{}`` selects every
  namespace; ``matchLabelKeys``/``mismatchLabelKeys`` are not read here: the API
  server merged them into ``labelSelector`` when the pod was created
  (:mod:`dra_affinity.validation.pod_strategy` does it for the embedded cluster);
* a spread constraint's ``matchLabelKeys`` are merged here, from the pod's labels, as
  the plugin itself does; ``minDomains`` defaults to 1, ``nodeAffinityPolicy`` to
  Honor and ``nodeTaintsPolicy`` to Ignore;
* host ports come from the app containers and the restartable init containers
  (sidecars); an empty ``hostIP`` means every address (``0.0.0.0``), an empty
  protocol TCP; on a ``hostNetwork`` pod an unset ``hostPort`` is the container port,
  as API-server defaulting writes it.

Malformed fields raise :class:`.errors.PlacementError` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from dra_affinity.api.core import Pod
from dra_affinity.api.meta import NodeSelectorTerm

from .errors import PlacementError
from .selectors import NOTHING, LabelSelector, parse_label_selector, set_selector

HOSTNAME: Final = "kubernetes.io/hostname"
ALL_ADDRESSES: Final = "0.0.0.0"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One pod (anti-)affinity term: which pods it selects, and the topology key."""

    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    selector: LabelSelector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str],
                namespace_labels: Mapping[str, str] | None = None) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is selected (``namespace_labels``:
        that namespace's labels, for a selector not resolved to names)."""
        if namespace in self.namespaces or self.namespace_selector.matches(namespace_labels or {}):
            return self.selector.matches(labels)
        return False

    def resolved(self, namespaces: Callable[[LabelSelector], Iterable[str]]) -> AffinityTerm:
        """The incoming pod's term with its namespace selector replaced by the names it
        selects now (upstream's ``mergeAffinityTermNamespacesIfNotEmpty``); a selector
        of everything or nothing is kept as it is."""
        sel = self.namespace_selector
        if sel.everything or sel.nothing:
            return self
        return AffinityTerm(self.namespaces | frozenset(namespaces(sel)), NOTHING, self.selector,
                            self.topology_key)

    @property
    def any_namespace(self) -> bool:
        return self.namespace_selector.everything

    def describe(self) -> str:
        ns = "all namespaces" if self.any_namespace else ",".join(sorted(self.namespaces)) or "-"
        if not self.namespace_selector.nothing and not self.any_namespace:
            ns += f" + namespaces with {self.namespace_selector}"
        return f"{{{self.selector}}} in {ns} by {self.topology_key}"


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_taints: bool = False

    def describe(self) -> str:
        extra = f", minDomains {self.min_domains}" if self.min_domains > 1 else ""
        return f"{self.topology_key} maxSkew {self.max_skew}{extra} over {{{self.selector}}}"


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}/{self.protocol}"


@dataclass(frozen=True, slots=True)
class WeightedNodeTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class PodTerms:
    """Everything of a pod that involves other pods, plus its soft node preferences."""

    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()  # whenUnsatisfiable: DoNotSchedule
    soft_spread: tuple[SpreadConstraint, ...] = ()  # whenUnsatisfiable: ScheduleAnyway
    ports: tuple[HostPort, ...] = ()
    preferred_nodes: tuple[WeightedNodeTerm, ...] = ()

    @property
    def any_affinity(self) -> bool:
        """Upstream's "pod with affinity": any pod (anti-)affinity term at all."""
        return bool(self.affinity or self.anti_affinity or self.preferred_affinity
                     or self.preferred_anti_affinity)

    @property
    def soft(self) -> bool:
        """The pod states preferences (what only a scoring policy acts on)."""
        return bool(self.preferred_affinity or self.preferred_anti_affinity or self.soft_spread
                    or self.preferred_nodes)


NO_TERMS: Final = PodTerms()


def _obj(raw: Any, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PlacementError(where, "must be an object")
    return raw


def _list(raw: Any, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PlacementError(where, "must be a list")
    return raw


def _int(raw: Any, where: str, *, minimum: int) -> int:
    if type(raw) is not int or raw < minimum:
        raise PlacementError(where, f"must be an integer of at least {minimum}")
    return raw


def _term(raw: Any, namespace: str, where: str) -> AffinityTerm:
    t = _obj(raw, where)
    key = t.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise PlacementError(f"{where}.topologyKey", "must be a non-empty string")
    names = _list(t.get("namespaces"), f"{where}.namespaces")
    if not all(isinstance(n, str) for n in names):
        raise PlacementError(f"{where}.namespaces", "must be a list of strings")
    raw_ns_sel = t.get("namespaceSelector")
    ns_sel = parse_label_selector(raw_ns_sel, f"{where}.namespaceSelector")
    for k in ("matchLabelKeys", "mismatchLabelKeys"):
        keys = _list(t.get(k), f"{where}.{k}")
        if not all(isinstance(x, str) for x in keys):
            raise PlacementError(f"{where}.{k}", "must be a list of strings")
    if not names and raw_ns_sel is None:
        names = [namespace]
    return AffinityTerm(frozenset(names), ns_sel,
                        parse_label_selector(t.get("labelSelector"), f"{where}.labelSelector"), key)


def _required(raw: Mapping[str, Any], namespace: str, where: str) -> tuple[AffinityTerm, ...]:
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    return tuple(_term(t, namespace, f"{where}.{key}[{i}]")
                 for i, t in enumerate(_list(raw.get(key), f"{where}.{key}")))


def _preferred(raw: Mapping[str, Any], namespace: str, where: str) -> tuple[WeightedTerm, ...]:
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    out = []
    for i, w in enumerate(_list(raw.get(key), f"{where}.{key}")):
        at = f"{where}.{key}[{i}]"
        w = _obj(w, at)
        out.append(WeightedTerm(_int(w.get("weight"), f"{at}.weight", minimum=1),
                                _term(w.get("podAffinityTerm"), namespace, f"{at}.podAffinityTerm")))
    return tuple(out)


def _preferred_nodes(node_aff: Mapping[str, Any], where: str) -> tuple[WeightedNodeTerm, ...]:
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    out = []
    for i, w in enumerate(_list(node_aff.get(key), f"{where}.{key}")):
        at = f"{where}.{key}[{i}]"
        w = _obj(w, at)
        weight = _int(w.get("weight"), f"{at}.weight", minimum=1)
        try:
            term = NodeSelectorTerm.model_validate(w.get("preference") or {})
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise PlacementError(f"{at}.preference" + (f".{loc}" if loc else ""), first["msg"]) from None
        out.append(WeightedNodeTerm(weight, term))
    return tuple(out)


def _spread(raw: Any, labels: Mapping[str, str], where: str) -> tuple[SpreadConstraint, bool]:
    c = _obj(raw, where)
    key = c.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise PlacementError(f"{where}.topologyKey", "must be a non-empty string")
    when = c.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise PlacementError(f"{where}.whenUnsatisfiable",
                             f"unsupported value {when!r}: {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
    skew = _int(c.get("maxSkew"), f"{where}.maxSkew", minimum=1)
    min_domains = 1 if c.get("minDomains") is None else _int(c.get("minDomains"), f"{where}.minDomains",
                                                              minimum=1)
    policies = []
    for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        v = c.get(field)
        if v is not None and v not in (HONOR, IGNORE):
            raise PlacementError(f"{where}.{field}", f"unsupported value {v!r}: {HONOR} or {IGNORE}")
        policies.append(v)
    selector = parse_label_selector(c.get("labelSelector"), f"{where}.labelSelector")
    keys = _list(c.get("matchLabelKeys"), f"{where}.matchLabelKeys")
    if not all(isinstance(k, str) for k in keys):
        raise PlacementError(f"{where}.matchLabelKeys", "must be a list of strings")
    own = {k: labels[k] for k in keys if k in labels}
    if own:
        selector = selector.with_requirements(set_selector(own))
    return SpreadConstraint(skew, key, selector, min_domains,
                            policies[0] != IGNORE, policies[1] == HONOR), when == DO_NOT_SCHEDULE


def _ports(spec_containers: Iterable[Any], host_network: bool, where: str,
           sidecars_only: bool) -> list[HostPort]:
    out = []
    for i, c in enumerate(spec_containers):
        if not isinstance(c, Mapping) or "ports" not in c:
            continue
        if sidecars_only and c.get("restartPolicy") != "Always":
            continue
        for j, p in enumerate(_list(c.get("ports"), f"{where}[{i}].ports")):
            at = f"{where}[{i}].ports[{j}]"
            p = _obj(p, at)
            port = p.get("hostPort")
            if port is None or port == 0:
                port = p.get("containerPort") if host_network else 0
            if type(port) is not int or not 0 <= port <= 65535:
                raise PlacementError(f"{at}.hostPort", "must be an integer between 0 and 65535")
            if port == 0:
                continue
            ip, proto = p.get("hostIP") or ALL_ADDRESSES, p.get("protocol") or "TCP"
            if not isinstance(ip, str) or not isinstance(proto, str):
                raise PlacementError(at, "hostIP and protocol must be strings")
            out.append(HostPort(ip, proto, port))
    return out


def terms_of(pod: Pod) -> PodTerms:
    """Parse the pod's inter-pod affinity, spread constraints, host ports and preferred
    node affinity; raises :class:`PlacementError`."""
    spec = pod.spec
    aff = spec.affinity
    spread = spec.topology_spread_constraints
    has_ports = any(isinstance(c, Mapping) and "ports" in c for c in spec.containers) or any(
        isinstance(c, Mapping) and "ports" in c for c in spec.init_containers)
    if not spread and not has_ports and (aff is None or (
            aff.get("podAffinity") is None and aff.get("podAntiAffinity") is None
            and not (isinstance(aff.get("nodeAffinity"), Mapping)
                     and aff["nodeAffinity"].get("preferredDuringSchedulingIgnoredDuringExecution")))):
        return NO_TERMS
    ns = pod.namespace
    where = "spec.affinity"
    a = _obj(aff, where)
    pa = _obj(a.get("podAffinity"), f"{where}.podAffinity")
    paa = _obj(a.get("podAntiAffinity"), f"{where}.podAntiAffinity")
    na = _obj(a.get("nodeAffinity"), f"{where}.nodeAffinity")
    hard: list[SpreadConstraint] = []
    soft: list[SpreadConstraint] = []
    for i, c in enumerate(spread):
        sc, is_hard = _spread(c, pod.metadata.labels, f"spec.topologySpreadConstraints[{i}]")
        (hard if is_hard else soft).append(sc)
    host_network = bool(spec.host_network)
    ports = _ports(spec.init_containers, host_network, "spec.initContainers", True)
    ports += _ports(spec.containers, host_network, "spec.containers", False)
    terms = PodTerms(
        _required(pa, ns, f"{where}.podAffinity"),
        _required(paa, ns, f"{where}.podAntiAffinity"),
        _preferred(pa, ns, f"{where}.podAffinity"),
        _preferred(paa, ns, f"{where}.podAntiAffinity"),
        tuple(hard), tuple(soft), tuple(ports),
        _preferred_nodes(na, f"{where}.nodeAffinity"))
    return NO_TERMS if terms == NO_TERMS else terms
