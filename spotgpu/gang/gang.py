"""One stop, one step, one final checkpoint for a whole gang of ranks.

A notice reaches one VM's agent; the ranks on other VMs never hear of it. So every
``every`` steps each rank contributes what its own agent said to one tiny all-reduce (MAX
of a float64 vector, :mod:`spotgpu.gang.agreement`) and every rank gets the same answer at
the same step: stop (with the gang's smallest budget deadline and who was noticed), take an
early checkpoint together, or go on. A rank that was not noticed learns everything from the
collective, never from its own agent. The final checkpoint, the restore and the outcome
reports then follow the same rule: decide together, report to each rank's own agent.

torch is imported lazily: ``import spotgpu.gang`` costs nothing where torch is absent.
"""

from __future__ import annotations

import datetime
import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from spotgpu.checkpoint.results import FinalSaveResult
from spotgpu.contract.checkpoint_report import PEER_LOST_REASON, GangOutcome, GangRole, ReportKind
from spotgpu.contract.notice import budget_left
from spotgpu.gang import agreement
from spotgpu.gang.exitcodes import EXIT_PEER_LOST, RESTARTABLE, exit_now
from spotgpu.gang.timing import DEFAULT_BUDGET_SECONDS, choose_every

log = logging.getLogger(__name__)

#: Extra seconds the outcome agreement waits past the budget (every rank's save_final ends by then).
OUTCOME_GRACE_SECONDS = 10.0


class Reporter(Protocol):
    """The part of :class:`spotgpu.agent.client.AgentClient` the gang uses."""

    def should_stop(self) -> bool: ...

    def checkpoint_requested(self) -> str | None: ...

    def mark_served(self) -> None: ...

    @property
    def notice(self) -> Any: ...

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
    ) -> None: ...

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
    ) -> None: ...

    def report_first_step(self, step: int) -> None: ...


