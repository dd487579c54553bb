"""Events and log records, kept in order for deterministic output.

A scenario run keeps every record (they are part of its output). A long-lived
scheduler must not grow with every pod it ever scheduled, so a recorder can be
given a ``limit``: it then keeps only the latest records (at least ``limit``, at
most twice as many) and counts what it let go in ``dropped``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("dra_affinity.scheduler")


@dataclass(frozen=True, slots=True)
class Event:
    object: str  # "Pod default/pod-a"
    type: str  # Normal | Warning
    reason: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"object": self.object, "type": self.type, "reason": self.reason,
                "message": self.message}


@dataclass
class Recorder:
    """Events and warnings in order; all of them, or the latest when ``limit`` is set."""

    events: list[Event] = field(default_factory=list)
    logs: list[dict[str, str]] = field(default_factory=list)
    limit: int | None = None
    # Records let go because of ``limit`` (events and logs together).
    dropped: int = 0

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"recorder limit must be at least 1, got {self.limit}")

    def event(self, obj: str, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(obj, type_, reason, message))
        if self.limit is not None and len(self.events) >= 2 * self.limit:
            self._trim(self.events)

    def warn(self, message: str, **kv: str) -> None:
        """A scheduler log warning (the KEP asks for one on inconsistent restarts)."""
        log.warning(message)
        self.logs.append({"level": "warning", "message": message, **kv})
        if self.limit is not None and len(self.logs) >= 2 * self.limit:
            self._trim(self.logs)

    def _trim(self, records: list[Any]) -> None:
        """Drop the oldest records down to ``limit`` (in blocks: amortised O(1) per record)."""
        assert self.limit is not None
        extra = len(records) - self.limit
        del records[:extra]
        self.dropped += extra
