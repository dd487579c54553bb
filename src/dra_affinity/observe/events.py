"""Events and log records, kept in order for deterministic output."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("dra_affinity.scheduler")


@dataclass(frozen=True)
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
    events: list[Event] = field(default_factory=list)
    logs: list[dict[str, str]] = field(default_factory=list)

    def event(self, obj: str, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(obj, type_, reason, message))

    def warn(self, message: str, **kv: str) -> None:
        """A scheduler log warning (the KEP asks for one on inconsistent restarts)."""
        log.warning(message)
        self.logs.append({"level": "warning", "message": message, **kv})
