"""``bench``: throughput, scaling and packing benchmarks."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from dra_affinity.bench.scale import BENCH_SCALE_ENV, bench_scale, scaled

from ._base import EXIT_INPUT, _console, _dump, main

#: Workload options shared by the throughput bench and --packing (CLI name, parameter name).
_WORKLOAD_OPTIONS = (("--nodes", "nodes"), ("--devices-per-node", "devices_per_node"),
                     ("--slots", "slots"), ("--values", "values"), ("--zipf", "zipf"),
                     ("--churn", "churn"), ("--fill", "fill"))
_SCALING_OPTIONS = (("--scaling-pods", "scaling_pods"), ("--scaling-nodes", "scaling_nodes"),
                    ("--scaling-devices", "scaling_devices"))


def _bench_scale() -> float | None:
    """The size factor from :data:`BENCH_SCALE_ENV`, or None when unset."""
    try:
        return bench_scale()
    except ValueError as e:
        _usage_error(str(e))


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
@click.option("--tune-gc/--no-tune-gc", default=True, show_default=True,
              help="Throughput: tune the garbage collector in the processes that schedule as "
                   "`dra-affinity scheduler --tune-gc` does; each variant reports its "
                   "collections per generation (gcCollections).")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
def bench(nodes: int, devices_per_node: int, slots: int, values: int, zipf: float, churn: float,
          fill: float, seed: int, scaling: bool, scaling_pods: int, scaling_nodes: str,
          scaling_devices: str, packing: bool, plots: str | None, offline_iterations: int,
          tune_gc: bool, output: str) -> None:
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
        wrong = [opt for opt, param in (("--scaling", "scaling"), *_SCALING_OPTIONS,
                                        ("--tune-gc/--no-tune-gc", "tune_gc")) if given(param)]
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
                                _int_list("--scaling-devices", scaling_devices), tune_gc, nodes=nodes,
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
                      tune_gc: bool, **workload: Any) -> dict[str, Any]:
    from dra_affinity.bench.throughput import bench as run_bench
    from dra_affinity.bench.throughput import tree_cpu_seconds
    from dra_affinity.progress import phase_progress
    from dra_affinity.sim.workload import WorkloadSpec

    spec = WorkloadSpec(**{**workload, "nodes": scaled(workload["nodes"], scale)})
    sn = tuple(scaled(n, scale) for n in scaling_nodes)
    sp = scaled(scaling_pods, scale)
    changes = [f"--nodes {workload['nodes']} -> {spec.nodes}"]
    if scaling:
        changes += [f"--scaling-nodes {','.join(map(str, scaling_nodes))} -> {','.join(map(str, sn))}",
                    f"--scaling-pods {scaling_pods} -> {sp}"]
    _scale_note(scale, changes)
    with phase_progress() as progress:
        out = run_bench(spec, scaling=scaling, scaling_pods=sp, scaling_nodes=sn,
                        scaling_devices=scaling_devices, progress=progress, tune_gc=tune_gc)
    # The whole command: this process from its start (interpreter, imports, parsing) and
    # every benchmark process it ran, not only the part bench() saw.
    whole = tree_cpu_seconds()
    out["wholeRunCpuSeconds"] = round(whole, 3)
    timed = out.get("timedSchedulingSeconds") or 0.0
    out["wholeRunCpuRatio"] = round(whole / timed, 3) if timed else None
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
    spec = replace(full, nodes=scaled(full.nodes, scale),
                   max_pods=None if full.max_pods is None else scaled(full.max_pods, scale))
    _scale_note(scale, [f"nodes {full.nodes} -> {spec.nodes}",
                        f"arrivals {full.max_pods} -> {spec.max_pods}"])
    with spinner(f"packing: {spec.nodes} nodes, {spec.max_pods} arrivals, first-fit and affinity scoring"):
        out = packing_report(seed=seed, plots=plots, spec=spec, offline_iterations=offline_iterations)
    if scale is not None:
        out["workload"]["sizeScale"] = scale
    return out
