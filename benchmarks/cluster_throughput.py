"""Throughput on a real control plane: ``dra-affinity scheduler`` vs the stock kube-scheduler.

One run starts a fresh control plane (tests/cluster/controlplane.py; binaries from
test/cluster/build.sh), creates N Nodes, each with one pool of D multi-allocatable
NICs of S slots, and fills FILL of all slots with one-slot pods, each from a
ResourceClaimTemplate of one of V subnets (round robin), as fast as the client
threads create them. Variants, each on its own fresh plane with the same workload:

* ``ours``: the pools' metadata slices carry sharingAffinity (the bridge annotation);
  pods name ``dra-affinity``; ``dra-affinity scheduler`` runs as a subprocess;
* ``stock``: no sharingAffinity; pods use the default scheduler (kube-scheduler 1.37)
  as shipped (client QPS 50, burst 100);
* ``stock-qps``: the same with its client limit raised (``--stock-qps``), so the
  scheduler, not its rate limiter, sets the pace.

``--repeat`` runs the list of variants that many times back to back (run pairs: load
from elsewhere on the machine falls on neighbours alike).

Per pod the latency is creation request sent -> the pod seen bound by a watch. A fill
whose last pods cannot fit (first fit leaves NICs half used, each locked to its subnet)
ends once no pod was bound for ``--stall`` seconds and every pod left was found
unschedulable; they are listed as ``stalled``. Output
(JSON on stdout), per run: pods/s (pods bound / seconds from the first create to the
last binding), p50/p99 latency, how many were bound; per process (scheduler, API
server, controller manager, etcd) CPU milliseconds per bound pod over the fill and
peak RSS; for ``ours`` the CPU split over the scheduler's threads (its
``dra_affinity_thread_cpu_seconds_total``).

``--unschedulable N --soak S`` measures instead what N pods that can never fit cost:
once every one has been tried, S seconds of the scheduler's CPU (percent of one core)
and the API server's writes to pods, events and claims per pod per minute.

``--profile DIR`` runs ours with ``--profile-dir`` (each thread's cProfile on its own CPU
clock: waiting costs nothing) into DIR and adds each group of threads' top functions to
the output; profiled code runs slower, so its CPU figures are not the run's.

    python benchmarks/cluster_throughput.py --nodes 200 --devices 8 --slots 2 --variant ours,stock-qps
    python benchmarks/cluster_throughput.py --nodes 1000 --devices 8 --slots 2 --variant ours,stock-qps
    python benchmarks/cluster_throughput.py --nodes 500 --devices 8 --slots 4 --variant ours
    python benchmarks/cluster_throughput.py --nodes 200 --unschedulable 1000 --soak 300 --variant ours
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "cluster"), str(ROOT / "tests")]

from controlplane import ControlPlane, build_binaries, free_port  # noqa: E402

from dra_affinity.kube.api import ApiError, ClientApi  # noqa: E402
from dra_affinity.observe.profiles import summary as profile_summary  # noqa: E402
from kube.live import Live, SchedulerProc, World, wait_until  # noqa: E402

KCM_ARGS = ["--kube-api-qps=2000", "--kube-api-burst=4000"]
VARIANTS = ("ours", "stock", "stock-qps")
# Processes whose CPU is reported per bound pod (the scheduler is ours or kube-scheduler).
PROCESSES = ("scheduler", "kube-apiserver", "kube-controller-manager", "etcd")
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
WRITE_RESOURCES = ("pods", "events", "resourceclaims")
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of one metric in Prometheus exposition text."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m["name"] == name:
            out.append((dict(_LABEL.findall(m["labels"] or "")), float(m["value"])))
    return out


class _Watcher:
    """Pods of the namespace seen bound (time) and seen with PodScheduled=False.

    Lists, then watches from the list's resourceVersion, and lists again whenever the
    watch cannot go on (410 Gone, a dropped stream): a pod bound meanwhile is found by
    the list, so the wait for "every pod bound" cannot miss one. ``error`` keeps what
    stopped the thread if anything but ``stop`` did."""

    def __init__(self, api: ClientApi, ns: str) -> None:
        self.api, self.ns = api, ns
        self.bound: dict[str, float] = {}
        self.unschedulable: set[str] = set()
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _see(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if obj.get("spec", {}).get("nodeName"):
            self.bound.setdefault(name, time.monotonic())
        for c in (obj.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                self.unschedulable.add(name)

    def _list(self, path: str) -> str:
        """Record every pod of the namespace; the list's resourceVersion."""
        query: dict[str, str] = {"limit": "500"}
        while True:
            page = self.api.request("GET", path, query=query)
            for obj in page.get("items") or ():
                self._see(obj)
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                return str(page["metadata"]["resourceVersion"])
            query = {"limit": "500", "continue": cont}

    def _run(self) -> None:
        rv = ""
        path = f"/api/v1/namespaces/{self.ns}/pods"
        try:
            while not self.stop.is_set():
                try:
                    if not rv:
                        rv = self._list(path)
                    for ev in self.api.watch(path, {"resourceVersion": rv, "allowWatchBookmarks": "true",
                                                    "timeoutSeconds": "30"}, 30.0):
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            rv = ""  # e.g. 410 Gone inside the stream: list again
                            break
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if ev.get("type") in ("ADDED", "MODIFIED"):
                            self._see(obj)
                        if self.stop.is_set():
                            return
                except ApiError as e:
                    if e.gone or e.status == 0:
                        rv = ""
                    time.sleep(0.2)
        except BaseException as e:  # kept for check(), not lost with the thread
            self.error = e

    def check(self) -> None:
        """Raise if the thread stopped on its own."""
        if not self.thread.is_alive() and not self.stop.is_set():
            raise RuntimeError(f"the pod watcher stopped: {self.error!r}")


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
        out["CpuSeconds"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        pass
    return out


class _Run:
    """One variant on one fresh control plane."""

    def __init__(self, variant: str, args: argparse.Namespace, plane: ControlPlane, tmp: Path,
                 index: int) -> None:
        self.variant, self.args, self.plane, self.tmp, self.index = variant, args, plane, tmp, index
        self.client = plane.api_client()
        self.live = Live(self.client)
        self.sched: SchedulerProc | None = None
        self.metrics_port = 0

    # ------------------------------------------------------------------ processes
    def pids(self) -> dict[str, int]:
        pids = dict(self.plane.pids())
        if self.sched is not None and self.sched.proc is not None:
            pids["scheduler"] = self.sched.proc.pid
        elif "kube-scheduler" in pids:
            pids["scheduler"] = pids.pop("kube-scheduler")
        return {name: pid for name, pid in pids.items() if name in PROCESSES}

    def usage(self) -> dict[str, dict[str, float]]:
        return {name: _proc_usage(pid) for name, pid in self.pids().items()}

    def our_metrics(self) -> str:
        if not self.metrics_port:
            return ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                        timeout=10) as r:
                return str(r.read().decode())
        except OSError:
            return ""

    def thread_cpu(self) -> dict[str, float]:
        return {labels["thread"]: v for labels, v in
                _samples(self.our_metrics(), "dra_affinity_thread_cpu_seconds_total")}

    def apiserver_writes(self) -> dict[str, float]:
        """Write requests the API server served so far, by resource (its own metric)."""
        rest = self.client.rest_client
        r = rest.pool_manager.request("GET", self.client.configuration.host + "/metrics")
        out: dict[str, float] = collections.defaultdict(float)
        for labels, v in _samples(r.data.decode(), "apiserver_request_total"):
            if labels.get("verb") in WRITE_VERBS:
                res = labels.get("resource", "")
                sub = labels.get("subresource", "")
                out[f"{res}/{sub}" if sub else res] += v
        return dict(out)

    def start_ours(self) -> None:
        self.metrics_port = free_port()
        self.sched = SchedulerProc(
            self.plane.kubeconfig, self.tmp / "sched.log", name="dra-affinity",
            lease_namespace="bench",
            # The shipped Lease timings, not the tests' short ones: on a loaded machine a
            # 3 s renew deadline can pass while the plane is busy, and the replica exits.
            extra=["--log-level", "warning", "--metrics-port", str(self.metrics_port),
                   "--lease-duration", "15", "--renew-deadline", "10", "--retry-period", "2",
                   *self.args.scheduler_arg, *self._profile_args()])
        wait_until(lambda: any(v == 1.0 for _, v in _samples(self.our_metrics(), "dra_affinity_leader")),
                   300, "dra-affinity scheduler to lead and sync")

    def stalled(self, watcher: _Watcher, created: dict[str, float], total: int,
                progress: float) -> bool:
        """Every pod is created, none was bound for ``--stall`` seconds, and each one left
        was found unschedulable: devices locked to other values can strand the last pods
        of a fill (first fit leaves NICs half used), and waiting for ``--timeout`` would
        add nothing but idle time."""
        if len(created) < total or time.monotonic() - progress < self.args.stall:
            return False
        left = set(created) - set(watcher.bound)
        return bool(left) and left <= watcher.unschedulable

    def _profile_args(self) -> list[str]:
        folder = self.profile_dir()
        if folder is None:
            return []
        shutil.rmtree(folder, ignore_errors=True)  # a profile of this run only
        return ["--profile-dir", str(folder)]

    def check_alive(self, watcher: _Watcher) -> None:
        """Stop the wait at once, with the reason, when nothing can bind the pods any
        more: our scheduler exited (its log's tail is in the error) or the watcher died."""
        watcher.check()
        proc = self.sched.proc if self.sched is not None else None
        if proc is not None and proc.poll() is not None:
            tail = (self.tmp / "sched.log").read_text(errors="replace").splitlines()[-20:]
            raise RuntimeError(f"dra-affinity scheduler exited with {proc.returncode}; "
                               "last lines of its log:\n" + "\n".join(tail))

    # ------------------------------------------------------------------ the run
    def measure(self) -> dict[str, Any]:
        from controlplane import create_namespace

        args, variant = self.args, self.variant
        ns = "bench"
        create_namespace(self.client, ns)
        t0 = time.monotonic()
        world = World(self.live, ns, nodes=args.nodes, nics=args.devices, slots=args.slots,
                      annotation=(variant == "ours"))
        setup_s = time.monotonic() - t0
        for v in range(args.values):
            world.template(f"subnet-{v}", f"subnet-{v}")
        if args.unschedulable:
            # More slots than any NIC has: every node rejects the pod, on every attempt.
            world.live.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                               "metadata": {"name": "too-big", "namespace": ns},
                               "spec": {"spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                                   "deviceClassName": world.klass,
                                   "capacity": {"requests": {f"{world.driver}/slots":
                                                             str(args.slots + 1)}}}}]}}}})
            total = args.unschedulable
        else:
            total = int(args.nodes * args.devices * args.slots * args.fill)
            if args.pods:
                total = min(total, args.pods)
        if variant == "ours":
            self.start_ours()
        watcher = _Watcher(self.live.api, ns)
        created: dict[str, float] = {}
        names: queue.Queue[str] = queue.Queue()
        for i in range(total):
            names.put(f"p{i:06d}")
        scheduler_name = "dra-affinity" if variant == "ours" else "default-scheduler"

        def creator() -> None:
            while True:
                try:
                    name = names.get_nowait()
                except queue.Empty:
                    return
                created[name] = time.monotonic()
                template = "too-big" if args.unschedulable else f"subnet-{int(name[1:]) % args.values}"
                world.pod(name, template=template, scheduler=scheduler_name)

        before = self.usage()
        threads_before = self.thread_cpu()
        start = time.monotonic()
        creators = [threading.Thread(target=creator) for _ in range(args.clients)]
        for t in creators:
            t.start()
        for t in creators:
            t.join()
        created_s = time.monotonic() - start
        out: dict[str, Any] = {"variant": variant, "run": self.index, "nodes": args.nodes,
                               "devicesPerNode": args.devices, "slots": args.slots, "pods": total}
        if args.unschedulable:
            wait_until(lambda: self.check_alive(watcher) or len(watcher.unschedulable) >= total,
                       args.timeout, "every pod to be tried once")
            tried_s = time.monotonic() - start
            soak_before, writes_before = self.usage(), self.apiserver_writes()
            time.sleep(args.soak)
            soak_after, writes_after = self.usage(), self.apiserver_writes()
            cpu = soak_after["scheduler"]["CpuSeconds"] - soak_before["scheduler"]["CpuSeconds"]
            writes = {k: v - writes_before.get(k, 0.0) for k, v in writes_after.items()
                      if v - writes_before.get(k, 0.0) > 0}
            pod_writes = sum(v for k, v in writes.items() if k.split("/")[0] in WRITE_RESOURCES)
            out.update({"secondsToTryAll": round(tried_s, 1), "soakSeconds": args.soak,
                        "schedulerCpuPercentOfCore": round(100 * cpu / args.soak, 2),
                        "writesPerPodPerMinute": round(pod_writes / total / (args.soak / 60), 3),
                        "writesByResource": writes, "bound": len(watcher.bound)})
        else:
            deadline = time.monotonic() + args.timeout
            progress, seen = time.monotonic(), 0
            while len(watcher.bound) < total and time.monotonic() < deadline:
                self.check_alive(watcher)
                time.sleep(0.2)
                if len(watcher.bound) != seen:
                    progress, seen = time.monotonic(), len(watcher.bound)
                elif self.stalled(watcher, created, total, progress):
                    out["stalled"] = sorted(set(created) - set(watcher.bound))
                    break
            bound = dict(watcher.bound)
            lat = [bound[n] - created[n] for n in bound if n in created]
            last = max(bound.values()) if bound else start
            out.update({
                "bound": len(bound),
                "podsPerSecond": round(len(bound) / max(last - start, 1e-9), 2),
                "latencyP50s": round(_percentile(lat, 0.5), 3),
                "latencyP99s": round(_percentile(lat, 0.99), 3),
                "latencyMeanS": round(statistics.fmean(lat), 3) if lat else None,
                "createSeconds": round(created_s, 1)})
        watcher.stop.set()
        # What each process used over the fill, read before the scheduler stops.
        after = self.usage()
        n = max(len(watcher.bound), 1)
        out["cpuMsPerBoundPod"] = {
            name: round(1000 * (u["CpuSeconds"] - before.get(name, {}).get("CpuSeconds", 0.0)) / n, 2)
            for name, u in after.items() if "CpuSeconds" in u}
        out["peakRssMB"] = {name: u["PeakRssMB"] for name, u in after.items() if "PeakRssMB" in u}
        if variant == "ours":
            threads_after = self.thread_cpu()
            spent = {k: v - threads_before.get(k, 0.0) for k, v in threads_after.items()}
            whole = sum(spent.values()) or 1.0
            out["schedulerThreadCpuShare"] = {k: round(v / whole, 3) for k, v in
                                              sorted(spent.items(), key=lambda kv: -kv[1]) if v > 0}
            # Whether --kube-api-qps/--kube-api-burst set the pace: seconds requests waited.
            text = self.our_metrics()
            out["rateLimiterWaitSeconds"] = {
                labels["client"]: round(v, 3) for labels, v in
                _samples(text, "dra_affinity_rest_client_rate_limiter_duration_seconds_sum")}
            out["requestsPerBoundPod"] = round(sum(
                v for _, v in _samples(text, "dra_affinity_rest_client_requests_total")) / n, 2)
            # Scheduling attempts by result (a pod tried again costs the loop another scan).
            out["attemptsPerBoundPod"] = {
                labels["result"]: round(v / n, 3) for labels, v in
                _samples(text, "dra_affinity_schedule_attempts_total")}
        if self.sched is not None:
            self.sched.stop()  # each profiled thread writes its profile as it ends
        folder = self.profile_dir()
        if folder is not None and self.variant == "ours":
            out["profile"] = {"folder": str(folder), "threads": profile_summary(folder)}
        out.update({"setupSeconds": round(setup_s, 1),
                    "planeStartSeconds": round(self.plane.started_seconds or 0, 1)})
        self.client.close()
        return out

    # ------------------------------------------------------------------ profiling
    def profile_dir(self) -> Path | None:
        """Where ours writes its threads' profiles (``--profile``), or None."""
        if self.args.profile is None:
            return None
        return Path(self.args.profile) / f"{self.variant}-{self.args.nodes}-run{self.index}"


