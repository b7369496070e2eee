"""One reconcile step for one pool: observation + record -> actions + telemetry.

Pure: no clock, no I/O. The same observation and record always give the same
actions, which is what makes the controller safe to run from a cron-style
function, restart at any point, or replay against a 45-day trace. The digital
twin (``spotgpu.simulation.twin``, ``spotgpu simulate --policy ladder``) runs
exactly this function against a trace-driven cloud; :func:`next_wake` tells it
(and could tell a sleeping controller) when a decision can next change.

Order of reasoning each tick:
1. account for the interval since the last tick (fallback time and cost) and take
   progress from the commits the agents reported (step and time): committed work,
   never time at capacity;
2. count new launch failures (by reason, once each) and back off the failing group;
3. open or close the capacity-loss episode and pick the rung with the strategy;
4. size the groups: the primary stays at target (the cloud keeps retrying spot);
   new capacity is asked only of the current rung's groups, and only when their
   price is within the rung's cost ceiling; groups of earlier rungs keep the VMs
   they got, and their unfulfilled requests are withdrawn. Capacity is counted in
   GPUs when the groups' types carry different GPU counts per node (``gpusPerNode``):
   the target is ``capacity.target`` primary nodes' worth of GPUs, so a 4-GPU rung
   standing in for an 8-GPU primary asks for twice the nodes;
5. when capacity is back above target for long enough, drain the most expensive
   extra VMs and remove each only after its workload committed a checkpoint; while
   the deadline could not survive losing spot again, nothing is drained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from spotgpu.contract.controller_events import (
    Deferred,
    DrainRequested,
    Event,
    EventDropped,
    FallbackUsage,
    Interruption,
    LaunchFailure,
    ProgressUnreported,
    Reacquired,
    Removed,
    Resumed,
    StepChanged,
    ThroughputUnmeasured,
)
from spotgpu.contract.interruptions import LOSS_KINDS, InterruptionKind
from spotgpu.contract.telemetry import FailureReason
from spotgpu.controller.actions import Action, Defer, RemoveInstance, RequestDrain, Resume, SetDesired
from spotgpu.controller.config import GroupSpec, reference_gpus
from spotgpu.controller.observe import PoolObservation, Vm
from spotgpu.controller.state import Backoff, PoolState
from spotgpu.controller.strategies import RecoveryStrategy, StrategyContext
from spotgpu.economics.deadline import DeadlineStatus, deadline_status
from spotgpu.economics.exposure import with_checkpoint_stalls
from spotgpu.models.ladder import LadderStep, StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import WorkloadProfile

#: A notice that never turned into lost capacity is forgotten after this long.
NOTICE_EXPIRY_SECONDS = 900.0
#: The controller's padding on work left (the loss reserve carries the rest of the margin).
CONTROLLER_SAFETY_FACTOR = 1.05
#: Most VM ids remembered from the last tick (their commit reports are read once more after they left).
SEEN_MEMBERS = 256
#: Default for ``eventMaxAgeSeconds``: an interruption event older than this is recorded, never acted on.
EVENT_MAX_AGE_SECONDS = 1800.0


@dataclass(frozen=True)
class PoolPlan:
    """Everything the planner needs about one pool that does not change tick to tick."""

    name: str
    groups: tuple[GroupSpec, ...]
    capacity: Capacity
    workload: WorkloadProfile
    strategy: RecoveryStrategy
    stable_spot_seconds: float = 300.0
    job_started_at: float | None = None
    #: The job's last step: committed work = newest reported step / total_steps * workHours.
    total_steps: int | None = None
    #: The workload's periodic checkpoint interval (work lost to one interruption is at most this).
    checkpoint_interval_seconds: float = 1800.0
    #: The controller's tick: a decision is acted on up to one tick late.
    tick_seconds: float = 30.0
    event_max_age_seconds: float = EVENT_MAX_AGE_SECONDS
    #: Padding on the work left in the deadline test. The loss reserve is the main margin (see
    #: ``_at_risk``); 5% more covers what it does not: the move off spot when escalating (a write
    #: and a load) and stragglers. (The cost model's 1.1 plus the reserve escalates needlessly early.)
    deadline_safety_factor: float = CONTROLLER_SAFETY_FACTOR

    # Derived values are cached properties: the plan and its pydantic members are frozen, and the
    # planner reads these every tick. A group that is not the plan's own object is computed, never
    # looked up (its price or limit may differ from the plan's group of the same name).

    def price(self, group: GroupSpec) -> float:
        hit = self._prices.get(group.name)
        return hit[1] if hit is not None and hit[0] is group else self._price(group)

    def _price(self, group: GroupSpec) -> float:
        if group.price_per_hour is not None:
            return group.price_per_hour
        prices = self.workload.prices
        return prices.on_demand if group.role is StepKind.ON_DEMAND else prices.spot_per_hour

    @cached_property
    def _prices(self) -> dict[str, tuple[GroupSpec, float]]:
        return {g.name: (g, self._price(g)) for g in self.groups}

    def limit(self, group: GroupSpec) -> int:
        hit = self._limits.get(group.name)
        return hit[1] if hit is not None and hit[0] is group else self._limit(group)

    def _limit(self, group: GroupSpec) -> int:
        if group.max_size is not None:
            return group.max_size
        return self.capacity.fallback_limit if group.role is StepKind.ON_DEMAND else self.capacity.max

    @cached_property
    def _limits(self) -> dict[str, tuple[GroupSpec, int]]:
        return {g.name: (g, self._limit(g)) for g in self.groups}

    @cached_property
    def tracks_deadline(self) -> bool:
        return self.job_started_at is not None and self.workload.deadline_hours is not None

    @cached_property
    def loss_reserve_seconds(self) -> float:
        """Slack that one more spot loss can cost: a move (write + restart + load), the work lost, a tick.

        A spot loss right after a drain throws away up to one interval of work, and the
        move to spot and back to on-demand pay a checkpoint write and a restart each; the
        deadline test already counts one restart.
        """
        w = self.workload
        return (
            w.restart_seconds + w.checkpoint_load_seconds + self.checkpoint_interval_seconds
            + 2 * w.checkpoint_write_seconds + self.tick_seconds
        )  # fmt: skip

    @cached_property
    def primary(self) -> GroupSpec:
        return next(g for g in self.groups if g.role is StepKind.SAME_POOL)

    @cached_property
    def on_demand_groups(self) -> tuple[GroupSpec, ...]:
        """The on-demand groups, in the plan's order."""
        return tuple(g for g in self.groups if g.role is StepKind.ON_DEMAND)

    @cached_property
    def growable(self) -> tuple[GroupSpec, ...]:
        """Non-primary groups, cheapest rung first."""
        others = [g for g in self.groups if g.role is not StepKind.SAME_POOL]
        return tuple(sorted(others, key=lambda g: (g.role.rank, self.price(g), g.name)))

    @cached_property
    def _reference_gpus(self) -> int:
        return reference_gpus(self.groups, self.workload)

    @cached_property
    def _units(self) -> dict[str, float]:
        reference = self._reference_gpus
        return {g.name: (g.gpus_per_node or reference) / reference for g in self.groups}

    @cached_property
    def _uniform(self) -> bool:
        return all(u == 1.0 for u in self._units.values())

    @cached_property
    def _reference_model(self) -> str | None:
        """The primary group's GPU model: the reference a speed prior is taken against when the workload's
        ``gpu.relativeThroughput`` names none (``spotgpu.models.workload.speed_basis``)."""
        return next((g.gpu_model for g in self.groups if g.role is StepKind.SAME_POOL), None)

    @cached_property
    def _rates(self) -> dict[str, tuple[GroupSpec, float]]:
        reference, model = self._reference_gpus, self._reference_model
        return {g.name: (g, self.workload.work_per_node_hour(g.gpus_per_node or reference, g.gpu_model, model))
                for g in self.groups}

    @cached_property
    def _on_demand_speeds(self) -> tuple[float, tuple[str, ...]]:
        gpu = self.workload.gpu
        speeds, unmeasured = [], []
        for g in self.on_demand_groups:
            speed, measured = gpu.speed(g.gpu_model, reference=self._reference_model) if gpu is not None else (1.0, True)
            if not measured and gpu is not None and gpu.relative_throughput:
                unmeasured.append(g.gpu_model or f"{g.name} (no gpuModel)")
            speeds.append(speed)
        return min(speeds, default=1.0), tuple(unmeasured)

    @property
    def on_demand_speed(self) -> float:
        """Work per hour on the on-demand type, against the type ``workHours`` was measured on.

        A type ``gpu.relativeThroughput`` does not list takes its spec prior (against the table's
        reference, or the primary group's model without a table), else the slowest listed speed
        (conservative: the deadline test then escalates early), and is named in :attr:`unmeasured_models`.
        """
        return self._on_demand_speeds[0]

    @property
    def unmeasured_models(self) -> tuple[str, ...]:
        return self._on_demand_speeds[1]

    def work_rate(self, group: GroupSpec) -> float:
        """Work-hours one node of the group does per hour: its GPUs x their measured speed (what a rung's
        ``costCeilingPerWorkHour`` divides its price by)."""
        hit = self._rates.get(group.name)
        if hit is not None and hit[0] is group:
            return hit[1]
        return self.workload.work_per_node_hour(group.gpus_per_node or self._reference_gpus, group.gpu_model,
                                                self._reference_model)

    def speed(self, group_name: str) -> float:
        """The group's GPU speed against the reference type (1.0 without a ``gpu`` block)."""
        gpu = self.workload.gpu
        if gpu is None:
            return 1.0
        group = next((g for g in self.groups if g.name == group_name), None)
        return gpu.speed(group.gpu_model if group is not None else None, reference=self._reference_model)[0]

    def units(self, group_name: str) -> float:
        """One node of the group, in primary nodes' worth of GPUs (1 unless the types' GPU counts differ)."""
        return self._units.get(group_name, 1.0) if not self._uniform else 1.0

    def nodes_for_units(self, group_name: str, units: float) -> int:
        """Nodes of the group that give at least ``units`` primary nodes' worth of GPUs."""
        if units <= 0:
            return 0
        return math.ceil(units / self.units(group_name) - 1e-9)

    def ready_units(self, obs: PoolObservation, groups: tuple[GroupSpec, ...] | None = None) -> float:
        """Ready capacity in primary nodes' worth of GPUs (the node count when every type is alike)."""
        seen = obs.groups
        if groups is None:
            if self._uniform:
                return obs.ready_count()
            return sum(len(g.ready) * self.units(name) for name, g in seen.items())
        return sum(len(seen[g.name].ready) * self.units(g.name) for g in groups if g.name in seen)


