"""The cyclic garbage collector, tuned as a long-running scheduler process wants it.

Reference counting frees almost everything a scheduler allocates: its own structures
are acyclic. The cyclic collector still runs on allocation counts, and with CPython's
defaults (a young collection every 700 net container allocations, a full one every
100 young ones, once the heap has grown by a quarter) it spends its time walking a
heap of 10^5 to 10^6 long-lived objects (the cluster's pods, claims and slices, the
scheduler's cache) that it will never free. What that costs on the throughput bench,
and who applies this: ``docs/decisions.md``, "Garbage collector".

So, once what is built at start-up is built: freeze it (``gc.freeze``: the collector
never walks it again), collect the young generation every :data:`YOUNG_THRESHOLD`
allocations instead of 700, and defer full collections (:data:`FULL_EVERY` middle
collections). Cycles are still found; they are found later.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Net container allocations between young collections (CPython's default is 700).
YOUNG_THRESHOLD = 20_000
#: Middle collections between full ones (the default 10 would mean one per 10 middle ones).
FULL_EVERY = 1_000_000


@contextmanager
def tuned_gc() -> Iterator[None]:
    """Freeze what exists now and apply the long-running thresholds; on exit the
    previous thresholds are back. What was frozen stays frozen (``gc.unfreeze()``
    would hand it to the next full collection, which walks all of it)."""
    gc.collect()
    gc.freeze()
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, before[1], FULL_EVERY)
    try:
        yield
    finally:
        gc.set_threshold(*before)
