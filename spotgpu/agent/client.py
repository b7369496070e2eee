"""The workload side of the agent, in three lines of a training loop::

    agent = AgentClient()                                   # SPOTGPU_AGENT or /run/spotgpu/agent.sock
    for step in range(start, steps):
        ...train...
        if agent.should_stop():                             # a preempt/terminate notice arrived
            agent.final_checkpoint(ckpt, step, state); break  # save_final within the budget, reported back

``should_stop()`` is a flag read (a background thread long-polls the agent), so
it costs nothing per step. ``wait_for_notice()`` blocks for loops that prefer a
thread of their own, and ``report()`` sends any checkpoint outcome back.
``report_throughput()`` sends the mean step time every few hundred steps, so the
fleet's logs measure each GPU model's speed (``spotgpu profile fit``). If no
agent is running (a laptop, a CI job), the client says "keep going" and the
periodic checkpoints remain the protection.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Protocol

from spotgpu.agent.control import parse_address
from spotgpu.contract.agent_status import AgentStatus, WorkloadSnapshot
from spotgpu.contract.checkpoint_report import (
    CheckpointReport,
    GangOutcome,
    GangRole,
    ReportKind,
    RestoreSource,
    member,
)
from spotgpu.contract.notice import NoticeDocument
from spotgpu.contract.throughput import ThroughputReport

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = "/run/spotgpu/agent.sock"
ENV_ADDRESS = "SPOTGPU_AGENT"


class CheckpointManagerLike(Protocol):
    """The part of ``spotgpu.checkpoint.CheckpointManager`` the client drives."""

    def save(self, step: int, state: Any) -> Any: ...

    def save_final(self, step: int, state: Any, budget_seconds: float) -> Any: ...


@dataclass(frozen=True)
class Notice(NoticeDocument):
    """A notice as the training loop sees it: the agent's document
    (:class:`~spotgpu.contract.notice.NoticeDocument`) and whether the job must stop now."""

    stop: bool = False


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class AgentClient:
    def __init__(self, address: str | None = None, timeout: float = 5.0, register: bool = True) -> None:
        self.address = address or os.environ.get(ENV_ADDRESS) or DEFAULT_ADDRESS
        self._kind, self._where = parse_address(self.address)
        self.timeout = timeout
        self._version = -1
        self._notice: Notice | None = None
        self._stop_flag = threading.Event()
        self._watcher: threading.Thread | None = None
        self._lock = threading.Lock()
        self._served: set[tuple[str, str]] = set()
        self._closed = threading.Event()
        self._watch_conn: http.client.HTTPConnection | None = None
        if register:
            self._try("POST", "/v1/register", {"pgid": os.getpgrp()})

    # -- transport ------------------------------------------------------------
    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        if self._kind == "unix":
            assert isinstance(self._where, str)
            return _UnixConnection(self._where, timeout)
        assert isinstance(self._where, tuple)
        return http.client.HTTPConnection(self._where[0], self._where[1], timeout=timeout)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        conn = self._conn(timeout or self.timeout)
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if payload else {}
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = json.loads(resp.read() or b"null")
            if resp.status != 200:
                raise RuntimeError(f"agent answered {resp.status} to {method} {path}: {data}")
            return data
        finally:
            conn.close()

    def _try(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Like _call, but an absent agent is logged, not raised: training must go on."""
        try:
            return self._call(method, path, body, timeout)
        except (OSError, http.client.HTTPException, RuntimeError, ValueError) as err:
            log.debug("spotgpu agent at %s unreachable: %s", self.address, err)
            return None

    def _absorb(self, snapshot: Any) -> Notice | None:
        if not isinstance(snapshot, dict):
            return None
        try:
            version, doc, stop = WorkloadSnapshot.notice_of(snapshot)
        except ValueError as err:  # an agent of another version: the periodic checkpoints still protect
            log.warning("spotgpu agent at %s served a notice this client cannot read: %s", self.address, err)
            with self._lock:
                self._version = max(self._version, WorkloadSnapshot.version_of(snapshot))
                return self._notice
        with self._lock:
            self._version = max(self._version, version)
            if doc is not None:
                self._notice = Notice(**{f.name: getattr(doc, f.name) for f in fields(doc)}, stop=stop)
                if self._notice.stop:
                    self._stop_flag.set()
            elif not self._stop_flag.is_set():
                # The agent says "no notice" (an early one cleared): forget it, so
                # checkpoint_requested() and notice stop naming it. A stop is never undone.
                self._notice = None
            return self._notice

    # -- the three calls ------------------------------------------------------
    def should_stop(self) -> bool:
        """True once a preempt/terminate notice arrived; cheap enough for every step."""
        if self._watcher is None:
            self._absorb(self._try("GET", "/v1/notice"))
            self._watcher = threading.Thread(target=self._watch, name="spotgpu-agent-watch", daemon=True)
            self._watcher.start()
        return self._stop_flag.is_set()

    def wait_for_notice(self, timeout: float | None = None, wait_chunk: float = 30.0) -> Notice | None:
        """Block until the agent has any notice (early or final), or ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            current = self._notice
            if current is not None:
                return current
            remaining = wait_chunk if end is None else min(wait_chunk, end - time.monotonic())
            if remaining <= 0:
                return None
            snap = self._try(
                "GET", f"/v1/notice?since={self._version}&wait={remaining:.3f}", timeout=remaining + self.timeout
            )
            if snap is None:
                time.sleep(min(1.0, max(0.0, remaining)))
            self._absorb(snap)

    def report(
        self,
        result: Any,
        checkpoint: str = "final",
        step: int | None = None,
        *,
        role: str | None = None,
        noticed_ranks: list[int] | None = None,
        outcome: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Send a checkpoint outcome; ``result`` is a FinalSaveResult, a GenerationInfo, or a bool.

        A gang (``spotgpu.gang``) adds ``role`` (noticed | peer), ``noticed_ranks`` and
        ``outcome``; with ``checkpoint="gang"`` the agent records it and does not drain.
        A kind, role or outcome outside :mod:`spotgpu.contract.checkpoint_report` raises
        ValueError (a bug in the loop, found at once); an absent agent does not.
        """
        committed, seconds, generation, said = _saved(result)
        self._send_report(CheckpointReport(
            checkpoint=member(ReportKind, checkpoint),
            committed=committed,
            step=step,
            seconds=seconds,
            generation=generation,
            reason=said if reason is None else reason,
            role=None if role is None else member(GangRole, role),
            noticed_ranks=None if role is None else list(noticed_ranks or []),
            outcome=None if role is None or outcome is None else member(GangOutcome, outcome),
        ))  # fmt: skip

    def report_restore(
        self,
        step: int | None,
        generation: str | None,
        *,
        source: str | None = None,
        seconds: float | None = None,
        nbytes: int | None = None,
        reason: str | None = None,
        started_at: float | None = None,
    ) -> None:
        """The step this job resumed from (None: from scratch), for the agent's events log (``restored``):
        where its state came from (``local``, ``peer`` or ``store``), how long it took, how many bytes,
        and why a nearer copy was not used."""
        self._send_report(CheckpointReport(
            checkpoint=ReportKind.RESTORE,
            committed=True,  # a restore is of a committed generation
            step=step,
            seconds=seconds,
            generation=generation,
            reason=reason,
            source=None if source is None else member(RestoreSource, source, "report_restore"),
            nbytes=nbytes,
            started_at=started_at,
        ))  # fmt: skip

    def zone(self) -> str | None:
        """This VM's zone as its agent read it from the metadata (None: no agent, or not read yet)."""
        status = self._try("GET", "/v1/status")
        if status is None:
            return None
        try:
            return AgentStatus.from_json(status).zone
        except ValueError as err:  # an agent of another version: no zone, as without an agent
            log.warning("spotgpu agent at %s served a status this client cannot read: %s", self.address, err)
            return None

    def report_first_step(self, step: int) -> None:
        """The first training step after a restore finished (``first-step``: the end of a recovery)."""
        self._send_report(CheckpointReport(ReportKind.STEP, committed=False, step=step))  # no checkpoint at all

    def _send_report(self, report: CheckpointReport) -> None:
        self._try("POST", "/v1/report", report.to_json())

    def report_throughput(self, step_seconds: float, steps: int = 1, gpu_model: str | None = None) -> None:
        """The mean seconds per step over the last ``steps`` steps, for the agent's events log.

        ``profile fit`` turns these into each GPU model's speed against the reference type
        (``gpu.relativeThroughput``). Leave ``gpu_model`` out: the agent knows its VM's type and
        names the model from the catalogue (give it where the agent cannot: GCP N1 with attached
        GPUs). Bad arguments raise ValueError in one line naming the argument (a bug in the loop, found
        at once; the agent refuses the same values in the same words); an absent agent does not (like
        every report, the training goes on).
        """
        report = ThroughputReport.of(step_seconds, steps, gpu_model, what="report_throughput")
        self._try("POST", "/v1/throughput", report.to_json())

    def mark_served(self) -> None:
        """The current notice was answered (a gang agreed on it): checkpoint_requested() stops returning it."""
        current = self._notice
        if current is not None:
            self._served.add((current.event_id, current.checkpoint))

    # -- conveniences ---------------------------------------------------------
    @property
    def notice(self) -> Notice | None:
        return self._notice

    def checkpoint_requested(self) -> str | None:
        """``early`` or ``final`` once per notice, else None (call after should_stop())."""
        self.should_stop()
        current = self._notice
        if current is None or (current.event_id, current.checkpoint) in self._served:
            return None
        return current.checkpoint

    def final_checkpoint(self, manager: CheckpointManagerLike, step: int, state: Any) -> Any:
        """``manager.save_final`` with the remaining budget, then report the outcome to the agent."""
        current = self._notice or self.wait_for_notice(timeout=0)
        budget = current.budget_seconds(time.time()) if current else 0.0
        started = time.monotonic()
        try:
            result = manager.save_final(step, state, budget_seconds=budget)
        except Exception as err:
            self.report(False, "final", step)
            log.warning("final checkpoint at step %s failed after %.1fs: %s", step, time.monotonic() - started, err)
            raise
        self.report(result, "final", step)
        if current:
            self._served.add((current.event_id, "final"))
        return result

    def early_checkpoint(self, manager: CheckpointManagerLike, step: int, state: Any) -> Any:
        """A periodic-style save the agent asked for early (rebalance, maintenance)."""
        info = manager.save(step, state)
        self.report(info, "early", step)
        if self._notice:
            self._served.add((self._notice.event_id, self._notice.checkpoint))
        return info

    def ready(self) -> None:
        """Tell the agent the workload is up (feeds boot-to-ready telemetry)."""
        self._try("POST", "/v1/ready", {})

    def close(self) -> None:
        """End the background watcher (its open long poll too). A training process that exits needs
        no close; a process that makes many clients (a test, a notebook) does, or each keeps polling."""
        self._closed.set()
        conn = self._watch_conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5.0)

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _watch(self) -> None:
        while not (self._stop_flag.is_set() or self._closed.is_set()):
            snap = self._watch_poll()
            if snap is None:
                self._closed.wait(1.0)
                continue
            self._absorb(snap)

    def _watch_poll(self) -> Any:
        """One long poll, on a connection :meth:`close` can cut."""
        conn = self._conn(30 + self.timeout)
        self._watch_conn = conn
        try:
            if self._closed.is_set():
                return None
            conn.request("GET", f"/v1/notice?since={self._version}&wait=30")
            if self._closed.is_set():  # close() ran while we connected: it may have found no socket to cut
                return None
            resp = conn.getresponse()
            data = json.loads(resp.read() or b"null")
            return data if resp.status == 200 else None
        except (OSError, http.client.HTTPException, ValueError) as err:
            log.debug("spotgpu agent at %s unreachable: %s", self.address, err)
            return None
        finally:
            self._watch_conn = None
            conn.close()


def _saved(result: Any) -> tuple[bool, float | None, str | None, str | None]:
    """committed, seconds, generation and reason of what a save returned: a FinalSaveResult, a
    GenerationInfo (a periodic save's: it only exists once committed) or a bool."""
    if isinstance(result, bool):
        return result, None, None, None
    if hasattr(result, "committed"):  # FinalSaveResult
        generation = _generation_id(getattr(result, "generation", None))
        return bool(result.committed), getattr(result, "seconds", None), generation, getattr(result, "reason", None)
    return True, None, _generation_id(result), None


def _generation_id(generation: Any) -> str | None:
    if generation is None:
        return None
    for attr in ("generation", "id", "name", "step"):
        value = getattr(generation, attr, None)
        if value is not None:
            return str(value)
    return str(generation)