class PeerLost(SystemExit):
    """A collective failed or timed out: a peer vanished or stalled. Exits with EXIT_PEER_LOST.

    A ``SystemExit`` so that ``except Exception`` in a training loop cannot swallow it;
    ``with gang:`` turns it (and a gloo error from the job's own collectives) into a reported,
    immediate exit, because a process whose gloo collective timed out aborts at interpreter exit.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(EXIT_PEER_LOST)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class GangRestoreError(RuntimeError):
    """Another rank could not restore; raised on every rank that did not fail itself."""


@dataclass(frozen=True)
class GangStop:
    step: int
    budget_deadline: float | None  # epoch seconds: the smallest noticed budget deadline
    noticed_ranks: tuple[int, ...]
    kind: str  # preempt | terminate | drain | maintenance | rebalance (several joined by "+")
    checkpoint: str  # early | final
    reason: str


def is_peer_error(err: BaseException) -> bool:
    """A failure of a collective (a peer gone or stalled), as opposed to a bug in the job.

    gloo raises plain ``RuntimeError``s whose text names gloo's transport ("Connection reset
    by peer", "Timed out waiting ... for recv"); NCCL and the stores raise ``DistError``s.
    """
    if isinstance(err, PeerLost):
        return True
    from torch.distributed import DistError

    if isinstance(err, DistError):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("gloo" in text or "Connection reset by peer" in text)


class Gang:
    def __init__(
        self,
        client: Reporter | None = None,
        group: Any = None,
        every: int | str = 1,
        budget_seconds: float = DEFAULT_BUDGET_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``client``: this rank's AgentClient (None: no agent, only the others can stop us).
        ``every``: steps between stop checks, or ``"auto"`` (from ``budget_seconds``, the
        shortest budget the job plans for, and the measured step and check times)."""
        import torch
        import torch.distributed as dist

        if every != "auto" and (not isinstance(every, int) or isinstance(every, bool) or every < 1):
            raise ValueError(f"every: {every!r}; fix: an int >= 1 or 'auto'")
        self._torch = torch
        self._dist = dist
        self.client = client
        self.group = group
        self.every = every
        self.budget_seconds = budget_seconds
        self.clock = clock
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank(group) if self.distributed else 0
        self.world_size = dist.get_world_size(group) if self.distributed else 1
        backend = dist.get_backend(group) if self.distributed else "gloo"
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
        self.stop: GangStop | None = None
        self.checks = 0
        self._interval = every if isinstance(every, int) else 1
        self._next_check: int | None = None
        self._early_due = False
        self._last_call: tuple[int, float] | None = None
        self._step_seconds: float | None = None
        self._check_seconds: float | None = None
        self._step = -1
        self._reported_loss = False
        self._first_step_due = False  # after a restore: report the first step (the end of the recovery)

    # -- the stop check ---------------------------------------------------------
    def should_stop(self, step: int) -> bool:
        """True on every rank at the same step once any rank's agent asked for a stop."""
        self._step = step
        self._measure_step(step)
        if self._first_step_due:
            self._first_step_due = False
            if self.client is not None:
                self.client.report_first_step(step)
        if self.stop is not None:
            return True
        if self._next_check is not None and step < self._next_check:
            return False
        local = self._local_view()
        started = time.monotonic()
        vector = self._allreduce_max(agreement.encode(local, self.rank, self.world_size), "stop check")
        spent = time.monotonic() - started
        # The check's cost is what the ranks spend in it, waiting for each other included (a
        # moving average, not the best case: with 4 ranks on 2 cores the best check took 0.3 ms
        # and the average 6 ms, so "auto" chose every step and cost 7.5 % at 100 ms steps).
        self._check_seconds = spent if self._check_seconds is None else 0.8 * self._check_seconds + 0.2 * spent
        self._last_call = (step, time.monotonic())  # the check is not step time
        view = agreement.decode(vector, self.world_size)
        self.checks += 1
        self._interval = view.every
        self._next_check = step + view.every
        if view.final:
            self.stop = _stop_from(view, step, self.clock())
            log.warning("gang stop at step %s: %s", step, self.stop.reason)
            return True
        if view.early:
            if self.client is not None and self.rank in view.noticed:
                self.client.mark_served()  # agreed: the gang answers this notice once
            self._early_due = True
        return False

    def checkpoint_requested(self) -> str | None:
        """``"early"`` once after the gang agreed on an early checkpoint (rebalance, maintenance)."""
        if self._early_due:
            self._early_due = False
            return "early"
        return None

    def early_checkpoint(self, manager: Any, step: int, state: Any) -> Any:
        """A periodic-style save by every rank at the agreed step, reported to each agent."""
        info = manager.save(step, state)
        if self.client is not None:
            self.client.report(info, "early", step)
        return info

    def commit_agreement(self) -> Any:
        """For ``CheckpointManager(..., agreement=gang.commit_agreement())``: the ranks of each
        save learn through this gang's group that every part is written, and how the commit
        went, instead of polling the store; a failed generation reaches every rank at once."""
        from spotgpu.checkpoint.collective import ProcessGroupAgreement

        return ProcessGroupAgreement(self.group)

    # -- the final checkpoint ---------------------------------------------------
    def final_checkpoint(self, manager: Any, step: int, state: Mapping[str, Any]) -> FinalSaveResult:
        """Every rank calls it after ``should_stop``; one final generation for the gang, or none."""
        stop = self.stop
        if stop is None:
            raise RuntimeError("final_checkpoint: call it only after should_stop(step) returned True")
        estimate = getattr(manager, "last_save_seconds", None)
        # One collective: the smallest budget on any clock (agreement time already spent) and the slowest save.
        left = budget_left(stop.budget_deadline, self.clock())
        smallest, slowest = self._allreduce_max([-left, float(estimate or 0.0)], "budget check")
        budget = -smallest
        if budget <= 0 or budget < slowest:
            why = "no time left" if budget <= 0 else f"the slowest rank's last save took {slowest:.1f}s"
            result = FinalSaveResult(
                False,
                0.0,
                None,
                f"no final checkpoint: the gang's budget of {max(budget, 0.0):.1f}s cannot fit a save ({why}); "
                f"nothing written, the gang resumes from the last committed generation",
            )
            self._report_outcome(result, step, GangOutcome.SKIPPED)
            return result
        started = time.monotonic()
        try:
            own = manager.save_final(step, state, budget_seconds=budget)
        except Exception as err:  # the others must still hear from us
            own = FinalSaveResult(False, time.monotonic() - started, None, f"failed: {err}")
        failed = [0.0] * self.world_size
        failed[self.rank] = 0.0 if own.committed else 1.0
        timeout = datetime.timedelta(seconds=budget + OUTCOME_GRACE_SECONDS)
        agreed = self._allreduce_max(failed, "final checkpoint outcome", timeout=timeout)
        failed_ranks = [r for r, flag in enumerate(agreed) if flag > 0]
        if not failed_ranks:
            result = FinalSaveResult(
                True,
                float(own.seconds),
                own.generation,
                f"gang checkpoint of step {step} committed by all {self.world_size} ranks "
                f"in a {budget:.1f}s budget ({stop.reason}); this rank: {own.reason}",
            )
            outcome = GangOutcome.COMMITTED
        else:
            names = ", ".join(str(r) for r in failed_ranks)
            result = FinalSaveResult(
                False,
                float(own.seconds),
                None,
                f"gang checkpoint of step {step} not committed: rank(s) {names} failed; this rank: {own.reason}",
            )
            outcome = GangOutcome.FAILED
        self._report_outcome(result, step, outcome)
        return result

    # -- restore ------------------------------------------------------------------
    def restore(self, manager: Any, state_dict: Any = None) -> Any:
        """Every rank restores the same newest step that verifies on every rank (or None on all).

        Each round every rank restores the newest generation it can verify at or below the
        agreed bound; the bound becomes the MIN over ranks until MIN == MAX. A rank that
        raises (e.g. a world-size mismatch) makes every rank raise, never a partial restore.
        ``state_dict``: for :class:`spotgpu.checkpoint.dcp.DCPCheckpointManager`, the job's
        state_dict to load into in place (resharded to this world); the plain manager
        returns the state instead and takes none.
        """
        bound: int | None = None
        result: Any = None
        local = None
        started = time.time()
        while True:
            error: BaseException | None = None
            if local is None or (bound is not None and local > bound):
                try:
                    if bound is not None and bound < 0:
                        result = None
                    elif state_dict is None:
                        result = manager.restore(max_step=bound)
                    else:
                        result = manager.restore(state_dict, max_step=bound)
                except Exception as err:
                    error, result = err, None
                local = -1 if result is None else int(result.step)
            lowest, highest, failed = self._allreduce_max(
                [-float(local), float(local), float(error is not None)], "restore"
            )
            if failed > 0:
                if error is not None:
                    raise error
                raise GangRestoreError("another rank failed to restore (see its log); no rank restored")
            if lowest == -highest:  # MIN == MAX: everyone holds the same step
                break
            bound = int(-lowest)
        if self.client is not None:
            self.client.report_restore(None if result is None else result.step, getattr(result, "generation", None),
                                       **_restore_detail(result, started))  # fmt: skip
        self._first_step_due = True
        return result

    # -- a lost peer --------------------------------------------------------------
    def __enter__(self) -> Gang:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """A peer error anywhere in the block (the job's own all-reduces too) exits EXIT_PEER_LOST now;
        a ``SystemExit`` with a restartable code (the loop's ``raise SystemExit(EXIT_GANG_STOP)``)
        exits with that code now. Both through :func:`exit_now`, never the interpreter's teardown."""
        if isinstance(exc, SystemExit) and not isinstance(exc, PeerLost) and exc.code in RESTARTABLE:
            exit_now(int(exc.code))  # type: ignore[arg-type]
        if exc is None or not is_peer_error(exc):
            return
        reason = exc.reason if isinstance(exc, PeerLost) else self._lost_reason("training step", exc)
        self._report_loss(reason)
        print(f"spotgpu gang: rank {self.rank}: {reason}; exiting {EXIT_PEER_LOST}", file=sys.stderr, flush=True)
        exit_now(EXIT_PEER_LOST)

    # -- internals ------------------------------------------------------------------
    def _local_view(self) -> agreement.LocalView:
        propose = self._interval
        if self.every == "auto" and self._step_seconds is not None and self._check_seconds is not None:
            propose = choose_every(self._step_seconds, self._check_seconds, self.budget_seconds)
        if self.client is None:
            return agreement.LocalView(propose_every=propose)
        final = self.client.should_stop()
        notice = self.client.notice
        early = not final and self.client.checkpoint_requested() == "early"
        return agreement.LocalView(
            final=final,
            early=early,
            kind=None if notice is None else notice.kind,
            budget_deadline=None if notice is None else notice.budget_deadline,
            propose_every=propose,
        )

    def _measure_step(self, step: int) -> None:
        now = time.monotonic()
        if self._last_call is not None and step > self._last_call[0]:
            per_step = (now - self._last_call[1]) / (step - self._last_call[0])
            self._step_seconds = per_step if self._step_seconds is None else 0.8 * self._step_seconds + 0.2 * per_step
        self._last_call = (step, now)

    def _allreduce_max(self, values: list[float], what: str, timeout: datetime.timedelta | None = None) -> list[float]:
        if not self.distributed:
            return values
        dist = self._dist
        tensor = self._torch.tensor(values, dtype=self._torch.float64, device=self.device)
        try:
            if timeout is None:
                dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self.group)
            else:
                options = dist.AllreduceOptions()
                options.reduceOp = dist.ReduceOp.MAX
                options.timeout = timeout
                group = self.group if self.group is not None else dist.group.WORLD
                group.allreduce([tensor], options).wait()
        except RuntimeError as err:
            reason = self._lost_reason(what, err)
            self._report_loss(reason)
            raise PeerLost(reason) from err
        return [float(v) for v in tensor.tolist()]

    def _lost_reason(self, what: str, err: BaseException) -> str:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"{PEER_LOST_REASON}: the {what} at step {self._step} failed on rank {self.rank}: {first}"

    def _report_loss(self, reason: str) -> None:
        if self._reported_loss or self.client is None:
            return
        self._reported_loss = True
        self.client.report(False, ReportKind.GANG, self._step, role=GangRole.PEER, reason=reason,
                           outcome=GangOutcome.PEER_LOST, noticed_ranks=[])  # fmt: skip

    def _report_outcome(self, result: FinalSaveResult, step: int, outcome: GangOutcome) -> None:
        stop = self.stop
        assert stop is not None
        if self.client is None:
            return
        noticed = self.rank in stop.noticed_ranks  # its own agent waits for a "final" report, then drains
        self.client.report(
            result,
            ReportKind.FINAL if noticed else ReportKind.GANG,
            step,
            role=GangRole.NOTICED if noticed else GangRole.PEER,
            noticed_ranks=list(stop.noticed_ranks),
            outcome=outcome,
        )


