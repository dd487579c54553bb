"""Driver-author and operator tools behind ``eval``, ``validate``, ``explain`` and ``locks``.

Each returns plain data (rendered as a table or JSON by the CLI), so the
same answers are available to scripts through the library.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dra_affinity.api.io import (
    Document,
    FieldError,
    ManifestError,
    parse_object,
    read_paths,
)
from dra_affinity.api.keys import key_of, namespaced_key
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    subrequest_name,
)
from dra_affinity.cel import (
    SHARING_AFFINITY_CEL_MAX_COST,
    ConfigObject,
    Extractor,
    OutcomeKind,
    extract,
)
from dra_affinity.scheduler.explain import explain_pod
from dra_affinity.sim.runner import Simulation
from dra_affinity.sim.scenario import Scenario
from dra_affinity.structured import reasons
from dra_affinity.structured.extraction import scoped_configs
from dra_affinity.structured.pools import Pool, gather_pools
from dra_affinity.validation.admission import validate_object
from dra_affinity.validation.sharing_affinity import effective_slices, slice_extractors


# ====================================================================== reading
def _is_scenario(d: Document) -> bool:
    return isinstance(d.data, dict) and d.data.get("kind") == "Scenario"


def load_kinds(paths: Iterable[str]) -> list[tuple[Document, TypedObject]]:
    """Every Kubernetes object of the given files and folders, typed (Scenario documents
    are skipped, so a scenario file can serve as a manifest file)."""
    out: list[tuple[Document, TypedObject]] = []
    for d in read_paths(paths):
        if _is_scenario(d):
            continue
        obj = parse_object(d)
        assert isinstance(obj, TypedObject)
        out.append((d, obj))
    return out




TypedObjectT = TypeVar("TypedObjectT", bound=TypedObject)


def load_one(path: str, kind: type[TypedObject]) -> list[TypedObject]:
    """Objects of one kind from a manifest or scenario file (Scenario documents skipped)."""
    return [o for _, o in load_kinds([path]) if isinstance(o, kind)]


def admitted(path: str, obj: TypedObjectT) -> TypedObjectT:
    """``obj`` when the API server would admit it; otherwise ``ManifestError`` naming the
    file, the object and every field admission refuses. A tool evaluates only what a
    cluster could hold (a claim whose configs exceed their size limit never reaches a
    scheduler)."""
    errors = validate_object(obj)
    if errors:
        raise ManifestError(path, errors, object_ref=f'{obj.kind} "{obj.metadata.name}"')
    return obj


def claim_from(path: str, name: str | None = None) -> ResourceClaim:
    """The (named, or first) ResourceClaim of a file, or a claim made from a template."""
    objs = [o for _, o in load_kinds([path])
            if name is None or o.metadata.name == name]
    for o in objs:
        if isinstance(o, ResourceClaim):
            return o
    for o in objs:
        if isinstance(o, ResourceClaimTemplate):
            return ResourceClaim.model_validate({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": o.metadata.name, "namespace": o.metadata.namespace},
                "spec": o.spec.spec.to_dict()})
    what = f"named {name!r} " if name else ""
    raise ManifestError(path, [FieldError("", f"no ResourceClaim or ResourceClaimTemplate {what}in file")])


# ====================================================================== eval
def _claim_requests(claim: ResourceClaim, request: str | None) -> list[tuple[str, str]]:
    """(request or req/sub, class) pairs, in claim order, optionally only one request."""
    requests: list[tuple[str, str]] = []
    for r in claim.spec.devices.requests:
        if r.exactly is not None:
            requests.append((r.name, r.exactly.device_class_name))
        for sub in r.first_available:
            requests.append((subrequest_name(r.name, sub.name), sub.device_class_name))
    if request is not None:
        requests = [x for x in requests if x[0] == request or x[0].split("/", 1)[0] == request]
        if not requests:
            raise ValueError(f"claim {claim.metadata.name} has no request {request!r}")
    return requests


def _pool_block(pool: Pool) -> tuple[str, str] | None:
    """(reason code, message) when the scheduler withholds the pool's shared devices
    whatever the claim says: the allocator's checks, in its order."""
    if pool.invalid_reason:
        return reasons.POOL_INVALID, f"pool {pool.driver}/{pool.name} is invalid: {pool.invalid_reason}"
    if pool.incomplete_reason:
        return reasons.AFFINITY_POOL_INCOMPLETE, pool.incomplete_reason
    if pool.affinity_invalid_reason:
        return (reasons.AFFINITY_INVALID_POOL, f"pool {pool.driver}/{pool.name} is invalid for "
                f"sharing affinity: {pool.affinity_invalid_reason}")
    return None


