"""One telemetry schema, and the reader that brings every log spotgpu writes onto it.

The cost model is fed from what the fleet measured. Three producers write JSON lines, each in
the shape :mod:`spotgpu.contract` gives it, and the reader parses each through that contract:

* the node agent's events log (:mod:`spotgpu.contract.agent_records`): ``{"v", "ts", "record", ...}``;
  the VM's pool, id, type, zone and capacity come from its ``started`` and ``identity``
  records, so the reader keeps a small context per stream (file, or log stream of an export);
* the fallback controller's events (:mod:`spotgpu.contract.controller_events`): ``{"v", "kind", "pool", "at", ...}``;
* schema v1 records (below), for anything else that wants to feed the fit.

Every line says its schema version (``v``, :data:`spotgpu.contract.telemetry.SCHEMA_VERSION`); one of
another version is refused with the fix.

A ``spot_price`` record is the one fact about a market rather than a pool: the spot USD per
VM-hour of one SKU in one zone (or region), from a price export (``telemetry_files``) or any
emitter; it may leave out the pool, since a price is the same for every pool launching that SKU.

Each becomes :class:`TelemetryRecord` (schema version 1, documented once in
docs/economics.md §3). Records of kinds the fit does not use are counted, never silently
dropped: :class:`ReadStats` says how many lines of which kind were skipped.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from itertools import repeat
from typing import Any, BinaryIO, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from spotgpu.catalogue import Cloud, list_price
from spotgpu.contract.agent_records import (
    TS_KEY,
    AgentRecordKind,
    FinalCheckpoint,
    Identity,
    Notice,
    Ready,
    Started,
    Throughput,
    read_agent_line,
)
from spotgpu.contract.controller_events import Event, Interruption, LaunchFailure, Reacquired
from spotgpu.contract.interruptions import LOSS_KINDS, LOSS_NOTICES, TELEMETRY_NOTICE_KINDS, InterruptionKind
from spotgpu.contract.telemetry import SCHEMA_VERSION, VERSION_KEY, FailureReason, check_version
from spotgpu.models.base import SpotModel


class RecordEvent(StrEnum):
    """What a record says happened (its ``event``): the schema's own vocabulary, one per fact the fit reads."""

    NODE_STARTED = "node_started"
    NODE_STOPPED = "node_stopped"
    NODE_READY = "node_ready"
    NOTICE = "notice"
    INTERRUPTED = "interrupted"
    REPLACEMENT_REQUESTED = "replacement_requested"
    REPLACEMENT_READY = "replacement_ready"
    LAUNCH_FAILED = "launch_failed"
    CHECKPOINT_COMMITTED = "checkpoint_committed"
    CHECKPOINT_LOADED = "checkpoint_loaded"
    THROUGHPUT = "throughput"
    SPOT_PRICE = "spot_price"


#: A spot price above this many times the SKU's on-demand list price (catalogue) is a unit mistake:
#: cents typed as dollars, or a monthly figure (the ladder's ceilings are held to the same bound).
MAX_SPOT_OVER_LIST = 10.0
#: Without a list price of the SKU, a spot price above this (USD per VM-hour) is a unit mistake: the
#: dearest GPU VMs list near $100/h on demand.
MAX_SPOT_USD_PER_HOUR = 200.0


