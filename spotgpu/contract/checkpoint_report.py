"""What the workload tells its node agent about a checkpoint: one report, written here once.

The training loop's ``AgentClient`` builds a :class:`CheckpointReport` and posts
:meth:`CheckpointReport.to_json` (``POST /v1/report``); the agent's control endpoint reads the body
back with :meth:`CheckpointReport.from_json`, which refuses a body that is not one with one line
naming the field; the agent's state serves what it holds as :meth:`CheckpointReport.as_dict`
(``finalReport``, ``gang``, ``restored`` and ``reports`` of ``/v1/notice`` and ``/v1/status``).
The kinds, gang roles, gang outcomes and restore sources are the enums below, nowhere else.

The body stays readable across versions both ways: a key left out or ``null`` means the same, a
``restore`` is of a committed generation and a ``step`` (the first step after a restore) is no
checkpoint at all whatever ``committed`` says, so a body without ``committed`` for those two
kinds (what clients before this module sent) reads as before, and an agent before it read the
``committed`` this module writes for them the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from spotgpu.contract import fields


class ReportKind(StrEnum):
    """What a report is about."""

    EARLY = "early"  # a save the agent asked for early (rebalance, maintenance)
    FINAL = "final"  # the final checkpoint within a notice's budget: the agent drains after it
    GANG = "gang"  # a multi-node job's stop seen by a peer rank: recorded, never drains
    RESTORE = "restore"  # the step the job resumed from, and where its state came from
    STEP = "step"  # the first training step after a restore (the end of a recovery)


class GangRole(StrEnum):
    """A rank's part in a gang's stop (``spotgpu.gang``): its own VM got the notice, or a peer's did."""

    NOTICED = "noticed"
    PEER = "peer"


class GangOutcome(StrEnum):
    """What the gang agreed its stop came to."""

    COMMITTED = "committed"
    FAILED = "failed"
    SKIPPED = "skipped"
    PEER_LOST = "peer-lost"


class RestoreSource(StrEnum):
    """Where a rank's restored state came from (``spotgpu.checkpoint.tiered``): its node's own tier,
    a peer's copy, the store."""

    LOCAL = "local"
    PEER = "peer"
    STORE = "store"


#: A reason that starts so says the gang lost a node: its outcome, when the rank did not say one.
PEER_LOST_REASON = "peer lost"


E = TypeVar("E", bound=StrEnum)

#: What a field's one-line error calls the body (``report.committed: not true or false ...``).
WHAT = "report"

#: Each value set's key on the body, and the fix its one-line error gives besides its values, if any
#: (a gang report without a role reads as role None: not one of noticed, peer).
_KEY_AND_FIX: dict[type[StrEnum], tuple[str, str | None]] = {
    ReportKind: ("checkpoint", None),
    GangRole: ("role", None),
    GangOutcome: ("outcome", "use one of them, or leave it out (the agent derives it from committed and reason)"),
    RestoreSource: ("source", None),
}


def member(enum: type[E], value: object, what: str = WHAT) -> E:
    """``value`` as a member of ``enum``; another value raises ValueError naming ``{what}.{key}``, the
    value and the values to use (:func:`fields.choice`; the client checks its arguments with it,
    ``what`` its method's name; the agent the body's values)."""
    key, fix = _KEY_AND_FIX[enum]
    return fields.choice({key: value}, key, what, enum, fix=fix)


