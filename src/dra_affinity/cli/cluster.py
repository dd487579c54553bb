"""Commands on a cluster: ``locks``, ``snapshot``, ``plan`` and the ``scheduler``.

The cluster is found as kubectl finds it (``--kubeconfig``, ``--context``,
``$KUBECONFIG``, ``~/.kube/config``, in-cluster; :mod:`dra_affinity.kube.config`),
so the same commands work as the kubectl plugin ``kubectl dra-affinity``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from dra_affinity.kube.binder import DEFAULT_MAX_IN_FLIGHT
from dra_affinity.kube.queue import DEFAULT_UNSCHEDULABLE_TIMEOUT
from dra_affinity.kube.ratelimit import KUBE_API_BURST, KUBE_API_QPS

from ._base import EXIT_EXPECTATION, _console, _dump, _fail_input, _scenario_sim, main
from ._kube import api_failed, cluster_options, connect

if TYPE_CHECKING:
    from dra_affinity.kube.config import ClusterConfig

@main.command()
@click.argument("file", type=click.Path(dir_okay=False), required=False)
@click.option("--at-step", type=int, default=None, help="State before step N (default: at the end).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
@cluster_options
def locks(file: str | None, at_step: int | None, output: str, kubeconfig: str | None,
          context: str | None, namespace: str | None) -> None:
    """Effective per-device lock state (status, keys, holders) at a point of a scenario
    FILE, or, without FILE, on the cluster, rebuilt as a starting scheduler would.

    With -n, only devices held by claims of that namespace are listed.

    \b
    Examples:
      dra-affinity locks examples/legacy-migration.yaml --at-step 8
      dra-affinity locks --kubeconfig ~/.kube/config -o json
    """
    from dra_affinity.tools import locks as do_locks

    if file is None:
        if at_step is not None:
            _fail_input("locks: --at-step needs a scenario FILE")
        rows = _cluster_locks(connect(kubeconfig, context))
    elif kubeconfig is not None or context is not None:
        _fail_input("locks: give either a scenario FILE or a cluster (--kubeconfig, --context)")
    else:
        rows = do_locks(_scenario_sim(file, at_step))
    if namespace is not None:
        rows = [r for r in rows if any(h["claim"].startswith(f"{namespace}/") for h in r["holders"])]
    if output == "json":
        click.echo(_dump({"devices": rows}))
        return
    from rich.table import Table

    t = Table(title="device locks", title_justify="left")
    for col in ("device", "status", "lock", "holders"):
        t.add_column(col, overflow="fold")
    for r in rows:
        lock = ", ".join(f"{k}={v}" for k, v in sorted(r["lock"].items()))
        holders = "; ".join(f"{h['claim']}/{h['request']}" + (" (tentative)" if h["tentative"] else "")
                            for h in r["holders"])
        t.add_row(r["device"], r["status"] + (f" ({r['reason']})" if r.get("reason") else ""), lock,
                  holders)
    _console().print(t)


def _cluster_locks(cfg: ClusterConfig) -> list[dict[str, Any]]:
    from dra_affinity.kube.api import ApiError
    from dra_affinity.kube.locks import cluster_locks

    try:
        rows, recorder = cluster_locks(cfg.api)
    except ApiError as e:
        api_failed(cfg, e)
    for entry in recorder.logs:
        click.echo(f"warning: {entry['message']}", err=True)
    return rows


@main.command()
@cluster_options
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, allow_dash=True),
              default="-", show_default=True, help="Scenario file to write ('-': stdout).")
@click.option("--scheduler-name", default="dra-affinity", show_default=True,
              help="Pending pods with this spec.schedulerName become the scenario's schedule steps.")
@click.option("--page-size", type=click.IntRange(1, 10000), default=500, show_default=True,
              help="Objects per list request.")
def snapshot(kubeconfig: str | None, context: str | None, namespace: str | None, output: str,
             scheduler_name: str, page_size: int) -> None:
    """Write the cluster's DRA state as a scenario file.

    Nodes (as placement reads them), DeviceClasses, ResourceSlices, claim templates,
    ResourceClaims with their status, and the pods that use claims or occupy nodes.
    Its Scenario restarts the scheduler on that state (as the live one rebuilds it),
    expects every Locked and Unreconstructable device as the cluster has it, then
    schedules the scheduler's pending pods (with -n, those of that namespace), so
    simulate, explain and locks on the file answer as the live scheduler would.
    Secrets are never read; objects are written as they are listed.

    \b
    Example:
      dra-affinity snapshot --kubeconfig ~/.kube/config -o cluster.yaml
    """
    import os
    import tempfile

    from dra_affinity.kube.api import ApiError
    from dra_affinity.kube.snapshot import write_snapshot
    from dra_affinity.progress import phase_progress

    cfg = connect(kubeconfig, context)
    to_stdout = output == "-"
    if to_stdout:
        stream = sys.stdout
    else:  # written beside the target and renamed: never a half-written file
        fd, tmp = tempfile.mkstemp(prefix=".snapshot-", suffix=".yaml",
                                   dir=os.path.dirname(os.path.abspath(output)))
        stream = os.fdopen(fd, "w", encoding="utf-8")
    try:
        with phase_progress(transient=True) as report:
            def progress(kind: str, listed: int, total: int | None) -> None:
                if report is not None:
                    report(f"listing {kind}", listed, total if total is not None else listed)

            result = write_snapshot(cfg.api, stream, scheduler_name=scheduler_name,
                                    namespace=namespace, page_size=page_size, progress=progress)
    except ApiError as e:
        if not to_stdout:
            stream.close()
            os.unlink(tmp)
        api_failed(cfg, e)
    if not to_stdout:
        stream.close()
        os.replace(tmp, output)
    for line in result.skipped:
        click.echo(f"warning: not written: {line}", err=True)
    counts = ", ".join(f"{n} {kind}" for kind, n in result.counts.items())
    click.echo(f"snapshot of {cfg.source}: {counts}; {result.expected_devices} device state(s) "
               f"expected, {len(result.pending)} pending pod(s) to schedule"
               + ("" if to_stdout else f"; written to {output}"), err=True)


@main.command()
@cluster_options
@click.option("--slice", "slice_files", multiple=True, type=click.Path(dir_okay=False),
              help="File with the ResourceSlices a driver would publish; each pool named "
                   "is replaced by its slices here (repeatable).")
@click.option("--remove-pool", "removed", multiple=True, metavar="DRIVER/POOL",
              help="A pool the driver would delete (repeatable).")
@click.option("--scheduler-name", default="dra-affinity", show_default=True,
              help="Pending pods with this spec.schedulerName are checked for fitting.")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def plan(kubeconfig: str | None, context: str | None, namespace: str | None,
         slice_files: tuple[str, ...], removed: tuple[str, ...], scheduler_name: str,
         output: str) -> None:
    """What republishing pools would do to the cluster's devices in use, without writing.

    Per device of a changed pool: Locked, Unreconstructable (with the key its holders
    no longer agree on) or Clean, before and after, and its holders; the devices that
    stay quarantined until which claims leave; the pending pods that start or stop
    fitting. With -n, only devices held and pods in that namespace.

    Exit status: 0 nothing in use is affected, 1 something is, 2 bad input.

    \b
    Example:
      dra-affinity plan --kubeconfig ~/.kube/config --slice new-pool.yaml
    """
    from dra_affinity.api.io import ManifestError
    from dra_affinity.api.resource import ResourceSlice
    from dra_affinity.kube.api import ApiError
    from dra_affinity.kube.plan import plan_republish
    from dra_affinity.tools import load_one
    from dra_affinity.validation.admission import validate_object

    if not slice_files and not removed:
        _fail_input("plan: nothing to plan: give --slice FILE or --remove-pool DRIVER/POOL")
    new: list[dict[str, Any]] = []
    for f in slice_files:
        try:
            slices = load_one(f, ResourceSlice)
        except ManifestError as e:
            _fail_input(e)
        if not slices:
            _fail_input(f"{f}: no ResourceSlice in file")
        for s in slices:
            errors = validate_object(s)
            if errors:
                _fail_input(f"{f}: ResourceSlice {s.metadata.name}: the API server would refuse "
                            "it: " + "; ".join(e.render() for e in errors))
            new.append(s.to_dict())
    pools: list[tuple[str, str]] = []
    for item in removed:
        driver, sep, pool = item.rpartition("/")
        if not sep or not driver or not pool:
            _fail_input(f"--remove-pool: {item!r} is not DRIVER/POOL")
        pools.append((driver, pool))
    cfg = connect(kubeconfig, context)
    try:
        out = plan_republish(cfg.api, new, pools, scheduler_name=scheduler_name,
                             namespace=namespace)
    except ApiError as e:
        api_failed(cfg, e)
    if output == "json":
        click.echo(_dump(out))
    else:
        _render_plan(out)
    sys.exit(EXIT_EXPECTATION if out["affected"] else 0)


def _render_plan(out: dict[str, Any]) -> None:
    from rich.table import Table

    con = _console()
    for p in out["pools"]:
        con.print(f"pool {p['driver']}/{p['pool']}: {p['change']}")
    t = Table(title="devices in use or locked", title_justify="left")
    for col in ("device", "before", "after", "holders", "affected"):
        t.add_column(col, overflow="fold")

    def shown(st: dict[str, Any]) -> str:
        lock = ", ".join(f"{k}={v}" for k, v in st.get("lock", {}).items())
        text = st["status"] + (f" {{{lock}}}" if lock else "")
        return str(text) + (f" ({st['reason']})" if st.get("reason") else "")

    for d in out["devices"]:
        t.add_row(d["device"], shown(d["before"]), shown(d["after"]), ", ".join(d["holders"]),
                  "yes" if d["affected"] else "no")
    con.print(t)
    for q in out["quarantined"]:
        con.print(f"quarantined: {q['device']} until {', '.join(q['until'])} leave")
    for key in out["pods"]["startFitting"]:
        con.print(f"starts fitting: {key}")
    for key in out["pods"]["stopFitting"]:
        con.print(f"stops fitting: {key}")
    con.print(f"{out['affected']} device(s) in use affected")


def _gate_map(values: tuple[str, ...]) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in values:
        for part in filter(None, item.split(",")):
            name, sep, value = part.partition("=")
            if not sep or value.lower() not in ("true", "false"):
                _fail_input(f"--feature-gates: {part!r} is not NAME=true|false")
            gates[name.strip()] = value.lower() == "true"
    return gates


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Cluster to schedule on (default: $KUBECONFIG, ~/.kube/config, then the "
                   "in-cluster service account, as kubectl).")
@click.option("--context", default=None, help="The kubeconfig context to use.")
@click.option("--scheduler-name", default="dra-affinity", show_default=True,
              help="Pods with this spec.schedulerName are scheduled by this process.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Take a coordination.k8s.io Lease before scheduling (several replicas).")
@click.option("--lease-namespace", default=None,
              help="Namespace of the Lease (default: $POD_NAMESPACE, else dra-affinity-system, "
                   "the namespace of deploy/).")
@click.option("--lease-name", default="dra-affinity-scheduler", show_default=True)
@click.option("--identity", default=None,
              help="Holder identity in the Lease (default: $POD_NAME, else host_pid).")
@click.option("--lease-duration", type=click.FloatRange(1.0), default=15.0, show_default=True)
@click.option("--renew-deadline", type=click.FloatRange(0.5), default=10.0, show_default=True)
@click.option("--retry-period", type=click.FloatRange(0.1), default=2.0, show_default=True)
@click.option("--metrics-port", type=click.IntRange(-1, 65535), default=10359, show_default=True,
              help="Port of /metrics, /healthz, /readyz (0: any free port, -1: none).")
@click.option("--metrics-address", default="127.0.0.1", show_default=True,
              help="Address /metrics, /healthz and /readyz listen on: loopback unless asked "
                   "(deploy/ gives the pod's IP, so probes and Prometheus reach it).")
@click.option("--feature-gates", multiple=True,
              help="Scheduler gates, e.g. DRASharingAffinity=false (repeatable, comma-separated).")
@click.option("--scoring", type=click.Choice(["firstfit", "affinity"]), default="firstfit",
              show_default=True)
@click.option("--initial-backoff", type=click.FloatRange(0.0), default=1.0, show_default=True,
              help="Seconds before a failed pod is tried again (doubling per failure).")
@click.option("--max-backoff", type=click.FloatRange(0.0), default=10.0, show_default=True)
@click.option("--pod-max-in-unschedulable-pods-duration", "unschedulable_timeout",
              type=click.FloatRange(1.0), default=DEFAULT_UNSCHEDULABLE_TIMEOUT, show_default=True,
              help="Seconds an unschedulable pod waits for a cluster event that could help "
                   "before it is tried again anyway.")
@click.option("--kube-api-qps", type=click.FloatRange(0.0), default=KUBE_API_QPS, show_default=True,
              help="Client-side requests per second to the API server, per client "
                   "(scheduling; events); 0: no limit.")
@click.option("--kube-api-burst", type=click.IntRange(1), default=KUBE_API_BURST, show_default=True,
              help="Requests a client may send at once before --kube-api-qps paces it.")
@click.option("--max-in-flight-bindings", type=click.IntRange(0), default=DEFAULT_MAX_IN_FLIGHT,
              show_default=True,
              help="Binding cycles (PreBind, Bind) run on this many threads while the next pod is "
                   "scheduled; scheduling waits when all are busy. 0: bind on the scheduling thread.")
@click.option("--tolerated-taint", "tolerated_taints", multiple=True,
              default=("dra-affinity.io/affinity-pools",), show_default=True,
              help="Taint keys every pod of this scheduler tolerates without saying so (repeatable); "
                   "other NoSchedule/NoExecute taints need the pod's own tolerations.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True)
@click.option("--tune-gc/--no-tune-gc", default=True, show_default=True,
              help="Once synced, freeze the informers' caches from the garbage collector and defer "
                   "its full collections (python_gc_collections_total counts them).")
@click.option("--profile-dir", type=click.Path(file_okay=False), default=None,
              help="Write a CPU profile of each of the scheduler's threads (pstats files, "
                   "<thread>.prof, every 10 s) into this folder; each thread's own CPU time "
                   "only. Diagnostics: profiled code runs slower.")
def scheduler(kubeconfig: str | None, context: str | None, scheduler_name: str, leader_elect: bool,
              lease_namespace: str | None, lease_name: str, identity: str | None, lease_duration: float, renew_deadline: float,
              retry_period: float, metrics_port: int, metrics_address: str,
              feature_gates: tuple[str, ...], scoring: str, initial_backoff: float,
              max_backoff: float, unschedulable_timeout: float, kube_api_qps: float,
              kube_api_burst: int, max_in_flight_bindings: int, tolerated_taints: tuple[str, ...],
              log_level: str, tune_gc: bool, profile_dir: str | None) -> None:
    """Run as a secondary scheduler on a cluster (pods with --scheduler-name).

    Logs are JSON lines on stderr. SIGTERM stops it cleanly (the Lease is released).

    \b
    Example:
      dra-affinity scheduler --kubeconfig ~/.kube/config --metrics-port 10359
    """
    import logging
    import os
    import socket

    from dra_affinity.features import Features, UnknownGateError
    from dra_affinity.kube.config import POD_NAME_ENV
    from dra_affinity.kube.config import lease_namespace as default_lease_namespace
    from dra_affinity.kube.runner import Options, SchedulerProcess, connections, setup_json_logging

    if leader_elect and not lease_duration > renew_deadline > retry_period:
        _fail_input("need --lease-duration > --renew-deadline > --retry-period")
    if initial_backoff > max_backoff:
        _fail_input("need --initial-backoff <= --max-backoff")
    try:
        features = Features.parse(scheduler=_gate_map(feature_gates))
    except UnknownGateError as e:
        _fail_input(f"--feature-gates: {e}")
    setup_json_logging(getattr(logging, log_level.upper()))
    api = connect(kubeconfig, context).api
    opts = Options(scheduler_name=scheduler_name, identity=identity or os.environ.get(POD_NAME_ENV)
                   or f"{socket.gethostname()}_{os.getpid()}", leader_elect=leader_elect,
                   lease_namespace=lease_namespace or default_lease_namespace(), lease_name=lease_name,
                   lease_duration=lease_duration, renew_deadline=renew_deadline,
                   retry_period=retry_period, metrics_port=metrics_port,
                   metrics_address=metrics_address, initial_backoff=initial_backoff,
                   max_backoff=max_backoff, unschedulable_timeout=unschedulable_timeout,
                   scoring=scoring, tolerated_taints=tolerated_taints,
                   kube_api_qps=kube_api_qps, kube_api_burst=kube_api_burst,
                   max_in_flight_bindings=max_in_flight_bindings, tune_gc=tune_gc,
                   profile_dir=profile_dir)
    try:
        api.keep_connections(connections(opts))
        proc = SchedulerProcess(api, opts, features)
        code = proc.run()
    except OSError as e:  # the metrics port is taken, say
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_EXPECTATION)
    sys.exit(code)
