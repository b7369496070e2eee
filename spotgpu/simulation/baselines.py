"""Recovery policies the simulator compares, each a vectorised ``decide(tick)``.

* ``OnDemandOnly``: the baseline; never touches spot.
* ``FixedWait``: spot in the home zone; after a loss wait a fixed time for it to
  come back, then on-demand until the end. No deadline awareness.
* ``UniformProgress``: the deadline-aware policy of *Can't Be Late* (Wu et al.,
  NSDI 2024), single zone, as the paper states its rules:
  1. when idle and behind the uniform-progress line ``ep(t) = W t / D``, go
     on-demand to catch up; 2. take spot whenever it is available and keep it
     until preempted; 3. hysteresis: once on on-demand stay until progress
     reaches ``ep(t + 2d)``; 4. safety net: when idle (or on on-demand) and the
     time left is below the work left plus ``2d``, go on-demand until the end.
  ``d`` is the changeover delay; with periodic checkpoints a preemption also
  loses up to one interval, so ``d`` here is restart + load + interval + write.
  The paper's model has no checkpoint stalls; here work left is converted to
  wall time with the same ``1 + C/T`` factor the controller's deadline test uses
  (:func:`spotgpu.economics.exposure.with_checkpoint_stalls`),
  so both get the same (fair) view of how long the remaining work takes.

These are the baselines. The project's ladder is not here: it is the controller's
planner (``spotgpu.controller.reconcile.reconcile``), replayed through the digital twin
(``spotgpu.simulation.ladder``), so what a simulation proves is what runs.
"""

from __future__ import annotations

import math

import numpy as np

from spotgpu.economics.exposure import with_checkpoint_stalls
from spotgpu.simulation.replay import IDLE, NEVER, ON_DEMAND, SPOT, Job, Tick


def ticks_while_positive(margin: np.ndarray | float, gap: float) -> np.ndarray:
    """Largest j >= 0 with ``margin - i * gap > 0`` for every i in 1..j (0 if the margin is gone).

    Quiet-stretch bounds are built from this: a quantity that shrinks by at most one
    tick's worth per tick stays positive for this many further ticks.
    """
    m = np.asarray(margin, dtype=float)
    with np.errstate(invalid="ignore"):
        j = np.where(m > 0, np.ceil(m / gap) - 1.0, 0.0)
    return np.minimum(np.nan_to_num(j, nan=0.0, posinf=float(NEVER)), float(NEVER)).astype(np.int64)


def _flip_ticks(tick: Tick, zones: np.ndarray | None = None) -> np.ndarray:
    """Further ticks in which the given zones (default: all) keep their current availability."""
    assert tick.run_left is not None
    if zones is None:
        return tick.run_left.min(axis=0) - 1
    return tick.run_left[zones, np.arange(len(zones))] - 1


class OnDemandOnly:
    name = "on-demand only"

    def reset(self, job: Job, batch: int, zones: int) -> None:
        self._n = batch

    def decide(self, tick: Tick) -> tuple[np.ndarray, np.ndarray]:
        return np.full(self._n, ON_DEMAND), np.zeros(self._n, dtype=np.int64)

    def quiet_ticks(self, tick: Tick) -> np.ndarray:
        return np.full(self._n, NEVER)


class FixedWait:
    def __init__(self, wait_seconds: float = 1800.0) -> None:
        if wait_seconds < 0:
            raise ValueError(f"wait_seconds {wait_seconds!r} must be >= 0")
        self.wait_seconds = wait_seconds
        self.name = f"spot, on-demand after {wait_seconds / 60:g} min"

    def reset(self, job: Job, batch: int, zones: int) -> None:
        self._od = np.zeros(batch, dtype=bool)

    def decide(self, tick: Tick) -> tuple[np.ndarray, np.ndarray]:
        s, cols = tick.state, np.arange(len(tick.home))
        home_up = tick.up[tick.home, cols]
        waited = tick.elapsed - s.lost_at
        self._od |= (s.mode == IDLE) & ~home_up & (waited >= self.wait_seconds)
        mode = np.where(self._od, ON_DEMAND, np.where((s.mode == SPOT) | home_up, SPOT, IDLE))
        return mode, tick.home

    def quiet_ticks(self, tick: Tick) -> np.ndarray:
        """Idle jobs wait for the home zone to flip or the wait to run out; others never change."""
        s = tick.state
        idle = np.minimum(
            _flip_ticks(tick, tick.home),
            ticks_while_positive(self.wait_seconds - (tick.elapsed - s.lost_at), tick.gap_seconds),
        )
        return np.where((s.mode == IDLE) & ~self._od, idle, NEVER)


