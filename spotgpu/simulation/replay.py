"""Trace-driven replay of one job under a recovery policy, for many start times at once.

The engine advances a *batch* of independent jobs (say, every start offset a
benchmark wants) one trace tick at a time with numpy, so a policy's decision
and the job's progress are array operations rather than a Python loop per job.

Job mechanics (shared by every policy, so only the scheduling differs):

* every (re)start on new capacity pays ``restart_seconds`` (boot + load) before work;
* work is committed only by a checkpoint: after each ``interval_seconds`` of work the
  job spends ``checkpoint_write_seconds`` writing; a preemption loses all work since
  the last committed checkpoint (traces carry no notices, so no final checkpoint);
* a voluntary move (spot to on-demand, say) first writes a final checkpoint, billed on
  the old capacity while the new one boots (so it costs money, not time);
* capacity is billed per second while held, at the spot or on-demand price times nodes;
* spot in zone ``z`` is usable at tick ``i`` when the trace holds at least ``nodes`` there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from spotgpu.models.workload import WorkloadProfile

IDLE, SPOT, ON_DEMAND = 0, 1, 2
_EPS = 1e-6


@dataclass(frozen=True)
class Job:
    work_hours: float
    deadline_hours: float
    interval_seconds: float
    checkpoint_write_seconds: float
    restart_seconds: float  # boot + checkpoint load: paid, no progress
    spot_per_hour: float
    on_demand_per_hour: float
    nodes: int = 1
    deadline_penalty_per_hour: float = 0.0
    #: The part of ``restart_seconds`` that is checkpoint load (the twin boots VMs, then loads).
    load_seconds: float = 0.0

    def __post_init__(self) -> None:
        for name in ("work_hours", "deadline_hours", "interval_seconds", "checkpoint_write_seconds"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"Job.{name} {v!r} must be a positive number")
        if self.deadline_hours < self.work_hours:
            raise ValueError(
                f"Job.deadline_hours {self.deadline_hours} is below work_hours {self.work_hours}; nothing can meet it"
            )
        if self.restart_seconds < 0 or self.nodes < 1:
            raise ValueError("Job.restart_seconds must be >= 0 and Job.nodes >= 1")
        if not 0 <= self.load_seconds <= self.restart_seconds:
            raise ValueError(f"Job.load_seconds {self.load_seconds!r} must lie in [0, restart_seconds]")

    @property
    def work_seconds(self) -> float:
        return self.work_hours * 3600.0

    @property
    def deadline_seconds(self) -> float:
        return self.deadline_hours * 3600.0

    @classmethod
    def from_profile(cls, profile: WorkloadProfile, interval_seconds: float, **overrides: Any) -> Job:
        deadline = profile.deadline_hours if profile.deadline_hours is not None else 2.0 * profile.work_hours
        values: dict[str, Any] = {
            "work_hours": profile.work_hours,
            "deadline_hours": deadline,
            "interval_seconds": float(interval_seconds),
            "checkpoint_write_seconds": profile.checkpoint_write_seconds,
            "restart_seconds": profile.restart_seconds + profile.checkpoint_load_seconds,
            "spot_per_hour": profile.prices.spot_per_hour,
            "on_demand_per_hour": profile.prices.on_demand,
            "nodes": profile.nodes,
            "deadline_penalty_per_hour": profile.prices.deadline_penalty_per_hour,
            "load_seconds": profile.checkpoint_load_seconds,
        }
        values.update(overrides)
        return cls(**values)


@dataclass
class State:
    """Per-job arrays the engine and the policies share (length = batch size)."""

    mode: np.ndarray  # IDLE / SPOT / ON_DEMAND
    zone: np.ndarray  # spot zone index (meaningful when mode == SPOT)
    committed: np.ndarray  # seconds of work safely checkpointed
    since: np.ndarray  # seconds of work since the last commit (lost on preemption)
    writing: np.ndarray  # seconds left of a checkpoint write in progress
    overhead: np.ndarray  # seconds left of restart + load
    lost_at: np.ndarray  # elapsed seconds when the job last had no capacity (ladder clock)
    done: np.ndarray
    finish: np.ndarray  # elapsed seconds at completion (inf until done)
    cost: np.ndarray
    spot_seconds: np.ndarray
    on_demand_seconds: np.ndarray
    idle_seconds: np.ndarray
    lost_work_seconds: np.ndarray
    preemptions: np.ndarray
    restarts: np.ndarray

    @classmethod
    def empty(cls, n: int) -> State:
        f = lambda v=0.0: np.full(n, v, dtype=float)  # noqa: E731
        i = lambda: np.zeros(n, dtype=np.int64)  # noqa: E731
        return cls(
            mode=i(), zone=i(), committed=f(), since=f(), writing=f(), overhead=f(), lost_at=f(),
            done=np.zeros(n, dtype=bool), finish=f(math.inf), cost=f(), spot_seconds=f(),
            on_demand_seconds=f(), idle_seconds=f(), lost_work_seconds=f(), preemptions=i(), restarts=i(),
        )  # fmt: skip


@dataclass(frozen=True)
class Tick:
    """What a policy sees at one tick: the job, its state, capacity now, and the clock."""

    job: Job
    state: State
    up: np.ndarray  # (zones, batch) spot usable now
    home: np.ndarray  # (batch,) home zone index
    elapsed: float  # seconds since the jobs started
    gap_seconds: float
    abs_tick: np.ndarray  # (batch,) absolute trace tick
    #: (zones, batch): ticks from now (this one included) that each zone keeps its current availability
    run_left: np.ndarray | None = None


class Policy(Protocol):
    name: str

    def reset(self, job: Job, batch: int, zones: int) -> None: ...

    def decide(self, tick: Tick) -> tuple[np.ndarray, np.ndarray]:
        """(mode, zone) wanted for the coming tick, per job."""
        ...


#: A policy may also offer ``quiet_ticks(tick) -> np.ndarray``: per job, how many of the
#: following ticks are *guaranteed* to get the same decision (given ``tick.run_left``).
#: The engine then advances that many ticks in one step; without it, one tick at a time.
NEVER = np.iinfo(np.int64).max // 4


def run_lengths_left(avail: np.ndarray) -> np.ndarray:
    """(zones, ticks + 1): ticks from i (included) until zone z's availability changes.

    Column ``ticks`` stands for everything after the trace (no capacity, forever), so
    a final run of no capacity never ends.
    """
    zones, ticks = avail.shape
    padded = np.concatenate([avail, np.zeros((zones, 1), dtype=bool)], axis=1)
    n = ticks + 1
    change = np.zeros((zones, n), dtype=bool)
    change[:, 1:] = padded[:, 1:] != padded[:, :-1]
    idx = np.where(change, np.arange(n), n)
    # next change strictly after i: reverse running minimum of idx[i+1:]
    nxt = np.full((zones, n), n, dtype=np.int64)
    nxt[:, :-1] = np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1][:, 1:]
    left = nxt - np.arange(n)
    return np.where(nxt >= n, NEVER, left)


@dataclass
class Replay:
    """Outcome per job of a batch replay."""

    policy: str
    job: Job
    starts: np.ndarray
    home: np.ndarray
    state: State
    progress: np.ndarray | None = None  # (ticks, batch) committed hours, when recorded
    gap_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def met(self) -> np.ndarray:
        return self.state.finish <= self.job.deadline_seconds + _EPS

    @property
    def hours_late(self) -> np.ndarray:
        return np.maximum(0.0, self.state.finish - self.job.deadline_seconds) / 3600.0

    @property
    def total_cost(self) -> np.ndarray:
        # an unfinished job is charged as late as the replay horizon (a lower bound on its lateness)
        horizon_late = max(
            0.0, float(self.extra.get("horizonHours", 2 * self.job.deadline_hours)) - self.job.deadline_hours
        )
        late = np.where(np.isfinite(self.hours_late), self.hours_late, horizon_late)
        return self.state.cost + late * self.job.deadline_penalty_per_hour

    def summary(self) -> dict[str, float]:
        s = self.state
        return {
            "jobs": len(self.starts),
            "meanCostUsd": float(self.total_cost.mean()),
            "deadlinesMet": float(self.met.mean()),
            "meanFinishHours": float(np.where(np.isfinite(s.finish), s.finish, np.nan).mean() / 3600.0)
            if np.isfinite(s.finish).any()
            else math.inf,
            "meanLostComputeHours": float(s.lost_work_seconds.mean() / 3600.0),
            "meanSpotHours": float(s.spot_seconds.mean() / 3600.0),
            "meanOnDemandHours": float(s.on_demand_seconds.mean() / 3600.0),
            "meanIdleHours": float(s.idle_seconds.mean() / 3600.0),
            "meanPreemptions": float(s.preemptions.mean()),
            "meanRestarts": float(s.restarts.mean()),
        }


def _advance(job: Job, s: State, running: np.ndarray, gap: float, elapsed: float) -> np.ndarray:
    """Spend ``gap`` seconds of held capacity on overhead, work and checkpoint writes.

    Returns the seconds billed per job: all of it, except what is left after the job finishes.
    """
    left = np.where(running, gap, 0.0)
    unused = np.zeros_like(left)  # held time after the job finished: not billed
    use = np.minimum(left, s.overhead)
    s.overhead -= use
    left -= use
    t_int, c, w = job.interval_seconds, job.checkpoint_write_seconds, job.work_seconds
    # Fast path (most ticks): nobody is writing, and nobody reaches a checkpoint or the end.
    ahead = s.since + left
    if not s.writing.any() and (ahead < t_int - _EPS).all() and (s.committed + ahead < w - _EPS).all():
        s.since = ahead
        return np.where(running, gap, 0.0)
    for _ in range(2 * math.ceil(gap / min(t_int, c)) + 4):
        active = left > _EPS
        if not active.any():
            break
        was_writing = active & (s.writing > 0)
        wr = np.where(was_writing, np.minimum(left, s.writing), 0.0)
        s.writing -= wr
        left -= wr
        committed_now = was_writing & (s.writing <= _EPS)
        s.committed += np.where(committed_now, s.since, 0.0)
        s.since[committed_now] = 0.0
        s.writing[committed_now] = 0.0
        can_work = active & (s.writing <= 0) & (left > _EPS)
        room = np.minimum(t_int - s.since, w - s.committed - s.since)
        x = np.where(can_work, np.minimum(left, np.maximum(room, 0.0)), 0.0)
        s.since += x
        left -= x
        completes = can_work & (w - s.committed - s.since <= _EPS)
        if completes.any():
            s.committed[completes] += s.since[completes]
            s.since[completes] = 0.0
            s.done |= completes
            s.finish = np.where(completes, elapsed + gap - left, s.finish)
            unused[completes] = left[completes]
            left[completes] = 0.0
        start_write = can_work & ~completes & (s.since >= t_int - _EPS)
        s.writing[start_write] = c
    return np.where(running, gap - np.maximum(left, 0.0) - unused, 0.0)


def replay(
    policy: Policy,
    job: Job,
    avail: np.ndarray,
    gap_seconds: float,
    starts: np.ndarray,
    home: np.ndarray | int = 0,
    *,
    max_hours: float | None = None,
    record_progress: bool = False,
    jump: bool = True,
) -> Replay:
    """Replay ``policy`` for jobs starting at trace ticks ``starts`` (zones x ticks availability ``avail``).

    Jobs run until done or ``max_hours`` (default: twice the deadline) pass; ticks past
    the end of the trace count as no spot capacity anywhere. With ``jump`` (and a policy
    that offers ``quiet_ticks``) stretches in which no decision can change are advanced
    in one step; the result is the same as stepping tick by tick.
    """
    avail = np.asarray(avail, dtype=bool)
    if avail.ndim != 2:
        raise ValueError(f"avail must be (zones, ticks); got shape {avail.shape}")
    starts = np.asarray(starts, dtype=np.int64)
    n, zones, ticks = len(starts), avail.shape[0], avail.shape[1]
    if n == 0:
        raise ValueError("no start offsets given")
    if starts.min() < 0 or starts.max() >= ticks:
        raise ValueError(f"start ticks must lie in [0, {ticks}); got {starts.min()}..{starts.max()}")
    homes = np.broadcast_to(np.asarray(home, dtype=np.int64), (n,)).copy()
    if homes.min() < 0 or homes.max() >= zones:
        raise ValueError(f"home zone index must lie in [0, {zones})")
    padded = np.concatenate([avail, np.zeros((zones, 1), dtype=bool)], axis=1)  # column `ticks` = no capacity
    horizon = max_hours if max_hours is not None else 2.0 * job.deadline_hours
    steps = math.ceil(horizon * 3600.0 / gap_seconds)
    s = State.empty(n)
    prepare = getattr(policy, "prepare", None)
    if prepare is not None:
        prepare(avail, gap_seconds)
    policy.reset(job, n, zones)
    cols = np.arange(n)
    prices = np.array([0.0, job.spot_per_hour, job.on_demand_per_hour]) * job.nodes / 3600.0
    trail: list[np.ndarray] = []
    quiet = getattr(policy, "quiet_ticks", None) if jump and not record_progress else None
    run_left = run_lengths_left(avail) if quiet is not None else None
    k, next_check, backoff = 0, 0, 1
    while k < steps:
        if s.done.all():
            break
        elapsed = k * gap_seconds
        abs_tick = np.minimum(starts + k, ticks)
        up = padded[:, abs_tick]
        checking = run_left is not None and k >= next_check
        left_now = run_left[:, abs_tick] if checking and run_left is not None else None
        live = ~s.done
        # 1. the provider takes spot capacity that is gone this tick
        preempted = live & (s.mode == SPOT) & ~up[s.zone, cols]
        if preempted.any():
            s.lost_work_seconds += np.where(preempted, s.since, 0.0)
            s.since[preempted] = 0.0
            s.writing[preempted] = 0.0
            s.overhead[preempted] = 0.0
            s.mode[preempted] = IDLE
            s.lost_at[preempted] = elapsed
            s.preemptions += preempted
        # 2. the policy chooses
        tick = Tick(job, s, up, homes, elapsed, gap_seconds, abs_tick, left_now)
        want_mode, want_zone = policy.decide(tick)
        want_mode = np.where(live, want_mode, IDLE)
        moving = live & (want_mode != s.mode) | (live & (want_mode == SPOT) & (s.mode == SPOT) & (want_zone != s.zone))
        if moving.any():
            from_running = moving & (s.mode != IDLE)
            # a voluntary move commits first: finish the write (or write now), then leave
            final_write = from_running & ((s.since > 0) | (s.writing > 0))
            s.committed += np.where(final_write, s.since, 0.0)
            s.since[final_write] = 0.0
            s.writing[final_write] = 0.0
            s.cost += np.where(final_write, job.checkpoint_write_seconds * prices[s.mode], 0.0)
            starting = moving & (want_mode != IDLE)
            s.overhead[starting] = job.restart_seconds
            s.restarts += starting
            released = moving & (want_mode == IDLE)
            s.lost_at[released] = elapsed
            s.mode = np.where(moving, want_mode, s.mode)
            s.zone = np.where(moving & (want_mode == SPOT), want_zone, s.zone)
        # 3. run one tick, or a quiet stretch of ticks in which nothing can change
        span = 1
        if quiet is not None and left_now is not None:
            q = quiet(tick)
            # spot capacity must outlast the stretch, or the provider takes it mid-way
            q = np.where(s.mode == SPOT, np.minimum(q, left_now[s.zone, cols] - 1), q)
            span = 1 + int(max(0, min(int(q[live].min()), steps - k - 1)))
            # big batches rarely have a stretch where *every* job is quiet: ask less often then
            backoff = 1 if span > 1 else min(2 * backoff, 32)
            next_check = k + span + backoff - 1
        budget = span * gap_seconds
        running = live & (s.mode != IDLE)
        billed = _advance(job, s, running, budget, elapsed)
        s.cost += billed * prices[s.mode]
        s.spot_seconds += np.where(s.mode == SPOT, billed, 0.0)
        s.on_demand_seconds += np.where(s.mode == ON_DEMAND, billed, 0.0)
        s.idle_seconds += np.where(live & (s.mode == IDLE), budget, 0.0)
        if record_progress:
            trail.append(s.committed / 3600.0)
        k += span
    progress = np.stack(trail) if record_progress and trail else None
    return Replay(policy.name, job, starts, homes, s, progress, gap_seconds, {"horizonHours": horizon})
