"""The node agent's events log: one JSON line per record, ``{"v", "ts", "record", ...fields}``.

``spotgpu.agent.telemetry.AgentTelemetry`` writes every record through :func:`agent_line`;
``spotgpu.economics.telemetry`` reads the ones the fit uses back through :func:`read_agent_line`.
A record's kind is :class:`AgentRecordKind`; its fields are the dataclass of that kind below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from spotgpu.contract.checkpoint_report import GangOutcome, GangRole, RestoreSource
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import Checkpoint, ClearedNotice, NoticeDocument
from spotgpu.contract.telemetry import SCHEMA_VERSION, VERSION_KEY, Fields, check_version, kinds_of

#: The keys every agent line carries besides its fields.
RECORD_KEY, TS_KEY = "record", "ts"


class AgentRecordKind(StrEnum):
    STARTED = "started"  # a new agent process: its pool and provider (a VM lifetime begins)
    IDENTITY = "identity"  # who this VM is (its labels)
    READY = "ready"  # the agent (first clean poll) or the workload is up
    NOTICE = "notice"  # a notice acted on, with its deadline and lead
    NOTICE_CLEARED = "notice-cleared"  # an early notice went away
    WORKLOAD_NOTIFIED = "workload-notified"  # the workload was told
    IGNORED = "ignored"  # a notice that needs nothing (by contract, or already drained)
    FINAL_CHECKPOINT = "final-checkpoint"  # the final checkpoint's outcome
    DRAINED = "drained"  # the drain hook ran
    ACKNOWLEDGE = "acknowledge"  # the cloud was answered (or not)
    COMMIT_REPORTED = "commit-reported"  # a committed checkpoint reported to the controller's store
    GANG_STOP = "gang-stop"  # this rank's part in a multi-node stop
    RESTORED = "restored"  # the step the job resumed from, and where its state came from
    FIRST_STEP = "first-step"  # the first training step after a restore (the end of a recovery)
    THROUGHPUT = "throughput"  # the workload's mean step time


class AgentRecord(Fields):
    """The fields of one agent record kind."""

    KIND: ClassVar[AgentRecordKind]


@dataclass(frozen=True)
class Started(AgentRecord):
    KIND = AgentRecordKind.STARTED
    provider: str | None = None
    pool: str | None = None
    control: str | None = None
    telemetry_port: int | None = None
    #: the pool's notice contract, as its model dumps it
    notice: dict[str, Any] | None = None


@dataclass(frozen=True)
class Identity(AgentRecord):
    """The VM's labels (``spotgpu.agent.identity.VmIdentity``) and its pool, keyed as the labels are."""

    KIND = AgentRecordKind.IDENTITY
    SNAKE_KEYS = True
    provider: str | None = None
    instance_id: str | None = None
    instance_type: str | None = None
    zone: str | None = None
    region: str | None = None
    capacity: str | None = None
    name: str | None = None
    pool: str | None = None


@dataclass(frozen=True)
class Ready(AgentRecord):
    KIND = AgentRecordKind.READY
    #: agent (its first clean poll) | workload (the workload said it is up)
    stage: str | None = None
    boot_to_ready_seconds: float | None = None


@dataclass(frozen=True)
class Notice(AgentRecord):
    KIND = AgentRecordKind.NOTICE
    OMITTED_WHEN_NONE = frozenset({"unparsed_time", "unknown_value"})
    kind: InterruptionKind | None = None
    source: str | None = None
    event_id: str | None = None
    detected_at: float | None = None
    deadline: float | None = None
    #: how the deadline was resolved (``spotgpu.agent.response_rules.Deadline.basis``)
    deadline_basis: str | None = None
    lead_seconds: float | None = None
    detection_latency_seconds: float | None = None
    raw: Any = None
    unparsed_time: str | None = None
    unknown_value: str | None = None


@dataclass(frozen=True)
class NoticeCleared(AgentRecord):
    """A :class:`~spotgpu.contract.notice.ClearedNotice`, as served."""

    KIND = AgentRecordKind.NOTICE_CLEARED
    event_id: str | None = None
    kind: InterruptionKind | None = None
    source: str | None = None
    cleared_at: float | None = None

    @classmethod
    def of(cls, cleared: ClearedNotice) -> NoticeCleared:
        return cls.from_fields(cleared.to_json())


