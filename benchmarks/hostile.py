"""Worst case of one scheduling attempt over hostile slices and claims within the API's limits.

    python benchmarks/hostile.py [--quick] [--case NAME] [--timeout S] [--output FILE]

Each case is a pool whose metadata slice holds up to 8 extractors of up to 10 KiB each
and a pod whose claim holds up to 32 opaque configs of up to 10 KiB of parameters
each: the most the API admits. The expressions try every way of turning claim data
into work: output size (``replace`` with an empty pattern, repeated concatenation,
``join`` of a built list), nested comprehensions, regular expressions, deep
conditionals, long results, regular expressions that fail to compile or backtrack,
``flatten`` of shared lists, version and duration parsing, and a pod whose 32
requests meet 8 pools with distinct extractor sets (budgets that multiply). For each
case one attempt runs on a fresh scheduler (nothing remembered) and a second on the
same scheduler (the outcome remembered); the script reports CPU seconds and the peak
of memory allocated during the attempt (``tracemalloc``), and the worst case of each.
Each case runs in a child process with a CPU limit (``--timeout``) and a 4 GB address
space, so code that takes minutes or gigabytes shows as over the limit. Nothing here
is asserted: the figures are for benchmarks/README.md ("Hostile input").
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from dra_affinity.api.core import Pod
from dra_affinity.api.resource import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    DEVICE_CONFIG_MAX,
    OPAQUE_PARAMETERS_MAX_LENGTH,
    SHARING_AFFINITY_MAX_ENTRIES,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from dra_affinity.features import Features
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster

DRIVER = "networking.example.com"


@dataclass(frozen=True)
class Case:
    name: str
    expression: str  # one extractor; the slice holds SHARING_AFFINITY_MAX_ENTRIES of them
    params: Callable[[int], dict[str, Any]]  # config index -> parameters
    # Requests of the claim (each with its own config: then the claim holds that many
    # configs) and pools, one per node, each with an extractor set of its own.
    requests: int = 1
    pools: int = 1


def _fill(text: str, limit: int) -> str:
    """``text`` repeated to just under ``limit`` characters (a string field's payload)."""
    return (text * (limit // max(1, len(text)) + 1))[:limit]


def _string_params(i: int) -> dict[str, Any]:
    # One non-ASCII character: string operations cannot take an ASCII fast path.
    return {"s": "é" + _fill("ab", OPAQUE_PARAMETERS_MAX_LENGTH - 200)}


def _list_params(i: int) -> dict[str, Any]:
    return {"l": list(range((OPAQUE_PARAMETERS_MAX_LENGTH - 200) // 6))}


def _padded(expr: str) -> str:
    """The expression padded with a no-op conditional chain to near the length limit."""
    pad = ' || false' * ((CEL_SELECTOR_EXPRESSION_MAX_LENGTH - len(expr) - 40) // 10)
    return f'(true{pad}) ? ({expr}) : ""'


def _patterns(i: int) -> dict[str, Any]:
    # Distinct Unicode-class repetitions: valid in Go; RE2 with its default memory
    # budget refuses each after compiling it for tens of milliseconds.
    out: list[str] = []
    n = 0
    while sum(len(p) + 4 for p in out) < OPAQUE_PARAMETERS_MAX_LENGTH - 400:
        out.append(rf"\pL{{{200 + (i * 997 + n) % 799}}}")
        n += 1
    return {"l": out}


def _backtracking_params(i: int) -> dict[str, Any]:
    return {"s": _fill("a", OPAQUE_PARAMETERS_MAX_LENGTH - 1700), "l": list(range(330))}


def _semver_params(i: int) -> dict[str, Any]:
    return {"s": "1.2.3-" + "a." * ((OPAQUE_PARAMETERS_MAX_LENGTH - 1800) // 2) + "a",
            "l": list(range(300))}


def _duration_params(i: int) -> dict[str, Any]:
    return {"d": "1ns" * 33, "l": list(range((OPAQUE_PARAMETERS_MAX_LENGTH - 400) // 6))}


def _distinct_durations(i: int) -> dict[str, Any]:
    # ~99-character durations, all distinct (none parsed twice across the configs)
    out: list[str] = []
    n = 0
    while sum(len(d) + 4 for d in out) < OPAQUE_PARAMETERS_MAX_LENGTH - 400:
        out.append(f"{i * 1000 + n}ns" + "1ns" * 31)
        n += 1
    return {"l": out}


def _flatten_params(i: int) -> dict[str, Any]:
    return {"l": list(range(260))}


def _square_params(i: int) -> dict[str, Any]:
    # distinct per request (what the extractor reads), so no two share an evaluation
    return {"l": list(range(i, i + 130))}


CASES = (
    Case("replace-empty-pattern", 'object.s.replace("", object.s)', _string_params),
    Case("concatenation", "object.s + object.s + object.s + object.s + object.s + object.s", _string_params),
    Case("join-of-built-list", 'object.l.map(x, object.s).join(",")',
         lambda i: {"s": "é" + _fill("ab", 4000), "l": list(range(1000))}),
    Case("nested-comprehension", 'object.l.all(x, object.l.all(y, x + y >= 0)) ? "" : ""', _list_params),
    Case("map-of-map", 'string(object.l.map(x, object.l.map(y, x * y)).size())', _list_params),
    Case("regex", 'object.s.matches("^(a|b|é)*c$") ? "" : "x"', _string_params),
    Case("long-value", "object.s", _string_params),
    Case("padded-expression", _padded('object.s.size() > 0 ? "" : "x"'), _string_params),
    Case("empty-result", '""', _string_params),
    Case("regex-compile-failures", 'object.l.exists(p, "x".matches(p)) ? "" : "x"', _patterns),
    Case("regex-backtracking", 'object.l.all(x, !object.s.matches("a.{0,999}c")) ? "" : "x"',
         _backtracking_params),
    Case("flatten-shared-lists",
         "string(object.l.map(x, object.l.map(y, object.l)).flatten(2).size())", _flatten_params),
    Case("semver-parse", 'object.l.all(x, isSemver(object.s)) ? "" : "x"', _semver_params),
    Case("duration-parse", 'object.l.all(x, duration(object.d) > duration("0s")) ? "" : "x"',
         _duration_params),
    Case("duration-parse-distinct", 'object.l.all(d, duration(d) > duration("0s")) ? "" : "x"',
         _distinct_durations),
    Case("budgets-multiply", 'object.l.all(x, object.l.all(y, x + y >= 0)) ? "v" : ""',
         _square_params, requests=DEVICE_CONFIG_MAX, pools=8),
)


def _objects(case: Case, configs: int, extractors: int) -> list[Any]:
    objects: list[Any] = []
    for p in range(case.pools):
        node = f"node-{p + 1}"
        pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
        objects.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-meta"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                     # names of their own: each pool has a distinct extractor set
                     "sharingAffinity": [{"name": f"k{i}-p{p}", "expression": case.expression}
                                         for i in range(extractors)]}})
        objects.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-nics"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                     "devices": [{"name": f"eth{d}", "allowMultipleAllocations": True,
                                  "capacity": {f"{DRIVER}/slots": {"value": "16"}}}
                                 for d in range(4)]}})
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
           "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    names = [f"nic{r}" for r in range(case.requests)] if case.requests > 1 else ["nic"]
    requests = [{"name": r, "exactly": {"deviceClassName": "nic",
                                        "capacity": {"requests": {f"{DRIVER}/slots": "1"}}}}
                for r in names]
    if case.requests > 1:  # a config per request
        config = [{"requests": [r], "opaque": {"driver": DRIVER, "parameters": case.params(i)}}
                  for i, r in enumerate(names[:configs])]
    else:
        config = [{"opaque": {"driver": DRIVER, "parameters": case.params(i)}}
                  for i in range(configs)]
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "hostile", "namespace": "default"},
             "spec": {"devices": {"requests": requests, "config": config}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile", "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "nic", "resourceClaimName": "hostile"}]}}
    return [DeviceClass.model_validate(cls), *(ResourceSlice.model_validate(s) for s in objects),
            ResourceClaim.model_validate(claim), Pod.model_validate(pod)]


