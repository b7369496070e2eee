"""Telemetry events the planner emits; sinks (Prometheus, JSON lines) consume them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    #: launch_failure | interruption | event_dropped | step_changed | reacquired | fallback_usage |
    #: drain_requested | removed | deferred | resumed | action_failed (and the runner's lease events)
    kind: str
    pool: str
    at: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "pool": self.pool, "at": self.at, **self.data}
