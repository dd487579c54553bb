"""Table output for ``dra-affinity bench``."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def render_bench(out: dict[str, Any], console: Console) -> None:
    if "policies" in out:
        t = Table(title=f"packing (lower bound {out['lowerBound']} devices)", title_justify="left")
        for col in ("policy", "devicesUsed", "ratio", "unschedulable", "strandedSlots"):
            t.add_column(col, justify="right")
        for name, p in out["policies"].items():
            t.add_row(name, str(p["devicesUsed"]), f"{p['ratio']:.3f}", str(p["unschedulable"]),
                      str(p["strandedSlots"]))
        off = out.get("reference", {}).get("offline")
        if off is not None:
            t.add_row("offline reference", str(off["devicesUsed"]), f"{off['ratio']:.3f}", "-", "-")
        console.print(t)
        return
    w = out["workload"]
    t = Table(title=f"throughput: {w['nodes']} nodes x {w['devicesPerNode']} devices x {w['slots']} slots, fill {w['fill']}",
              title_justify="left")
    for col in ("variant", "pods/s", "filter p50 ms", "filter p99 ms", "peak MB", "attempts"):
        t.add_column(col, justify="right")
    for name in ("withAffinity", "withoutAffinity"):
        r = out[name]
        t.add_row(name, f"{r['podsPerSecond']:.0f}", f"{r['filterP50Ms']:.3f}",
                  f"{r['filterP99Ms']:.3f}", f"{r['peakMemoryMB']:.0f}", str(r["attempts"]))
    console.print(t)
    console.print(f"overhead ratio (with / without): {out['overheadRatio']}")
    if out.get("wholeRunCpuSeconds") is not None:
        console.print(f"whole run: {out['wholeRunCpuSeconds']:.1f} s CPU for "
                      f"{out['timedSchedulingSeconds']:.1f} s of timed scheduling "
                      f"(ratio {out['wholeRunCpuRatio']})")
    d = Table(title="pods/s per fill decile", title_justify="left")
    d.add_column("fill")
    d.add_column("with", justify="right")
    d.add_column("without", justify="right")
    without = {x["fill"]: x["podsPerSecond"] for x in out["withoutAffinity"]["fillDeciles"]}
    for x in out["withAffinity"]["fillDeciles"]:
        d.add_row(f"{x['fill']:.1f}", f"{x['podsPerSecond']:.0f}",
                  f"{without.get(x['fill']) or 0:.0f}")
    console.print(d)
    if "scaling" in out:
        s = Table(title="scaling (with sharingAffinity)", title_justify="left")
        for col in ("nodes", "devices/node", "pods/s", "filter p50 ms", "filter p99 ms"):
            s.add_column(col, justify="right")
        for r in out["scaling"]:
            s.add_row(str(r["nodes"]), str(r["devicesPerNode"]), f"{r['podsPerSecond']:.0f}",
                      f"{r['filterP50Ms']:.3f}", f"{r['filterP99Ms']:.3f}")
        console.print(s)
    console.print(f"lock state: {out['lockStateBytesPer1000Devices']} bytes per 1,000 locked devices")
