"""What the node agent serves about itself: ``GET /v1/notice`` and ``GET /v1/status``, written here once.

:class:`WorkloadSnapshot` is the workload's view (the phase, the notice, the last cleared notice,
the reports it holds); :class:`AgentStatus` is that and the agent's own state, for
``spotgpu agent status`` and the training loop's ``AgentClient.zone``. The agent builds both
(``WorkloadState.view``, ``Agent.status``) and serves their ``to_json``; readers parse with
``from_json``. A key an older agent did not serve reads as absent (None, empty); a key of the
wrong type raises ValueError naming it.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from spotgpu.contract import fields
from spotgpu.contract.checkpoint_report import CheckpointReport
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import ClearedNotice, NoticeDocument

Phase = Literal["running", "early-checkpoint", "final-checkpoint", "draining", "drained"]
PHASES: tuple[Phase, ...] = typing.get_args(Phase)
#: The phases in which the running job must stop (a terminal notice); any notice stops new work.
STOPPING: frozenset[Phase] = frozenset({"final-checkpoint", "draining", "drained"})


def _report(doc: dict[str, Any], key: str, what: str) -> CheckpointReport | None:
    served = fields.mapping(doc, key, what)
    return None if served is None else _served_report(served, f"{what}.{key}")


def _served_report(served: dict[str, Any], where: str) -> CheckpointReport:
    """A report in its served form (:meth:`CheckpointReport.as_dict`, with ``receivedAt``)."""
    received = fields.epoch(served, "receivedAt", where)
    try:
        return CheckpointReport.from_json(served, received_at=received)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


@dataclass(frozen=True)
class WorkloadSnapshot:
    """``GET /v1/notice``: what the workload is told, counted at ``now``."""

    version: int
    phase: Phase
    now: float
    notice: NoticeDocument | None = None
    #: The last early notice that went away.
    cleared: ClearedNotice | None = None
    final_report: CheckpointReport | None = None
    gang: CheckpointReport | None = None
    restored: CheckpointReport | None = None

    @property
    def accepting_work(self) -> bool:
        """Any notice stops new work."""
        return self.phase == "running"

    @property
    def stop(self) -> bool:
        """Only a terminal notice stops the running job."""
        return self.phase in STOPPING

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "phase": self.phase,
            "acceptingWork": self.accepting_work,
            "stop": self.stop,
            "notice": self.notice.to_json(self.now) if self.notice else None,
            "cleared": self.cleared.to_json() if self.cleared else None,
            "finalReport": self.final_report.as_dict() if self.final_report else None,
            "gang": self.gang.as_dict() if self.gang else None,
            "restored": self.restored.as_dict() if self.restored else None,
            "now": self.now,
        }

    @staticmethod
    def version_of(doc: dict[str, Any]) -> int:
        """The served version alone (-1 when absent or not a whole number): a client that cannot read the
        rest still long-polls past it, instead of being answered at once again and again."""
        version = doc.get("version")
        return version if isinstance(version, int) and not isinstance(version, bool) else -1

    @staticmethod
    def notice_of(doc: object, what: str = "snapshot") -> tuple[int, NoticeDocument | None, bool]:
        """What a training loop acts on, read so that nothing else in the snapshot can hide a notice: the
        version, the notice, and whether the job must stop (the served ``stop``; without it, the phase).
        A newer agent's phase or report value this version does not know (which :meth:`from_json`
        refuses) does not stop a terminal notice from stopping the job; a notice it cannot read raises."""
        doc = fields.document(doc, what)
        notice = fields.mapping(doc, "notice", what)
        stop = doc.get("phase") in STOPPING if doc.get("stop") is None else fields.flag(doc, "stop", what)
        return (WorkloadSnapshot.version_of(doc), None if notice is None else NoticeDocument.from_json(notice),
                stop)  # fmt: skip

    @classmethod
    def from_json(cls, doc: object, what: str = "snapshot") -> WorkloadSnapshot:
        doc = fields.document(doc, what)
        phase = doc.get("phase")
        phase = "running" if phase is None else phase  # absent and null alike
        if phase not in PHASES:
            raise fields.problem(f"{what}.phase", f"one of {', '.join(PHASES)}", phase)
        notice = fields.mapping(doc, "notice", what)
        cleared = fields.mapping(doc, "cleared", what)
        version = fields.whole(doc, "version", what)
        now = fields.epoch(doc, "now", what)
        return cls(
            version=-1 if version is None else version,
            phase=phase,
            now=0.0 if now is None else now,
            notice=None if notice is None else NoticeDocument.from_json(notice),
            cleared=None if cleared is None else ClearedNotice.from_json(cleared),
            final_report=_report(doc, "finalReport", what),
            gang=_report(doc, "gang", what),
            restored=_report(doc, "restored", what),
        )


@dataclass(frozen=True)
class SeenEvent:
    """An interruption event the agent saw (``events`` of the status)."""

    event_id: str
    kind: InterruptionKind
    source: str
    detected_at: float

    def to_json(self) -> dict[str, Any]:
        return {"eventId": self.event_id, "kind": self.kind.value, "source": self.source,
                "detectedAt": self.detected_at}  # fmt: skip

    @classmethod
    def from_json(cls, doc: dict[str, Any], what: str) -> SeenEvent:
        kind = fields.choice(doc, "kind", what, InterruptionKind, "an interruption kind")
        detected = fields.epoch(doc, "detectedAt", what)
        return cls(fields.text(doc, "eventId", what) or "", kind, fields.text(doc, "source", what) or "",
                   0.0 if detected is None else detected)  # fmt: skip


@dataclass(frozen=True)
class ControllerLinkStatus:
    """The agent's link to its pool's controller (``controller`` of the status; null without one)."""

    store: str
    vm_id: str
    last_reported_at: float | None

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "vmId": self.vm_id, "lastReportedAt": self.last_reported_at}

    @classmethod
    def from_json(cls, doc: dict[str, Any], what: str) -> ControllerLinkStatus:
        return cls(fields.text(doc, "store", what) or "", fields.text(doc, "vmId", what) or "",
                   fields.epoch(doc, "lastReportedAt", what))  # fmt: skip


@dataclass(frozen=True)
class AgentStatus:
    """``GET /v1/status``: the workload's snapshot and the agent's own state, in one flat document."""

    workload: WorkloadSnapshot
    provider: str | None = None
    pool: str | None = None
    #: The VM's identity labels, keyed as the labels are (``instance_id``, ``zone``...).
    identity: dict[str, str] = field(default_factory=dict)
    agent_ready_at: float | None = None
    telemetry_port: int | None = None
    events: list[SeenEvent] = field(default_factory=list)
    #: Ids of the events the cloud was answered for.
    acknowledged: list[str] = field(default_factory=list)
    reports: list[CheckpointReport] = field(default_factory=list)
    controller: ControllerLinkStatus | None = None

    @property
    def zone(self) -> str | None:
        """This VM's zone as the agent read it (None: not read yet)."""
        return self.identity.get("zone") or None

    @property
    def instance_id(self) -> str | None:
        return self.identity.get("instance_id") or None

    @property
    def instance_type(self) -> str | None:
        return self.identity.get("instance_type") or None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.workload.to_json(),
            "provider": self.provider,
            "pool": self.pool,
            "identity": dict(self.identity),
            "agentReadyAt": self.agent_ready_at,
            "telemetryPort": self.telemetry_port,
            "events": [e.to_json() for e in self.events],
            "acknowledged": list(self.acknowledged),
            "reports": [r.as_dict() for r in self.reports],
            "controller": None if self.controller is None else self.controller.to_json(),
        }

    @classmethod
    def from_json(cls, doc: object) -> AgentStatus:
        """Read a served status back; a key of the wrong type raises ValueError naming it."""
        what = "status"
        workload = WorkloadSnapshot.from_json(doc, what)
        assert isinstance(doc, dict)  # from_json refused anything else
        identity = fields.mapping(doc, "identity", what) or {}
        if not all(isinstance(v, str) for v in identity.values()):
            raise fields.problem(f"{what}.identity", "labels of strings", identity)
        events = fields.items(doc, "events", what) or []
        reports = fields.items(doc, "reports", what) or []
        acknowledged = fields.items(doc, "acknowledged", what, wanted="a list of event ids", of=str) or []
        controller = fields.mapping(doc, "controller", what)
        return cls(
            workload=workload,
            provider=fields.text(doc, "provider", what),
            pool=fields.text(doc, "pool", what),
            identity=dict(identity),
            agent_ready_at=fields.epoch(doc, "agentReadyAt", what),
            telemetry_port=fields.whole(doc, "telemetryPort", what),
            events=[SeenEvent.from_json(*_item(e, f"{what}.events[{i}]")) for i, e in enumerate(events)],
            acknowledged=list(acknowledged),
            reports=[_served_report(*_item(r, f"{what}.reports[{i}]")) for i, r in enumerate(reports)],
            controller=None if controller is None else ControllerLinkStatus.from_json(controller, f"{what}.controller"),
        )


def _item(value: object, where: str) -> tuple[dict[str, Any], str]:
    """A list item that must be a JSON object, and where it is."""
    return fields.document(value, where), where


__all__ = ["PHASES", "STOPPING", "AgentStatus", "ControllerLinkStatus", "Phase", "SeenEvent", "WorkloadSnapshot"]
