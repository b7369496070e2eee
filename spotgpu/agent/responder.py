"""Executes the plan for each notice: tell the workload, wait, drain, acknowledge.

One responder per agent consumes the de-duplicated event stream in order. A
terminal notice is handled to completion (final checkpoint answer or budget
spent, then drain, then acknowledgement) before the next event; later terminal
events for the same VM are then only acknowledged, each exactly once.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from spotgpu.agent import actions
from spotgpu.agent.events import EventStore, InterruptionEvent, NoticeWithdrawn
from spotgpu.agent.response_rules import Contract, plan_response, resolve_deadline
from spotgpu.agent.state import Phase, WorkloadState
from spotgpu.agent.telemetry import AgentTelemetry
from spotgpu.contract.agent_records import Drained, Ignored
from spotgpu.contract.notice import Checkpoint, ClearedNotice, NoticeDocument, drain_hook_environment

log = logging.getLogger(__name__)


class Acknowledger(Protocol):
    """Answers the cloud for a notice once the drain is done.

    An acknowledger may also define ``handles(event) -> bool``: only the notices it answers
    are given to it (Azure approves only events with ``acknowledge_ids``; the AWS lifecycle
    hook is completed only for the notices the group waits on). Without it, it gets them all.
    """

    def acknowledge(self, event: InterruptionEvent) -> None: ...


def _handles(ack: Acknowledger, event: InterruptionEvent) -> bool:
    handles = getattr(ack, "handles", None)
    return True if handles is None else bool(handles(event))


@dataclass
class WorkloadHooks:
    """Signals and hook commands; all optional."""

    notice_signal: signal.Signals | None = None
    drain_signal: signal.Signals | None = None
    pid_file: str | None = None
    notice_hook: Sequence[str] | None = None
    drain_hook: Sequence[str] | None = None


@dataclass
class Responder:
    contract: Contract
    state: WorkloadState
    telemetry: AgentTelemetry
    acknowledgers: Sequence[Acknowledger] = ()
    hooks: WorkloadHooks = field(default_factory=WorkloadHooks)
    #: How long a workload must have been silent before we stop waiting for it.
    workload_contact_window: float = 3600.0
    ack_retry_seconds: float = 0.5
    #: Keep retrying an acknowledgement this long past the deadline (the VM may outlive it).
    ack_grace_seconds: float = 5.0
    store: EventStore = field(default_factory=EventStore)
    terminal_event: InterruptionEvent | None = None
    drained: bool = False
    acknowledged: list[str] = field(default_factory=list)
    #: Early notices the clouds still show, with their deadlines: the workload's notice while any is.
    early_active: dict[tuple[str, str], tuple[InterruptionEvent, float | None]] = field(default_factory=dict)
    #: Called with each terminal event and its final-checkpoint outcome once the drain is done.
    on_drained: Callable[[InterruptionEvent, str], None] | None = None

    def __post_init__(self) -> None:
        self.state.gang_listeners.append(lambda report: self.telemetry.gang_report(report.as_dict()))

    def handle(self, event: InterruptionEvent) -> None:
        if not self.store.add(event):
            self.telemetry.duplicate(event)
            return
        plan = plan_response(event, self.contract)
        deadline = resolve_deadline(event, self.contract)
        self.telemetry.notice(event, deadline.at, deadline.basis)
        if not plan.act:
            self.telemetry.log(Ignored(event_id=event.event_id, why=plan.why))
            return
        if plan.checkpoint is Checkpoint.EARLY:
            self.early_active[event.dedup_key] = (event, deadline.at)
            if self.terminal_event is None and self.state.phase in ("running", "early-checkpoint"):
                self._notify(event, "early-checkpoint", Checkpoint.EARLY, deadline.at)
            return
        if self.terminal_event is not None:
            # Events are handled in order, so the earlier notice's drain is done:
            # approve this one too (Azure may list a second event for this VM).
            if plan.acknowledge:
                self._acknowledge(event, deadline.at)
            else:
                self.telemetry.log(Ignored(event_id=event.event_id, why="already drained"))
            return
        self.terminal_event = event
        self._final(event, deadline.at, plan.acknowledge)

    def withdraw(self, gone: NoticeWithdrawn) -> None:
        """A source stopped showing notices: an early one clears, unless another is still shown."""
        for event_id in gone.event_ids:
            self.early_active.pop((gone.source, event_id), None)
        current = self.state.notice
        if self.terminal_event is not None or self.state.phase != "early-checkpoint" or current is None:
            return
        if (current.source, current.event_id) in self.early_active:
            return
        if self.early_active:  # another early notice is still shown: it is the workload's notice now
            event, deadline = max(self.early_active.values(), key=lambda pair: pair[0].detected_at)
            self.state.set_notice("early-checkpoint", self._notice_doc(event, Checkpoint.EARLY, deadline))
            return
        cleared = ClearedNotice.of(current, gone.detected_at)
        self.state.clear_notice(cleared)
        self.telemetry.notice_cleared(cleared)

    # -- steps --------------------------------------------------------------
    def _notice_doc(self, event: InterruptionEvent, checkpoint: Checkpoint, deadline: float | None) -> NoticeDocument:
        return NoticeDocument.told(event.event_id, event.kind, event.source, checkpoint, event.detected_at, deadline,
                                   self.contract.safety_margin_seconds)  # fmt: skip

    def _notify(
        self, event: InterruptionEvent, phase: Phase, checkpoint: Checkpoint, deadline: float | None
    ) -> float | None:
        notice = self._notice_doc(event, checkpoint, deadline)
        self.state.set_notice(phase, notice)
        pgids = set(self.state.workload_pgids)
        pid = actions.read_pid_file(self.hooks.pid_file)
        if pid is not None:
            pgids.add(pid)
        actions.signal_groups(self.hooks.notice_signal, pgids)
        now = time.time()
        actions.start_hook(self.hooks.notice_hook, notice.hook_environment(now))
        self.telemetry.workload_notified(phase, notice, now)
        return notice.budget_deadline

    def _final(self, event: InterruptionEvent, deadline: float | None, acknowledge: bool = True) -> None:
        assert deadline is not None  # terminal kinds always resolve a deadline
        # Each step runs even if an earlier one failed: a VM that is going away
        # must still drain and release the cloud's event.
        outcome = "error"
        try:
            budget_deadline = self._notify(event, "final-checkpoint", Checkpoint.FINAL, deadline) or deadline
            outcome = self._await_final_checkpoint(event, budget_deadline)
        except Exception:
            log.exception("final checkpoint step failed for %s", event.event_id)
        try:
            self._drain(deadline)
        except Exception:
            log.exception("drain failed for %s", event.event_id)
        if self.on_drained is not None:
            try:
                self.on_drained(event, outcome)
            except Exception:
                log.exception("drain callback failed for %s", event.event_id)
        if acknowledge:
            self._acknowledge(event, deadline)

    def _await_final_checkpoint(self, event: InterruptionEvent, budget_deadline: float) -> str:
        """Wait for the workload's final report; returns the outcome recorded in telemetry."""
        seen = self.state.workload_seen_at
        if not self.state.workload_pgids and (seen is None or time.time() - seen > self.workload_contact_window):
            self.telemetry.final_checkpoint("no-workload", None, event.event_id)
            return "no-workload"
        report = self.state.wait_final_report(budget_deadline)
        if report is None:
            self.telemetry.final_checkpoint("timeout", None, event.event_id)
            return "timeout"
        outcome = "committed" if report.committed else "failed"
        self.telemetry.final_checkpoint(outcome, report.seconds, event.event_id, report.as_dict())
        return outcome

    def _drain(self, deadline: float) -> None:
        self.state.set_phase("draining")
        pgids = set(self.state.workload_pgids)
        pid = actions.read_pid_file(self.hooks.pid_file)
        if pid is not None:
            pgids.add(pid)
        actions.signal_groups(self.hooks.drain_signal, pgids)
        code = actions.run_hook(self.hooks.drain_hook, drain_hook_environment(deadline), deadline)
        self.state.set_phase("drained")
        self.drained = True
        self.telemetry.log(Drained(hook_exit=code))

    def _acknowledge(self, event: InterruptionEvent, deadline: float | None) -> None:
        """Acknowledge with retries until it succeeds or the VM must be gone."""
        give_up = (deadline or time.time()) + self.ack_grace_seconds
        for ack in self.acknowledgers:
            if not _handles(ack, event):
                continue
            while True:
                try:
                    ack.acknowledge(event)
                    self.acknowledged.append(event.event_id)
                    self.telemetry.acknowledged("ok", event)
                    break
                except Exception as err:  # retry: an unacknowledged event only waits for NotBefore
                    self.telemetry.acknowledged("error", event, str(err))
                    if time.time() >= give_up or self.state.closed:
                        break
                    time.sleep(self.ack_retry_seconds)

