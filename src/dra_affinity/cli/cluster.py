"""Lock state and the real-cluster scheduler: ``locks`` and ``scheduler``."""

from __future__ import annotations

import sys
from typing import Any

import click

from ._base import EXIT_EXPECTATION, _console, _dump, _fail_input, _scenario_sim, main


@main.command()
@click.argument("file", type=click.Path(dir_okay=False), required=False)
@click.option("--at-step", type=int, default=None, help="State before step N (default: at the end).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Rebuild the locks from a cluster's slices and claims instead of a scenario FILE.")
def locks(file: str | None, at_step: int | None, output: str, kubeconfig: str | None) -> None:
    """Effective per-device lock state (status, keys, holders) at a point of a scenario,
    or on a cluster (--kubeconfig), rebuilt as a starting scheduler would.

    \b
    Examples:
      dra-affinity locks examples/legacy-migration.yaml --at-step 8
      dra-affinity locks --kubeconfig ~/.kube/config -o json
    """
    from dra_affinity.tools import locks as do_locks

    if kubeconfig is not None:
        if file is not None or at_step is not None:
            _fail_input("locks: give either a scenario FILE (with --at-step) or --kubeconfig")
        rows = _cluster_locks(kubeconfig)
    elif file is None:
        _fail_input("locks: missing scenario FILE (or --kubeconfig for a cluster)")
    else:
        rows = do_locks(_scenario_sim(file, at_step))
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


def _cluster_locks(kubeconfig: str) -> list[dict[str, Any]]:
    from dra_affinity.kube.api import ApiError, load_api
    from dra_affinity.kube.locks import cluster_locks

    try:
        api = load_api(kubeconfig)
        rows, recorder = cluster_locks(api)
    except ApiError as e:
        click.echo(f"error: {kubeconfig}: the API server answered {e}", err=True)
        sys.exit(EXIT_EXPECTATION)
    except Exception as e:  # kubeconfig unreadable or incomplete: the client's own message
        _fail_input(f"{kubeconfig}: {type(e).__name__}: {e}")
    for entry in recorder.logs:
        click.echo(f"warning: {entry['message']}", err=True)
    return rows


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
              help="Cluster to schedule on (default: the in-cluster service account).")
@click.option("--scheduler-name", default="dra-affinity", show_default=True,
              help="Pods with this spec.schedulerName are scheduled by this process.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Take a coordination.k8s.io Lease before scheduling (several replicas).")
@click.option("--lease-namespace", default="kube-system", show_default=True)
@click.option("--lease-name", default="dra-affinity-scheduler", show_default=True)
@click.option("--identity", default=None, help="Holder identity in the Lease (default: host_pid).")
@click.option("--lease-duration", type=click.FloatRange(1.0), default=15.0, show_default=True)
@click.option("--renew-deadline", type=click.FloatRange(0.5), default=10.0, show_default=True)
@click.option("--retry-period", type=click.FloatRange(0.1), default=2.0, show_default=True)
@click.option("--metrics-port", type=click.IntRange(-1, 65535), default=10359, show_default=True,
              help="Port of /metrics, /healthz, /readyz (0: any free port, -1: none).")
@click.option("--metrics-address", default="0.0.0.0", show_default=True)
@click.option("--feature-gates", multiple=True,
              help="Scheduler gates, e.g. DRASharingAffinity=false (repeatable, comma-separated).")
@click.option("--scoring", type=click.Choice(["firstfit", "affinity"]), default="firstfit",
              show_default=True)
@click.option("--initial-backoff", type=click.FloatRange(0.0), default=1.0, show_default=True,
              help="Seconds before a failed pod is tried again (doubling per failure).")
@click.option("--max-backoff", type=click.FloatRange(0.0), default=10.0, show_default=True)
@click.option("--tolerated-taint", "tolerated_taints", multiple=True,
              default=("dra-affinity.io/affinity-pools",), show_default=True,
              help="Taint keys every pod of this scheduler tolerates without saying so (repeatable); "
                   "other NoSchedule/NoExecute taints need the pod's own tolerations.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True)
def scheduler(kubeconfig: str | None, scheduler_name: str, leader_elect: bool, lease_namespace: str,
              lease_name: str, identity: str | None, lease_duration: float, renew_deadline: float,
              retry_period: float, metrics_port: int, metrics_address: str,
              feature_gates: tuple[str, ...], scoring: str, initial_backoff: float,
              max_backoff: float, tolerated_taints: tuple[str, ...], log_level: str) -> None:
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
    from dra_affinity.kube.api import load_api
    from dra_affinity.kube.runner import Options, SchedulerProcess, setup_json_logging

    if leader_elect and not lease_duration > renew_deadline > retry_period:
        _fail_input("need --lease-duration > --renew-deadline > --retry-period")
    try:
        features = Features.parse(scheduler=_gate_map(feature_gates))
    except UnknownGateError as e:
        _fail_input(f"--feature-gates: {e}")
    setup_json_logging(getattr(logging, log_level.upper()))
    try:
        api = load_api(kubeconfig)
    except Exception as e:
        _fail_input(f"{kubeconfig or 'in-cluster config'}: {type(e).__name__}: {e}")
    opts = Options(scheduler_name=scheduler_name, identity=identity or
                   f"{socket.gethostname()}_{os.getpid()}", leader_elect=leader_elect,
                   lease_namespace=lease_namespace, lease_name=lease_name,
                   lease_duration=lease_duration, renew_deadline=renew_deadline,
                   retry_period=retry_period, metrics_port=metrics_port,
                   metrics_address=metrics_address, initial_backoff=initial_backoff,
                   max_backoff=max_backoff, scoring=scoring,
                   tolerated_taints=tolerated_taints)
    try:
        proc = SchedulerProcess(api, opts, features)
        code = proc.run()
    except OSError as e:  # the metrics port is taken, say
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_EXPECTATION)
    sys.exit(code)