@dataclass
class CheckpointReport:
    """One report as the agent holds it; ``received_at`` is when the agent read it (not on the body)."""

    checkpoint: ReportKind
    committed: bool
    step: int | None = None
    seconds: float | None = None
    generation: str | None = None
    reason: str | None = None
    received_at: float = field(default_factory=time.time)
    #: A gang's reports (spotgpu.gang): the rank's role, the noticed ranks, and the agreed outcome.
    role: GangRole | None = None
    noticed_ranks: list[int] | None = None
    outcome: GangOutcome | None = None
    #: A restore's source, bytes read and when it began (epoch seconds).
    source: RestoreSource | None = None
    nbytes: int | None = None
    started_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``POST /v1/report`` body: ``checkpoint`` and ``committed``, then every field that is set."""
        body: dict[str, Any] = {"checkpoint": str(self.checkpoint), "committed": self.committed}
        optional = {
            "step": self.step,
            "seconds": self.seconds,
            "generation": self.generation,
            "reason": self.reason,
            "role": _value(self.role),
            "noticedRanks": None if self.noticed_ranks is None else list(self.noticed_ranks),
            "outcome": _value(self.outcome),
            "source": _value(self.source),
            "bytes": self.nbytes,
            "startedAt": self.started_at,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any], received_at: float | None = None) -> CheckpointReport:
        """Read a ``POST /v1/report`` body; one that is not a report raises ValueError naming the field."""
        kind = member(ReportKind, body.get("checkpoint", ReportKind.FINAL.value))
        if kind is ReportKind.RESTORE:
            body = {"committed": True, **body}  # a restore is of a committed generation
        if kind is ReportKind.STEP:
            body = {**body, "committed": False}  # the first step after a restore: no checkpoint at all
        source = body.get("source")
        if source is not None:
            source = member(RestoreSource, source)
        nbytes = fields.whole(body, "bytes", WHAT, least=0, fix="use the bytes restored")
        started = fields.epoch(body, "startedAt", WHAT)
        committed = fields.flag(body, "committed", WHAT)
        role = body.get("role")
        if role is not None or kind is ReportKind.GANG:  # a gang report must say it
            role = member(GangRole, role)
        noticed = fields.items(body, "noticedRanks", WHAT, wanted="a list of ranks", of=int)
        outcome = body.get("outcome") or None
        if outcome is not None:
            outcome = member(GangOutcome, outcome)
        reason = fields.text(body, "reason", WHAT)
        step = fields.whole(body, "step", WHAT, least=0, fix="use the training step, a whole number")
        seconds = fields.number(body, "seconds", WHAT, least=0)
        generation = fields.text(body, "generation", WHAT)
        if role is not None and outcome is None:
            outcome = _outcome(committed, reason)
        return cls(
            checkpoint=kind,
            committed=committed,
            step=step,
            seconds=seconds,
            generation=generation,
            reason=reason,
            received_at=time.time() if received_at is None else received_at,
            role=role,
            noticed_ranks=noticed,
            outcome=None if role is None else outcome,
            source=source,
            nbytes=nbytes,
            started_at=started,
        )

    def as_dict(self) -> dict[str, object]:
        """The served form (``/v1/notice``, ``/v1/status``, the ``gang-stop`` record): every report field
        and ``receivedAt``; a gang's fields only on a gang's report, a restore's only on a restore."""
        data: dict[str, object] = {
            "checkpoint": str(self.checkpoint),
            "committed": self.committed,
            "step": self.step,
            "seconds": self.seconds,
            "generation": self.generation,
            "reason": self.reason,
            "receivedAt": self.received_at,
        }
        if self.role is not None:
            data.update(role=_value(self.role), noticedRanks=self.noticed_ranks, outcome=_value(self.outcome))
        if self.checkpoint == ReportKind.RESTORE:
            data.update(source=_value(self.source), bytes=self.nbytes, startedAt=self.started_at)
        return data


def _value(member: StrEnum | None) -> str | None:
    """A member's wire value (``str`` of a StrEnum member is its value; a plain string stays itself)."""
    return None if member is None else str(member)


def _outcome(committed: bool, reason: object) -> GangOutcome:
    """A gang report's outcome when the rank did not say: committed, else peer-lost or failed by its reason."""
    if committed:
        return GangOutcome.COMMITTED
    return GangOutcome.PEER_LOST if str(reason or "").startswith(PEER_LOST_REASON) else GangOutcome.FAILED


__all__ = ["PEER_LOST_REASON", "CheckpointReport", "GangOutcome", "GangRole", "ReportKind", "RestoreSource", "member"]
