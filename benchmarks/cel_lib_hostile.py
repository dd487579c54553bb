"""CPU time of hostile expressions over the CEL library modules, at the runtime budget.

Each case spends the whole budget (1,000,000) on one library function fed with
the most data a claim may carry, or runs a library-heavy loop to completion.
What matters is the CPU time per budget: it should stay in the range of the
other hostile cases (benchmarks/hostile.py), i.e. a budget must not buy seconds.
CPU time (``time.process_time``), not wall time: the machine may be loaded.

    python benchmarks/cel_lib_hostile.py [--json out/cel_lib_hostile.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    SHARING_AFFINITY_CEL_MAX_COST,
    CELCostExceeded,
    CELEvalError,
)

S = "\u00e9" + "ab" * 4900
L = list(range(1600))

CASES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("format of 10 KiB strings", "object.l.map(x, '%s%s'.format([object.s, object.s])).size()",
     {"s": S, "l": L}),
    ("isURL of a 10 KiB URL of escapes", "object.l.all(x, isURL(object.u))",
     {"u": "http://h/" + "a%20" * 2400, "l": L}),
    ("getQuery of 2,400 parameters", "object.l.all(x, size(url(object.u).getQuery()) > 0)",
     {"u": "http://h/?" + "a=1&" * 2400, "l": L}),
    ("duration() of a 10 KiB string", "object.l.all(x, duration(object.d) > duration('0'))",
     {"d": "1" * 9800 + "s", "l": L}),
    ("time-zone accessor", "object.l.all(x, timestamp(object.t).getHours('America/New_York') >= 0)",
     {"t": "2024-01-02T03:04:05Z", "l": L}),
    ("CIDR containment", "object.l.all(x, cidr(object.c).containsIP(object.i))",
     {"c": "2001:db8::/32", "i": "2001:db8::1", "l": L}),
    ("%.100f of 1e308", "lists.range(1000).map(i, '%.100f'.format([object.f])).size()", {"f": 1e308}),
    ("sortBy of 1,600 elements", "object.l.sortBy(x, -x).size()", {"l": L}),
)


def run() -> list[dict[str, Any]]:
    rows = []
    for name, expr, obj in CASES:
        prog = EXTRACTOR_ENV.compile(expr)
        t0 = time.process_time()
        try:
            _, cost = prog.evaluate({"object": obj}, SHARING_AFFINITY_CEL_MAX_COST)
            outcome = "value"
        except CELCostExceeded as e:
            cost, outcome = e.cost, "cost exceeded"
        except CELEvalError as e:
            cost, outcome = e.cost, "error"
        cpu = time.process_time() - t0
        rows.append({"case": name, "expression": expr, "outcome": outcome, "cost": cost,
                     "cpu_ms": round(cpu * 1000, 1)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    rows = run()
    for r in rows:
        print(f"{r['case']:34s} {r['outcome']:14s} cost {r['cost']:>9}  cpu {r['cpu_ms']:8.1f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
