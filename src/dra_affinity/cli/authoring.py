"""Driver-author tools: ``eval``, ``validate`` and ``explain`` (on a scenario or a cluster)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from dra_affinity.api.io import ManifestError

from ._base import (
    EXIT_EXPECTATION,
    EXIT_INPUT,
    EXIT_OK,
    _console,
    _dump,
    _fail_input,
    _scenario_sim,
    main,
)
from ._kube import api_failed, cluster_options, connect

if TYPE_CHECKING:
    from dra_affinity.kube.config import ClusterConfig


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
    from dra_affinity.tools import admitted, claim_from, evaluate_extractors, load_one
    from dra_affinity.validation.sharing_affinity import SHARING_AFFINITY_ANNOTATION

    try:
        slices = [s for f in slice_files for s in load_one(f, ResourceSlice)]
        # the claim and classes as admission lets them reach a scheduler
        classes = [admitted(f, c) for f in class_files for c in load_one(f, DeviceClass)]
        claim = admitted(claim_file, claim_from(claim_file, claim_name))
    except ManifestError as e:
        _fail_input(e)
    try:
        out = evaluate_extractors(slices, claim, classes, request)  # type: ignore[arg-type]
    except ValueError as e:
        _fail_input(f"{claim_file}: {e}")
    if not out["pools"]:
        _fail_input(f"{', '.join(slice_files)}: no ResourceSlice declares sharing affinity "
                    f"(spec.sharingAffinity or the annotation {SHARING_AFFINITY_ANNOTATION})")
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
@click.argument("file", type=click.Path(dir_okay=False), required=False)
@click.option("--pod", required=True, help="Pod name or namespace/name.")
@click.option("--at-step", type=int, default=None,
              help="Explain the state before step N (default: after the last step).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
@cluster_options
def explain(file: str | None, pod: str, at_step: int | None, output: str, kubeconfig: str | None,
            context: str | None, namespace: str | None) -> None:
    """Why a pod does or does not fit each candidate device at a point of a scenario
    FILE, or, without FILE, on the cluster now (as a starting scheduler sees it).

    For every node and every device: capacity, selectors, lock, strict gating,
    unknown state, pool condition, or "Fits". Nothing is changed.

    \b
    Examples:
      dra-affinity explain examples/story-3-subnet.yaml --pod pod-e --at-step 6
      dra-affinity explain --kubeconfig ~/.kube/config -n team-a --pod trainer-0
    """
    from dra_affinity.tools import explain as do_explain

    if file is None:
        if at_step is not None:
            _fail_input("explain: --at-step needs a scenario FILE")
        out = _cluster_explain(connect(kubeconfig, context), pod, namespace)
    elif kubeconfig is not None or context is not None:
        _fail_input("explain: give either a scenario FILE or a cluster (--kubeconfig, --context)")
    else:
        if namespace is not None and "/" not in pod:
            pod = f"{namespace}/{pod}"
        try:
            out = do_explain(_scenario_sim(file, at_step), pod)
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
    if out.get("summary"):
        con.print(out["summary"])
    for n in out["nodes"]:
        verdict = "fits" if n["fits"] else "does not fit"
        if n.get("plugin"):
            verdict += f" ({n['plugin']}: {', '.join(n.get('fitReasons', []))})"
        t = Table(title=f"node {n['node']}: {verdict}", title_justify="left")
        for col in ("claim", "request", "device", "verdict", "detail"):
            t.add_column(col, overflow="fold")
        for r in n["devices"]:
            t.add_row(r["claim"], r["request"], r["device"], r["verdict"], r["message"])
        for r in n.get("reasons", []):
            if r.get("device") is None:
                t.add_row("", "", "(node)", r["code"], r["message"])
        con.print(t)


def _cluster_explain(cfg: ClusterConfig, pod: str, namespace: str | None) -> dict[str, Any]:
    from dra_affinity.kube.api import ApiError
    from dra_affinity.kube.locks import listed_view, started_scheduler
    from dra_affinity.scheduler.explain import explain_pod

    key = pod if "/" in pod else f"{namespace or cfg.namespace}/{pod}"
    try:
        sched, _ = started_scheduler(listed_view(cfg.api))
    except ApiError as e:
        api_failed(cfg, e)
    try:
        return explain_pod(sched, key)
    except KeyError:
        _fail_input(f"{cfg.source}: pod {key} not found")