class TelemetryRecord(SpotModel):
    """Schema v1: one measured fact about one pool, or one SKU's spot price (camelCase keys, unknown keys rejected)."""

    v: int = Field(default=SCHEMA_VERSION, description="The schema version (spotgpu.contract.telemetry).")
    ts: float = Field(description="Epoch seconds (ISO-8601 strings with a timezone are converted).")
    event: RecordEvent
    pool: str | None = Field(default=None, min_length=1,
                             description="The pool; only a spot_price may leave it out (its price holds for any pool).")  # fmt: skip
    node: str | None = None
    capacity: Literal["spot", "on_demand"] | None = None
    provider: Cloud | None = None
    zone: str | None = None
    sku: str | None = None
    step: str | None = None
    notice_kind: InterruptionKind | None = None
    reason: FailureReason | None = None
    seconds: float | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=0)
    gpu_model: str | None = Field(default=None, min_length=1, max_length=64)
    steps: int | None = Field(default=None, ge=1)
    usd_per_hour: float | None = Field(default=None, gt=0, description="A spot_price's USD per VM-hour (Linux).")

    @field_validator("v")
    @classmethod
    def _read_version(cls, v: int) -> int:
        check_version({VERSION_KEY: v})
        return v

    @field_validator("ts", mode="before")
    @classmethod
    def _epoch(cls, value: object) -> object:
        return parse_ts(value)

    @field_validator("notice_kind")
    @classmethod
    def _a_notice(cls, kind: InterruptionKind | None) -> InterruptionKind | None:
        """A notice's kind is one the agent or a cloud names (``TELEMETRY_NOTICE_KINDS``), not a controller event."""
        if kind is not None and kind not in TELEMETRY_NOTICE_KINDS:
            known = ", ".join(sorted(TELEMETRY_NOTICE_KINDS))
            raise ValueError(f"{kind.value!r} is not a notice kind; use one of {known}")
        return kind

    @field_validator("seconds")
    @classmethod
    def _a_step_time(cls, value: float | None, info: ValidationInfo) -> float | None:
        """A ``throughput`` record is a step time: ``seconds`` per step, finite and above 0 (the fit divides by it)."""
        if info.data.get("event") == "throughput" and not (value is not None and value > 0 and math.isfinite(value)):
            raise ValueError("a throughput record needs its mean seconds per step, a finite number above 0")
        return value

    @field_validator("pool")
    @classmethod
    def _a_pool(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Every fact but a price is about one pool: without it the fit cannot say whose rate it is."""
        if value is None and info.data.get("event") != "spot_price":
            raise ValueError("Field required: every record but a spot_price names its pool")
        return value

    @field_validator("usd_per_hour")
    @classmethod
    def _a_price(cls, value: float | None, info: ValidationInfo) -> float | None:
        """A ``spot_price`` carries its SKU and a plausible USD per VM-hour; no other record carries a price."""
        if info.data.get("event") != "spot_price":
            if value is not None:
                raise ValueError("only a spot_price record carries usdPerHour")
            return value
        if value is None:
            raise ValueError("a spot_price record needs its usdPerHour: the spot USD per VM-hour, e.g. 1.93")
        sku = info.data.get("sku")
        if sku is None:
            raise ValueError("a spot_price record needs its sku (the instance type or VM size the price is for)")
        problem = implausible_spot_price(value, sku)
        if problem is not None:
            raise ValueError(f"{problem[0]}; fix: {problem[1]}")
        return value

    def to_line(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, exclude_none=True), sort_keys=True)


def implausible_spot_price(usd: float, sku: str) -> tuple[str, str] | None:
    """(why a spot price is not USD per VM-hour, the fix), or None: the same unit guard as the ladder's ceilings."""
    if not math.isfinite(usd):
        return f"{usd} is not a price", "write the spot USD per VM-hour as a finite number, e.g. 1.93"
    quote = list_price(sku)
    cents = f"e.g. {usd / 100:g} if it is in cents"
    if quote is not None and usd > MAX_SPOT_OVER_LIST * quote.usd_per_hour:
        return (f"{usd:g} USD per VM-hour is {usd / quote.usd_per_hour:.0f}x the on-demand list price "
                f"{quote.usd_per_hour:g}/h of {sku}, above the plausible {MAX_SPOT_OVER_LIST:g}x: cents or a monthly "
                f"price typed as USD per hour?", f"write the spot USD per VM-hour, {cents}")  # fmt: skip
    if quote is None and usd > MAX_SPOT_USD_PER_HOUR:
        return (f"{usd:g} USD per VM-hour is above the plausible {MAX_SPOT_USD_PER_HOUR:g} for any GPU VM (the "
                f"catalogue lists no price of {sku}): cents or a monthly price typed as USD per hour?",
                f"write the spot USD per VM-hour, {cents}")  # fmt: skip
    return None


def parse_ts(value: object) -> object:
    """Epoch seconds from a number or an ISO-8601 string with a timezone (other values pass to validation)."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"ts {value!r} is not ISO-8601; use epoch seconds or 2026-11-30T13:00:00Z") from None
        if parsed.tzinfo is None:
            raise ValueError(f"ts {value!r} has no timezone; append Z for UTC")
        return parsed.timestamp()
    return value


@dataclass
class ReadStats:
    """What the reader took and what it skipped (by source and kind), so nothing is lost unseen."""

    lines: int = 0
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    #: What a file said about itself that bears on the fit (a price page with more pages after it)
    notes: list[str] = field(default_factory=list)

    def skipped_summary(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in sorted(self.skipped.items())) or "none"


@dataclass
class StreamContext:
    """What an agent's earlier records said about its VM (agent lines carry no pool or id of their own)."""

    stream: str
    pool: str | None = None
    provider: str | None = None
    node: str | None = None
    zone: str | None = None
    sku: str | None = None
    capacity: str | None = None
    started_at: float | None = None
    announced: bool = False
    last_ts: float | None = None

    def where(self) -> dict[str, Any]:
        return {"pool": self.pool, "node": self.node or self.stream, "zone": self.zone, "sku": self.sku,
                "provider": self.provider}  # fmt: skip


_AGENT_CAPACITY = {"spot": "spot", "on-demand": "on_demand"}
#: The agent records the fit reads; the others are counted as skipped (found by their ``"record"`` value).
AGENT_READ = frozenset({AgentRecordKind.STARTED, AgentRecordKind.IDENTITY, AgentRecordKind.READY,
                        AgentRecordKind.NOTICE, AgentRecordKind.THROUGHPUT, AgentRecordKind.FINAL_CHECKPOINT})  # fmt: skip
AGENT_UNUSED = frozenset(kind.value for kind in AgentRecordKind if kind not in AGENT_READ)


def from_agent_record(obj: dict[str, Any], ctx: StreamContext) -> list[dict[str, Any]] | None:
    """Schema v1 dicts for one agent events-log line; ``None`` for a record the fit does not use."""
    record, ts = read_agent_line(obj), obj.get(TS_KEY)
    if isinstance(record, Started):  # a new agent process: a new VM lifetime begins (a log may hold several)
        ctx.node = ctx.zone = ctx.sku = ctx.capacity = None
        ctx.announced = False
        ctx.pool = record.pool or ctx.pool
        ctx.provider = record.provider or ctx.provider
        ctx.started_at = ts if isinstance(ts, int | float) else ctx.started_at
        return []
    if isinstance(record, Identity):
        ctx.pool = record.pool or ctx.pool
        ctx.provider = record.provider or ctx.provider
        ctx.node = record.instance_id or record.name or ctx.node
        ctx.zone = record.zone or None
        ctx.sku = record.instance_type or None
        ctx.capacity = _AGENT_CAPACITY.get(str(record.capacity))
        if ctx.announced:
            return []
        ctx.announced = True
        start = ctx.started_at if ctx.started_at is not None else ts
        return [{"ts": start, "event": "node_started", "capacity": ctx.capacity}]
    if ctx.pool is None:
        raise ValueError("record: an agent record before the agent's 'started' line names no pool; "
                         "keep each VM's events log whole (one file or log stream per VM)")  # fmt: skip
    match record:
        case Ready(stage="workload", boot_to_ready_seconds=seconds) if seconds is not None:
            return [{"ts": ts, "event": "node_ready", "seconds": seconds}]
        case Notice(kind=kind, lead_seconds=lead, deadline=end):
            out = [{"ts": ts, "event": "notice", "noticeKind": kind, "seconds": None if lead is None else max(0.0, lead)}]
            if kind in LOSS_NOTICES:
                out.append({"ts": end if end is not None else ts, "event": "interrupted", "capacity": ctx.capacity})
            return out
        case Throughput(step_seconds=seconds, steps=steps, gpu_model=model):
            return [{"ts": ts, "event": "throughput", "seconds": seconds, "steps": steps, "gpuModel": model}]
        case FinalCheckpoint(outcome="committed", seconds=seconds) if seconds is not None:
            return [{"ts": ts, "event": "checkpoint_committed", "seconds": seconds}]
    return None  # the agent's own readiness, an uncommitted final checkpoint, a kind the fit does not read


def from_controller_event(obj: dict[str, Any]) -> dict[str, Any] | None:
    """Map a controller event line onto schema v1; ``None`` for kinds the cost model ignores."""
    event = Event.from_json(obj)
    if event is None:
        return None
    out: dict[str, Any] = {VERSION_KEY: SCHEMA_VERSION, "ts": event.at, "pool": event.pool}
    match event.fields:
        case Interruption(type=kind, stale=stale, vm=vm):
            if kind not in LOSS_KINDS or stale:
                return None  # a rebalance hint, or an event from before this incarnation: no VM was lost
            return {**out, "event": "interrupted", **({"node": vm} if vm else {})}
        case Reacquired(latency_seconds=seconds, step=step):
            return {**out, "event": "replacement_ready", "seconds": seconds, **({"step": step} if step else {})}
        case LaunchFailure(reason=reason, zone=zone):
            return {**out, "event": "launch_failed", "reason": reason.value, **({"zone": zone} if zone else {})}
    return None


def _previous_lifetime_ended(obj: dict[str, Any], ctx: StreamContext) -> list[dict[str, Any]]:
    """A second ``started`` in one stream: the VM before it stopped at its last record."""
    if obj.get("record") != "started" or not ctx.announced or ctx.last_ts is None:
        return []
    where = {k: v for k, v in ctx.where().items() if v is not None}
    return [{**where, "ts": ctx.last_ts, "event": "node_stopped"}]


def normalize(obj: object, ctx: StreamContext, stats: ReadStats, fallback_ts: float | None = None) -> list[TelemetryRecord]:
    """Schema v1 records for one parsed line of any producer (agent, controller, v1)."""
    if not isinstance(obj, dict):
        raise ValueError("record: not a JSON object; write one JSON object per line")
    if fallback_ts is not None and "ts" not in obj and "at" not in obj:
        obj = {**obj, "ts": fallback_ts}
    dicts: list[dict[str, Any]] | None
    if "record" in obj:
        ended = _previous_lifetime_ended(obj, ctx)
        dicts = from_agent_record(obj, ctx)
        if isinstance(obj.get("ts"), int | float):
            ctx.last_ts = obj["ts"]
        if dicts is None:
            stats.skipped[f"agent:{obj.get('record')}"] += 1
            return []
        where = {k: v for k, v in ctx.where().items() if v is not None}
        dicts = [*ended, *({**where, **{k: v for k, v in d.items() if v is not None}} for d in dicts)]
    elif "kind" in obj and "event" not in obj:
        one = from_controller_event(obj)
        if one is None:
            stats.skipped[f"controller:{obj.get('kind')}"] += 1
            return []
        dicts = [one]
    else:
        dicts = [obj]
    out = [TelemetryRecord.model_validate(d) for d in dicts]
    stats.records += len(out)
    return out


def parse_lines(
    lines: Iterable[str], source: str = "telemetry", stats: ReadStats | None = None, ctx: StreamContext | None = None
) -> Iterator[TelemetryRecord]:
    """Records from JSON lines (agent, controller or v1); an error names the line, the field and the value."""
    yield from _parse_blocks(_line_blocks(lines), source, stats if stats is not None else ReadStats(),
                             ctx or StreamContext(source))  # fmt: skip


def parse_stream(
    fh: BinaryIO, source: str = "telemetry", stats: ReadStats | None = None, ctx: StreamContext | None = None
) -> Iterator[TelemetryRecord]:
    """:func:`parse_lines` of a file opened in binary mode, read in blocks of whole lines (the fast path)."""
    yield from _parse_blocks(_file_blocks(fh), source, stats if stats is not None else ReadStats(),
                             ctx or StreamContext(source))  # fmt: skip


#: Bytes read at a time (then up to the end of the line): a million lines stay a few MiB in memory.
BLOCK_BYTES = 1 << 22
_BATCH_LINES = 20_000


def _file_blocks(fh: BinaryIO) -> Iterator[bytes]:
    while True:
        block = fh.read(BLOCK_BYTES)
        if not block:
            return
        yield block + fh.readline()


def _line_blocks(lines: Iterable[str]) -> Iterator[bytes]:
    batch: list[str] = []
    for line in lines:
        batch.append(line.rstrip("\r\n"))
        if len(batch) == _BATCH_LINES:
            yield ("\n".join(batch) + "\n").encode()
            batch = []
    if batch:
        yield ("\n".join(batch) + "\n").encode()


#: An agent record the fit does not use, recognised by its ``"record"`` value without parsing the line
#: (most of a log is these: ``commit-reported`` every tick). Only their time is read, when needed.
_UNUSED_MARK = re.compile(rb'"record": "(' + b"|".join(re.escape(k.encode()) for k in sorted(AGENT_UNUSED)) + rb')"')
_TS_KEY = b'"ts": '


def _parse_blocks(blocks: Iterable[bytes], source: str, stats: ReadStats, ctx: StreamContext) -> Iterator[TelemetryRecord]:
    """The block's unused agent records are found by one regex pass and counted; the rest is parsed line by line.

    A later ``started`` ends the VM's lifetime at the stream's last agent record, so the time of
    the unused records just before it (and at the end of each block) is read from their ``ts``.
    """
    import numpy as np

    first = 1  # the line number of the block's first line
    for block in blocks:
        lines = block.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        unused = np.zeros(len(lines), dtype=bool)
        parts = _UNUSED_MARK.split(block)  # text, kind, text, kind, ..., text: one pass, no Python per line
        if len(parts) > 1:
            kinds = parts[1::2]
            # the line of each mark: the newlines before it (a mark and its kind hold none)
            rows = np.cumsum(np.fromiter(map(bytes.count, parts[0:-1:2], repeat(b"\n")), dtype=np.int64, count=len(kinds)))
            if len(rows) > 1 and not np.all(rows[1:] > rows[:-1]):  # two marks on one line: the line's first counts
                rows, firsts = np.unique(rows, return_index=True)
                kinds = [kinds[i] for i in firsts.tolist()]
            unused[rows] = True
            for kind, n in Counter(kinds).items():
                stats.skipped[f"agent:{kind.decode()}"] += n
            stats.lines += len(rows)
        for i in np.flatnonzero(~unused).tolist():
            line = lines[i]
            if not line.strip():
                continue
            stats.lines += 1
            if b"started" in line:
                _last_unused_ts(lines, unused, i, ctx)
            try:
                yield from normalize(json.loads(line.decode()), ctx, stats)
            except json.JSONDecodeError as err:
                raise ValueError(f"{source}:{first + i}: not JSON ({err.msg}); write one JSON object per line") from None
            except ValidationError as err:
                raise ValueError(f"{source}:{first + i}: {describe_validation(err)}") from None
            except ValueError as err:  # also a line that is not UTF-8
                raise ValueError(f"{source}:{first + i}: {err}") from None
        if len(lines) and unused[-1]:
            _last_unused_ts(lines, unused, len(lines), ctx)
        first += len(lines)


def _last_unused_ts(lines: list[bytes], unused: Any, end: int, ctx: StreamContext) -> None:
    """``ctx.last_ts`` from the latest unused record before line ``end`` that follows the last parsed line."""
    for j in range(end - 1, -1, -1):
        if not unused[j]:
            if lines[j].strip():
                return  # a parsed line: it set ctx.last_ts itself
            continue
        ts = _ts_of(lines[j])
        if ts is not None:
            ctx.last_ts = ts
            return


def _ts_of(line: bytes) -> float | None:
    t = line.find(_TS_KEY)
    if t < 0:
        return None
    t += len(_TS_KEY)
    stop = line.find(b",", t)
    if stop < 0:
        stop = line.find(b"}", t)
    try:
        return float(line[t:stop])
    except ValueError:
        return None


def describe_validation(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(to_camel(p) if isinstance(p, str) else str(p) for p in first["loc"]) or "(record)"
    return (f"{loc}: {first['msg']} (value: {first.get('input')!r}); "
            "see the telemetry schema in docs/economics.md §3")  # fmt: skip