def _attempt(sched: Scheduler) -> tuple[float, float, str]:
    tracemalloc.start()
    t0 = time.process_time()
    a = sched.schedule("default/hostile")
    cpu = time.process_time() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return cpu, peak / 2**20, f"{a.result.value}: {(a.reasons[0].code if a.reasons else '')}"


def run_case(case: Case, quick: bool) -> dict[str, Any]:
    """One case, in this process: a first attempt and a retry."""
    configs = 4 if quick else DEVICE_CONFIG_MAX
    extractors = 2 if quick else SHARING_AFFINITY_MAX_ENTRIES
    cluster = Cluster()
    for obj in _objects(case, configs, extractors):
        res = cluster.apply(obj)
        if not res.applied:
            return {"case": case.name, "rejected": [e.render() for e in res.errors][:2]}
    sched = Scheduler(cluster, Features())
    sched.start()
    cpu, peak, outcome = _attempt(sched)
    cpu2, peak2, _ = _attempt(sched)
    return {"case": case.name, "outcome": outcome,
            "firstAttempt": {"cpuSeconds": round(cpu, 3), "peakMB": round(peak, 1)},
            "retry": {"cpuSeconds": round(cpu2, 3), "peakMB": round(peak2, 1)}}


#: The child's address space: beyond it an allocation fails (reported as over).
_ADDRESS_SPACE: Final = 4 << 30


