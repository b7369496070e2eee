"""The agent's half of the fallback controller's drain protocol.

The controller gives surplus fallback capacity back only after the VM's workload
has committed a checkpoint made after the drain request. Both directions go
through the controller's own store (its ``stateUrl``; the components default it
to the pool's checkpoint store + ``/_controller``) and the controller's own
:class:`~spotgpu.contract.drain.DrainChannel`, so the two sides cannot drift
apart on keys or fields:

* in: ``drains/<pool>/<vm>.json``, read every ``runtime.controlPollSeconds`` by
  :class:`DrainMonitor`. A request becomes an :class:`InterruptionEvent` of kind
  ``drain`` (source ``controller/drain``), which the responder handles like a
  preemption without a cloud acknowledgement: stop new work, final checkpoint
  within ``runtime.drainBudgetSeconds``, drain;
* out: ``agents/<pool>/<vm>.json`` = ``{"lastCommittedAt": c, ...}``, written by
  :class:`ControllerLink` after every committed checkpoint the workload reports
  (early or final). Writes happen on the link's own thread with retries, so a
  slow or failing store never delays the workload's report.

VM ids are the ones the controller's adapters use: the AWS instance id, the GCP
instance name and the Azure VM name.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from spotgpu.agent.events import InterruptionEvent, since
from spotgpu.agent.identity import VmIdentity
from spotgpu.agent.telemetry import AgentTelemetry
from spotgpu.contract.checkpoint_report import CheckpointReport
from spotgpu.contract.drain import DrainChannel, vm_key
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.state_store import ObjectJsonStore

log = logging.getLogger(__name__)

DRAIN_SOURCE = "controller/drain"
#: A drain request older than this VM's boot, by more than this much clock skew,
#: was written for an earlier VM that had the same name (GCP and Azure reuse names).
BOOT_SKEW_SECONDS = 60.0


def controller_vm_id(identity: VmIdentity, vm_name: str | None = None) -> str:
    """The id the controller knows this VM by (the contract's rule, :func:`spotgpu.contract.drain.vm_key`)."""
    return vm_key(identity.provider, identity.instance_id, identity.name, vm_name)


def open_channel(url: str, region: str = "") -> DrainChannel:
    """The controller's channel on its store; S3 gets the VM's region unless the environment sets one."""
    options: dict[str, Any] = {}
    if (
        url.startswith("s3://")
        and region
        and not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
    ):
        options["region"] = region
    return DrainChannel(ObjectJsonStore(url, **options))


def commit_time(reported_at: float, drain: tuple[float, float] | None) -> float:
    """The ``lastCommittedAt`` to report for a commit the workload reported at ``reported_at``.

    The controller compares it with ``requestedAt`` from its own clock. A commit
    reported after this agent saw the request (``drain = (requested_at, seen_at)``)
    is causally after the request, so it is reported as no earlier than
    ``requested_at``: a VM clock running behind the controller's must not keep a
    drained VM (and its bill) alive forever. Earlier commits keep their own time.
    """
    if drain is None:
        return reported_at
    requested_at, seen_at = drain
    return max(reported_at, requested_at) if reported_at >= seen_at else reported_at


class ControllerLink:
    """Reads drain requests and writes commit reports for one VM; never raises into the agent."""

    def __init__(
        self,
        url: str,
        pool: str,
        identity: Callable[[], VmIdentity],
        telemetry: AgentTelemetry,
        stop: threading.Event,
        *,
        vm_name: str | None = None,
        retry_seconds: float = 1.0,
        channel_factory: Callable[[str, str], DrainChannel] = open_channel,
    ) -> None:
        self.url = url
        self.pool = pool
        self.identity = identity
        self.telemetry = telemetry
        self.stop_event = stop
        self.vm_name = vm_name
        self.retry_seconds = retry_seconds
        self._factory = channel_factory
        self._channel: DrainChannel | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: tuple[float, dict[str, Any]] | None = None
        self._drain: tuple[float, float] | None = None
        self.last_reported: float | None = None
        self._thread = threading.Thread(target=self._run, name="controller-link", daemon=True)

    # -- identity and store -------------------------------------------------
    def vm_id(self) -> str:
        return controller_vm_id(self.identity(), self.vm_name)

    def channel(self) -> DrainChannel:
        if self._channel is None:
            self._channel = self._factory(self.url, self.identity().region)
        return self._channel

    # -- drain requests in ----------------------------------------------------
    def requested_at(self) -> float | None:
        vm = self.vm_id()
        return self.channel().requested_at(self.pool, vm) if vm else None

    def drain_seen(self, requested_at: float, seen_at: float) -> None:
        """Remember when we first saw this request (see :func:`commit_time`)."""
        with self._lock:
            if self._drain is None or self._drain[0] != requested_at:
                self._drain = (requested_at, seen_at)

    # -- commits out ------------------------------------------------------------
    def on_report(self, report: CheckpointReport) -> None:
        """A ``WorkloadState`` commit listener: the workload reported a committed checkpoint."""
        self.commit(report.received_at, checkpoint=str(report.checkpoint), step=report.step, generation=report.generation)

    def commit(self, at: float, **detail: Any) -> None:
        """Queue a commit report; only the newest pending one is written."""
        with self._lock:
            value = commit_time(at, self._drain)
            if self._pending is None or value >= self._pending[0]:
                self._pending = (value, {k: v for k, v in detail.items() if v is not None})
        self._wake.set()

    def start(self) -> ControllerLink:
        self._thread.start()
        return self

    @property
    def thread(self) -> threading.Thread:
        """The writer thread (it ends once the agent's stop event is set)."""
        return self._thread

    def _run(self) -> None:
        while not self.stop_event.is_set():
            if not self._wake.wait(0.2):
                continue
            with self._lock:
                pending = self._pending
                self._wake.clear()
            if pending is None:
                continue
            if not self._write(*pending):
                self._wake.set()  # retry
                self.stop_event.wait(self.retry_seconds)
                continue
            with self._lock:
                if self._pending is pending:
                    self._pending = None

    def _write(self, at: float, detail: dict[str, Any]) -> bool:
        vm = self.vm_id()
        if not vm:
            return False  # identity not resolved yet
        if self.last_reported is not None and at <= self.last_reported:
            return True  # never move lastCommittedAt backwards
        try:
            self.channel().report_commit(self.pool, vm, at, **detail)
        except Exception as err:  # the store may be briefly unreachable: retry
            # Reopen on the next try: a write whose answer was lost leaves a stale ETag
            # behind, and this document has no other writer to protect it from.
            self._channel = None
            self.telemetry.controller_report("error", at, vm, str(err)[:300])
            return False
        self.last_reported = at
        self.telemetry.controller_report("ok", at, vm)
        return True


class DrainMonitor:
    """One poll of ``drains/<pool>/<vm>.json``; a request becomes a ``drain`` event."""

    source = DRAIN_SOURCE

    def __init__(self, link: ControllerLink, interval: float, budget_seconds: float, not_before: float | None) -> None:
        self.link = link
        self.interval = interval
        self.budget_seconds = budget_seconds
        self.not_before = not_before
        self.last_clean: float | None = None

    def check(self) -> list[InterruptionEvent]:
        requested = self.link.requested_at()
        if requested is None or (self.not_before is not None and requested < self.not_before):
            return []
        now = time.time()
        self.link.drain_seen(requested, now)
        return [
            InterruptionEvent(
                event_id=f"drain@{requested:.3f}",
                kind=InterruptionKind.DRAIN,
                source=DRAIN_SOURCE,
                detected_at=now,
                raw={"requestedAt": requested, "store": self.link.url},
                cloud_deadline=now + self.budget_seconds,
                published_at=requested,
                since_last_clean_poll=since(self.last_clean, now),
            )
        ]


def boot_time(seconds_since_boot: float | None) -> float | None:
    """Earliest drain request this VM honours: its boot, less clock skew; None when unknown."""
    if seconds_since_boot is None:
        return None
    return time.time() - seconds_since_boot - BOOT_SKEW_SECONDS
