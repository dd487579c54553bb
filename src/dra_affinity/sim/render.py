"""Readable table output of a simulation (the default ``simulate`` output)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _reasons(entry: dict[str, Any]) -> str:
    codes: list[str] = []
    for r in entry.get("reasons", []):
        if r["code"] not in codes:
            codes.append(r["code"])
    return ", ".join(codes)


def render(out: dict[str, Any], console: Console) -> None:
    steps = Table(title=f"scenario {out['scenario']}", title_justify="left", expand=False)
    for col in ("#", "action", "pod / object", "result", "node", "devices", "reasons", "expect"):
        steps.add_column(col, overflow="fold")
    for e in out["steps"]:
        target = e.get("pod") or e.get("object") or e.get("device") or ""
        devices = ", ".join(a["device"] for a in e.get("allocations", []))
        exps = e.get("expectations", [])
        expect = "" if not exps else ("ok" if all(x["ok"] for x in exps) else "FAILED")
        extra = ""
        if e.get("errors"):
            extra = "; ".join(f"{x['field']}: {x['message']}" for x in e["errors"])
        elif e.get("warnings"):
            extra = "; ".join(e["warnings"])
        steps.add_row(str(e["index"]), e["action"], target, e.get("result", ""), e.get("node") or "",
                      devices, _reasons(e) or extra, expect)
    console.print(steps)
    for e in out["steps"]:
        for x in e.get("expectations", []):
            if not x["ok"]:
                console.print(f"[red]step {e['index']}: expectation failed: {escape(x['message'])}[/red]")

    dev = Table(title="devices", title_justify="left")
    for col in ("device", "status", "lock", "claims"):
        dev.add_column(col, overflow="fold")
    for d in out["devices"]:
        lock = ", ".join(f"{k}={v}" for k, v in sorted(d["lock"].items()))
        dev.add_row(d["device"], d["status"], lock, ", ".join(d["claims"]))
    console.print(dev)

    met = Table(title="metrics", title_justify="left")
    met.add_column("metric")
    met.add_column("value", justify="right")
    for k, v in out["metrics"].items():
        met.add_row(k, str(v))
    console.print(met)
    if out["expectationsFailed"]:
        console.print(f"[red]{out['expectationsFailed']} expectation(s) failed[/red]")