def _trace(extractors: Sequence[Extractor], configs: Sequence[ConfigObject],
           evaluations: int) -> list[dict[str, Any]]:
    """One row per evaluation the contract performed, in its order, each through
    :func:`extract` itself with what remains of the extraction's budget."""
    rows: list[dict[str, Any]] = []
    remaining = SHARING_AFFINITY_CEL_MAX_COST  # one budget for the whole extraction
    for cfg in configs:
        for ex in extractors:
            if len(rows) >= evaluations:
                return rows
            one = extract([ex], [cfg], budget=remaining)
            remaining -= one.cost
            row: dict[str, Any] = {"config": cfg.source, "key": ex.name, "cost": one.cost}
            if one.kind is OutcomeKind.OK:
                row["value"] = row["display"] = dict(one.keys)[ex.name]
            elif one.kind is OutcomeKind.NO_KEYS:
                row["value"], row["display"] = "", "''"
            else:
                row["value"], row["error"] = None, f"{one.kind.value}: {one.message}"
            rows.append(row)
    return rows


def evaluate_extractors(slices: Sequence[ResourceSlice], claim: ResourceClaim,
                        classes: Sequence[DeviceClass] = (),
                        request: str | None = None) -> dict[str, Any]:
    """What the scheduler would decide for each request of ``claim`` on each pool.

    Slices are read as the scheduler reads them (extractors from
    ``spec.sharingAffinity`` or the bridge annotation) and gathered into pools as
    it does (newest generation only, completeness, validity); a pool that
    declares sharingAffinity in no generation is left out. Per request, the pool's extractors run together
    through :func:`dra_affinity.cel.extract` (one budget for all, stopping
    at the first slice error): the verdict is its outcome, unless the pool
    itself withholds its shared devices. The rows show each evaluation that
    outcome rests on.
    """
    class_map = {c.metadata.name: c for c in classes}
    requests = _claim_requests(claim, request)
    read, _ = effective_slices(slices)
    declaring = {(s.spec.driver, s.spec.pool.name) for s in read.slices
                 if s.spec.sharing_affinity or s.metadata.name in read.problems}
    out: dict[str, Any] = {"claim": key_of(claim), "pools": []}
    for pid, pool in gather_pools(read.slices, read.problems).items():
        if pid not in declaring:
            continue
        block = _pool_block(pool)
        pool_out: dict[str, Any] = {
            "driver": pool.driver, "pool": pool.name, "generation": pool.generation,
            "metadataSlices": [s.metadata.name for s in pool.slices
                               if s.spec.sharing_affinity or s.metadata.name in read.problems],
            "problem": {"code": block[0], "message": block[1]} if block else None,
            "requests": [],
        }
        for name, class_name in requests:
            configs = scoped_configs(claim, name, pool.driver, class_map.get(class_name))
            entry: dict[str, Any] = {"request": name, "class": class_name}
            if not pool.declares_sharing_affinity:
                entry.update(evaluations=[], outcome="NotDeclared", keys={}, message=(
                    f"generation {pool.generation} of pool {pool.driver}/{pool.name} declares no "
                    "sharingAffinity (older generations do not count): its devices are not gated"))
            else:
                res = extract(pool.extractors, configs)
                entry.update(evaluations=_trace(pool.extractors, configs, res.evaluations),
                             outcome=res.kind.value, keys=dict(res.keys), message=res.message)
                if block is not None:
                    entry["extraction"] = {"outcome": res.kind.value, "keys": dict(res.keys),
                                           "message": res.message}
                    entry.update(outcome=block[0], keys={}, message=block[1])
            pool_out["requests"].append(entry)
        out["pools"].append(pool_out)
    return out