@dataclass(frozen=True)
class TickResult:
    actions: tuple[Action, ...]
    events: tuple[Event, ...]
    step: LadderStep | None  # None while the pool has its capacity
    #: The tick's deadline test on its progress (None: no deadline tracked). Hand it to
    #: :func:`next_wake` and :func:`commits_matter` for the same tick, which then need not redo it.
    deadline: DeadlineStatus | None = None


def reconcile(plan: PoolPlan, obs: PoolObservation, state: PoolState) -> TickResult:
    """Advance ``state`` (mutated in place; the caller persists it) and return the actions."""
    now = obs.now
    events: list[Event] = []
    actions: list[Action] = []
    ready = plan.ready_units(obs)
    target = plan.capacity.target

    _account(plan, obs, state, ready, events)
    events.extend(
        Event.of(plan.name, now, EventDropped(reason=d.reason, source=d.source, what=d.what))
        for d in obs.dropped
    )
    _count_failures(plan, obs, state, events)
    status = deadline(plan, state, now)  # on this tick's progress (counted in _account): nothing below changes it
    step = _walk(plan, obs, state, ready, events, actions, status)
    at_risk = _at_risk(plan, status)
    actions.extend(_size_groups(plan, obs, state, step, ready, at_risk))
    if step is not None and step.kind is StepKind.QUEUE_DEFER and not state.deferred:
        state.deferred = True
        actions.append(Defer(plan.name, f"no capacity within the ladder after {now - (state.lost_since or now):.0f} s"))
        events.append(Event.of(plan.name, now, Deferred(waited_seconds=now - (state.lost_since or now))))
    actions.extend(_scale_in(plan, obs, state, ready - target, events, at_risk))
    if ready >= target and state.whole_since is None:
        state.whole_since = now
    if plan.tracks_deadline:
        state.members = sorted(v.id for g in obs.groups.values() for v in g.vms)[:SEEN_MEMBERS]
    state.last_tick = now
    return TickResult(tuple(actions), tuple(events), step, status)


