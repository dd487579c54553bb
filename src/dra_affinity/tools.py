"""Driver-author and operator tools behind ``eval``, ``validate``, ``explain`` and ``locks``.

Each returns plain data (rendered as a table or JSON by the CLI), so the
same answers are available to scripts through the library.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dra_affinity.api.io import (
    Document,
    FieldError,
    ManifestError,
    parse_object,
    read_documents,
)
from dra_affinity.api.meta import TypedObject
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from dra_affinity.cel import EXTRACTOR_ENV, CELError, Extractor, extract
from dra_affinity.scheduler.explain import explain_pod
from dra_affinity.sim.runner import Simulation
from dra_affinity.sim.scenario import Scenario, _pod_key
from dra_affinity.structured.extraction import scoped_configs
from dra_affinity.structured.pools import gather_pools
from dra_affinity.validation.admission import validate_object

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


# ====================================================================== eval
def _value_repr(v: object) -> str:
    if isinstance(v, str):
        return repr(v) if v == "" else v
    return f"{type(v).__name__} {v!r}"


def evaluate_extractors(slices: Sequence[ResourceSlice], claim: ResourceClaim,
                        classes: Sequence[DeviceClass] = (),
                        request: str | None = None) -> dict[str, Any]:
    """Per request: every extractor against every in-scope opaque config, then the outcome."""
    by_pool: dict[tuple[str, str], list[Extractor]] = {}
    for s in sorted(slices, key=lambda s: s.metadata.name):
        for e in s.spec.sharing_affinity or []:
            by_pool.setdefault((s.spec.driver, s.spec.pool.name), []).append(
                Extractor(e.name, e.expression))
    class_map = {c.metadata.name: c for c in classes}
    requests: list[tuple[str, str]] = []  # (name, class)
    for r in claim.spec.devices.requests:
        if r.exactly is not None:
            requests.append((r.name, r.exactly.device_class_name))
        for sub in r.first_available:
            requests.append((f"{r.name}/{sub.name}", sub.device_class_name))
    if request is not None:
        requests = [x for x in requests if x[0] == request or x[0].split("/", 1)[0] == request]
        if not requests:
            raise ValueError(f"claim {claim.metadata.name} has no request {request!r}")
    out: dict[str, Any] = {"claim": f"{claim.namespace}/{claim.name}", "pools": []}
    for (driver, pool), extractors in sorted(by_pool.items()):
        pool_out: dict[str, Any] = {"driver": driver, "pool": pool, "requests": []}
        for name, class_name in requests:
            configs = scoped_configs(claim, name, driver, class_map.get(class_name))
            rows = []
            for cfg in configs:
                for ex in extractors:
                    row: dict[str, Any] = {"config": cfg.source, "key": ex.name}
                    try:
                        prog = EXTRACTOR_ENV.compile(ex.expression)
                        val, cost = prog.evaluate({"object": cfg.parameters}, 1_000_000)
                        row["value"] = val if isinstance(val, str) else None
                        row["display"] = _value_repr(val)
                        row["cost"] = cost
                        if not isinstance(val, str):
                            row["error"] = f"non-string return ({type(val).__name__})"
                    except CELError as e:
                        row["error"] = str(e)
                    rows.append(row)
            res = extract(extractors, configs)
            pool_out["requests"].append({
                "request": name, "class": class_name, "evaluations": rows,
                "outcome": res.kind.value, "keys": dict(res.keys), "message": res.message,
            })
        out["pools"].append(pool_out)
    return out


def load_kinds(paths: Iterable[str]) -> list[tuple[Document, TypedObject]]:
    out: list[tuple[Document, TypedObject]] = []
    for p in manifest_files(paths):
        for d in read_documents(_read(p), p):
            if isinstance(d.data, dict) and d.data.get("kind") == "Scenario":
                continue
            obj = parse_object(d)
            assert isinstance(obj, TypedObject)
            out.append((d, obj))
    return out


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ManifestError(path, [FieldError("", f"cannot read: {e.strerror}")]) from None
    except UnicodeDecodeError:
        raise ManifestError(path, [FieldError("", "not UTF-8 text")]) from None


def manifest_files(paths: Iterable[str]) -> list[str]:
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for n in sorted(names):
                    if n.endswith(MANIFEST_SUFFIXES):
                        files.append(os.path.join(root, n))
        else:
            files.append(p)
    return files


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
    """Admission validation of every object, then pool validation per file (or across files)."""
    files = manifest_files(paths)
    if together:
        return _validate_files(files)
    out: list[Finding] = []
    for f in files:
        out.extend(_validate_files([f]))
    return out


def _validate_files(files: Sequence[str]) -> list[Finding]:
    findings: list[Finding] = []
    slices: list[tuple[Document, ResourceSlice]] = []
    seen: dict[tuple[str, str], str] = {}
    for path in files:
        try:
            docs = read_documents(_read(path), path)
        except ManifestError as e:
            findings.extend(Finding(e.source, "-", fe.path, fe.render(), "input") for fe in e.errors)
            continue
        for d in docs:
            if isinstance(d.data, dict) and d.data.get("kind") == "Scenario":
                continue
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
                slices.append((d, obj))
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
    key = _pod_key(pod_ref)
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


def load_one(path: str, kind: type[TypedObject]) -> list[TypedObject]:
    """Objects of one kind from a manifest or scenario file (Scenario documents skipped)."""
    return [o for _, o in load_kinds([path]) if isinstance(o, kind)]


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
