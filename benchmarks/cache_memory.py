"""Bytes the scheduler itself holds per live pod and claim (tracemalloc).

Fills the bench workload's cluster to N live pods (with its churn) and counts the
memory still allocated at the end that was allocated by the scheduler's own code
(``scheduler/``, ``structured/``, ``observe/``, ``cel/``): the allocation cache,
locks, indexes, memos, records. It leaves out what the cluster store holds: the
API objects (pods, claims and the claim statuses PreBind writes, which the store
keeps), and what existed before the first pod (the snapshot and indexes over the
slices, which do not grow with pods).

    python benchmarks/cache_memory.py [--nodes 200] [--pods 5000]
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import tracemalloc
from pathlib import Path

from dra_affinity.api import podclaims
from dra_affinity.features import Features
from dra_affinity.scheduler import reserve
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.workload import Arrival, WorkloadSpec, pod_objects, stream

from dra_affinity.bench.throughput import build_cluster  # isort: skip

PACKAGE = Path(reserve.__file__).resolve().parents[1]
OWN = tuple(str(PACKAGE / d) + "/" for d in ("scheduler", "structured", "observe", "cel"))


def _lines(fn: object) -> tuple[str, range]:
    src, first = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    return str(Path(inspect.getsourcefile(fn)).resolve()), range(first, first + len(src))  # type: ignore[arg-type]


# Code that builds the API objects the store keeps (counted with the store, not here).
API_BUILDERS = [_lines(f) for f in (reserve.claim_statuses, reserve.allocation_config,
                                    reserve.ClaimWrite.export, reserve.ClaimWrite.rows,
                                    podclaims.reservation, podclaims.reservation_fields,
                                    reserve.allocation_rows)]


def _own(tb: tracemalloc.Traceback) -> bool:
    inner = tb[-1].filename  # frames run from the oldest to the most recent
    if not inner.startswith(OWN):
        return False
    for fr in tb:
        for path, lines in API_BUILDERS:
            if fr.filename == path and fr.lineno in lines:
                return False
    return True


def measure(nodes: int, pods: int, affinity: bool, seed: int = 1) -> dict[str, float]:
    spec = WorkloadSpec(nodes=nodes, devices_per_node=8, seed=seed, affinity=affinity)
    cluster = build_cluster(spec)
    sched = Scheduler(cluster, Features())
    sched.start()
    gc.collect()
    tracemalloc.start(8)
    before = tracemalloc.take_snapshot()
    gen = stream(spec)
    ev = next(gen)
    live: set[str] = set()
    while len(live) < pods:
        if isinstance(ev, Arrival):
            claim, pod = pod_objects(ev.pod, ev.value)
            cluster.apply(claim)
            cluster.apply(pod)
            ok = sched.schedule(f"default/{ev.pod}").result.value == "Scheduled"
            if ok:
                live.add(ev.pod)
            ev = gen.send(ok)
        else:
            cluster.delete("Pod", f"default/{ev.pod}")
            live.discard(ev.pod)
            ev = gen.send(None)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    own_after = sum(t.size for t in after.traces if _own(t.traceback))
    own_before = sum(t.size for t in before.traces if _own(t.traceback))
    grown = own_after - own_before
    return {"livePods": len(live), "schedulerBytes": grown,
            "bytesPerLivePod": round(grown / len(live), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.pods > args.nodes * 8 * 4:
        ap.error(f"--pods {args.pods}: at most {args.nodes * 8 * 4} fit on {args.nodes} nodes")
    out = {"nodes": args.nodes, "pods": args.pods,
           "withAffinity": measure(args.nodes, args.pods, True, args.seed),
           "withoutAffinity": measure(args.nodes, args.pods, False, args.seed)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