def _account(plan: PoolPlan, obs: PoolObservation, state: PoolState, ready: float, events: list[Event]) -> None:
    _progress(plan, obs, state)
    unreported = plan.tracks_deadline and obs.commits and not obs.steps and state.committed_at is None
    if unreported and state.remember("w:progress-unreported"):
        # commits without a step cannot move committed work: the deadline test then runs on the
        # clock alone (safe, but it escalates to on-demand early); say so once, loudly. A pool that
        # has counted a step reports steps: a stepless report then is a drained idle VM's
        # acknowledgement, not a workload that forgot ``step=``
        events.append(Event.of(plan.name, obs.now, ProgressUnreported(
            commits=len(obs.commits),
            why="commits carry no step: work done stays at the last reported step and the deadline test runs on the "
                "clock alone; fix: pass step= to AgentClient.report with each commit",
        )))  # fmt: skip
    if plan.tracks_deadline and plan.unmeasured_models and state.remember("w:throughput-unmeasured"):
        events.append(Event.of(plan.name, obs.now, ThroughputUnmeasured(
            models=list(plan.unmeasured_models), speed=plan.on_demand_speed,
            why="the on-demand type's speed is not in gpu.relativeThroughput: the deadline test takes it at the "
                "slowest measured speed (escalates early); fix: measure it and add it to the table",
        )))  # fmt: skip
    dt = 0.0 if state.last_tick is None else max(0.0, obs.now - state.last_tick)
    if dt == 0:
        return
    seconds = cost = 0.0
    for group in plan.on_demand_groups:
        if group.name in obs.groups:
            n = len(obs.groups[group.name].ready)
            seconds += n * dt
            cost += n * dt / 3600.0 * plan.price(group)
    if seconds:
        state.fallback_seconds += seconds
        state.fallback_cost_usd += cost
        events.append(Event.of(plan.name, obs.now, FallbackUsage(node_seconds=seconds, cost_usd=cost)))


