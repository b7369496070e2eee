"""Telemetry events the planner emits; sinks (Prometheus, JSON lines) consume them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    kind: str  # launch_failure | interruption | step_changed | reacquired | fallback_usage | drain_requested | removed | deferred | resumed | action_failed
    pool: str
    at: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "pool": self.pool, "at": self.at, **self.data}
