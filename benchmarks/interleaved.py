"""Both bench variants in one process, alternating pod by pod: the per-pod cost of sharing
affinity with machine noise cancelled as far as it can be, and where it goes.

    python benchmarks/interleaved.py [--nodes 1000] [--pods 15000]
    python benchmarks/interleaved.py --precomputed-extraction   # knock-out, see below
    python benchmarks/interleaved.py --no-gc   # cyclic GC off: what collections cost
    python benchmarks/interleaved.py --warm-config   # claims' configs read before timing

Prints pods/s of each variant (CPU time of ``Scheduler.schedule``), their ratio and
the extra microseconds per pod with affinity. ``--precomputed-extraction`` is a
measurement only, not a mode of the scheduler: it evaluates each claim's extraction
before the timed call and has the memo return that, so the difference between a
normal run and this one is what the extraction lookup (configs in scope, content
key, shared-result lookup) costs inside a scheduling cycle. It also leaves the
claim's config in the CPU caches for the affinity variant only, so compare it with
``--warm-config``, which reads every claim's config parameters before the timed call
in both variants: ``--warm-config`` against ``--warm-config --precomputed-extraction``
is the lookup's own cost.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import time
from contextlib import ExitStack
from typing import Any

from dra_affinity.api.resource import ResourceClaim
from dra_affinity.bench.throughput import build_cluster
from dra_affinity.cel import ExtractionResult
from dra_affinity.features import Features
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.gctune import tuned_gc
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.workload import Arrival, WorkloadSpec, pod_objects, stream
from dra_affinity.structured.claims import ClaimSpec, RequestSpec
from dra_affinity.structured.extraction import ExtractionMemo
from dra_affinity.structured.model import PoolInfo, Result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=15000, help="attempts per variant (at most)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precomputed-extraction", action="store_true")
    ap.add_argument("--warm-config", action="store_true",
                    help="read each claim's opaque config before the timed call (both variants)")
    ap.add_argument("--no-gc", action="store_true",
                    help="disable the cyclic garbage collector while scheduling (a measurement)")
    args = ap.parse_args()

    precomputed: dict[str, ExtractionResult] = {}
    if args.precomputed_extraction:
        def lookup(self: ExtractionMemo, claim: ClaimSpec, alt: RequestSpec,
                   pool: PoolInfo) -> ExtractionResult:
            return precomputed[claim.key]

        ExtractionMemo.__call__ = lookup  # type: ignore[method-assign]

    warmed = [0]  # config values read by --warm-config
    runs: list[dict[str, Any]] = []
    for affinity in (True, False):
        spec = WorkloadSpec(nodes=args.nodes, devices_per_node=8, seed=args.seed, affinity=affinity)
        cluster = build_cluster(spec)
        sched = Scheduler(cluster, Features(), fast_paths=FastPaths.all())
        sched.start()
        gen = stream(spec)
        runs.append({"affinity": affinity, "cluster": cluster, "sched": sched, "gen": gen,
                     "ev": next(gen), "used": 0, "seconds": 0.0, "attempts": 0, "running": set()})
    ExitStack().enter_context(tuned_gc())  # as the bench does, for the rest of the run
    if args.no_gc:
        gc.disable()
    target = math.ceil(0.9 * WorkloadSpec(nodes=args.nodes, devices_per_node=8).total_slots)

    def step(r: dict[str, Any]) -> None:
        """Advance one variant to and through its next arrival."""
        cluster, sched = r["cluster"], r["sched"]
        while True:
            ev = r["ev"]
            if not isinstance(ev, Arrival):
                cluster.delete("Pod", f"default/{ev.pod}")
                if ev.pod in r["running"]:
                    r["running"].discard(ev.pod)
                    r["used"] -= 1
                r["ev"] = r["gen"].send(None)
                continue
            claim, pod = pod_objects(ev.pod, ev.value)
            cluster.apply(claim)
            cluster.apply(pod)
            ckey = f"default/{ev.pod}-nic"
            if args.precomputed_extraction and r["affinity"]:
                pool = sched.snapshot().extractor_pools()[0]
                memo = ExtractionMemo({}, cluster.classes(), shared=sched.extraction_cache)
                precomputed[ckey] = memo.evaluate(cluster.claim(ckey), "nic", "shared-nic", pool)
            if args.warm_config:
                stored = cluster.claim(ckey)  # what the scheduler reads: admission copied it
                assert stored is not None
                warmed[0] += _read_configs(stored)
            t0 = time.process_time()
            a = sched.schedule(f"default/{ev.pod}")
            r["seconds"] += time.process_time() - t0
            r["attempts"] += 1
            ok = a.result is Result.SCHEDULED
            if ok:
                r["used"] += 1
                r["running"].add(ev.pod)
            else:
                cluster.delete("Pod", f"default/{ev.pod}")
                cluster.delete("ResourceClaim", ckey)
            precomputed.pop(ckey, None)
            r["ev"] = r["gen"].send(ok)
            return

    with_aff = runs[0]
    while all(r["used"] < target for r in runs) and with_aff["attempts"] < args.pods:
        for r in runs:
            step(r)
    per_pod = [r["seconds"] / r["attempts"] for r in runs]
    print(json.dumps({
        "nodes": args.nodes,
        "attempts": with_aff["attempts"],
        "precomputedExtraction": args.precomputed_extraction,
        "gc": not args.no_gc,
        "warmConfig": args.warm_config,
        "warmedConfigValues": warmed[0],
        "withAffinityPodsPerSecond": round(1 / per_pod[0], 1),
        "withoutAffinityPodsPerSecond": round(1 / per_pod[1], 1),
        "overheadRatio": round(per_pod[1] / per_pod[0], 3),
        "extraMicrosecondsPerPod": round((per_pod[0] - per_pod[1]) * 1e6, 1),
    }, indent=2))


def _read_configs(claim: ResourceClaim) -> int:
    """Read every value of the claim's opaque config parameters (what extraction reads,
    and more); returns how many were read."""
    n = 0
    for cfg in claim.spec.devices.config:
        if cfg.opaque is not None and isinstance(cfg.opaque.parameters, dict):
            for v in cfg.opaque.parameters.values():
                n += v is not None
    return n


if __name__ == "__main__":
    main()
