"""Throughput on a real control plane: ``dra-affinity scheduler`` vs the stock kube-scheduler.

One run starts a fresh control plane (tests/cluster/controlplane.py; binaries from
test/cluster/build.sh), creates N Nodes, each with one pool of D multi-allocatable
NICs of S slots, and fills FILL of all slots with one-slot pods, each from a
ResourceClaimTemplate of one of V subnets (round robin), as fast as one client
creates them. Two variants on identical workloads, each on its own fresh plane:

* ``ours``: the pools' metadata slices carry sharingAffinity (the bridge annotation);
  pods name ``dra-affinity``; ``dra-affinity scheduler`` runs as a subprocess;
* ``stock``: no sharingAffinity; pods use the default scheduler (kube-scheduler 1.37).

Per pod the latency is creation request sent -> the pod seen bound by a watch. Output
(JSON on stdout): pods/s (pods bound / seconds from the first create to the last
binding), p50/p99 latency, how many were bound, the plane's start time.

    python benchmarks/cluster_throughput.py --nodes 500 --devices 8 --slots 4 --fill 0.9
    python benchmarks/cluster_throughput.py --nodes 50 --devices 8 --slots 2 --variant both
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "cluster"), str(ROOT / "tests")]

from controlplane import ControlPlane, build_binaries  # noqa: E402

from dra_affinity.kube.api import ApiError, ClientApi  # noqa: E402
from kube.live import Live, SchedulerProc, World  # noqa: E402

KCM_ARGS = ["--kube-api-qps=2000", "--kube-api-burst=4000"]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _watch_bound(api: ClientApi, ns: str, bound: dict[str, float], stop: threading.Event) -> None:
    rv = ""
    while not stop.is_set():
        try:
            if not rv:
                rv = api.request("GET", f"/api/v1/namespaces/{ns}/pods",
                                 query={"limit": "1"})["metadata"]["resourceVersion"]
            for ev in api.watch(f"/api/v1/namespaces/{ns}/pods",
                                {"resourceVersion": rv, "allowWatchBookmarks": "true",
                                 "timeoutSeconds": "30"}, 30.0):
                obj = ev.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if ev.get("type") in ("ADDED", "MODIFIED") and obj.get("spec", {}).get("nodeName"):
                    bound.setdefault(obj["metadata"]["name"], time.monotonic())
                if stop.is_set():
                    return
        except ApiError as e:
            if e.gone:
                rv = ""
            time.sleep(0.2)


def _proc_usage(pid: int) -> dict[str, float]:
    """Peak RSS (MB) and CPU seconds (user + system) of a live process, from /proc."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    out["PeakRssMB"] = round(int(line.split()[1]) / 1024, 1)
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out["CpuSeconds"] = round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)
    except (OSError, IndexError, ValueError):
        pass
    return out


def run_variant(variant: str, args: argparse.Namespace, bin_dir: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{variant}-") as tmp:
        # kube-controller-manager's client is limited to 20 requests/s by default, and
        # the resourceclaim controller spends two per pod (the claim, the pod's status):
        # left alone it, not a scheduler, sets the pace (10 pods/s for both variants).
        plane = ControlPlane(Path(tmp) / "cp", bin_dir, with_scheduler=(variant == "stock"),
                             extra_args={"kube-controller-manager": KCM_ARGS})
        plane.start()
        try:
            return _measure(variant, args, plane, Path(tmp))
        finally:
            plane.stop()


def _measure(variant: str, args: argparse.Namespace, plane: ControlPlane, tmp: Path) -> dict[str, Any]:
    from controlplane import create_namespace

    client = plane.api_client()
    live = Live(client)
    ns = "bench"
    create_namespace(client, ns)
    t0 = time.monotonic()
    world = World(live, ns, nodes=args.nodes, nics=args.devices, slots=args.slots,
                  annotation=(variant == "ours"))
    setup_s = time.monotonic() - t0
    for v in range(args.values):
        world.template(f"subnet-{v}", f"subnet-{v}")
    total = int(args.nodes * args.devices * args.slots * args.fill)
    if args.pods:
        total = min(total, args.pods)
    sched = None
    if variant == "ours":
        sched = SchedulerProc(plane.kubeconfig, tmp / "sched.log", name="dra-affinity",
                              lease_namespace=ns, extra=["--log-level", "warning"])
    bound: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_bound, args=(live.api, ns, bound, stop), daemon=True)
    watcher.start()
    created: dict[str, float] = {}
    names: queue.Queue[str] = queue.Queue()
    for i in range(total):
        names.put(f"p{i:06d}")

    def creator() -> None:
        while True:
            try:
                name = names.get_nowait()
            except queue.Empty:
                return
            created[name] = time.monotonic()
            world.pod(name, template=f"subnet-{int(name[1:]) % args.values}",
                      scheduler="dra-affinity" if variant == "ours" else "default-scheduler")

    start = time.monotonic()
    creators = [threading.Thread(target=creator) for _ in range(args.clients)]
    for t in creators:
        t.start()
    for t in creators:
        t.join()
    created_s = time.monotonic() - start
    deadline = time.monotonic() + args.timeout
    while len(bound) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    # What each process used, read before the scheduler stops: the scheduler (ours or the
    # stock one) and the API server, which serves every request of both.
    pids = {"scheduler": sched.proc.pid if sched is not None and sched.proc is not None
            else plane.pids().get("kube-scheduler"), "apiserver": plane.pids().get("kube-apiserver")}
    usage = {name: _proc_usage(pid) for name, pid in pids.items() if pid is not None}
    if sched is not None:
        sched.stop()
    lat = [bound[n] - created[n] for n in bound if n in created]
    last = max(bound.values()) if bound else start
    out = {"variant": variant, "nodes": args.nodes, "devicesPerNode": args.devices,
           "slots": args.slots, "pods": total, "bound": len(bound),
           "podsPerSecond": round(len(bound) / max(last - start, 1e-9), 2),
           "latencyP50s": round(_percentile(lat, 0.5), 3),
           "latencyP99s": round(_percentile(lat, 0.99), 3),
           "latencyMeanS": round(statistics.fmean(lat), 3) if lat else None,
           "createSeconds": round(created_s, 1), "setupSeconds": round(setup_s, 1),
           "planeStartSeconds": round(plane.started_seconds or 0, 1),
           **{f"{name}{k}": v for name, u in usage.items() for k, v in u.items()}}
    client.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--devices", type=int, default=8, help="NICs per node")
    ap.add_argument("--slots", type=int, default=4, help="slots per NIC")
    ap.add_argument("--fill", type=float, default=0.9)
    ap.add_argument("--values", type=int, default=64, help="distinct subnets (templates)")
    ap.add_argument("--pods", type=int, default=0, help="cap on pods (0: fill)")
    ap.add_argument("--clients", type=int, default=4, help="threads creating pods")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--variant", choices=["ours", "stock", "both"], default="both")
    args = ap.parse_args()
    bin_dir = build_binaries()
    variants = ["ours", "stock"] if args.variant == "both" else [args.variant]
    results = [run_variant(v, args, bin_dir) for v in variants]
    print(json.dumps({"results": results, "python": sys.version.split()[0],
                      "cpus": os.cpu_count()}, indent=2))
    return 0 if all(r["bound"] == r["pods"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