@dataclass(frozen=True)
class WorkloadNotified(AgentRecord):
    """The workload's phase and the :class:`~spotgpu.contract.notice.NoticeDocument` it was served."""

    KIND = AgentRecordKind.WORKLOAD_NOTIFIED
    phase: str | None = None
    event_id: str | None = None
    kind: InterruptionKind | None = None
    source: str | None = None
    checkpoint: Checkpoint | None = None
    detected_at: float | None = None
    deadline: float | None = None
    budget_deadline: float | None = None
    budget_seconds: float | None = None

    @classmethod
    def of(cls, phase: str, notice: NoticeDocument, now: float) -> WorkloadNotified:
        return cls.from_fields({"phase": phase, **notice.to_json(now)})


@dataclass(frozen=True)
class Ignored(AgentRecord):
    KIND = AgentRecordKind.IGNORED
    event_id: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class FinalCheckpoint(AgentRecord):
    KIND = AgentRecordKind.FINAL_CHECKPOINT
    OMITTED_WHEN_NONE = frozenset({"event_id", "report"})
    #: committed | failed | timeout | no-workload
    outcome: str | None = None
    seconds: float | None = None
    event_id: str | None = None
    #: the workload's report (:class:`GangStop`'s fields)
    report: dict[str, Any] | None = None


@dataclass(frozen=True)
class Drained(AgentRecord):
    KIND = AgentRecordKind.DRAINED
    hook_exit: int | None = None


@dataclass(frozen=True)
class Acknowledge(AgentRecord):
    KIND = AgentRecordKind.ACKNOWLEDGE
    #: ok | error
    result: str | None = None
    event_id: str | None = None
    source: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class CommitReported(AgentRecord):
    KIND = AgentRecordKind.COMMIT_REPORTED
    #: ok | error
    result: str | None = None
    last_committed_at: float | None = None
    vm_id: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class GangStop(AgentRecord):
    """A workload's checkpoint report (``spotgpu.contract.checkpoint_report.CheckpointReport``) of a gang stop."""

    KIND = AgentRecordKind.GANG_STOP
    OMITTED_WHEN_NONE = frozenset({"role", "noticed_ranks", "outcome"})
    checkpoint: str | None = None
    committed: bool | None = None
    step: int | None = None
    seconds: float | None = None
    generation: str | None = None
    reason: str | None = None
    received_at: float | None = None
    role: GangRole | None = None
    noticed_ranks: list[int] | None = None
    outcome: GangOutcome | None = None


@dataclass(frozen=True)
class Restored(AgentRecord):
    KIND = AgentRecordKind.RESTORED
    RENAMED: ClassVar[Mapping[str, str]] = {"nbytes": "bytes"}
    step: int | None = None
    generation: str | None = None
    #: this rank's own tier, a peer's copy, the store (``spotgpu.checkpoint.tiered``)
    source: RestoreSource | None = None
    seconds: float | None = None
    nbytes: int | None = None
    #: why nearer copies were passed over
    reason: str | None = None
    started_at: float | None = None


@dataclass(frozen=True)
class FirstStep(AgentRecord):
    KIND = AgentRecordKind.FIRST_STEP
    step: int | None = None


@dataclass(frozen=True)
class Throughput(AgentRecord):
    KIND = AgentRecordKind.THROUGHPUT
    step_seconds: float | None = None
    steps: int | None = None
    gpu_model: str | None = None
    #: client | catalogue | unknown: who named the GPU model
    gpu_model_source: str | None = None


#: Every agent record class by its kind.
AGENT_RECORDS: dict[AgentRecordKind, type[AgentRecord]] = kinds_of(AgentRecord)  # type: ignore[assignment]


def agent_line(record: AgentRecord, ts: float) -> dict[str, Any]:
    """The line the agent writes for ``record`` at ``ts`` (epoch seconds)."""
    return {VERSION_KEY: SCHEMA_VERSION, TS_KEY: ts, RECORD_KEY: record.KIND.value, **record.to_fields()}


def read_agent_line(obj: dict[str, Any]) -> AgentRecord | None:
    """The record of one parsed agent line; None for a kind this version does not write (an older agent's)."""
    check_version(obj)
    try:
        kind = AgentRecordKind(str(obj.get(RECORD_KEY)))
    except ValueError:
        return None
    fields = {k: v for k, v in obj.items() if k not in (VERSION_KEY, TS_KEY, RECORD_KEY)}
    return AGENT_RECORDS[kind].from_fields(fields)


__all__ = [
    "AGENT_RECORDS",
    "Acknowledge",
    "AgentRecord",
    "AgentRecordKind",
    "CommitReported",
    "Drained",
    "FinalCheckpoint",
    "FirstStep",
    "GangStop",
    "Identity",
    "Ignored",
    "Notice",
    "NoticeCleared",
    "Ready",
    "Restored",
    "Started",
    "Throughput",
    "WorkloadNotified",
    "agent_line",
    "read_agent_line",
]
