"""Fixtures of the differential oracle suites: one oracle process per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oracle import Oracle, oracle_binary


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    """The running upstream oracle (built on demand; skipped without Go unless CI is set)."""
    proc = Oracle(oracle_binary())
    try:
        yield proc
    finally:
        proc.close()
