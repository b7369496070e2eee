"""What the workload is told, shared by the responder and the control endpoint.

The workload's reports back are :class:`~spotgpu.contract.checkpoint_report.CheckpointReport`
(re-exported here for the agent's parts that hold them).

Every change bumps ``version`` and wakes long-polling clients, so a training
loop waiting on the agent learns of a notice the moment the responder decides.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from spotgpu.contract.agent_status import Phase, WorkloadSnapshot
from spotgpu.contract.checkpoint_report import CheckpointReport, GangOutcome, ReportKind
from spotgpu.contract.notice import ClearedNotice, NoticeDocument

log = logging.getLogger(__name__)


class WorkloadState:
    """The agent's answer to "should I stop?", plus the workload's reports back."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.version = 0
        self.phase: Phase = "running"
        self.notice: NoticeDocument | None = None
        #: The last early notice that went away.
        self.cleared: ClearedNotice | None = None
        self.final_report: CheckpointReport | None = None
        self.reports: list[CheckpointReport] = []
        self.workload_pgids: set[int] = set()
        self.workload_seen_at: float | None = None
        self.workload_ready_at: float | None = None
        #: Called with every *committed* report, outside the lock (the controller link).
        self.commit_listeners: list[Callable[[CheckpointReport], None]] = []
        #: The last gang stop this VM's rank reported (noticed or peer), and the last restore.
        self.gang: CheckpointReport | None = None
        self.restored: CheckpointReport | None = None
        #: Called with every gang or restore report, outside the lock (telemetry).
        self.gang_listeners: list[Callable[[CheckpointReport], None]] = []
        #: Set by :meth:`close` (the agent stopping): no one waits on this state any more.
        self.closed = False

    def _bump(self) -> None:
        self.version += 1
        self._cond.notify_all()

    def set_notice(self, phase: Phase, notice: NoticeDocument) -> None:
        with self._cond:
            self.phase = phase
            self.notice = notice
            self._bump()

    def clear_notice(self, cleared: ClearedNotice) -> None:
        """The early notice went away: accept work again (a terminal notice is never cleared)."""
        with self._cond:
            self.phase = "running"
            self.notice = None
            self.cleared = cleared
            self._bump()

    def set_phase(self, phase: Phase) -> None:
        with self._cond:
            self.phase = phase
            self._bump()

    def touch(self) -> None:
        """A workload talked to us: it is worth waiting for its final checkpoint."""
        with self._cond:
            self.workload_seen_at = time.time()

    def register(self, pgid: int) -> None:
        with self._cond:
            self.workload_pgids.add(pgid)
            self.workload_seen_at = time.time()

    def mark_ready(self) -> bool:
        with self._cond:
            self.workload_seen_at = time.time()
            first = self.workload_ready_at is None
            if first:
                self.workload_ready_at = time.time()
            return first

    def add_report(self, report: CheckpointReport) -> None:
        with self._cond:
            self.reports.append(report)
            if report.checkpoint == ReportKind.FINAL and self.final_report is None:
                self.final_report = report
            elif report.outcome == GangOutcome.PEER_LOST and self.phase == "final-checkpoint" and self.final_report is None:
                self.final_report = report  # the gang lost a node during the notice: no final checkpoint is coming
            if report.role is not None:
                self.gang = report
            if report.checkpoint == ReportKind.RESTORE:
                self.restored = report
            self.workload_seen_at = time.time()
            self._bump()
        if report.role is not None or report.checkpoint in (ReportKind.RESTORE, ReportKind.STEP):
            for gang_listener in list(self.gang_listeners):
                try:
                    gang_listener(report)
                except Exception:
                    log.exception("gang listener failed")
        if report.committed:
            for listener in list(self.commit_listeners):
                try:
                    listener(report)
                except Exception:  # a broken listener must not fail the workload's report
                    log.exception("commit listener failed")

    def close(self) -> None:
        """The agent is stopping: every wait on this state returns now, not at its deadline."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def wait_final_report(self, until: float) -> CheckpointReport | None:
        """Block until the workload reports its final checkpoint or ``until`` (Unix time)."""
        with self._cond:
            while self.final_report is None and not self.closed:
                remaining = until - time.time()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            return self.final_report

    def wait_change(self, since: int, timeout: float) -> None:
        with self._cond:
            end = time.monotonic() + timeout
            while self.version <= since and not self.closed:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return
                self._cond.wait(remaining)

    def view(self) -> WorkloadSnapshot:
        """What ``GET /v1/notice`` serves (:class:`~spotgpu.contract.agent_status.WorkloadSnapshot`): the
        notice (its budget counted now), the phase, the last cleared notice and the workload's reports."""
        with self._cond:
            return WorkloadSnapshot(
                version=self.version,
                phase=self.phase,
                now=time.time(),
                notice=self.notice,
                cleared=self.cleared,
                final_report=self.final_report,
                gang=self.gang,
                restored=self.restored,
            )

    def snapshot(self) -> dict[str, object]:
        """:meth:`view` as served."""
        return self.view().to_json()


__all__ = ["CheckpointReport", "Phase", "WorkloadState"]