def _progress(plan: PoolPlan, obs: PoolObservation, state: PoolState) -> None:
    """Committed work from the agents' reports: the step of the newest commit (by time) counts.

    Only a newer commit moves it, so a VM that is gone, or a report redelivered, changes
    nothing; a restore from an older generation (the newest failed to verify) does move
    it back, because the newest commit then carries the older step.
    """
    if not plan.total_steps:
        return
    reports = [(at, obs.steps[vm]) for vm, at in obs.commits.items() if vm in obs.steps]
    if not reports:
        return
    at, step = max(reports)
    if state.committed_at is not None and at <= state.committed_at:
        return
    state.committed_at, state.committed_step = at, step
    state.work_done_hours = min(1.0, max(0, step) / plan.total_steps) * plan.workload.work_hours


def _count_failures(plan: PoolPlan, obs: PoolObservation, state: PoolState, events: list[Event]) -> None:
    failed_groups: set[str] = set()
    for f in sorted(obs.failures, key=lambda f: (f.at, f.key)) if obs.failures else ():
        if not state.remember(f"f:{f.key}"):
            continue
        events.append(Event.of(plan.name, f.at, LaunchFailure(
            group=f.group, reason=f.reason, code=f.code, zone=f.zone, time_basis=f.time_basis,
        )))  # fmt: skip
        if f.reason is not FailureReason.OTHER:
            failed_groups.add(f.group)
    for name in sorted(failed_groups):
        asked = obs.groups[name].desired if name in obs.groups else 0
        state.backoff.setdefault(name, Backoff()).fail(obs.now, asked)
    over = []
    for name, backoff in state.backoff.items():
        group = obs.groups.get(name)
        if group is None or not group.vms or name in failed_groups:
            continue  # a group holding nothing has delivered nothing: its streak goes on
        if backoff.over(len(group.ready), obs.now):
            over.append(name)
    for name in over:
        del state.backoff[name]  # the group delivered what it was asked for (or the streak is long over)


