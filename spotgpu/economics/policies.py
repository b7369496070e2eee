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
  wall time with the same ``1 + C/T`` factor the ladder uses, so both policies
  get the same (fair) view of how long the remaining work takes.
* ``LadderPolicy``: this project's ladder (same pool, other zone, other SKU,
  on-demand, queue/defer) walked by ``spotgpu.controller.ladder.LadderWalker``'s
  step boundaries, with the cost model's deadline test
  (``spotgpu.economics.deadline``) escalating to on-demand for good.
"""

from __future__ import annotations

import math

import numpy as np

from spotgpu.economics.simulator import IDLE, NEVER, ON_DEMAND, SPOT, Job, Tick
from spotgpu.models.ladder import FallbackLadder, StepKind

#: Zone preference looks back this far at each zone's availability (no look-ahead).
ZONE_SCORE_WINDOW_SECONDS = 24 * 3600


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
        remaining_work = (w - progress) * (1.0 + job.checkpoint_write_seconds / job.interval_seconds)
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
        stall = 1.0 + job.checkpoint_write_seconds / job.interval_seconds
        progress = s.committed
        remaining_time = math.floor((dl - t) / g) * g
        need = np.ceil(((w - progress) * stall + 2 * d) / g) * g
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


class LadderPolicy:
    """The project's ladder over traced zones; ``alternate_sku`` has no trace of its own.

    The traces record one instance type, so the other-SKU rung can only keep
    looking at the traced zones (it adds no capacity here); a pool with a second
    SKU would do at least as well.
    """

    name = "spotgpu ladder"

    def __init__(self, ladder: FallbackLadder, *, safety_factor: float = 1.0) -> None:
        from spotgpu.controller.ladder import LadderWalker  # the controller's own step boundaries

        self.ladder = ladder
        self.walker = LadderWalker(ladder)
        self.safety_factor = safety_factor
        steps = ladder.steps
        #: Seconds after a loss at which step i begins, from the walker (no duplication of its rule).
        self.entered = np.array([self.walker.entered_at(i) for i in range(len(steps))], dtype=float)
        self.kinds = [s.kind for s in steps]

    def reset(self, job: Job, batch: int, zones: int) -> None:
        self._locked = np.zeros(batch, dtype=bool)
        steps = self.ladder.steps
        # What each rung allows, after its cost ceiling: cumulative spot options, on-demand, or wait.
        spot_ok = [s.kind.uses_spot and s.cost_ceiling_per_hour >= job.spot_per_hour for s in steps]
        self._home_ok = np.array(
            [any(ok and k is StepKind.SAME_POOL for ok, k in zip(spot_ok[: i + 1], self.kinds, strict=False))
             for i in range(len(steps))]
        )  # fmt: skip
        self._other_ok = np.array(
            [any(ok and k is not StepKind.SAME_POOL for ok, k in zip(spot_ok[: i + 1], self.kinds, strict=False))
             for i in range(len(steps))]
        )  # fmt: skip
        self._od_ok = np.array(
            [s.kind is StepKind.ON_DEMAND and s.cost_ceiling_per_hour >= job.on_demand_per_hour for s in steps]
        )
        self._od_index = next((i for i, k in enumerate(self.kinds) if k is StepKind.ON_DEMAND), None)
        self._escalates = self.ladder.deadline_escalation and self._od_index is not None and self._od_ok.any()
        self._job = job

    def prepare(self, avail: np.ndarray, gap_seconds: float) -> None:
        """Precompute each zone's trailing availability (past ticks only: no look-ahead)."""
        window = max(1, int(ZONE_SCORE_WINDOW_SECONDS / gap_seconds))
        cs = np.concatenate([np.zeros((avail.shape[0], 1)), np.cumsum(avail, axis=1, dtype=float)], axis=1)
        lagged = np.concatenate([np.zeros((avail.shape[0], window)), cs], axis=1)[:, : cs.shape[1]]
        # score[:, i] = ticks available in [i - window, i); column avail.shape[1] is "after the trace"
        self._trailing = cs - lagged

    def _best_zones(self, tick: Tick, which: np.ndarray) -> np.ndarray:
        """For the jobs ``which`` may move, the available zone with the best past day (others: 0)."""
        best = np.zeros(len(tick.home), dtype=np.int64)
        idx = np.flatnonzero(which)
        if idx.size:
            up = tick.up[:, idx]
            scores = self._trailing[:, tick.abs_tick[idx]]
            best[idx] = np.argmax(np.where(up, scores + 1.0, -1.0), axis=0)
        return best

    def slack_seconds(self, tick: Tick) -> np.ndarray:
        """Deadline slack if the job moved to on-demand now, one tick ahead (decisions happen per tick).

        The cost model's deadline test (``deadline_status``), vectorised: on-demand still
        checkpoints, so each interval of work left also costs one write.
        """
        job, s = tick.job, tick.state
        stall = 1.0 + job.checkpoint_write_seconds / job.interval_seconds
        work_left = (job.work_seconds - s.committed) * stall * self.safety_factor
        seconds_left = job.deadline_seconds - tick.elapsed - tick.gap_seconds
        return seconds_left - work_left - (job.restart_seconds + job.checkpoint_write_seconds)

    def at_risk(self, tick: Tick, extra_seconds: float = 0.0) -> np.ndarray:
        """True where moving to on-demand now leaves no more than ``extra_seconds`` of slack."""
        return (tick.state.committed < tick.job.work_seconds) & (self.slack_seconds(tick) <= extra_seconds)

    def decide(self, tick: Tick) -> tuple[np.ndarray, np.ndarray]:
        s = tick.state
        n = len(tick.home)
        cols = np.arange(n)
        home_up = tick.up[tick.home, cols]
        any_up = tick.up.any(axis=0)
        # only jobs not already on spot (and not escalated) can move to a zone
        best_zone = self._best_zones(tick, (s.mode != SPOT) & ~self._locked & any_up)
        slack = self.slack_seconds(tick)
        if self._escalates:
            self._locked |= slack <= 0
        waited = np.maximum(0.0, tick.elapsed - s.lost_at)
        rung = np.searchsorted(self.entered, waited, side="right") - 1
        home_ok, other_ok, od_ok = self._home_ok[rung], self._other_ok[rung], self._od_ok[rung]
        zone = np.where(home_ok & home_up, tick.home, best_zone)
        spot_here = (home_ok & home_up) | (other_ok & any_up)
        mode = np.where(spot_here, SPOT, np.where(od_ok, ON_DEMAND, IDLE))
        # keep spot while it lasts
        mode = np.where(s.mode == SPOT, SPOT, mode)
        zone = np.where(s.mode == SPOT, s.zone, zone)
        # on on-demand (reached by the ladder): return to spot only with room for one more loss
        on_od = s.mode == ON_DEMAND
        back = on_od & any_up & (slack > self._job.interval_seconds + self._job.restart_seconds)
        mode = np.where(on_od, np.where(back, SPOT, ON_DEMAND), mode)
        zone = np.where(back, best_zone, zone)
        mode = np.where(self._locked, ON_DEMAND, mode)
        return mode, zone

    def quiet_ticks(self, tick: Tick) -> np.ndarray:
        """Further ticks whose decision cannot differ from this one's.

        Slack only shrinks by the clock (commits raise it), so the escalation cannot fire
        before it runs out; an idle or on-demand job's choice changes only when some zone
        flips or the wait reaches the next rung.
        """
        s, g = tick.state, tick.gap_seconds
        slack = self.slack_seconds(tick)
        q_lock = ticks_while_positive(slack, g) if self._escalates else np.full(len(slack), NEVER)
        any_flip = _flip_ticks(tick)
        any_up = tick.up.any(axis=0)
        q_od = np.where(any_up, 0, any_flip)
        waited = np.maximum(0.0, tick.elapsed - s.lost_at)
        rung = np.searchsorted(self.entered, waited, side="right") - 1
        next_rung = np.append(self.entered[1:], np.inf)[rung]
        q_idle = np.minimum(any_flip, ticks_while_positive(next_rung - waited, g))
        q = np.where(s.mode == SPOT, NEVER, np.where(s.mode == ON_DEMAND, q_od, q_idle))
        return np.where(self._locked, NEVER, np.minimum(q, q_lock))