def _limit_child(cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE, _ADDRESS_SPACE))


def run_isolated(case: Case, quick: bool, timeout: int) -> dict[str, Any]:
    """One case in a child process with ``timeout`` CPU seconds and a 4 GB address
    space; a child stopped by either is reported as over the limit."""
    cmd = [sys.executable, __file__, "--case", case.name] + (["--quick"] if quick else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          preexec_fn=lambda: _limit_child(timeout))
    if proc.returncode == 0:
        row: dict[str, Any] = json.loads(proc.stdout)
        return row
    over = "MemoryError" in proc.stderr
    return {"case": case.name, "outcome": "stopped",
            "firstAttempt": {"cpuSeconds": None if over else f">{timeout}",
                             "peakMB": f">{_ADDRESS_SPACE >> 20}" if over else None}}


def run(quick: bool, timeout: int, only: str | None = None) -> dict[str, Any]:
    rows = [run_isolated(case, quick, timeout) for case in CASES if only in (None, case.name)]

    def cpu(r: dict[str, Any]) -> float:
        v = r.get("firstAttempt", {}).get("cpuSeconds")
        return float("inf") if isinstance(v, str) else (v or 0.0)

    def mem(r: dict[str, Any]) -> float:
        v = r.get("firstAttempt", {}).get("peakMB")
        return float("inf") if isinstance(v, str) else (v or 0.0)

    ran = [r for r in rows if "firstAttempt" in r]
    worst_cpu = max(ran, key=cpu) if ran else None
    worst_mem = max(ran, key=mem) if ran else None
    return {
        "limits": {"configs": 4 if quick else DEVICE_CONFIG_MAX,
                   "extractors": 2 if quick else SHARING_AFFINITY_MAX_ENTRIES,
                   "expressionChars": CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
                   "parameterBytes": OPAQUE_PARAMETERS_MAX_LENGTH},
        "cases": rows,
        "worstCPU": worst_cpu and {"case": worst_cpu["case"], **worst_cpu["firstAttempt"]},
        "worstMemory": worst_mem and {"case": worst_mem["case"], **worst_mem["firstAttempt"]},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 configs x 2 extractors (a smoke run)")
    ap.add_argument("--case", choices=[c.name for c in CASES],
                    help="run only this case, in this process (JSON of its row)")
    ap.add_argument("--only", choices=[c.name for c in CASES], help="run only this case, isolated")
    ap.add_argument("--timeout", type=int, default=120,
                    help="CPU seconds a case may take before it is stopped (default 120)")
    ap.add_argument("--output", default="-", help="JSON file (default: stdout)")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(next(c for c in CASES if c.name == args.case), args.quick)))
        return 0
    out = json.dumps(run(args.quick, args.timeout, args.only), indent=2)
    if args.output == "-":
        print(out)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(out + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