def _walk(
    plan: PoolPlan, obs: PoolObservation, state: PoolState, ready: float, events: list[Event], actions: list[Action],
    status: DeadlineStatus | None,
) -> LadderStep | None:
    now, target = obs.now, plan.capacity.target
    for i in sorted(obs.interruptions, key=lambda i: (i.at, i.event_id)) if obs.interruptions else ():
        if not state.remember(f"i:{i.event_id}"):
            continue
        stale = _stale(plan, state, i.at, now)
        events.append(Event.of(plan.name, i.at, Interruption(
            vm=i.vm_id, type=InterruptionKind(i.kind), stale=stale, zone=i.zone, time_basis=i.time_basis,
        )))  # fmt: skip
        if stale:
            continue  # recorded, but an event from before this incarnation never moves the ladder
        if i.kind in LOSS_KINDS and state.interrupted_at is None:
            state.interrupted_at = i.at
    if ready < target:
        if state.lost_since is None:
            start = min(now, state.interrupted_at) if state.interrupted_at is not None else now
            state.lost_since, state.step_index, state.step_entered_at = start, 0, start
    elif state.lost_since is not None:
        t0 = state.interrupted_at if state.interrupted_at is not None else state.lost_since
        readies = [
            v.ready_at for g in obs.groups.values() for v in g.ready if v.ready_at is not None and v.ready_at >= t0
        ]
        t1 = min(now, max(readies)) if readies else now
        step_seconds = now - (state.step_entered_at if state.step_entered_at is not None else now)
        events.append(Event.of(plan.name, now, Reacquired(
            latency_seconds=t1 - t0,
            step=plan.strategy.ladder.steps[state.step_index].kind.value,
            seconds_on_step=step_seconds,
        )))  # fmt: skip
        state.lost_since = state.interrupted_at = state.step_entered_at = None
        state.step_index = 0
        state.whole_since = now
        if state.deferred:
            state.deferred = False
            actions.append(Resume(plan.name))
            events.append(Event.of(plan.name, now, Resumed()))
        return None
    elif state.interrupted_at is not None and now - state.interrupted_at > NOTICE_EXPIRY_SECONDS:
        state.interrupted_at = None
    if state.lost_since is None:
        return None
    ctx = _context(plan, state, now, status)
    index = max(state.step_index, plan.strategy.step_index(ctx))
    if index != state.step_index:
        ladder = plan.strategy.ladder
        events.append(Event.of(plan.name, now, StepChanged(
            from_=ladder.steps[state.step_index].kind.value,
            to=ladder.steps[index].kind.value,
            waited_seconds=ctx.waited_seconds,
            deadline_at_risk=ctx.deadline_at_risk,
            seconds_on_previous=now - (state.step_entered_at if state.step_entered_at is not None else now),
        )))  # fmt: skip
        state.step_index, state.step_entered_at = index, now
    return plan.strategy.ladder.steps[state.step_index]


def _stale(plan: PoolPlan, state: PoolState, at: float, now: float) -> bool:
    """Older than the window, or than the pool's current incarnation (the last time it was whole)."""
    if at < now - plan.event_max_age_seconds:
        return True
    return state.lost_since is None and state.whole_since is not None and at < state.whole_since


def deadline(plan: PoolPlan, state: PoolState, now: float) -> DeadlineStatus | None:
    """The cost model's deadline test on committed work; ``None`` when the pool tracks no deadline.

    Work left is turned into wall time on on-demand (which still checkpoints, so
    ``1 + C/T``, :func:`spotgpu.economics.exposure.with_checkpoint_stalls`) at the on-demand type's speed (:attr:`PoolPlan.on_demand_speed`: a slower type
    escalates earlier, a faster one later), and the overhead is one restart + load plus one tick.
    Pure: a tick computes it once and passes it down (:attr:`TickResult.deadline`).
    """
    return _deadline(plan, state.work_done_hours, now)


