"""What the node agent tells the workload about a notice: one document, three ways to read it.

The agent's responder builds a :class:`NoticeDocument` when it decides to tell the workload;
the control endpoint serves it as JSON (``GET /v1/notice``: :meth:`NoticeDocument.to_json`),
the training loop's ``AgentClient`` and ``spotgpu agent status`` read it back
(:meth:`NoticeDocument.from_json`), a notice hook gets it as environment variables
(:meth:`NoticeDocument.hook_environment`), and a gang turns its budget deadline into the
smallest budget of its ranks. "Seconds left in the budget" is :func:`budget_left`, here only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from spotgpu.contract import fields
from spotgpu.contract.interruptions import InterruptionKind


class Checkpoint(StrEnum):
    """What the workload is asked for: ``early`` (keep the VM: save now, stop taking new work) or
    ``final`` (the VM is going: save within the budget, then stop)."""

    EARLY = "early"
    FINAL = "final"


#: The notice hook's environment (``runtime.noticeHook``), one variable per field.
ENV_KIND = "SPOTGPU_EVENT_KIND"
ENV_EVENT_ID = "SPOTGPU_EVENT_ID"
ENV_CHECKPOINT = "SPOTGPU_CHECKPOINT"
ENV_DEADLINE = "SPOTGPU_DEADLINE"
ENV_BUDGET_SECONDS = "SPOTGPU_BUDGET_SECONDS"


def budget_left(budget_deadline: float | None, now: float) -> float:
    """Seconds a final checkpoint may still use: until the budget deadline, never negative; 0 without one."""
    if budget_deadline is None:
        return 0.0
    return max(0.0, budget_deadline - now)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


@dataclass(frozen=True)
class NoticeDocument:
    """A notice as the workload is told it.

    ``deadline`` is when the VM should be assumed gone (None: no deadline, an early notice);
    ``budget_deadline`` is the deadline less the pool's safety margin, by which a final
    checkpoint must have committed.
    """

    event_id: str
    kind: InterruptionKind
    source: str
    checkpoint: Checkpoint
    detected_at: float
    deadline: float | None
    budget_deadline: float | None

    @classmethod
    def told(
        cls, event_id: str, kind: InterruptionKind, source: str, checkpoint: Checkpoint, detected_at: float,
        deadline: float | None, safety_margin_seconds: float,
    ) -> NoticeDocument:
        """The document for a notice whose VM is gone at ``deadline``, less the contract's safety margin."""
        budget = None if deadline is None else deadline - safety_margin_seconds
        return cls(event_id, kind, source, checkpoint, detected_at, deadline, budget)

    def budget_seconds(self, now: float) -> float:
        """Seconds the final checkpoint may still use at ``now`` (0 when there is no deadline)."""
        return budget_left(self.budget_deadline, now)

    def to_json(self, now: float) -> dict[str, Any]:
        """The served form (camelCase); ``budgetSeconds`` is counted at ``now`` (None without a deadline)."""
        return {
            "eventId": self.event_id,
            "kind": self.kind.value,
            "source": self.source,
            "checkpoint": self.checkpoint.value,
            "detectedAt": self.detected_at,
            "deadline": self.deadline,
            "budgetDeadline": self.budget_deadline,
            "budgetSeconds": None if self.deadline is None else self.budget_seconds(now),
        }

    @classmethod
    def from_json(cls, doc: object) -> NoticeDocument:
        """Read the served form back; a document that is not one raises ValueError naming the field."""
        doc = fields.document(doc, "notice")
        kind = fields.choice(doc, "kind", "notice", InterruptionKind, "an interruption kind")
        checkpoint = fields.choice(doc, "checkpoint", "notice", Checkpoint, "early or final")
        return cls(
            event_id=fields.text(doc, "eventId", "notice", required=True),
            kind=kind,
            source=fields.text(doc, "source", "notice", required=True),
            checkpoint=checkpoint,
            detected_at=fields.epoch(doc, "detectedAt", "notice", required=True),
            deadline=fields.epoch(doc, "deadline", "notice"),
            budget_deadline=fields.epoch(doc, "budgetDeadline", "notice"),
        )

    def hook_environment(self, now: float) -> dict[str, str]:
        """The notice hook's environment: the same fields, the budget counted at ``now``."""
        return {
            ENV_KIND: self.kind.value,
            ENV_EVENT_ID: self.event_id,
            ENV_CHECKPOINT: self.checkpoint.value,
            ENV_DEADLINE: _seconds(self.deadline),
            ENV_BUDGET_SECONDS: _seconds(None if self.deadline is None else self.budget_seconds(now)),
        }


def drain_hook_environment(deadline: float) -> dict[str, str]:
    """The drain hook's environment (``runtime.drainHook``): when the VM is gone."""
    return {ENV_DEADLINE: _seconds(deadline)}


@dataclass(frozen=True)
class ClearedNotice:
    """An early notice that went away (the VM accepts work again): served beside the notice, logged."""

    event_id: str
    kind: InterruptionKind
    source: str
    cleared_at: float

    @classmethod
    def of(cls, notice: NoticeDocument, cleared_at: float) -> ClearedNotice:
        return cls(notice.event_id, notice.kind, notice.source, cleared_at)

    def to_json(self) -> dict[str, Any]:
        return {"eventId": self.event_id, "kind": self.kind.value, "source": self.source, "clearedAt": self.cleared_at}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ClearedNotice:
        """Read the served form back; a document that is not one raises ValueError naming the field."""
        kind = fields.choice(doc, "kind", "cleared", InterruptionKind, "an interruption kind")
        at = fields.epoch(doc, "clearedAt", "cleared", required=True)
        return cls(fields.text(doc, "eventId", "cleared", required=True), kind,
                   fields.text(doc, "source", "cleared", required=True), at)  # fmt: skip

