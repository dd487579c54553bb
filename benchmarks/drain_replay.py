"""What the scheduling loop's drain costs per watched change, replayed in-process.

``--record`` runs ``dra-affinity scheduler``'s process in this one (on a fresh control
plane, tests/cluster/controlplane.py) while pods from ResourceClaimTemplates are
created and bound, and writes down, in the order the view saw them, every informer
change the loop applied and every answer of the scheduler's own writes the view
assumed (a claim's finalizer and status, a binding). Replaying feeds that trace to a fresh
:class:`~dra_affinity.kube.view.KubeView` (no API server, no scheduler: a listener
that only counts), and reports per (kind, change type) how many changes were
applied, how many were converted (``to_model``), how many reached the listeners,
and the loop thread's CPU per applied change (``time.thread_time``, best of
``--repeat``).

    python benchmarks/drain_replay.py --record --nodes 10 --pods 150 out/drain-trace.json.gz
    python benchmarks/drain_replay.py benchmarks/drain-trace-150.json.gz --repeat 5
    python benchmarks/drain_replay.py benchmarks/drain-trace-150.json.gz --src /tmp/before/src

``benchmarks/drain-trace-150.json.gz`` was recorded so (10 nodes x 8 NICs x 2 slots, 150
pods from 4 ResourceClaimTemplates) with the code before issue 30's changes.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# ``--src``: the code to replay on (another checkout's src/, to compare), put first.
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(ROOT / "src")
sys.path[:0] = [_SRC, str(ROOT / "tests" / "cluster"), str(ROOT / "tests")]

from dra_affinity.kube import view as view_module  # noqa: E402
from dra_affinity.kube.fifo import ChangeFIFO  # noqa: E402
from dra_affinity.kube.informer import Change  # noqa: E402
from dra_affinity.kube.view import PACKED, KubeView  # noqa: E402


# ---------------------------------------------------------------------------- record
def record(args: argparse.Namespace) -> int:
    from controlplane import ControlPlane, build_binaries, create_namespace

    from dra_affinity.kube.config import connect
    from dra_affinity.kube.runner import Options, SchedulerProcess
    from kube.live import Live, World, wait_until

    trace: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp, \
            ControlPlane(Path(tmp) / "plane", build_binaries()) as plane:
        client = plane.api_client()
        live = Live(client)
        create_namespace(client, "bench")
        world = World(live, "bench", nodes=args.nodes, nics=args.devices, slots=args.slots)
        for v in range(args.values):
            world.template(f"subnet-{v}", f"subnet-{v}")
        api = connect(str(plane.kubeconfig), None).api
        proc = SchedulerProcess(api, Options(leader_elect=False, metrics_port=-1))
        _record_into(proc.view, trace)
        runner = threading.Thread(target=proc.run, kwargs={"install_signals": False})
        runner.start()
        try:
            wait_until(lambda: proc.view.has_synced(), 120, "informers synced")
            names = iter(range(args.pods))
            lock = threading.Lock()

            def create() -> None:
                while True:
                    with lock:
                        i = next(names, None)
                    if i is None:
                        return
                    world.pod(f"p{i:05d}", template=f"subnet-{i % args.values}")

            creators = [threading.Thread(target=create) for _ in range(args.clients)]
            for t in creators:
                t.start()
            for t in creators:
                t.join()

            def bound() -> bool:
                pods = live.list("Pod", "v1", "bench")
                return sum(1 for p in pods if p["spec"].get("nodeName")) >= args.pods

            wait_until(bound, 600, "every pod bound")
            time.sleep(2)  # the last echoes
        finally:
            proc.stopping.set()
            runner.join(60)
        client.close()
    with gzip.open(args.trace, "wt") as f:
        json.dump({"pods": args.pods, "trace": trace}, f)
    print(json.dumps({"steps": len(trace), "pods": args.pods, "trace": str(args.trace)}))
    return 0


def _record_into(view: KubeView, trace: list[Any]) -> None:
    """Wrap the view's entry points so each call is written down, in the order taken
    under the view's lock, before it runs."""
    apply, assume, assume_model = view.apply, view._assume, view._assume_model
    set_finalizers = view._set_finalizers
    inside = threading.local()

    def rec_set_finalizers(raw: Any, finalizers: list[str]) -> Any:
        stored = set_finalizers(raw, finalizers)
        with view.lock:
            meta = raw.get("metadata") or {}
            trace.append(["finalizers", f"{meta.get('namespace')}/{meta.get('name')}",
                          str(meta.get("resourceVersion")), stored])
        return stored

    def rec_apply(ch: Change) -> None:
        with view.lock:
            trace.append(["apply", ch.kind, ch.type, ch.object, ch.objects])
            apply(ch)

    def rec_assume(kind: str, key: str, raw: dict[str, Any]) -> Any:
        with view.lock:
            trace.append(["assume", kind, key, raw])
            inside.on = True
            try:
                return assume(kind, key, raw)
            finally:
                inside.on = False

    def rec_assume_model(kind: str, key: str, model: Any, rv: int) -> None:
        with view.lock:
            if not getattr(inside, "on", False):
                trace.append(["assume_model", kind, key,
                              model.model_dump_json(by_alias=True, exclude_unset=True), rv])
            assume_model(kind, key, model, rv)

    view.apply = rec_apply  # type: ignore[method-assign]
    view._assume = rec_assume  # type: ignore[method-assign]
    view._assume_model = rec_assume_model  # type: ignore[method-assign]
    view._set_finalizers = rec_set_finalizers  # type: ignore[method-assign]
    assume_metadata = getattr(view, "_assume_metadata", None)
    if assume_metadata is not None:  # its assume_model is replayed from the finalizers step
        def rec_assume_metadata(*a: Any) -> None:
            inside.on = True
            try:
                assume_metadata(*a)
            finally:
                inside.on = False

        view._assume_metadata = rec_assume_metadata