# ====================================================================== validate
@dataclass
class Finding:
    source: str
    object: str
    field: str
    message: str
    severity: str = "error"

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "object": self.object, "field": self.field,
                "message": self.message, "severity": self.severity}

    def render(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{self.source}: {self.object}: {where}{self.message}"


def validate_paths(paths: Sequence[str], *, together: bool = False) -> list[Finding]:
    """Admission validation of every object, then pool validation per file (or across files).

    Unreadable input becomes findings of severity ``input``; input with no
    manifests at all is one such finding, never a clean result.
    """
    errors: list[ManifestError] = []
    docs = read_paths(paths, errors)
    out = [Finding(e.source, f"document {e.document}" if e.document else "-", fe.path,
                   fe.render(), "input") for e in errors for fe in e.errors]
    by_file: dict[str, list[Document]] = {}
    for d in docs:
        by_file.setdefault(d.source, []).append(d)
    if together:
        return out + _validate_docs(docs)
    for group in by_file.values():
        out.extend(_validate_docs(group))
    return out


def _validate_docs(docs: Sequence[Document]) -> list[Finding]:
    findings: list[Finding] = []
    slices: list[tuple[Document, ResourceSlice]] = []
    seen: dict[tuple[str, str], str] = {}
    for d in docs:
        if _is_scenario(d):
            continue
        path = d.source
        try:
            obj = parse_object(d)
        except ManifestError as e:
            ref = e.object_ref or f"document {d.index}"
            findings.extend(Finding(path, ref.strip("()"), fe.path,
                                    fe.message + (f" (hint: {fe.hint})" if fe.hint else ""))
                            for fe in e.errors)
            continue
        assert isinstance(obj, TypedObject)
        ref = f'{obj.kind} "{obj.metadata.name}"'
        for fe in validate_object(obj):
            findings.append(Finding(path, ref, fe.path, fe.message))
        if isinstance(obj, ResourceSlice):
            k = (obj.kind, obj.metadata.name)
            if k in seen:
                findings.append(Finding(path, ref, "metadata.name",
                                        f"Duplicate value: also defined in {seen[k]}"))
                continue
            seen[k] = f"{path} document {d.index}"
            # The extractors as the scheduler reads them; an unreadable annotation is
            # reported here, once (its pool is not reported again for it).
            read = slice_extractors(obj)
            findings.extend(Finding(path, ref, fe.path, fe.message) for fe in read.errors)
            slices.append((d, read.slice))
    for pid, pool in gather_pools([s for _, s in slices]).items():
        ref = f"pool {pid[0]}/{pid[1]}"
        src = ", ".join(sorted({d.source for d, s in slices
                                if (s.spec.driver, s.spec.pool.name) == pid}))
        if pool.incomplete_reason:
            findings.append(Finding(src, ref, "", f"incomplete: {pool.incomplete_reason}", "warning"))
        if pool.invalid_reason:
            findings.append(Finding(src, ref, "", f"invalid: {pool.invalid_reason}"))
        if pool.affinity_invalid_reason:
            findings.append(Finding(src, ref, "spec.sharingAffinity",
                                    f"invalid for sharing affinity: {pool.affinity_invalid_reason}"))
    return findings


# ====================================================================== explain / locks
def run_until(scenario: Scenario, at_step: int | None) -> Simulation:
    """Run steps [0, at_step) and return the simulation in that state."""
    sim = Simulation(scenario)
    steps = scenario.spec.steps
    stop = len(steps) if at_step is None else max(0, min(at_step, len(steps)))
    for i in range(stop):
        sim.run_step(i, steps[i])
    return sim


def explain(sim: Simulation, pod_ref: str) -> dict[str, Any]:
    """Why a pod does or does not fit each candidate device on each node, now."""
    key = namespaced_key(pod_ref)
    try:
        return explain_pod(sim.scheduler, key)
    except KeyError:
        raise ValueError(f"pod {key} does not exist at this point of the scenario") from None


def locks(sim: Simulation) -> list[dict[str, Any]]:
    """Effective per-device lock state with holders (claims and requests)."""
    out = []
    for entry in sim.devices_output():
        did = entry["device"]
        holders = [{"claim": s.claim, "request": s.request, "tentative": s.tentative,
                    "keys": dict(s.keys) if s.keys is not None else None}
                   for s in sim.scheduler.state.shares(did)]
        out.append({**entry, "holders": holders})
    return out