def _deadline(plan: PoolPlan, work_done_hours: float, now: float) -> DeadlineStatus | None:
    work = plan.workload
    if plan.job_started_at is None or work.deadline_hours is None:
        return None
    elapsed_h = (now - plan.job_started_at) / 3600.0
    left = with_checkpoint_stalls(
        max(0.0, work.work_hours - work_done_hours), work.checkpoint_write_seconds, plan.checkpoint_interval_seconds
    ) / plan.on_demand_speed
    overhead_h = (work.restart_seconds + work.checkpoint_load_seconds + plan.tick_seconds) / 3600.0
    return deadline_status(left, work.deadline_hours - elapsed_h, overhead_h, plan.deadline_safety_factor)


def _context(plan: PoolPlan, state: PoolState, now: float, status: DeadlineStatus | None) -> StrategyContext:
    waited = now - (state.lost_since if state.lost_since is not None else now)
    if status is None:
        return StrategyContext(waited, False, False)
    return StrategyContext(waited, _at_risk(plan, status), _behind(plan, state, now))


def commits_matter(plan: PoolPlan, state: PoolState, now: float, tick: TickResult | None = None) -> bool:
    """Whether a new commit (more committed work) could change a decision made now (``tick``: this
    tick's :func:`reconcile` result, whose deadline test is then reused).

    Committed work only grows, and more of it only raises the slack and lifts progress
    above the uniform-progress line; so a commit moves a decision only while the deadline
    is at risk (it may end that), or, for a strategy that reads the line, while an episode
    is behind it. Otherwise it only moves timers later. (A drained VM's removal waits for
    its final checkpoint, which the cloud reports as a timed event of its own.)
    """
    if not plan.tracks_deadline:
        return False
    if _at_risk(plan, _status(plan, state, now, tick)):
        return True
    return state.lost_since is not None and plan.strategy.reads_behind_schedule and _behind(plan, state, now)


def _behind(plan: PoolPlan, state: PoolState, now: float) -> bool:
    """Committed work below the uniform-progress line (work x elapsed / deadline)."""
    work = plan.workload
    assert plan.job_started_at is not None and work.deadline_hours is not None
    elapsed_h = max(0.0, (now - plan.job_started_at) / 3600.0)
    return state.work_done_hours < work.work_hours and (
        state.work_done_hours < work.work_hours * min(1.0, elapsed_h / work.deadline_hours)
    )


def _at_risk(plan: PoolPlan, status: DeadlineStatus | None) -> bool:
    """The deadline is at risk once its slack would not survive losing spot (once more) now.

    Slack is counted on committed work, so it falls while no commit lands: on spot it can
    drop by one interval and a write before the next commit, and regaining spot costs a
    restart first. Escalating (and refusing to drain on-demand) at ``slack <= reserve``
    rather than at ``slack <= 0`` keeps the slack at any later loss non-negative, so the
    move to on-demand then still finishes in time.
    """
    if status is None or status.work_left_hours <= 0:
        return False
    return status.slack_hours * 3600.0 <= plan.loss_reserve_seconds


def can_give_back(plan: PoolPlan, state: PoolState, now: float) -> bool:
    """Whether draining now leaves a slack that survives losing spot again (always, without a deadline)."""
    return not _at_risk(plan, deadline(plan, state, now))


def _status(plan: PoolPlan, state: PoolState, now: float, tick: TickResult | None) -> DeadlineStatus | None:
    """The deadline test at ``now``: the tick's own when given (it is pure in plan, progress and time)."""
    return tick.deadline if tick is not None else deadline(plan, state, now)