class UniformProgress:
    name = "uniform progress"

    def reset(self, job: Job, batch: int, zones: int) -> None:
        self._locked = np.zeros(batch, dtype=bool)
        self._d = job.restart_seconds + job.interval_seconds + job.checkpoint_write_seconds

    def decide(self, tick: Tick) -> tuple[np.ndarray, np.ndarray]:
        job, s, g = tick.job, tick.state, tick.gap_seconds
        cols = np.arange(len(tick.home))
        has_spot = tick.up[tick.home, cols]
        w, dl, d, t = job.work_seconds, job.deadline_seconds, self._d, tick.elapsed
        progress = s.committed
        remaining_work = with_checkpoint_stalls(w - progress, job.checkpoint_write_seconds, job.interval_seconds)
        remaining_time = math.floor((dl - t) / g) * g
        behind = progress < w * t / dl
        mode = np.where(has_spot, SPOT, np.where(behind, ON_DEMAND, IDLE))
        # exploitation: keep spot until preempted
        mode = np.where(s.mode == SPOT, SPOT, mode)
        # hysteresis: on on-demand, stay until progress reaches ep(t + 2d)
        hold = (s.mode == ON_DEMAND) & (progress < w * (t + 2 * d) / dl)
        mode = np.where(hold, ON_DEMAND, mode)
        # safety net: idle or on-demand with time left below work left + 2d
        need = np.ceil((remaining_work + 2 * d) / g) * g
        self._locked |= (s.mode != SPOT) & (need >= remaining_time)
        mode = np.where(self._locked, ON_DEMAND, mode)
        return mode, tick.home

    def quiet_ticks(self, tick: Tick) -> np.ndarray:
        """Further ticks whose decision cannot differ from this one's.

        Work can only raise progress (by at most the pending work plus one tick per
        tick), the deadline only comes closer, and an idle job's progress is frozen:
        each rule's trigger is bounded from that.
        """
        job, s, g, t = tick.job, tick.state, tick.gap_seconds, tick.elapsed
        w, dl, d = job.work_seconds, job.deadline_seconds, self._d
        progress = s.committed
        remaining_time = math.floor((dl - t) / g) * g
        remaining_work = with_checkpoint_stalls(w - progress, job.checkpoint_write_seconds, job.interval_seconds)
        need = np.ceil((remaining_work + 2 * d) / g) * g
        q_lock = ticks_while_positive(remaining_time - need, g)
        # on on-demand under hysteresis: stays while progress < ep(t + 2d)
        hold = progress < w * (t + 2 * d) / dl
        rate = 1.0 - w / dl
        gap_to_line = w * (t + 2 * d) / dl - progress - s.since
        q_hold = ticks_while_positive(gap_to_line / rate, g) if rate > 0 else np.where(gap_to_line > 0, NEVER, 0)
        # committed progress is frozen until the next commit, and the line only rises
        to_commit = np.where(
            s.writing > 0, s.writing, s.overhead + job.interval_seconds - s.since + job.checkpoint_write_seconds
        )
        q_hold = np.maximum(q_hold, ticks_while_positive(to_commit, g))
        q_od = np.where(hold, np.minimum(q_hold, q_lock), 0)
        # idle: until the home zone flips, progress falls behind the line, or the safety net
        q_behind = ticks_while_positive(progress * dl / w - t, g)
        q_idle = np.minimum(np.minimum(_flip_ticks(tick, tick.home), q_behind), q_lock)
        q = np.where(s.mode == SPOT, NEVER, np.where(s.mode == ON_DEMAND, q_od, q_idle))
        return np.where(self._locked, NEVER, q)
