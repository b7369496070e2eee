"""Telemetry records (JSON lines) and the estimates the cost model takes from them.

The node agent and the fallback controller append one JSON object per line; the
cost model reads them back to measure what a profile otherwise has to guess.
Schema version 1 (camelCase keys, unknown keys rejected so a typo is loud):

    {"v": 1, "ts": 1764500000.0, "event": "interrupted", "pool": "train-aws",
     "node": "i-0abc", "capacity": "spot", "zone": "us-east-1a", "sku": "g5.12xlarge"}

``ts`` is epoch seconds (float) or an ISO-8601 string with a timezone. Events:

* ``node_started`` / ``node_stopped``: a node's billed lifetime (``capacity`` spot or on_demand);
* ``notice``: a preemption notice or early signal arrived (``noticeKind``: ``rebalance``,
  ``instance-action``, ``preempted``, ``scheduled-event``);
* ``interrupted``: the provider took the node;
* ``replacement_requested`` / ``replacement_ready``: the controller asked for capacity /
  the replacement is ready for work (``step``: the ladder rung that supplied it);
* ``launch_failed``: a launch attempt failed (``reason``: ``quota``, ``capacity`` or ``other``),
  counted apart from reacquisition latency so quota problems never look like scarce spot;
* ``checkpoint_committed``: a generation was committed (``seconds``: write time, ``bytes``).

The fallback controller's own JSON lines (``spotgpu.controller.events.Event``:
``{"kind", "pool", "at", ...}``) are read too: ``interruption`` becomes
``interrupted``, ``reacquired`` (with ``latencySeconds``) becomes
``replacement_ready`` carrying its latency in ``seconds``, ``launch_failure``
becomes ``launch_failed``; other controller kinds are skipped.

Estimates: interruptions per spot node-hour; reacquisition latency from each
``interrupted`` to the next ``replacement_ready`` of the same pool; notice lead
time (``interrupted.ts - notice.ts`` per node); launch failures by reason.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator

from spotgpu.models.base import SpotModel

SCHEMA_VERSION = 1

EventKind = Literal[
    "node_started",
    "node_stopped",
    "notice",
    "interrupted",
    "replacement_requested",
    "replacement_ready",
    "launch_failed",
    "checkpoint_committed",
]


class TelemetryRecord(SpotModel):
    v: Literal[1] = 1
    ts: float = Field(description="Epoch seconds (ISO-8601 strings are converted).")
    event: EventKind
    pool: str = Field(min_length=1)
    node: str | None = None
    capacity: Literal["spot", "on_demand"] | None = None
    provider: Literal["aws", "gcp", "azure"] | None = None
    zone: str | None = None
    sku: str | None = None
    step: str | None = None
    notice_kind: Literal["rebalance", "instance-action", "preempted", "scheduled-event"] | None = None
    reason: Literal["quota", "capacity", "price", "other"] | None = None
    seconds: float | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=0)

    @field_validator("ts", mode="before")
    @classmethod
    def _epoch(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"ts {value!r} is not ISO-8601; use epoch seconds or 2026-11-30T13:00:00Z") from None
            if parsed.tzinfo is None:
                raise ValueError(f"ts {value!r} has no timezone; append Z for UTC")
            return parsed.timestamp()
        return value

    def to_line(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, exclude_none=True), sort_keys=True)


_CONTROLLER_KINDS = {
    "interruption": "interrupted",
    "reacquired": "replacement_ready",
    "launch_failure": "launch_failed",
}


def from_controller_event(obj: dict[str, object]) -> dict[str, object] | None:
    """Map a controller Event JSON line onto schema v1; ``None`` for kinds the cost model ignores."""
    event = _CONTROLLER_KINDS.get(str(obj.get("kind")))
    if event is None:
        return None
    out: dict[str, object] = {"v": 1, "ts": obj.get("at"), "event": event, "pool": obj.get("pool")}
    if event == "replacement_ready" and obj.get("latencySeconds") is not None:
        out["seconds"] = obj["latencySeconds"]
    if event == "launch_failed":
        reason = obj.get("reason")
        out["reason"] = reason if reason in ("quota", "capacity", "price") else "other"
    return out


def parse_lines(lines: Iterable[str], source: str = "telemetry") -> list[TelemetryRecord]:
    """Validate JSON lines; an error names the line, the field and the value."""
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if isinstance(obj, dict) and "kind" in obj and "event" not in obj:
                obj = from_controller_event(obj)
                if obj is None:
                    continue
            out.append(TelemetryRecord.model_validate(obj))
        except json.JSONDecodeError as err:
            raise ValueError(f"{source}:{number}: not JSON ({err.msg}); write one JSON object per line") from None
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(record)"
            raise ValueError(
                f"{source}:{number}: {loc}: {first['msg']} (value: {first.get('input')!r}); "
                "see the schema in spotgpu.economics.telemetry"
            ) from None
    return sorted(out, key=lambda r: r.ts)


def read_jsonl(path: str | Path) -> list[TelemetryRecord]:
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        return parse_lines(fh, str(p))


@dataclass(frozen=True)
class TelemetryEstimate:
    spot_node_hours: float
    interruptions: int
    reacquisition_seconds: list[float]
    notice_lead_seconds: list[float]
    launch_failures: dict[str, int]
    checkpoint_write_seconds: list[float] = field(default_factory=list)

    @property
    def interruptions_per_hour(self) -> float | None:
        return self.interruptions / self.spot_node_hours if self.spot_node_hours > 0 else None

    @property
    def expected_reacquisition_seconds(self) -> float | None:
        r = self.reacquisition_seconds
        return sum(r) / len(r) if r else None

    def profile_updates(self) -> dict[str, float]:
        """WorkloadProfile fields (camelCase) these records measure; only those with data."""
        out: dict[str, float] = {}
        if self.interruptions_per_hour is not None:
            out["interruptionsPerHour"] = round(self.interruptions_per_hour, 6)
        if self.expected_reacquisition_seconds is not None:
            out["expectedReacquisitionSeconds"] = round(self.expected_reacquisition_seconds, 1)
        if self.checkpoint_write_seconds:
            w = sorted(self.checkpoint_write_seconds)
            out["checkpointWriteSeconds"] = w[min(len(w) - 1, int(0.9 * len(w)))]  # p90: plan for slow writes
        return out


def estimate_from_telemetry(records: Iterable[TelemetryRecord], now: float | None = None) -> TelemetryEstimate:
    """Measure exposure and latency from agent/controller records (sorted by time)."""
    recs = sorted(records, key=lambda r: r.ts)
    end = now if now is not None else (recs[-1].ts if recs else 0.0)
    started: dict[str, float] = {}
    spot_seconds = 0.0
    interruptions = 0
    pending_loss: dict[str, list[float]] = defaultdict(list)
    latencies: list[float] = []
    notices: dict[str, float] = {}
    leads: list[float] = []
    failures: dict[str, int] = defaultdict(int)
    writes: list[float] = []
    for r in recs:
        key = f"{r.pool}/{r.node}"
        if r.event == "node_started" and r.capacity == "spot" and r.node:
            started[key] = r.ts
        elif r.event in ("node_stopped", "interrupted") and key in started:
            spot_seconds += r.ts - started.pop(key)
        if r.event == "interrupted":
            interruptions += 1
            pending_loss[r.pool].append(r.ts)
            if key in notices:
                leads.append(r.ts - notices.pop(key))
        elif r.event == "notice" and r.node:
            notices.setdefault(key, r.ts)
        elif r.event == "replacement_ready" and r.seconds is not None:
            latencies.append(r.seconds)  # the controller measured it (from the loss it saw)
            if pending_loss[r.pool]:
                pending_loss[r.pool].pop(0)
        elif r.event == "replacement_ready" and pending_loss[r.pool]:
            latencies.append(r.ts - pending_loss[r.pool].pop(0))
        elif r.event == "launch_failed":
            failures[r.reason or "other"] += 1
        elif r.event == "checkpoint_committed" and r.seconds is not None:
            writes.append(r.seconds)
    for t0 in started.values():  # still running: exposure so far
        spot_seconds += max(0.0, end - t0)
    return TelemetryEstimate(
        spot_node_hours=spot_seconds / 3600.0,
        interruptions=interruptions,
        reacquisition_seconds=latencies,
        notice_lead_seconds=leads,
        launch_failures=dict(failures),
        checkpoint_write_seconds=writes,
    )