# ---------------------------------------------------------------------------- replay
class _Counting:
    """A listener that only counts what it is told, by kind."""

    def __init__(self) -> None:
        self.told: collections.Counter[str] = collections.Counter()

    def on_change(self, kind: str, old: Any, new: Any) -> None:
        self.told[kind] += 1


def _steps(trace: list[Any], kubelet: int = 0) -> list[tuple[str, Any]]:
    """The trace as calls, decoded once (outside the measured time). With ``kubelet``,
    that many updates of each bound pod follow, as a kubelet's status updates reach
    this scheduler: the pod informer keeps of a bound pod only its phase and claims, so
    all but the last (the phase: Running) change only the resourceVersion."""
    out: list[tuple[str, Any]] = []
    last: dict[str, dict[str, Any]] = {}
    for step in trace:
        if step[0] == "apply":
            _, kind, typ, obj, objs = step
            out.append(("apply", Change(kind, typ, object=obj, objects=objs or [])))
            if kind == "Pod" and obj is not None:
                last[f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"] = obj
        elif step[0] in ("assume", "finalizers"):
            out.append((step[0], tuple(step[1:])))
        else:
            _, kind, key, text, rv = step
            out.append(("assume_model", (kind, key, text, rv)))
    rv = 1 + max((int(o["metadata"]["resourceVersion"]) for o in last.values()), default=0)
    for i in range(kubelet):
        for obj in last.values():
            if not obj["spec"].get("nodeName"):
                continue
            new = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
            if i == kubelet - 1:
                new["status"] = {**obj.get("status", {}), "phase": "Running"}
            out.append(("kubelet", Change("Pod", "MODIFIED", object=new)))
            rv += 1
    return out


def replay_once(steps: list[tuple[str, Any]], api: Any = None) -> dict[str, Any]:
    """One replay on a fresh view: counts by (kind, type) and the CPU seconds of applying."""
    view = KubeView(api)
    listener = _Counting()
    view.subscribe(listener)
    current: list[str] = [""]
    converted: collections.Counter[str] = collections.Counter()
    convert = view._convert

    def counting_convert(kind: str, key: str, raw: dict[str, Any]) -> Any:
        converted[current[0]] += 1
        return convert(kind, key, raw)

    view._convert = counting_convert  # type: ignore[method-assign]
    to_metadata = getattr(view_module, "to_metadata", None)
    metadata: collections.Counter[str] = collections.Counter()
    if to_metadata is not None:
        def counting_to_metadata(kind: str, raw: Any) -> Any:
            metadata[current[0]] += 1
            return to_metadata(kind, raw)

        view_module.to_metadata = counting_to_metadata
    applied: collections.Counter[str] = collections.Counter()
    told: collections.Counter[str] = collections.Counter()
    cpu: collections.Counter[str] = collections.Counter()
    fifo = ChangeFIFO()
    apply_cpu = put_cpu = 0.0
    for what, arg in steps:
        before = sum(listener.told.values())
        if what in ("apply", "kubelet"):
            # Through the FIFO as in the process: put in a reflector's thread, taken and
            # applied by the loop's (only that is the loop's CPU).
            t0 = time.thread_time()
            fifo.put(arg)
            t1 = time.thread_time()
            ch: Change = fifo.get_nowait()
            current[0] = f"{ch.kind} {ch.type}" + (" (kubelet)" if what == "kubelet" else "")
            view.apply(ch)
            spent = time.thread_time() - t1
            apply_cpu += spent
            put_cpu += t1 - t0
            cpu[current[0]] += spent
            applied[current[0]] += 1
        elif what == "assume":
            kind, key, raw = arg
            current[0] = f"{kind} (own write)"
            t0 = time.thread_time()
            view._assume(kind, key, raw)
            cpu[current[0]] += time.thread_time() - t0
        elif what == "finalizers":
            # The claim's finalizer written on the version ``base``: the view records
            # the answer where it has a way to (write_claim_status calls it so).
            key, base, stored = arg
            current[0] = "ResourceClaim (own finalizer)"
            claim = view.claim(key)
            assume_metadata = getattr(view, "_assume_metadata", None)
            if assume_metadata is not None and claim is not None \
                    and claim.metadata.resource_version == base:
                t0 = time.thread_time()
                assume_metadata(key, claim, stored)
                cpu[current[0]] += time.thread_time() - t0
        else:
            kind, key, text, rv = arg
            current[0] = f"{kind} (own binding)"
            model = PACKED[kind].model_validate_json(text)
            t0 = time.thread_time()
            view._assume_model(kind, key, model, rv)
            cpu[current[0]] += time.thread_time() - t0
        told[current[0]] += sum(listener.told.values()) - before
    if to_metadata is not None:
        view_module.to_metadata = to_metadata
    return {"applied": applied, "converted": converted, "told": told, "metadata": metadata,
            "applyCpu": apply_cpu, "putCpu": put_cpu, "cpu": cpu}


def replay(args: argparse.Namespace) -> int:
    with gzip.open(args.trace, "rt") as f:
        data = json.load(f)
    pods = int(data["pods"])
    steps = _steps(data["trace"], args.kubelet)
    runs = [replay_once(steps) for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["applyCpu"])
    applied, converted, told = best["applied"], best["converted"], best["told"]
    watch = {k: v for k, v in applied.items() if not k.endswith("REPLACE")}
    metadata = best["metadata"]
    rows = sorted(set(applied) | set(converted) | set(told) | set(metadata))
    out = {
        "module": view_module.__file__,
        "pods": pods,
        "byKindAndType": {k: {"applied": applied.get(k, 0), "converted": converted.get(k, 0),
                              "metadataConverted": metadata.get(k, 0),
                              "told": told.get(k, 0),
                              "cpuMicros": round(1e6 * best["cpu"].get(k, 0.0))} for k in rows},
        "appliedChanges": sum(applied.values()),
        "watchChangesPerPod": round(sum(watch.values()) / pods, 2),
        "conversionsPerPod": round(sum(converted.values()) / pods, 2),
        "metadataConversionsPerPod": round(sum(metadata.values()) / pods, 2),
        "listenerCallsPerPod": round(sum(told.values()) / pods, 2),
        "applyCpuMicrosPerChange": round(1e6 * best["applyCpu"] / max(sum(applied.values()), 1), 1),
        "applyCpuSecondsAll": [round(r["applyCpu"], 4) for r in runs],
        "putCpuMicrosPerChange": round(1e6 * best["putCpu"] / max(sum(applied.values()), 1), 1),
    }
    print(json.dumps(out, indent=2))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", type=Path, help="the trace (gzipped JSON) to replay, or to write")
    p.add_argument("--record", action="store_true",
                   help="record the trace on a fresh control plane instead of replaying it")
    p.add_argument("--nodes", type=int, default=10, help="record: nodes")
    p.add_argument("--devices", type=int, default=8, help="record: NICs per node")
    p.add_argument("--slots", type=int, default=2, help="record: slots per NIC")
    p.add_argument("--values", type=int, default=4, help="record: subnets (templates), round robin")
    p.add_argument("--pods", type=int, default=150, help="record: pods, all bound")
    p.add_argument("--clients", type=int, default=8, help="record: threads creating the pods")
    p.add_argument("--repeat", type=int, default=5, help="replay: runs (the CPU is the best)")
    p.add_argument("--kubelet", type=int, default=0,
                   help="replay: then this many kubelet status updates of each bound pod")
    p.add_argument("--src", type=Path, default=ROOT / "src",
                   help="the src/ that records or replays (another checkout's, to compare)")
    args = p.parse_args()
    return record(args) if args.record else replay(args)


if __name__ == "__main__":
    sys.exit(main())
