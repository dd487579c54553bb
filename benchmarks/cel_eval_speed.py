"""Evaluation speed of the CEL engine: microseconds and Python bytecodes per evaluation.

Timings on a shared machine move run to run; the bytecode counts do not, so a
change of the interpreter's structure is judged on both. Each workload is
compiled once and evaluated repeatedly; the time is the best of ``--repeat``
rounds of ``--number`` evaluations.

    python benchmarks/cel_eval_speed.py [--number 2000] [--repeat 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from types import FrameType
from typing import Any

from dra_affinity.cel import EXTRACTOR_ENV

NIC: dict[str, object] = {
    "apiVersion": "networking.example.com/v1",
    "kind": "NICConfig",
    "subnetID": "subnet-A",
    "mtu": 9000,
    "tags": ["a", "b", "c", "d"],
    "l": list(range(40)),
    "s": "abcdefghij" * 10,
}

WORKLOADS: tuple[tuple[str, str], ...] = (
    (
        "kep-subnet",
        'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig"'
        ' ? object.subnetID : ""',
    ),
    ("arith-compare", "object.mtu + 100 > 9000 && object.mtu * 2 - 1 != 0"),
    ("nested-all", "object.l.all(a, object.l.all(b, a + b >= 0))"),
    ("filter-map", "object.l.filter(x, x % 2 == 0).map(x, x * 3).size()"),
    ("strings", 'object.s.contains("ij") && object.s.startsWith("abc") && object.s.size() > 3'),
    ("index-in", '"c" in object.tags && object.tags[1] == "b" && object.l[3] < 10'),
)

BUDGET = 10**9


def bytecodes(expr: str) -> int:
    """Python bytecodes executed by one evaluation (deterministic)."""
    prog = EXTRACTOR_ENV.compile(expr)
    act = {"object": NIC}
    n = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal n
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        elif event == "opcode":
            n += 1
        return tracer

    sys.settrace(tracer)
    try:
        prog.evaluate(act, BUDGET)
    finally:
        sys.settrace(None)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for name, expr in WORKLOADS:
        prog = EXTRACTOR_ENV.compile(expr)
        act = {"object": NIC}
        _, cost = prog.evaluate(act, BUDGET)
        number = max(1, args.number // (50 if "all" in name else 1))
        best = min(
            timeit.repeat(lambda p=prog, a=act: p.evaluate(a, BUDGET), number=number, repeat=args.repeat)
        )
        us = best / number * 1e6
        ops = bytecodes(expr)
        rows.append({"workload": name, "us": round(us, 2), "bytecodes": ops, "cost": cost})
        print(f"{name:14} {us:10.2f} us  {ops:9d} bytecodes  cost {cost}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
