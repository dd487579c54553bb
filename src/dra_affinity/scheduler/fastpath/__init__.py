"""Fast paths: indexes and caches that skip work without changing any decision.

Each is behind its own switch in :class:`FastPaths`; with every switch off the
scheduler runs the reference path (the full first-fit scan, an extraction per
cycle). ``tests/scheduler/fastpath/test_agreement.py`` runs every combination
against the reference on random workloads and requires identical choices.

* :mod:`.freeindex`: nodes by free capacity and lock value, for one-device requests;
* :mod:`.nodeindex`: per claim-content cursors and cached "device not viable" verdicts;
* :mod:`.contentkey`: extraction outcomes shared across cycles by config content.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FastPaths:
    """Which fast paths are on. The default keeps only the extraction cache."""

    free_index: bool = False
    node_index: bool = False
    extraction_cache: bool = True

    @classmethod
    def all(cls) -> FastPaths:
        return cls(True, True, True)

    @classmethod
    def none(cls) -> FastPaths:
        return cls(False, False, False)

    @property
    def indexed(self) -> bool:
        return self.free_index or self.node_index
