"""Worst case of one scheduling attempt over hostile slices and claims within the API's limits.

    python benchmarks/hostile.py [--quick] [--output FILE]

Each case is a pool whose metadata slice holds up to 8 extractors of up to 10 KiB each
and a pod whose claim holds up to 32 opaque configs of up to 10 KiB of parameters
each: the most the API admits. The expressions try every way of turning claim data
into work: output size (``replace`` with an empty pattern, repeated concatenation,
``join`` of a built list), nested comprehensions, regular expressions, deep
conditionals, long results. For each case one attempt runs on a fresh scheduler
(nothing remembered) and a second on the same scheduler (the outcome remembered);
the script reports CPU seconds and the peak of memory allocated during the attempt
(``tracemalloc``), and the worst case of each. Nothing here is asserted: the figures
are for benchmarks/README.md ("Hostile input").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
)


def _objects(case: Case, configs: int, extractors: int) -> list[Any]:
    slices = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": "node-1-meta"},
         "spec": {"driver": DRIVER, "nodeName": "node-1",
                  "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2},
                  "sharingAffinity": [{"name": f"k{i}", "expression": case.expression}
                                      for i in range(extractors)]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": "node-1-nics"},
         "spec": {"driver": DRIVER, "nodeName": "node-1",
                  "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 2},
                  "devices": [{"name": "eth1", "allowMultipleAllocations": True,
                               "capacity": {f"{DRIVER}/slots": {"value": "16"}}}]}},
    ]
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
           "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "hostile", "namespace": "default"},
             "spec": {"devices": {
                 "requests": [{"name": "nic", "exactly": {
                     "deviceClassName": "nic",
                     "capacity": {"requests": {f"{DRIVER}/slots": "1"}}}}],
                 "config": [{"opaque": {"driver": DRIVER, "parameters": case.params(i)}}
                            for i in range(configs)]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile", "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "nic", "resourceClaimName": "hostile"}]}}
    return [DeviceClass.model_validate(cls), *(ResourceSlice.model_validate(s) for s in slices),
            ResourceClaim.model_validate(claim), Pod.model_validate(pod)]


def _attempt(sched: Scheduler) -> tuple[float, float, str]:
    tracemalloc.start()
    t0 = time.process_time()
    a = sched.schedule("default/hostile")
    cpu = time.process_time() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return cpu, peak / 2**20, f"{a.result.value}: {(a.reasons[0].code if a.reasons else '')}"


def run(quick: bool) -> dict[str, Any]:
    configs = 4 if quick else DEVICE_CONFIG_MAX
    extractors = 2 if quick else SHARING_AFFINITY_MAX_ENTRIES
    rows = []
    for case in CASES:
        cluster = Cluster()
        for obj in _objects(case, configs, extractors):
            res = cluster.apply(obj)
            if not res.applied:
                rows.append({"case": case.name, "rejected": [e.render() for e in res.errors][:2]})
                break
        else:
            sched = Scheduler(cluster, Features())
            sched.start()
            cpu, peak, outcome = _attempt(sched)
            cpu2, peak2, _ = _attempt(sched)
            rows.append({"case": case.name, "outcome": outcome,
                         "firstAttempt": {"cpuSeconds": round(cpu, 3), "peakMB": round(peak, 1)},
                         "retry": {"cpuSeconds": round(cpu2, 3), "peakMB": round(peak2, 1)}})
    ran = [r for r in rows if "firstAttempt" in r]
    worst_cpu = max(ran, key=lambda r: r["firstAttempt"]["cpuSeconds"]) if ran else None
    worst_mem = max(ran, key=lambda r: r["firstAttempt"]["peakMB"]) if ran else None
    return {
        "limits": {"configs": configs, "extractors": extractors,
                   "expressionChars": CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
                   "parameterBytes": OPAQUE_PARAMETERS_MAX_LENGTH},
        "cases": rows,
        "worstCPU": worst_cpu and {"case": worst_cpu["case"], **worst_cpu["firstAttempt"]},
        "worstMemory": worst_mem and {"case": worst_mem["case"], **worst_mem["firstAttempt"]},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 configs x 2 extractors (a smoke run)")
    ap.add_argument("--output", default="-", help="JSON file (default: stdout)")
    args = ap.parse_args()
    out = json.dumps(run(args.quick), indent=2)
    if args.output == "-":
        print(out)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(out + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