def _restore_detail(result: Any, started: float) -> dict[str, Any]:
    """What a ``restored`` record says of one rank's restore: its source (a tiered manager's result says; a
    store-only one reads the store), seconds, bytes and why nearer copies were passed over."""
    if result is None:
        return {"started_at": started, "seconds": round(time.time() - started, 6)}
    notes = getattr(result, "notes", ())
    return {
        "source": getattr(result, "source", "store"),
        "seconds": round(getattr(result, "seconds", None) or time.time() - started, 6),
        "nbytes": getattr(result, "nbytes", None),
        "reason": "; ".join(notes) if notes else None,
        "started_at": started,
    }


def _stop_from(view: agreement.GangView, step: int, now: float) -> GangStop:
    finals = {r: kind for r, (checkpoint, kind) in view.noticed.items() if checkpoint == "final"}
    kinds = "+".join(sorted(set(finals.values()))) or "other"
    ranks = ", ".join(str(r) for r in sorted(finals))
    left = None if view.budget_deadline is None else view.budget_deadline - now
    budget = "no budget" if left is None else f"{max(left, 0.0):.1f}s of budget left"
    several = " (the smallest budget wins)" if len(finals) > 1 else ""
    reason = f"{kinds} on rank(s) {ranks}; every rank stops at step {step} with {budget}{several}"
    return GangStop(step, view.budget_deadline, tuple(sorted(finals)), kinds, "final", reason)
