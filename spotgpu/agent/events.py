"""The one normalized interruption event every metadata monitor produces.

Each cloud says "you are about to lose this VM" differently (an IMDS JSON
document, a metadata flag flipping to TRUE, a Scheduled Events entry). Monitors
translate their source into :class:`InterruptionEvent` so that the responder,
telemetry and the workload interface never need to know which cloud spoke.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from spotgpu.contract.interruptions import InterruptionKind


@dataclass(frozen=True)
class InterruptionEvent:
    """A notice as the agent understood it at detection time.

    ``deadline`` is absolute (Unix seconds) and already sanity-checked against the
    contract (see :mod:`spotgpu.agent.response_rules`); ``cloud_deadline`` is what the cloud
    said, kept for telemetry. ``published_at`` is when the cloud says the notice was
    issued, when it says so at all.
    """

    event_id: str
    #: What the notice means for the VM, not what the cloud called it: the contract's one vocabulary; the
    #: agent produces its ``NOTICE_KINDS`` (rebalance, maintenance, preempt, terminate, drain; ``.terminal``
    #: for the last three).
    kind: InterruptionKind
    source: str
    detected_at: float
    raw: object
    cloud_deadline: float | None = None
    published_at: float | None = None
    #: Seconds between the last clean poll of this source and this detection
    #: (the detection-latency upper bound when the cloud gives no publish time).
    since_last_clean_poll: float | None = None
    #: Azure: the ids to acknowledge (StartRequests) once the drain is done.
    acknowledge_ids: tuple[str, ...] = ()
    #: The cloud's time as served (repr) when it could not be read: the notice is acted on
    #: at once with the contract's minimum notice instead of being dropped.
    unparsed_time: str | None = None
    #: The lead this notice's source documents when the cloud gives no time (GCP: the
    #: maintenance-event value flips about 60 s before a migration); None: the contract's.
    documented_lead: float | None = None
    #: The longest lead this source documents, beyond which a cloud time is clock skew; None:
    #: the kind's (:data:`spotgpu.agent.response_rules.MAX_DOCUMENTED_LEAD`). Scheduled maintenance (AWS
    #: scheduled events, GCE upcoming maintenance) is announced days ahead: ``math.inf``.
    max_lead: float | None = None
    #: A value the cloud sent that the agent does not know (a new GCP maintenance-event value,
    #: Azure EventType, AWS event code): the notice is then of the safest kind it could be.
    unknown_value: str | None = None

    @property
    def dedup_key(self) -> tuple[str, str]:
        return (self.source, self.event_id)

    def detection_latency(self) -> float | None:
        """Best available upper bound on how long the notice sat before we saw it.

        Both bounds over-estimate: the notice was absent at the last clean poll,
        and a cloud publish time may be truncated to whole seconds; take the tighter.
        """
        bounds = [b for b in (self.since_last_clean_poll,) if b is not None]
        if self.published_at is not None:
            bounds.append(max(0.0, self.detected_at - self.published_at))
        return min(bounds) if bounds else None


@dataclass(frozen=True)
class NoticeWithdrawn:
    """A source no longer shows these notices (AWS rebalance 404 again, GCP maintenance-event
    back to NONE, an Azure event gone from the document). An early notice then clears; a
    terminal one never does (the drain has begun)."""

    source: str
    event_ids: tuple[str, ...]
    detected_at: float


def since(last_clean: float | None, now: float) -> float | None:
    """Seconds since a source's last clean round (``since_last_clean_poll``), None before the first."""
    return None if last_clean is None else now - last_clean


def withdrawn(
    source: str, event_ids: tuple[str, ...] | str | None, now: float
) -> list[InterruptionEvent | NoticeWithdrawn]:
    """The notices a source stopped showing, as the one-item list a monitor returns (none: ``[]``)."""
    ids = (event_ids,) if isinstance(event_ids, str) else tuple(event_ids or ())
    return [NoticeWithdrawn(source, ids, now)] if ids else []


@dataclass
class EventStore:
    """Remembers every (source, id) seen, so re-served notices are acted on once.

    Clouds re-serve the same notice on every poll (AWS returns the same JSON
    until the VM is gone; Azure bumps DocumentIncarnation on unrelated changes),
    so de-duplication is by identity, not by arrival.
    """

    _seen: dict[tuple[str, str], InterruptionEvent] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event: InterruptionEvent) -> bool:
        """True if the event is new."""
        with self._lock:
            if event.dedup_key in self._seen:
                return False
            self._seen[event.dedup_key] = event
            return True

    def all(self) -> list[InterruptionEvent]:
        with self._lock:
            return list(self._seen.values())
