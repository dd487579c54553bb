"""Long fuzzing campaign over every CLI command (docs/fuzzing.md).

    PYTHONPATH=src python benchmarks/fuzz_cli.py --count 20000 --jobs 2

Each input is a bundled example mutated by one seed (byte-level or
structure-aware, ``tests/fuzz/mutators.py``), run in-process through three
command lines. Prints the number of inputs, command runs and crashes (exit
status outside 0/1/2, or a traceback), with the seeds to replay; exit 1 if
anything crashed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz.harness import run
from fuzz.mutators import commands, mutate


def _batch(seeds: range) -> tuple[int, int, list[dict[str, object]]]:
    runs, crashes = 0, []
    with tempfile.TemporaryDirectory() as d:
        for seed in seeds:
            name, data = mutate(seed)
            f = Path(d) / name
            f.write_bytes(data)
            for args in commands(str(f), seed):
                runs += 1
                crash = run(args)
                if crash is not None:
                    crashes.append({"seed": seed, "args": list(crash.args)[:1],
                                    "detail": crash.detail.splitlines()[-1:]})
    return len(seeds), runs, crashes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=2000, help="fuzzed inputs")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = ap.parse_args()
    step = 100
    batches = [range(s, min(s + step, args.start + args.count))
               for s in range(args.start, args.start + args.count, step)]
    inputs = runs = 0
    crashes: list[dict[str, object]] = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for n, r, c in pool.map(_batch, batches):
            inputs, runs = inputs + n, runs + r
            crashes.extend(c)
    print(json.dumps({"inputs": inputs, "commandRuns": runs, "crashes": len(crashes),
                      "seeds": f"{args.start}..{args.start + args.count - 1}",
                      "seconds": round(time.perf_counter() - t0, 1),
                      "crashSamples": crashes[:20]}, indent=2))
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