def _size_groups(
    plan: PoolPlan, obs: PoolObservation, state: PoolState, step: LadderStep | None, ready: float, at_risk: bool
) -> list[Action]:
    """Primary at target; others grow only within the rung, the ceiling and their backoff."""
    actions: list[Action] = []
    primary = plan.primary
    seen = obs.groups.get(primary.name)
    if seen is not None:
        held = at_risk and _on_demand_ready(plan, obs) >= plan.capacity.target
        want = len(seen.vms) if held else max(plan.capacity.target, len(seen.vms))
        if seen.desired != want:
            why = (
                "on-demand carries the job to its deadline: no new spot"
                if held
                else "keep retrying the same pool at target"
            )
            actions.append(SetDesired(primary.name, want, why))
    whole_gang = _escalated(plan, obs, step) if at_risk else None
    groups, now = obs.groups, obs.now
    present = [(g, groups[g.name]) for g in plan.growable if g.name in groups]
    deficit = 0.0  # in primary nodes' worth of GPUs (nodes, when every type is alike)
    if step is not None:  # the gap a rung's groups may fill (pending VMs elsewhere already count)
        pending = sum(len(seen.pending) * plan.units(g.name) for g, seen in present)
        deficit = max(0.0, plan.capacity.target - ready - pending)
    for group, seen in present:  # with no rung and no escalation, every group holds what it has
        live = len(seen.vms)
        add = 0
        if whole_gang is not None and group.role is StepKind.ON_DEMAND:
            if _allowed(plan, group, whole_gang, state, now):
                gang = plan.nodes_for_units(group.name, plan.capacity.target)  # the whole gang, not the gap
                add = max(0, min(gang, plan.limit(group)) - live)
        elif step is not None and group.role is step.kind and _allowed(plan, group, step, state, now):
            add = max(0, min(plan.nodes_for_units(group.name, deficit), plan.limit(group) - live))
            deficit -= add * plan.units(group.name)
        want = live + add
        if seen.desired != want:
            why = (
                f"{step.kind.value} step fills {add} node(s)"
                if step and add
                else "hold: keep running VMs, withdraw open requests"
            )
            actions.append(SetDesired(group.name, want, why))
    return actions


def _escalated(plan: PoolPlan, obs: PoolObservation, step: LadderStep | None) -> LadderStep | None:
    """The on-demand rung, when the deadline is at risk and the job is (being) moved there for good.

    Then the whole gang goes to on-demand, not only the missing nodes: a gang that keeps
    some spot nodes is still stopped by each of their losses, which the slack can no
    longer absorb. It applies once escalation has begun (on the on-demand rung, or
    on-demand VMs already held), never to a pool that is whole on spot.
    """
    ladder = plan.strategy.ladder
    od = ladder.step(StepKind.ON_DEMAND)
    if od is None or not ladder.deadline_escalation:
        return None
    held = sum(len(obs.groups[g.name].vms) for g in plan.on_demand_groups if g.name in obs.groups)
    return od if (step is not None and step.kind is StepKind.ON_DEMAND) or held > 0 else None


def _on_demand_ready(plan: PoolPlan, obs: PoolObservation) -> float:
    return plan.ready_units(obs, plan.on_demand_groups)


def plan_group(plan: PoolPlan, name: str) -> GroupSpec:
    return next(g for g in plan.groups if g.name == name)


def _allowed(plan: PoolPlan, group: GroupSpec, step: LadderStep, state: PoolState, now: float) -> bool:
    if group.role is not step.kind:
        return False  # each rung asks only its own groups; earlier rungs keep what they got
    per_node = step.cost_ceiling_per_hour  # the usual unit: no work rate needed
    if per_node is not None and plan.price(group) > per_node:
        return False
    if per_node is None and not step.allows(plan.price(group), plan.work_rate(group)):
        return False
    backoff = state.backoff.get(group.name)
    return not (backoff and backoff.blocked(now))


