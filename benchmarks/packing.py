"""Packing evaluation: first-fit (KEP-5981 alpha) vs affinity scoring vs the lower bound.

Replays one recorded workload (see ``dra_affinity.bench.packing``) through the
scheduler once per policy, prints the table, writes the plots and, with
``--output``, the full report as JSON::

    python benchmarks/packing.py --seed 1 --output out/packing.json

The figures committed under ``benchmarks/figures/`` come from exactly that
command (``--plots`` defaults to that folder).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console

from dra_affinity.bench.packing import DEFAULT_OFFLINE_ITERATIONS, packing_report
from dra_affinity.bench.render import render_bench

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    ap.add_argument("--plots", type=Path, default=HERE / "figures",
                    help="folder for the PNGs (default benchmarks/figures); '' to skip")
    ap.add_argument("--output", type=Path, default=None, help="write the JSON report here")
    ap.add_argument("--offline-iterations", type=int, default=DEFAULT_OFFLINE_ITERATIONS,
                    help="search steps of the offline reference (default "
                         f"{DEFAULT_OFFLINE_ITERATIONS}; 0 = its greedy start only)")
    ap.add_argument("--sequential", action="store_true",
                    help="run the two policies one after the other instead of in two processes")
    args = ap.parse_args(argv)
    if args.offline_iterations < 0:
        ap.error("--offline-iterations must be >= 0")
    plots = str(args.plots) if str(args.plots) not in ("", ".") else None
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    out = packing_report(seed=args.seed, plots=plots, parallel=not args.sequential,
                         offline_iterations=args.offline_iterations)
    wall = time.perf_counter() - t0
    console = Console(width=120)
    render_bench(out, console)
    w = out["workload"]
    ref = out["reference"]["bestFitModel"]
    console.print(
        f"workload: {w['nodes']} nodes x {w['devicesPerNode']} devices x {w['slots']} slots, "
        f"{w['values']} values (Zipf {w['zipf']}), churn {w['churn']}, fill {w['fill']}, "
        f"{w['arrivals']} arrivals, {w['events']} events, seed {w['seed']}")
    console.print(f"best-fit placement model (no scheduler): {ref['devicesUsed']} devices, "
                  f"ratio {ref['ratio']:.3f}")
    cv = out["reference"]["clairvoyantModel"]
    console.print(f"clairvoyant placement model (told every departure): {cv['devicesUsed']} "
                  f"devices, ratio {cv['ratio']:.3f}")
    off = out["reference"]["offline"]
    console.print(f"offline reference (hindsight, pods never move; {off['iterations']} search "
                  f"steps, seed {off['seed']}): {off['devicesUsed']} devices, ratio "
                  f"{off['ratio']:.3f}; policies above it: " + ", ".join(
                      f"{n} +{p['devicesAboveOffline']} ({p['ratioToOffline']:.3f})"
                      for n, p in out["policies"].items()))
    # Time is printed, not put in the JSON: the report is the same bytes on every run.
    console.print(f"wall time {wall:.1f} s (this process's CPU {time.process_time() - cpu0:.1f} s; "
                  "the policies and the search run in worker processes)")
    if plots:
        console.print(f"plots: {', '.join(str(Path(plots) / p) for p in out['plots'])}")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
