"""Nanoseconds of CPU per charged cost unit, for every CEL operation and library function.

    python benchmarks/cel_unit_cost.py [--quick] [--json FILE] [--top N]

The cost model holds when charged units track real work within a constant factor.
This measures it over three sets of cases: the corpus (``benchmarks/cel_corpus.py``),
the differential suite's generated cases (``tests/oracle/cel_gen.py``, object
environment) and *probes*: each library function and operator fed the largest input a
claim can carry (10 KiB strings, 1,600-element lists), where a charge that is flat
while the work grows shows up. For each case the expression is compiled once and
evaluated repeatedly; the fixed cost of one evaluation (measured on ``true``) is
subtracted and the rest divided by the charged cost. The table lists the median and
the worst cases; a worst case above 10x the median is a cost-model bug. CPU time
(``time.process_time``): the machine may be loaded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    SHARING_AFFINITY_CEL_MAX_COST,
    CELCompileError,
    CELCostExceeded,
    CELEvalError,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "oracle"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cel_corpus import CORPUS  # noqa: E402
from cel_gen import generate  # noqa: E402

SEED = 20260
BIG = 9800  # characters of a string a claim's config can carry (10 KiB with the JSON around it)
S = "\u00e9" + "ab" * (BIG // 2)
ASCII = "ab" * (BIG // 2)
DIGITS = "1" * BIG
L = list(range(1600))
LS = [f"s{i}" for i in range(1600)]
NESTED = [[i, i] for i in range(800)]

#: (name, expression, object): each library function and operator at its largest input.
PROBES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("size(string)", "size(object.s)", {"s": S}),
    ("string ==", "object.s == object.t", {"s": S, "t": S[:-1] + "x"}),
    ("string <", "object.s < object.t", {"s": S, "t": S[:-1] + "x"}),
    ("string +", "object.s + object.s", {"s": S}),
    ("contains", "object.s.contains(object.t)", {"s": ASCII, "t": "ab" * 40 + "x"}),
    ("startsWith", "object.s.startsWith(object.t)", {"s": S, "t": S[:-1] + "x"}),
    ("endsWith", "object.s.endsWith(object.t)", {"s": S, "t": "x" + S[1:]}),
    ("matches", "object.s.matches('^(a|b|\u00e9)*c$')", {"s": S}),
    ("matches dynamic pattern", "object.s.matches(object.p)", {"s": ASCII, "p": "(a|b)*c"}),
    ("find", "object.s.find('b+c')", {"s": S}),
    ("findAll", "object.s.findAll('a').size()", {"s": S}),
    ("int(string)", "int(object.d)", {"d": DIGITS}),
    ("uint(string)", "uint(object.d)", {"d": DIGITS}),
    ("double(string)", "double(object.d)", {"d": DIGITS}),
    ("double(string) fraction", "double(object.d)", {"d": "0." + DIGITS}),
    ("bool(string)", "bool(object.s)", {"s": S}),
    ("string(bytes)", "string(bytes(object.s))", {"s": S}),
    ("bytes(string)", "bytes(object.s)", {"s": S}),
    ("string(int)", "object.l.map(x, string(x)).size()", {"l": L}),
    ("string(double)", "string(object.f)", {"f": 1.7976931348623157e308}),
    ("charAt", "object.s.charAt(9000)", {"s": S}),
    ("indexOf", "object.s.indexOf('x')", {"s": S}),
    ("lastIndexOf", "object.s.lastIndexOf('x')", {"s": S}),
    ("indexOf offset", "object.s.indexOf('x', 9000)", {"s": S}),
    ("lowerAscii", "object.s.lowerAscii()", {"s": S}),
    ("upperAscii", "object.s.upperAscii()", {"s": S}),
    ("replace", "object.s.replace('a', 'b')", {"s": S}),
    ("split", "object.s.split('a').size()", {"s": S}),
    ("substring", "object.s.substring(1, 9000)", {"s": S}),
    ("trim", "object.s.trim()", {"s": " " * BIG + "x"}),
    ("join", "object.l.join(',')", {"l": LS}),
    ("format %s", "'%s'.format([object.s])", {"s": S}),
    ("format %d list", "'%s'.format([object.l])", {"l": L}),
    ("strings.quote", "strings.quote(object.s)", {"s": S}),
    ("isSemver", "isSemver(object.s)", {"s": "1.2.3-" + "a." * (BIG // 2)}),
    ("isSemver normalize", "isSemver(object.s, true)", {"s": "v1.2.3-" + "a." * (BIG // 2)}),
    ("semver", "semver(object.s).major()", {"s": "1.2.3-" + "a." * (BIG // 2 - 3) + "a"}),
    ("semver compare", "semver(object.s).compareTo(semver(object.s))",
     {"s": "1.2.3-" + "a." * (BIG // 2 - 3) + "a"}),
    ("quantity", "quantity(object.s)", {"s": "1" * 390}),
    ("isQuantity", "isQuantity(object.s)", {"s": DIGITS}),
    ("duration", "duration(object.s)", {"s": "1" * 18 + "ns"}),
    ("duration long", "duration(object.s)", {"s": "0" * BIG + "1s"}),
    ("timestamp", "timestamp(object.s)", {"s": "2024-01-02T03:04:05." + "1" * 9 + "Z"}),
    ("timestamp long", "timestamp(object.s)", {"s": "2024-01-02T03:04:05." + "1" * BIG + "Z"}),
    ("getHours tz", "timestamp('2024-01-02T03:04:05Z').getHours(object.z)", {"z": "America/New_York"}),
    ("ip", "ip(object.s)", {"s": "2001:db8::1"}),
    ("isIP long", "isIP(object.s)", {"s": S}),
    ("cidr", "cidr(object.s)", {"s": "2001:db8::/32"}),
    ("isCIDR long", "isCIDR(object.s)", {"s": S}),
    ("url", "url(object.s).getHost()", {"s": "https://h/" + "a" * BIG}),
    ("isURL escapes", "isURL(object.s)", {"s": "http://h/" + "a%20" * (BIG // 4)}),
    ("getQuery", "size(url(object.s).getQuery())", {"s": "http://h/?" + "a=1&" * (BIG // 4)}),
    ("list ==", "object.l == object.m", {"l": L, "m": [*L[:-1], 0]}),
    ("nested list ==", "object.l == object.m", {"l": NESTED, "m": [*NESTED[:-1], [0]]}),
    ("map ==", "object.a == object.b", {"a": {str(i): i for i in range(800)},
                                        "b": {str(i): i for i in range(800)}}),
    ("list +", "(object.l + object.l).size()", {"l": L}),
    ("in list", "-1 in object.l", {"l": L}),
    ("in map", "'x' in object.a", {"a": {str(i): i for i in range(800)}}),
    ("index", "object.l[1500]", {"l": L}),
    ("size(list)", "size(object.l)", {"l": L}),
    ("isSorted", "object.l.isSorted()", {"l": L}),
    ("sum", "object.l.sum()", {"l": L}),
    ("min", "object.l.min()", {"l": L}),
    ("max strings", "object.l.max()", {"l": LS}),
    ("list indexOf", "object.l.indexOf(-1)", {"l": L}),
    ("slice", "object.l.slice(1, 1500).size()", {"l": L}),
    ("flatten", "object.l.flatten().size()", {"l": NESTED}),
    ("flatten depth", "object.l.flatten(3).size()", {"l": NESTED}),
    ("distinct", "object.l.distinct().size()", {"l": L[:300]}),
    ("sort", "object.l.sort().size()", {"l": L[::-1]}),
    ("reverse", "object.l.reverse().size()", {"l": L}),
    ("sortBy", "object.l.sortBy(x, -x).size()", {"l": L}),
    ("lists.range", "lists.range(1600).size()", {}),
    ("sets.contains", "sets.contains(object.l, object.m)", {"l": L[:200], "m": L[:200]}),
    ("sets.intersects", "sets.intersects(object.l, object.m)", {"l": L[:200], "m": [-1] * 200}),
    ("sets.equivalent", "sets.equivalent(object.l, object.m)", {"l": L[:200], "m": L[:200]}),
    ("all", "object.l.all(x, x >= 0)", {"l": L}),
    ("exists", "object.l.exists(x, x < 0)", {"l": L}),
    ("exists_one", "object.l.exists_one(x, x < 0)", {"l": L}),
    ("map", "object.l.map(x, x * 2).size()", {"l": L}),
    ("filter", "object.l.filter(x, x % 2 == 0).size()", {"l": L}),
    ("transformMap", "object.l.transformMap(i, v, v).size()", {"l": L}),
    ("nested all", "object.l.all(x, object.l.all(y, x + y >= 0))", {"l": L[:300]}),
    ("string of map", "string(object.a.size())", {"a": {str(i): i for i in range(800)}}),
    ("optional select", "object.?a.?b.orValue(1)", {"a": {"b": 2}}),
    ("dyn", "dyn(object.l).size()", {"l": L}),
    ("type", "type(object.l) == list", {"l": L}),
)


@dataclass
class Row:
    source: str
    name: str
    expression: str
    cost: int
    ns: float  # per evaluation, fixed cost subtracted

    @property
    def per_unit(self) -> float:
        return self.ns / max(self.cost, 1)


def _evaluate(prog: Any, activation: dict[str, Any]) -> int:
    try:
        return int(prog.evaluate(activation, SHARING_AFFINITY_CEL_MAX_COST)[1])
    except CELCostExceeded as e:
        return int(e.cost)
    except CELEvalError as e:
        return int(e.cost)


def _time(prog: Any, activation: dict[str, Any], min_seconds: float) -> float:
    """CPU seconds of one evaluation: repeated until ``min_seconds`` have passed."""
    n, total = 0, 0.0
    while total < min_seconds:
        t0 = time.process_time()
        _evaluate(prog, activation)
        total += time.process_time() - t0
        n += 1
    return total / n


def measure(cases: list[tuple[str, str, str, Any]], min_seconds: float) -> list[Row]:
    base_prog = EXTRACTOR_ENV.compile("true")
    fixed = min(_time(base_prog, {"object": {}}, min_seconds) for _ in range(3))
    rows = []
    for source, name, expression, obj in cases:
        try:
            prog = EXTRACTOR_ENV.compile(expression)
        except CELCompileError:
            continue
        activation = {"object": obj}
        cost = _evaluate(prog, activation)
        seconds = _time(prog, activation, min_seconds)
        rows.append(Row(source, name, expression, cost, max(0.0, seconds - fixed) * 1e9))
    return rows


def cases(quick: bool) -> list[tuple[str, str, str, Any]]:
    out = [("probe", name, expr, obj) for name, expr, obj in PROBES]
    out += [("corpus", c.expr[:40], c.expr, c.obj) for c in CORPUS]
    generated = generate(SEED, 400 if quick else 5000, 0)
    out += [("generated", c.family, c.expression, c.data) for c in generated]
    return out


def report(rows: list[Row], top: int) -> dict[str, Any]:
    # Cases charged almost nothing are dominated by the call itself (~1 us): the ratio
    # is meaningful where the work is, so the median is over cases that cost >= 10.
    weighed = [r for r in rows if r.cost >= 10]
    median = statistics.median(r.per_unit for r in weighed) if weighed else 0.0
    worst = sorted(rows, key=lambda r: r.per_unit, reverse=True)[:top]
    return {
        "cases": len(rows),
        "medianNsPerUnit": round(median, 1),
        "worst": [{"source": r.source, "name": r.name, "expression": r.expression[:100],
                   "cost": r.cost, "usPerEvaluation": round(r.ns / 1000, 1),
                   "nsPerUnit": round(r.per_unit, 1),
                   "ratioToMedian": round(r.per_unit / median, 1) if median else None}
                  for r in worst],
        "over10x": sum(1 for r in rows if median and r.per_unit > 10 * median),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="400 generated cases, shorter timing")
    ap.add_argument("--json", help="write the report here too")
    ap.add_argument("--top", type=int, default=25, help="worst cases to list (default 25)")
    args = ap.parse_args()
    rows = measure(cases(args.quick), 0.002 if args.quick else 0.005)
    out = report(rows, args.top)
    print(f"{out['cases']} cases; median {out['medianNsPerUnit']} ns/unit; "
          f"{out['over10x']} above 10x the median")
    print(f"{'ratio':>7} {'ns/unit':>9} {'us/eval':>9} {'cost':>8}  source     case")
    for w in out["worst"]:
        print(f"{w['ratioToMedian']:>7} {w['nsPerUnit']:>9} {w['usPerEvaluation']:>9} "
              f"{w['cost']:>8}  {w['source']:<10} {w['name']}: {w['expression']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