def run_variant(variant: str, args: argparse.Namespace, bin_dir: Path, index: int) -> dict[str, Any]:
    extra: dict[str, list[str]] = {"kube-controller-manager": KCM_ARGS}
    if variant == "stock-qps":
        extra["kube-scheduler"] = [f"--kube-api-qps={args.stock_qps}",
                                   f"--kube-api-burst={2 * args.stock_qps}"]
    with tempfile.TemporaryDirectory(prefix=f"bench-{variant}-") as tmp:
        # kube-controller-manager's client is limited to 20 requests/s by default, and
        # the resourceclaim controller spends two per pod (the claim, the pod's status):
        # left alone it, not a scheduler, sets the pace (10 pods/s for both variants).
        plane = ControlPlane(Path(tmp) / "cp", bin_dir, with_scheduler=(variant != "ours"),
                             extra_args=extra)
        plane.start()
        try:
            return _Run(variant, args, plane, Path(tmp), index).measure()
        finally:
            plane.stop()


def _variants(text: str) -> list[str]:
    names = [v.strip() for v in text.replace("both", "ours,stock").split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"variants are {', '.join(VARIANTS)} (or both)")
    return names


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
    ap.add_argument("--stall", type=float, default=30.0,
                    help="stop waiting when no pod was bound for this long and every pod "
                         "left was found unschedulable (reported as stalled)")
    ap.add_argument("--variant", type=_variants, default=["ours", "stock-qps", "stock"],
                    help=f"comma-separated, of {', '.join(VARIANTS)} (default: all three)")
    ap.add_argument("--repeat", type=int, default=1, help="run the variants this many times")
    ap.add_argument("--stock-qps", type=int, default=1000,
                    help="stock-qps: kube-scheduler's --kube-api-qps (burst twice that)")
    ap.add_argument("--scheduler-arg", action="append", default=[],
                    help="one more argument for dra-affinity scheduler (repeatable)")
    ap.add_argument("--unschedulable", type=int, default=0,
                    help="soak: this many pods that never fit instead of the fill")
    ap.add_argument("--soak", type=float, default=300.0, help="soak: seconds measured")
    ap.add_argument("--profile", default=None,
                    help="CPU profiles of ours's threads into this folder (--profile-dir)")
    args = ap.parse_args()
    bin_dir = build_binaries()
    results = []
    for i in range(args.repeat):
        for v in args.variant:
            results.append(run_variant(v, args, bin_dir, i))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)  # progress, one line a run
    print(json.dumps({"results": results, "python": sys.version.split()[0],
                      "cpus": os.cpu_count(), "loadAverage": os.getloadavg()}, indent=2))
    return 0 if all(r["bound"] == r["pods"] or args.unschedulable for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
