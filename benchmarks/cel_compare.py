"""Compare Python CEL implementations on this machine.

Measures, for each implementation that is importable (others are skipped):

* fidelity: agreement with cel-go's results on ``cel_corpus.CORPUS``;
* time per evaluation of the KEP's subnet extractor (compiled once);
* compile time of that extractor (cold: no cache);
* whether the library tracks evaluation cost (can enforce a budget).

Implementations: this project's engine (``dra_affinity.cel``), cel-python
(``celpy``), common-expression-language (``cel``, Rust bindings) and
cel-expr-python (``cel_expr_python``, cel-cpp bindings). Only the first two
are project dependencies; install the others to include them::

    pip install common-expression-language cel-expr-python
    python benchmarks/cel_compare.py --json out/cel_compare.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cel_corpus import CORPUS, ERROR, NIC, SUBNET_EXTRACTOR

Evaluator = Callable[[object], object]
Compiler = Callable[[str], Evaluator]


class Failed(Exception):
    """The implementation reported an error (compile or evaluation)."""


@dataclass(frozen=True)
class Impl:
    name: str
    package: str
    compile: Compiler
    cost_tracking: str


def _ours() -> Impl:
    from dra_affinity.cel import Environment

    def compile_(expr: str) -> Evaluator:
        env = Environment("compare", {"object": "dyn"})  # fresh: no compile cache
        try:
            prog = env.compile(expr)
        except Exception as e:
            raise Failed(str(e)) from e

        def run(obj: object) -> object:
            try:
                return prog.evaluate({"object": obj}, 10**9)[0]
            except Exception as e:
                raise Failed(str(e)) from e

        return run

    return Impl("dra_affinity.cel", "this project", compile_, "yes (cel-go cost model, budget enforced)")


def _celpy() -> Impl:
    import logging

    import celpy

    logging.getLogger("celpy").setLevel(logging.CRITICAL)
    logging.getLogger("Evaluator").setLevel(logging.CRITICAL)

    def compile_(expr: str) -> Evaluator:
        env = celpy.Environment()
        try:
            prog = env.program(env.compile(expr))
        except Exception as e:
            raise Failed(str(e)) from e

        def run(obj: object) -> object:
            try:
                result = prog.evaluate({"object": celpy.json_to_cel(obj)})
            except Exception as e:
                raise Failed(str(e)) from e
            if isinstance(result, (celpy.CELEvalError, Exception)):
                raise Failed(str(result))
            return result

        return run

    return Impl("cel-python", f"celpy {_version('cel-python')}", compile_, "no")


def _rust_cel() -> Impl:
    import cel

    if not hasattr(cel, "compile"):  # some other "cel" (e.g. a namespace directory) on sys.path
        raise ImportError("common-expression-language is not installed")

    def compile_(expr: str) -> Evaluator:
        try:
            prog = cel.compile(expr)
        except Exception as e:
            raise Failed(str(e)) from e

        def run(obj: object) -> object:
            try:
                return prog.execute({"object": obj})
            except Exception as e:
                raise Failed(str(e)) from e

        return run

    return Impl("common-expression-language", f"cel {_version('common-expression-language')}", compile_, "no")


def _cel_cpp() -> Impl:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_strings

    env = cel.NewEnv(variables={"object": cel.Type.DYN}, extensions=[ext_strings.ExtStrings()])

    def compile_(expr: str) -> Evaluator:
        try:
            compiled = env.compile(expr)
        except Exception as e:
            raise Failed(str(e)) from e

        def run(obj: object) -> object:
            try:
                value = compiled.eval(data={"object": obj})
                plain = value.plain_value()
            except Exception as e:
                raise Failed(str(e)) from e
            if value.type() == cel.Type.ERROR:
                raise Failed(str(plain))
            return plain

        return run

    return Impl("cel-expr-python", f"cel_expr_python {_version('cel-expr-python')}", compile_, "no (not exposed)")


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def available() -> list[Impl]:
    impls = []
    for factory in (_ours, _celpy, _rust_cel, _cel_cpp):
        try:
            impls.append(factory())
        except ImportError:
            continue
    return impls


# -- comparing results ------------------------------------------------------------


def normalize(v: Any) -> Any:
    """Plain Python values with CEL's kinds kept apart (bool is not int)."""
    name = type(v).__name__
    if isinstance(v, bool) or name == "BoolType":
        return ("bool", bool(v))
    if name in ("UintType", "UInt"):
        return ("uint", int(v))
    if isinstance(v, int):
        return ("int", int(v))
    if isinstance(v, float):
        return ("double", float(v))
    if isinstance(v, str):
        return ("string", str(v))
    if isinstance(v, bytes):
        return ("bytes", bytes(v))
    if v is None or name == "NullType":
        return ("null", None)
    if isinstance(v, Mapping):
        return ("map", sorted((repr(normalize(k)), normalize(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return ("list", [normalize(x) for x in v])
    return ("other", repr(v))


def outcome(impl: Impl, expr: str, obj: object) -> object:
    try:
        return impl.compile(expr)(obj)
    except Failed:
        return ERROR
    except Exception:  # a crash of the library counts as an error result
        return ERROR


def agrees(got: object, expected: object) -> bool:
    if expected is ERROR or got is ERROR:
        return got is expected
    a, b = normalize(got), normalize(expected)
    if a[0] == b[0] == "double":
        return math.isclose(a[1], b[1], rel_tol=1e-12)
    return bool(a == b)


def fidelity(impl: Impl) -> tuple[int, list[str]]:
    misses = []
    for case in CORPUS:
        got = outcome(impl, case.expr, case.obj)
        if not agrees(got, case.expect):
            misses.append(f"{case.expr}  -> {got!r} (cel-go: {case.expect!r})")
    return len(CORPUS) - len(misses), misses


def _timeit(fn: Callable[[], object], min_time: float = 0.3) -> float:
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / n
        n *= 2 if elapsed < min_time / 4 else 4


def measure(impl: Impl) -> dict[str, object]:
    run = impl.compile(SUBNET_EXTRACTOR)
    assert normalize(run(NIC)) == ("string", "subnet-A"), impl.name
    eval_s = _timeit(lambda: run(NIC))
    compile_s = _timeit(lambda: impl.compile(SUBNET_EXTRACTOR), min_time=0.5)
    ok, misses = fidelity(impl)
    return {
        "implementation": impl.name,
        "package": impl.package,
        "fidelity": f"{ok}/{len(CORPUS)}",
        "fidelity_ratio": round(ok / len(CORPUS), 4),
        "eval_us": round(eval_s * 1e6, 2),
        "compile_us": round(compile_s * 1e6, 1),
        "cost_tracking": impl.cost_tracking,
        "disagreements": misses,
    }


def cutoff() -> dict[str, object]:
    """Our engine: time until the pathological triple comprehension is cut off at the KEP budget."""
    from dra_affinity.cel import EXTRACTOR_ENV, SHARING_AFFINITY_CEL_MAX_COST, CELCostExceeded

    prog = EXTRACTOR_ENV.compile("object.l.all(a, object.l.all(b, object.l.all(c, a + b + c >= 0)))")
    act = {"object": {"l": list(range(300))}}
    times, costs = [], []
    for _ in range(3):
        start = time.perf_counter()
        try:
            prog.evaluate(act, SHARING_AFFINITY_CEL_MAX_COST)
        except CELCostExceeded as e:
            costs.append(e.cost)
        times.append(time.perf_counter() - start)
    return {"budget": SHARING_AFFINITY_CEL_MAX_COST, "cost_at_cutoff": costs, "seconds": [round(t, 4) for t in times]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path("out/cel_compare.json"), help="where to write the results")
    parser.add_argument("--verbose", action="store_true", help="list every disagreement")
    args = parser.parse_args(argv)

    rows = [measure(impl) for impl in available()]
    header = f"{'implementation':28} {'fidelity':>9} {'eval µs':>9} {'compile µs':>11}  cost tracking"
    print(f"corpus: {len(CORPUS)} expressions; extractor: {SUBNET_EXTRACTOR}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['implementation']:28} {r['fidelity']:>9} {r['eval_us']:>9} {r['compile_us']:>11}  {r['cost_tracking']}")
    cut = cutoff()
    print(f"\ndra_affinity.cel: pathological triple comprehension cut off at cost {cut['cost_at_cutoff']} "
          f"in {cut['seconds']} s (budget {cut['budget']})")
    if args.verbose:
        for r in rows:
            for miss in r["disagreements"]:  # type: ignore[attr-defined]
                print(f"  {r['implementation']}: {miss}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"python": sys.version.split()[0], "rows": rows, "cutoff": cut}, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
