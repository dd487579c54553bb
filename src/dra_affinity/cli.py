"""``dra-affinity``: a thin command-line shell over the library."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console

from dra_affinity.api.io import ManifestError

if TYPE_CHECKING:
    from dra_affinity.sim.scenario import Scenario

EXIT_OK, EXIT_EXPECTATION, EXIT_INPUT = 0, 1, 2


def _fail_input(err: ManifestError | str) -> NoReturn:
    click.echo(f"error: {err}", err=True)
    sys.exit(EXIT_INPUT)


def _load_scenario(file: str) -> Scenario:
    """A scenario file, read by the one manifest reader every command uses."""
    from dra_affinity.api.io import read_text
    from dra_affinity.sim.scenario import load_scenario_text

    return load_scenario_text(read_text(file), file)


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False)


def _console(markup: bool = False) -> Console:
    """Output console. Markup is off unless a renderer writes its own: names and
    messages from manifests may contain ``[...]`` and must print as written."""
    tty = sys.stdout.isatty()
    return Console(width=None if tty else 160, force_terminal=tty, no_color=not tty,
                   highlight=False, soft_wrap=False, markup=markup, emoji=False)


def _render_simulation(out: dict[str, Any]) -> None:
    """The simulation table. Its renderer styles lines with markup around messages that
    carry manifest text; text that is not valid markup is printed without styles."""
    from rich.errors import MarkupError

    from dra_affinity.sim.render import render

    con = _console(markup=True)
    try:
        with con.capture() as cap:
            render(out, con)
    except MarkupError:
        con = _console(markup=False)
        with con.capture() as cap:
            render(out, con)
    click.echo(cap.get(), nl=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dra-affinity")
@click.option("--verbose", "-v", is_flag=True, help="Print scheduler warnings (logs) on stderr.")
def main(verbose: bool) -> None:
    """Kubernetes DRA with Sharing Affinity (KEP-5981): simulate, validate, explain.

    \b
    Example:
      dra-affinity simulate examples/story-3-subnet.yaml
    """
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("dra_affinity")
    root.handlers[:] = [handler] if verbose else [logging.NullHandler()]
    root.propagate = False
    root.setLevel(logging.INFO if verbose else logging.WARNING)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Output format.")
@click.option("--scoring", type=click.Choice(["firstfit", "affinity"]), default="firstfit",
              show_default=True, help="Node and device preference: firstfit is the KEP's alpha.")
def simulate(file: str, output: str, scoring: str) -> None:
    """Run a scenario timeline on an embedded in-memory cluster.

    Exit status: 0 all expectations passed, 1 an expectation failed, 2 bad input.

    \b
    Example:
      dra-affinity simulate examples/story-3-subnet.yaml --output json
    """
    from dra_affinity.progress import spinner
    from dra_affinity.sim.runner import Simulation

    try:
        with spinner(f"loading {file}"):  # stderr, terminal only: parsing and initial objects
            sc = _load_scenario(file)
            sim = Simulation(sc, scoring)
    except ManifestError as e:
        _fail_input(e)
    steps = sc.spec.steps
    if sys.stderr.isatty() and len(steps) >= 500:
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=True) as prog:
            task = prog.add_task("simulating", total=len(steps))
            out = sim.run(lambda i: prog.update(task, completed=i + 1))
    else:
        out = sim.run()
    if output == "json":
        click.echo(_dump(out))
    else:
        _render_simulation(out)
    sys.exit(EXIT_EXPECTATION if out["expectationsFailed"] else EXIT_OK)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
def metrics(file: str) -> None:
    """Run a scenario and print the scheduler's Prometheus exposition text.

    \b
    Example:
      dra-affinity metrics examples/story-3-subnet.yaml
    """
    from dra_affinity.sim.runner import Simulation

    try:
        sim = Simulation(_load_scenario(file))
    except ManifestError as e:
        _fail_input(e)
    sim.run()
    click.echo(sim.metrics.exposition(), nl=False)


def _scenario_sim(file: str, at_step: int | None) -> Any:
    from dra_affinity.tools import run_until

    try:
        sc = _load_scenario(file)
        if at_step is not None and not 0 <= at_step <= len(sc.spec.steps):
            _fail_input(f"{file}: --at-step {at_step} is outside 0..{len(sc.spec.steps)}")
        return run_until(sc, at_step)
    except ManifestError as e:
        _fail_input(e)


@main.command("eval")
@click.option("--slice", "slice_files", multiple=True, required=True, type=click.Path(dir_okay=False),
              help="File with the pool's ResourceSlices (all of them: completeness counts); "
                   "repeatable.")
@click.option("--claim", "claim_file", required=True, type=click.Path(dir_okay=False),
              help="File with a ResourceClaim (or ResourceClaimTemplate).")
@click.option("--class", "class_files", multiple=True, type=click.Path(dir_okay=False),
              help="File with DeviceClass(es) whose configs are in scope; repeatable.")
@click.option("--claim-name", default=None, help="Which claim of the file (default: the first).")
@click.option("--request", default=None, help="Only this request (or subrequest req/sub).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
def eval_cmd(slice_files: tuple[str, ...], claim_file: str, class_files: tuple[str, ...],
             claim_name: str | None, request: str | None, output: str) -> None:
    """Say what the scheduler would decide for a claim's requests on a pool's devices.

    The slices are gathered into pools as the scheduler does (newest generation,
    completeness, validity); the pool's extractors run against the in-scope
    opaque configs under one shared budget, stopping at the first
    error. Shows each evaluation (value, '' or the error, and its cost), then per
    request the effective affinity map or why there is none. Exit status 0
    when every request extracts keys, 1 otherwise, 2 for bad input.

    \b
    Example:
      dra-affinity eval --slice slices.yaml --claim claim.yaml --request nic
    """
    from dra_affinity.api.resource import DeviceClass, ResourceSlice
    from dra_affinity.tools import claim_from, evaluate_extractors, load_one

    try:
        slices = [s for f in slice_files for s in load_one(f, ResourceSlice)]
        classes = [c for f in class_files for c in load_one(f, DeviceClass)]
        claim = claim_from(claim_file, claim_name)
    except ManifestError as e:
        _fail_input(e)
    if not any(s.spec.sharing_affinity for s in slices):  # type: ignore[attr-defined]
        _fail_input(f"{', '.join(slice_files)}: no ResourceSlice with spec.sharingAffinity")
    try:
        out = evaluate_extractors(slices, claim, classes, request)  # type: ignore[arg-type]
    except ValueError as e:
        _fail_input(f"{claim_file}: {e}")
    ok = all(r["outcome"] == "OK" for p in out["pools"] for r in p["requests"])
    if output == "json":
        click.echo(_dump(out))
    else:
        _render_eval(out)
    sys.exit(EXIT_OK if ok else EXIT_EXPECTATION)


def _render_eval(out: dict[str, Any]) -> None:
    from rich.table import Table

    con = _console()
    for p in out["pools"]:
        if p["problem"]:
            con.print(f"pool {p['driver']}/{p['pool']} generation {p['generation']}: "
                      f"{p['problem']['code']}: {p['problem']['message']}")
        for r in p["requests"]:
            t = Table(title=f"pool {p['driver']}/{p['pool']} · claim {out['claim']} · "
                            f"request {r['request']} (class {r['class']})",
                      title_justify="left")
            for col in ("key", "config", "value / error", "cost"):
                t.add_column(col, overflow="fold")
            for row in r["evaluations"]:
                t.add_row(row["key"], row["config"], row.get("error") or row.get("display", ""),
                          str(row["cost"]))
            if not r["evaluations"]:
                t.add_row("-", "(nothing evaluated)", "", "")
            con.print(t)
            verdict = (f"effective affinity: {r['keys']}" if r["outcome"] == "OK"
                       else f"{r['outcome']}: {r['message']}")
            con.print(f"  → {verdict}\n")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=False))
@click.option("--together", is_flag=True,
              help="Gather the slices of all files into one set of pools (default: per file).")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
def validate(paths: tuple[str, ...], together: bool, output: str) -> None:
    """Admission and pool validation over manifests (files or folders).

    Every object is checked as the API server would (sharingAffinity limits,
    CEL compile and cost, mutual exclusion with devices, ...), then slices are
    gathered into pools and checked across slices (duplicate keys, combined
    cost, completeness): per file, or across all files with --together (for
    a driver's slices split over several files). Exit status 1 on any error
    (warnings, such as an incomplete pool, do not count), 2 when a file
    cannot be read or parsed.

    \b
    Example:
      dra-affinity validate examples/
    """
    from dra_affinity.tools import validate_paths

    findings = validate_paths(list(paths), together=together)
    unreadable = [f for f in findings if f.severity == "input"]
    errors = [f for f in findings if f.severity in ("error", "input")]
    if output == "json":
        click.echo(_dump({"errors": len(errors), "findings": [f.as_dict() for f in findings]}))
    else:
        for f in findings:
            click.echo(f"{f.severity}: {f.render()}")
        click.echo(f"{len(errors)} error(s), {len(findings) - len(errors)} warning(s)")
    sys.exit(EXIT_INPUT if unreadable else EXIT_EXPECTATION if errors else EXIT_OK)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--pod", required=True, help="Pod name or namespace/name.")
@click.option("--at-step", type=int, default=None,
              help="Explain the state before step N (default: after the last step).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
def explain(file: str, pod: str, at_step: int | None, output: str) -> None:
    """Why a pod does or does not fit each candidate device at a point of a scenario.

    For every node and every device: capacity, selectors, lock, strict gating,
    unknown state, pool condition, or "Fits". Nothing is changed.

    \b
    Example:
      dra-affinity explain examples/story-3-subnet.yaml --pod pod-e --at-step 6
    """
    from dra_affinity.tools import explain as do_explain

    sim = _scenario_sim(file, at_step)
    try:
        out = do_explain(sim, pod)
    except ValueError as e:
        _fail_input(f"{file}: {e}")
    if output == "json":
        click.echo(_dump(out))
        return
    from rich.table import Table

    con = _console()
    if "boundTo" in out:
        con.print(f"pod {out['pod']} is bound to {out['boundTo']}")
        return
    if "reason" in out:
        con.print(f"pod {out['pod']}: {out['result']}: {out['reason']['code']}: {out['reason']['message']}")
        return
    for n in out["nodes"]:
        t = Table(title=f"node {n['node']}: {'fits' if n['fits'] else 'does not fit'}",
                  title_justify="left")
        for col in ("claim", "request", "device", "verdict", "detail"):
            t.add_column(col, overflow="fold")
        for r in n["devices"]:
            t.add_row(r["claim"], r["request"], r["device"], r["verdict"], r["message"])
        for r in n.get("reasons", []):
            if r.get("device") is None:
                t.add_row("", "", "(node)", r["code"], r["message"])
        con.print(t)


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
              help="Taint keys whose nodes are still offered (repeatable); a node with any other "
                   "NoSchedule/NoExecute taint is not.")
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


#: Environment variable that scales a bench down (nodes, scaling cells, packing arrivals):
#: lets documentation and CI run the documented large commands at a fraction of the size.
BENCH_SCALE_ENV = "DRA_AFFINITY_BENCH_SCALE"

#: Workload options shared by the throughput bench and --packing (CLI name, parameter name).
_WORKLOAD_OPTIONS = (("--nodes", "nodes"), ("--devices-per-node", "devices_per_node"),
                     ("--slots", "slots"), ("--values", "values"), ("--zipf", "zipf"),
                     ("--churn", "churn"), ("--fill", "fill"))
_SCALING_OPTIONS = (("--scaling-pods", "scaling_pods"), ("--scaling-nodes", "scaling_nodes"),
                    ("--scaling-devices", "scaling_devices"))


def _bench_scale() -> float | None:
    """The size factor from :data:`BENCH_SCALE_ENV`, or None when unset."""
    import os

    raw = os.environ.get(BENCH_SCALE_ENV, "").strip()
    if not raw:
        return None
    try:
        scale = float(raw)
    except ValueError:
        scale = -1.0
    if not 0.0 < scale <= 1.0:
        _usage_error(f"environment variable {BENCH_SCALE_ENV}={raw!r}: "
                     "must be a number greater than 0 and at most 1")
    return scale


def _scaled(n: int, scale: float | None) -> int:
    return n if scale is None else max(1, round(n * scale))


def _usage_error(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INPUT)


def _int_list(option: str, text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        _usage_error(f"{option} {text!r}: takes comma-separated integers, e.g. 500,1000")
    if not values or any(v < 1 for v in values):
        _usage_error(f"{option} {text!r}: takes one or more positive integers")
    return values


@main.command()
@click.option("--nodes", type=click.IntRange(1), default=500, show_default="500; 50 with --packing")
@click.option("--devices-per-node", type=click.IntRange(1), default=8,
              show_default="8; 4 with --packing")
@click.option("--slots", type=click.IntRange(1), default=4, show_default="4; 8 with --packing",
              help="Slots per device (capacity networking.example.com/slots).")
@click.option("--values", type=click.IntRange(1), default=64, show_default="64; 32 with --packing",
              help="Distinct affinity values (subnets).")
@click.option("--zipf", type=click.FloatRange(0.0), default=1.1, show_default=True,
              help="Skew of the affinity values (0 = uniform).")
@click.option("--churn", type=click.FloatRange(0.0, 1.0), default=0.05,
              show_default="0.05; 0.2 with --packing",
              help="Probability of a deletion after each placement.")
@click.option("--fill", type=click.FloatRange(0.01, 1.0), default=0.9,
              show_default="0.9; 0.75 with --packing",
              help="Throughput: stop when this fraction of all slots is allocated. "
                   "--packing: the occupancy its steady state holds.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--scaling", is_flag=True,
              help="Add a scaling table over nodes x devices per node (not with --packing).")
@click.option("--scaling-pods", type=click.IntRange(1), default=5000, show_default=True,
              help="With --scaling: scheduling attempts per scaling cell.")
@click.option("--scaling-nodes", default="500,1000,2000,5000", show_default=True,
              help="With --scaling: comma-separated node counts.")
@click.option("--scaling-devices", default="4,8,32", show_default=True,
              help="With --scaling: comma-separated devices per node.")
@click.option("--packing", is_flag=True,
              help="Packing evaluation: first-fit vs affinity scoring vs the lower bound.")
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help="With --packing: write PNG plots into this folder (needs matplotlib).")
@click.option("--offline-iterations", type=click.IntRange(min=0), default=4000, show_default=True,
              help="With --packing: search steps of the offline reference (0 = its greedy start only).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
def bench(nodes: int, devices_per_node: int, slots: int, values: int, zipf: float, churn: float,
          fill: float, seed: int, scaling: bool, scaling_pods: int, scaling_nodes: str,
          scaling_devices: str, packing: bool, plots: str | None, offline_iterations: int,
          output: str) -> None:
    """Benchmark scheduling throughput with and without sharingAffinity on one workload.

    Generates N nodes with a metadata slice and a slice of D multi-allocatable
    NICs each, and pods whose subnets follow a Zipf-like distribution, with
    churn; fills the cluster from empty to --fill, once with sharingAffinity
    and once without (the baseline), each in its own process, the two taking
    turns of 500 attempts so both see the same machine load. Reports pods/s
    (CPU time of scheduling decisions), Filter p50/p99, peak memory and
    throughput per fill decile.

    With --packing, replays one recorded churn workload under first-fit and
    affinity scoring instead; the workload options given override its own
    defaults (shown after the semicolons). Options that do not apply to the
    chosen mode are rejected (exit status 2), never ignored. On a terminal,
    progress goes to stderr. DRA_AFFINITY_BENCH_SCALE=F (0 < F <= 1) shrinks
    node counts, scaling cells and packing arrivals by F, and says so.

    \b
    Examples:
      dra-affinity bench --nodes 5000 --devices-per-node 8 --seed 1 --output json
      dra-affinity bench --packing --seed 1 --plots out/
    """
    from click.core import ParameterSource

    ctx = click.get_current_context()

    def given(param: str) -> bool:
        return ctx.get_parameter_source(param) is not ParameterSource.DEFAULT

    if plots is not None and not packing:
        _usage_error("--plots applies only with --packing (the throughput bench draws no plots)")
    if given("offline_iterations") and not packing:
        _usage_error("--offline-iterations applies only with --packing")
    if packing:
        wrong = [opt for opt, param in (("--scaling", "scaling"), *_SCALING_OPTIONS) if given(param)]
        if wrong:
            _usage_error(f"{', '.join(wrong)}: not used by --packing")
    else:
        unused = [opt for opt, param in _SCALING_OPTIONS if given(param)]
        if unused and not scaling:
            _usage_error(f"{', '.join(unused)}: takes effect only with --scaling")
    scale = _bench_scale()
    if packing:
        out = _bench_packing(given, scale, seed, plots, offline_iterations, nodes=nodes,
                             devices_per_node=devices_per_node, slots=slots, values=values,
                             zipf=zipf, churn=churn, fill=fill)
    else:
        out = _bench_throughput(scale, scaling, scaling_pods, _int_list("--scaling-nodes", scaling_nodes),
                                _int_list("--scaling-devices", scaling_devices), nodes=nodes,
                                devices_per_node=devices_per_node, slots=slots, values=values,
                                zipf=zipf, churn=churn, fill=fill, seed=seed)
    if output == "json":
        click.echo(_dump(out))
    else:
        from dra_affinity.bench.render import render_bench

        render_bench(out, _console())
    if plots is not None:
        from pathlib import Path

        written = ", ".join(str(Path(plots) / name) for name in out.get("plots", []))
        click.echo(f"plots written: {written}", err=True)


def _scale_note(scale: float | None, changes: list[str]) -> None:
    if scale is not None:
        click.echo(f"note: {BENCH_SCALE_ENV}={scale:g}: " + ("; ".join(changes) or "nothing to scale"),
                   err=True)


def _bench_throughput(scale: float | None, scaling: bool, scaling_pods: int,
                      scaling_nodes: tuple[int, ...], scaling_devices: tuple[int, ...],
                      **workload: Any) -> dict[str, Any]:
    from dra_affinity.bench.throughput import bench as run_bench
    from dra_affinity.progress import phase_progress
    from dra_affinity.sim.workload import WorkloadSpec

    spec = WorkloadSpec(**{**workload, "nodes": _scaled(workload["nodes"], scale)})
    sn = tuple(_scaled(n, scale) for n in scaling_nodes)
    sp = _scaled(scaling_pods, scale)
    changes = [f"--nodes {workload['nodes']} -> {spec.nodes}"]
    if scaling:
        changes += [f"--scaling-nodes {','.join(map(str, scaling_nodes))} -> {','.join(map(str, sn))}",
                    f"--scaling-pods {scaling_pods} -> {sp}"]
    _scale_note(scale, changes)
    with phase_progress() as progress:
        out = run_bench(spec, scaling=scaling, scaling_pods=sp, scaling_nodes=sn,
                        scaling_devices=scaling_devices, progress=progress)
    if scale is not None:
        out["workload"]["sizeScale"] = scale
    return out


def _bench_packing(given: Any, scale: float | None, seed: int, plots: str | None,
                   offline_iterations: int, **workload: Any) -> dict[str, Any]:
    from dataclasses import replace

    from dra_affinity.bench.packing import DEFAULT_SPEC, packing_report
    from dra_affinity.progress import spinner

    if plots is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            _usage_error("--plots needs matplotlib: pip install 'dra-affinity[plots]'")
    full = replace(DEFAULT_SPEC, **{k: v for k, v in workload.items() if given(k)})
    spec = replace(full, nodes=_scaled(full.nodes, scale),
                   max_pods=None if full.max_pods is None else _scaled(full.max_pods, scale))
    _scale_note(scale, [f"nodes {full.nodes} -> {spec.nodes}",
                        f"arrivals {full.max_pods} -> {spec.max_pods}"])
    with spinner(f"packing: {spec.nodes} nodes, {spec.max_pods} arrivals, first-fit and affinity scoring"):
        out = packing_report(seed=seed, plots=plots, spec=spec, offline_iterations=offline_iterations)
    if scale is not None:
        out["workload"]["sizeScale"] = scale
    return out


if __name__ == "__main__":
    main()
