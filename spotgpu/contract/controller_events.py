"""The controller's events: what the planner and the runner emit, one JSON line each.

``{"v", "kind", "pool", "at", ...fields}``: the planner (``spotgpu.controller.reconcile``) and the
runner build each :class:`Event` from the fields of its kind (:meth:`Event.of`); the sinks
(``spotgpu.controller.telemetry``: Prometheus, JSON lines) and the fleet's reader
(``spotgpu.economics.telemetry``) read the typed fields back (:attr:`Event.fields`,
:meth:`Event.from_json`). A kind is :class:`ControllerEventKind`; its fields are the dataclass of
that kind below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, ClassVar

from spotgpu.contract import fields
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.sources import DropReason, EventTimeBasis
from spotgpu.contract.telemetry import SCHEMA_VERSION, VERSION_KEY, FailureReason, Fields, check_version, kinds_of

#: The keys every controller line carries besides its fields.
KIND_KEY, POOL_KEY, AT_KEY = "kind", "pool", "at"
#: The pool of an event about the whole controller (its lease, a tick that failed).
EVERY_POOL = "*"


class ControllerEventKind(StrEnum):
    LAUNCH_FAILURE = "launch_failure"  # a launch failed, by reason (capacity is not quota)
    INTERRUPTION = "interruption"  # a cloud event about one VM (stale ones are recorded, never acted on)
    EVENT_DROPPED = "event_dropped"  # a received event that became no observation
    REACQUIRED = "reacquired"  # capacity is back: the latency and the rung it came back on
    STEP_CHANGED = "step_changed"  # the ladder moved to another rung
    FALLBACK_USAGE = "fallback_usage"  # node-seconds and USD on on-demand since the last tick
    DEFERRED = "deferred"  # the ladder ran out: the work is deferred
    RESUMED = "resumed"  # deferred work may run again
    DRAIN_REQUESTED = "drain_requested"  # a surplus VM is asked to drain
    REMOVED = "removed"  # a drained VM is removed, after its commit
    PROGRESS_UNREPORTED = "progress_unreported"  # commits carry no step: the deadline runs on the clock
    THROUGHPUT_UNMEASURED = "throughput_unmeasured"  # the on-demand type's speed is not measured
    ACTION = "action"  # an action the runner carried out
    ACTION_FAILED = "action_failed"  # an action (or an observation, or a tick) that failed
    LEASE = "lease"  # this controller holds the pools' lease
    LEASE_REFUSED = "lease_refused"  # another controller holds it
    WOULD = "would"  # a dry run: the event it would have emitted


class EventFields(Fields):
    """The fields of one controller event kind."""

    KIND: ClassVar[ControllerEventKind]


@dataclass(frozen=True)
class LaunchFailure(EventFields):
    KIND = ControllerEventKind.LAUNCH_FAILURE
    group: str
    reason: FailureReason
    code: str
    zone: str = ""
    #: cloud, or received when the event carried no usable time
    time_basis: EventTimeBasis = EventTimeBasis.CLOUD


@dataclass(frozen=True)
class Interruption(EventFields):
    KIND = ControllerEventKind.INTERRUPTION
    type: InterruptionKind
    #: the VM it is about, when the event names one
    vm: str | None = None
    #: from before this incarnation of the pool: recorded, never acted on
    stale: bool = False
    zone: str = ""
    time_basis: EventTimeBasis = EventTimeBasis.CLOUD


@dataclass(frozen=True)
class EventDropped(EventFields):
    KIND = ControllerEventKind.EVENT_DROPPED
    reason: DropReason
    source: str
    what: str


@dataclass(frozen=True)
class Reacquired(EventFields):
    KIND = ControllerEventKind.REACQUIRED
    latency_seconds: float
    #: the rung capacity came back on (a ``StepKind`` value)
    step: str
    seconds_on_step: float


@dataclass(frozen=True)
class StepChanged(EventFields):
    KIND = ControllerEventKind.STEP_CHANGED
    RENAMED: ClassVar[Mapping[str, str]] = {"from_": "from"}
    from_: str
    to: str
    waited_seconds: float
    deadline_at_risk: bool
    seconds_on_previous: float


@dataclass(frozen=True)
class FallbackUsage(EventFields):
    KIND = ControllerEventKind.FALLBACK_USAGE
    node_seconds: float
    cost_usd: float


@dataclass(frozen=True)
class Deferred(EventFields):
    KIND = ControllerEventKind.DEFERRED
    waited_seconds: float


@dataclass(frozen=True)
class Resumed(EventFields):
    KIND = ControllerEventKind.RESUMED


@dataclass(frozen=True)
class DrainRequested(EventFields):
    KIND = ControllerEventKind.DRAIN_REQUESTED
    vm: str
    group: str


@dataclass(frozen=True)
class Removed(EventFields):
    KIND = ControllerEventKind.REMOVED
    vm: str
    group: str
    #: the agent's commit after the drain request that let the VM go
    commit_at: float


@dataclass(frozen=True)
class ProgressUnreported(EventFields):
    KIND = ControllerEventKind.PROGRESS_UNREPORTED
    commits: int
    why: str


@dataclass(frozen=True)
class ThroughputUnmeasured(EventFields):
    KIND = ControllerEventKind.THROUGHPUT_UNMEASURED
    models: list[str]
    speed: float
    why: str


@dataclass(frozen=True)
class ActionTaken(EventFields):
    """An action (``spotgpu.controller.actions``): its class name and, flat beside it, its own fields."""

    KIND = ControllerEventKind.ACTION
    action: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ActionFailed(EventFields):
    KIND = ControllerEventKind.ACTION_FAILED
    #: the action's class name, or observe | tick
    action: str
    error: str


@dataclass(frozen=True)
class LeaseHeld(EventFields):
    KIND = ControllerEventKind.LEASE
    token: int
    how: str


@dataclass(frozen=True)
class LeaseRefused(EventFields):
    KIND = ControllerEventKind.LEASE_REFUSED
    reason: str
    token: int | None = None


@dataclass(frozen=True)
class Would(EventFields):
    """A dry run's event: the kind it would have been and, flat beside it, that event's fields."""

    KIND = ControllerEventKind.WOULD
    event: ControllerEventKind
    detail: dict[str, Any] = field(default_factory=dict)


#: Every event fields class by its kind.
EVENTS: dict[ControllerEventKind, type[EventFields]] = kinds_of(EventFields)  # type: ignore[assignment]


@dataclass(frozen=True)
class Event:
    """One controller event: the pool it is about (:data:`EVERY_POOL` for the controller's own), when, what."""

    pool: str
    at: float
    fields: EventFields

    @classmethod
    def of(cls, pool: str, at: float, fields: EventFields) -> Event:
        return cls(pool, at, fields)

    @property
    def kind(self) -> ControllerEventKind:
        return self.fields.KIND

    @cached_property
    def data(self) -> dict[str, Any]:
        """The fields as written (camelCase keys)."""
        return self.fields.to_fields()

    def to_json(self) -> dict[str, Any]:
        return {VERSION_KEY: SCHEMA_VERSION, KIND_KEY: self.kind.value, POOL_KEY: self.pool, AT_KEY: self.at,
                **self.data}  # fmt: skip

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Event | None:
        """The event of one parsed line; None for a kind this version does not write (an older controller's)."""
        check_version(obj)
        try:
            kind = ControllerEventKind(str(obj.get(KIND_KEY)))
        except ValueError:
            return None
        pool = fields.text(obj, POOL_KEY, kind.value, required=True)
        at = fields.epoch(obj, AT_KEY, kind.value, required=True)
        own = {k: v for k, v in obj.items() if k not in (VERSION_KEY, KIND_KEY, POOL_KEY, AT_KEY)}
        return cls(pool, at, EVENTS[kind].from_fields(own))
