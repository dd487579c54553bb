"""What one attribute read of an API object costs: an API model (plain reads on CPython
3.11, see ``dra_affinity.api._getattr``), the same fields on a pydantic model that keeps
pydantic's ``__getattr__`` fallback, and a plain Python object.

    python benchmarks/attr_reads.py [--reads 4000000]

Prints nanoseconds per read of each (best of five timings; warm caches, so this is the
interpreter's path, not memory).
"""

from __future__ import annotations

import argparse
import json
import timeit
from typing import Any

from pydantic import BaseModel

from dra_affinity.api._getattr import has_plain_reads, plain_reads_possible
from dra_affinity.api.meta import ObjectMeta


class _WithFallback(BaseModel):
    """ObjectMeta's first field on a pydantic model of its own (the fallback kept)."""

    name: str = ""


class _Plain:
    def __init__(self) -> None:
        self.name = "n"


def _per_read(obj: Any, reads: int) -> float:
    # Ten reads per loop turn, so the loop's own cost is a small part.
    loop = timeit.Timer("for _ in r:\n    o.name; o.name; o.name; o.name; o.name; "
                        "o.name; o.name; o.name; o.name; o.name",
                        globals={"o": obj, "r": range(reads // 10)})
    return min(loop.repeat(5, 1)) / reads * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=4_000_000)
    args = ap.parse_args()
    api = ObjectMeta(name="n")
    print(json.dumps({
        "plainReadsPossible": plain_reads_possible(),
        "apiModelHasPlainReads": has_plain_reads(ObjectMeta),
        "nsPerRead": {
            "apiModel": round(_per_read(api, args.reads), 1),
            "pydanticModelWithFallback": round(_per_read(_WithFallback(name="n"), args.reads), 1),
            "plainObject": round(_per_read(_Plain(), args.reads), 1),
        },
    }, indent=2))


if __name__ == "__main__":
    main()
