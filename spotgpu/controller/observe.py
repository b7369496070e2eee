"""What one tick sees of a pool, in cloud-neutral terms.

Cloud adapters translate ASGs, MIGs and scale sets into these records; the
planner never sees a provider type. Times are Unix seconds, passed in, so a
replay or a test is exactly reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spotgpu.contract.sources import DropReason, EventTimeBasis
from spotgpu.contract.telemetry import FailureReason


@dataclass(frozen=True)
class Vm:
    id: str
    group: str
    ready: bool  # running and able to take work (ASG InService, MIG RUNNING+NONE, Azure running)
    zone: str = ""
    sku: str = ""
    ready_at: float | None = None  # when it became ready, when the cloud says


@dataclass(frozen=True)
class GroupObservation:
    name: str
    desired: int
    vms: tuple[Vm, ...] = ()
    #: Derived once (the planner reads them many times a tick): VMs that can take work, and the rest.
    ready: tuple[Vm, ...] = field(init=False, repr=False, compare=False)
    pending: tuple[Vm, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ready", tuple(v for v in self.vms if v.ready))
        object.__setattr__(self, "pending", tuple(v for v in self.vms if not v.ready))


@dataclass(frozen=True)
class LaunchFailure:
    group: str
    reason: FailureReason
    code: str
    at: float
    key: str  # stable id (activity id, error timestamp+instance) so a failure is counted once
    message: str = ""
    zone: str = ""
    #: ``cloud``, or ``received`` when the event carried no usable time.
    time_basis: EventTimeBasis = EventTimeBasis.CLOUD


@dataclass(frozen=True)
class Interruption:
    """A notice or loss of one VM (spot warning, rebalance, preemption, eviction)."""

    event_id: str
    vm_id: str
    #: An observed :class:`spotgpu.contract.interruptions.InterruptionKind` (a str: records and telemetry keep the value).
    kind: str
    at: float
    #: The VM's zone, when the event or the adapter knows it (the ladder decides by zone).
    zone: str = ""
    #: ``cloud``, or ``received`` when the event carried no usable time.
    time_basis: EventTimeBasis = EventTimeBasis.CLOUD


@dataclass(frozen=True)
class Dropped:
    """A received message that became no observation, and why: logged once and counted."""

    reason: DropReason
    #: Where it came from: ``sqs``, ``pubsub``, ``eventgrid``.
    source: str
    #: What it was, briefly (detail-type, method, event type, the unknown value).
    what: str = ""


@dataclass(frozen=True)
class PoolObservation:
    pool: str
    now: float
    groups: dict[str, GroupObservation]
    failures: tuple[LaunchFailure, ...] = ()
    interruptions: tuple[Interruption, ...] = ()
    #: vm id -> Unix time of its last *committed* checkpoint, as the node agent reports it.
    commits: dict[str, float] = field(default_factory=dict)
    #: vm id -> the training step of that commit, when the agent reports one (progress = committed work).
    steps: dict[str, int] = field(default_factory=dict)
    #: Opaque receipts the adapter acknowledges after the state record is saved.
    receipts: tuple[object, ...] = ()
    #: Messages received this tick that became no observation (each is still acknowledged).
    dropped: tuple[Dropped, ...] = ()

    def ready_count(self) -> int:
        return sum(len(g.ready) for g in self.groups.values())