def _scale_in(
    plan: PoolPlan, obs: PoolObservation, state: PoolState, surplus: float, events: list[Event], at_risk: bool
) -> list[Action]:
    """Drain extra non-primary VMs, most expensive first; remove each only after a later commit."""
    now = obs.now
    actions: list[Action] = []
    by_id: dict[str, Vm] = {v.id: v for g in obs.groups.values() for v in g.vms} if state.drains else {}
    for vm_id in [v for v in state.drains if v not in by_id]:
        del state.drains[vm_id]  # gone: removed by us, or lost to the cloud
    if surplus > 0:
        state.surplus_since = state.surplus_since if state.surplus_since is not None else now
    else:
        state.surplus_since = None
    stable = state.surplus_since is not None and now - state.surplus_since >= plan.stable_spot_seconds
    candidates: list[Vm] = []
    if surplus > 0 and at_risk:
        # at risk: on-demand is never drained; once it carries the whole gang, spot VMs (primary
        # included) are given back so no spot loss can stop the job again
        if _on_demand_ready(plan, obs) >= plan.capacity.target:
            spot = [g for g in plan.groups if g.role is not StepKind.ON_DEMAND and g.name in obs.groups]
            candidates = sorted(
                (v for g in spot for v in obs.groups[g.name].ready if v.id not in state.drains),
                key=lambda v: (-plan.price(plan_group(plan, v.group)), v.id),
            )
    elif stable:
        rank = {g.name: (-g.role.rank, -plan.price(g)) for g in plan.growable}
        candidates = sorted(
            (
                v
                for g in plan.growable
                if g.name in obs.groups
                for v in obs.groups[g.name].ready
                if v.id not in state.drains
            ),
            key=lambda v: (rank[v.group], v.id),
        )
    if candidates:
        # drain while the surplus (in primary nodes' worth of GPUs) still covers the VM
        room = surplus - sum(plan.units(by_id[v].group) for v in state.drains)
        chosen = []
        for vm in candidates:
            if plan.units(vm.group) <= room + 1e-9:
                chosen.append(vm)
                room -= plan.units(vm.group)
        for vm in chosen:
            state.drains[vm.id] = now
            by_id[vm.id] = vm
            actions.append(RequestDrain(vm.group, vm.id))
            events.append(Event.of(plan.name, now, DrainRequested(vm=vm.id, group=vm.group)))
    for vm_id, asked_at in sorted(state.drains.items()):
        committed = obs.commits.get(vm_id)
        if committed is not None and committed >= asked_at and asked_at >= 0:
            actions.append(RemoveInstance(by_id[vm_id].group, vm_id))
            events.append(Event.of(plan.name, now, Removed(vm=vm_id, group=by_id[vm_id].group, commit_at=committed)))
            state.drains[vm_id] = -1.0  # removal issued; never issue it twice
    return actions


def next_wake(plan: PoolPlan, state: PoolState, now: float, tick: TickResult | None = None) -> float:
    """The earliest time after ``now`` at which :func:`reconcile` could act differently on the same cloud
    (``tick``: this tick's :func:`reconcile` result, whose deadline test is then reused).

    Every timer the planner reads: the next rung boundary, a backoff ending (while a group
    may grow), the stable-spot wait, a notice expiring, and the deadline tests crossing with
    progress frozen (slack reaching the loss reserve; progress falling below the
    uniform-progress line, for a strategy that reads it, while capacity is lost).
    Commits only raise progress, so a crossing computed without them is never late; a
    caller that wakes at this time (or on any change in the cloud) makes the same decisions
    as one that ticks every ``tick_seconds``. ``math.inf`` when nothing is pending.
    """
    times: list[float] = []
    if state.lost_since is not None:
        left = plan.strategy.walker.seconds_left(max(0.0, now - state.lost_since))
        if left is not None:
            times.append(now + max(left, 1e-6))
    status = _status(plan, state, now, tick)
    if state.lost_since is not None or _at_risk(plan, status):
        # a backoff is read only to grow a group: within an episode, or moving an at-risk gang to
        # on-demand; the primary is kept at target whatever its backoff, so it has no timer
        times += [b.until for name, b in state.backoff.items() if b.until > now and name != plan.primary.name]
    if state.surplus_since is not None:
        times.append(state.surplus_since + plan.stable_spot_seconds)
    if state.interrupted_at is not None:
        times.append(state.interrupted_at + NOTICE_EXPIRY_SECONDS + 1e-6)
    if status is not None and status.work_left_hours > 0:
        slack = status.slack_hours * 3600.0
        times.append(now + slack - plan.loss_reserve_seconds)  # _at_risk's crossing; slack 0 moves nothing
        work = plan.workload
        assert plan.job_started_at is not None and work.deadline_hours is not None
        behind_at = plan.job_started_at + state.work_done_hours / work.work_hours * work.deadline_hours * 3600.0
        # read only by a strategy that asks for it, within an episode; at exactly now the line is
        # met, any later instant is behind it
        if state.lost_since is not None and plan.strategy.reads_behind_schedule and behind_at >= now:
            times.append(max(behind_at, now + 1e-6))
    later = [t for t in times if t > now]
    return min(later) if later else math.inf
