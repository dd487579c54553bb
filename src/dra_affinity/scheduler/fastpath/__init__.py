"""Fast paths: indexes and caches that skip work without changing any decision.

Every fast path is on by default, and every entry point (``scheduler``,
``simulate``, ``bench``, the tools) runs that one configuration. The switches of
:class:`FastPaths` exist for the tests: with every switch off the scheduler runs
the reference path (the full first-fit scan, an extraction per cycle), and
``tests/scheduler/fastpath/test_agreement.py`` runs every combination against it
on random workloads and requires identical choices. Why on rather than a faster
reference: docs/decisions.md, "One scheduler configuration".

* :mod:`.freeindex`: nodes by free capacity and lock value, for one-device requests;
* :mod:`.nodeindex`: per claim-content cursors and cached "device not viable" verdicts;
* :mod:`.contentkey`: extraction outcomes shared across cycles by config content;
* :mod:`.verdicts`: a node's Filter verdict for a pod signature, kept while the node's
  devices and pods are unchanged (the scan node scores need).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FastPaths:
    """Which fast paths are on: all of them unless a test asks otherwise."""

    free_index: bool = True
    node_index: bool = True
    extraction_cache: bool = True
    verdict_cache: bool = True

    @classmethod
    def all(cls) -> FastPaths:
        return cls(True, True, True, True)

    @classmethod
    def none(cls) -> FastPaths:
        return cls(False, False, False, False)

    @property
    def indexed(self) -> bool:
        return self.free_index or self.node_index
