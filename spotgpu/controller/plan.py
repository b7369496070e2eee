"""One reconcile step for one pool: observation + record -> actions + telemetry.

Pure: no clock, no I/O. The same observation and record always give the same
actions, which is what makes the controller safe to run from a cron-style
function, restart at any point, or replay against a 45-day trace.

Order of reasoning each tick:
1. account for the interval since the last tick (fallback time and cost, progress);
2. count new launch failures (by reason, once each) and back off the failing group;
3. open or close the capacity-loss episode and pick the rung with the strategy;
4. size the groups: the primary stays at target (the cloud keeps retrying spot);
   new capacity is asked only of the current rung's groups, and only when their
   price is within the rung's cost ceiling; groups of earlier rungs keep the VMs
   they got, and their unfulfilled requests are withdrawn;
5. when capacity is back above target for long enough, drain the most expensive
   extra VMs and remove each only after its workload committed a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu.controller.actions import Action, Defer, RemoveInstance, RequestDrain, Resume, SetDesired
from spotgpu.controller.config import GroupSpec
from spotgpu.controller.events import Event
from spotgpu.controller.observe import FailureReason, PoolObservation, Vm
from spotgpu.controller.state import Backoff, PoolState
from spotgpu.controller.strategies import RecoveryStrategy, StrategyContext
from spotgpu.economics.deadline import deadline_at_risk
from spotgpu.models.ladder import LadderStep, StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import WorkloadProfile

#: Interruption kinds that mean the VM is (about to be) gone; rebalance hints are only logged.
LOSS_KINDS = frozenset({"interruption", "preempted", "evicted", "terminated"})
#: A notice that never turned into lost capacity is forgotten after this long.
NOTICE_EXPIRY_SECONDS = 900.0


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

    def price(self, group: GroupSpec) -> float:
        if group.price_per_hour is not None:
            return group.price_per_hour
        prices = self.workload.prices
        return prices.on_demand if group.role is StepKind.ON_DEMAND else prices.spot_per_hour

    def limit(self, group: GroupSpec) -> int:
        if group.max_size is not None:
            return group.max_size
        return self.capacity.fallback_limit if group.role is StepKind.ON_DEMAND else self.capacity.max

    @property
    def primary(self) -> GroupSpec:
        return next(g for g in self.groups if g.role is StepKind.SAME_POOL)

    @property
    def growable(self) -> tuple[GroupSpec, ...]:
        """Non-primary groups, cheapest rung first."""
        others = [g for g in self.groups if g.role is not StepKind.SAME_POOL]
        return tuple(sorted(others, key=lambda g: (g.role.rank, self.price(g), g.name)))


@dataclass(frozen=True)
class TickResult:
    actions: tuple[Action, ...]
    events: tuple[Event, ...]
    step: LadderStep | None  # None while the pool has its capacity


def reconcile(plan: PoolPlan, obs: PoolObservation, state: PoolState) -> TickResult:
    """Advance ``state`` (mutated in place; the caller persists it) and return the actions."""
    now = obs.now
    events: list[Event] = []
    actions: list[Action] = []
    ready = obs.ready_count()
    target = plan.capacity.target

    _account(plan, obs, state, ready, events)
    _count_failures(plan, obs, state, events)
    step = _walk(plan, obs, state, ready, events, actions)
    actions.extend(_size_groups(plan, obs, state, step))
    if step is not None and step.kind is StepKind.QUEUE_DEFER and not state.deferred:
        state.deferred = True
        actions.append(Defer(plan.name, f"no capacity within the ladder after {now - (state.lost_since or now):.0f} s"))
        events.append(Event("deferred", plan.name, now, {"waitedSeconds": now - (state.lost_since or now)}))
    actions.extend(_scale_in(plan, obs, state, ready - target, events))
    state.last_tick = now
    return TickResult(tuple(actions), tuple(events), step)


def _account(plan: PoolPlan, obs: PoolObservation, state: PoolState, ready: int, events: list[Event]) -> None:
    dt = 0.0 if state.last_tick is None else max(0.0, obs.now - state.last_tick)
    if dt == 0:
        return
    if plan.capacity.target and ready >= plan.capacity.target:
        state.work_done_hours += dt / 3600.0
    seconds = cost = 0.0
    for group in plan.groups:
        if group.role is StepKind.ON_DEMAND and group.name in obs.groups:
            n = len(obs.groups[group.name].ready)
            seconds += n * dt
            cost += n * dt / 3600.0 * plan.price(group)
    if seconds:
        state.fallback_seconds += seconds
        state.fallback_cost_usd += cost
        events.append(Event("fallback_usage", plan.name, obs.now, {"nodeSeconds": seconds, "costUsd": cost}))


def _count_failures(plan: PoolPlan, obs: PoolObservation, state: PoolState, events: list[Event]) -> None:
    failed_groups: set[str] = set()
    for f in sorted(obs.failures, key=lambda f: (f.at, f.key)):
        if not state.remember(f"f:{f.key}"):
            continue
        events.append(
            Event("launch_failure", plan.name, f.at, {"group": f.group, "reason": f.reason.value, "code": f.code, "zone": f.zone})
        )
        if f.reason is not FailureReason.OTHER:
            failed_groups.add(f.group)
    for name in sorted(failed_groups):
        state.backoff.setdefault(name, Backoff()).fail(obs.now)
    for name, group in obs.groups.items():
        backoff = state.backoff.get(name)
        if backoff and name not in failed_groups and group.vms and len(group.ready) >= group.desired:
            del state.backoff[name]  # the group delivered what it was asked for


def _walk(
    plan: PoolPlan, obs: PoolObservation, state: PoolState, ready: int, events: list[Event], actions: list[Action]
) -> LadderStep | None:
    now, target = obs.now, plan.capacity.target
    for i in sorted(obs.interruptions, key=lambda i: (i.at, i.event_id)):
        if not state.remember(f"i:{i.event_id}"):
            continue
        events.append(Event("interruption", plan.name, i.at, {"vm": i.vm_id, "type": i.kind}))
        if i.kind in LOSS_KINDS and state.interrupted_at is None:
            state.interrupted_at = i.at
    if ready < target:
        if state.lost_since is None:
            start = min(now, state.interrupted_at) if state.interrupted_at is not None else now
            state.lost_since, state.step_index, state.step_entered_at = start, 0, start
    elif state.lost_since is not None:
        t0 = state.interrupted_at if state.interrupted_at is not None else state.lost_since
        readies = [v.ready_at for g in obs.groups.values() for v in g.ready if v.ready_at is not None and v.ready_at >= t0]
        t1 = min(now, max(readies)) if readies else now
        step_seconds = now - (state.step_entered_at if state.step_entered_at is not None else now)
        events.append(
            Event("reacquired", plan.name, now, {"latencySeconds": t1 - t0, "step": plan.strategy.ladder.steps[state.step_index].kind.value,
                                                 "secondsOnStep": step_seconds})
        )
        state.lost_since = state.interrupted_at = state.step_entered_at = None
        state.step_index = 0
        if state.deferred:
            state.deferred = False
            actions.append(Resume(plan.name))
            events.append(Event("resumed", plan.name, now))
        return None
    elif state.interrupted_at is not None and now - state.interrupted_at > NOTICE_EXPIRY_SECONDS:
        state.interrupted_at = None
    if state.lost_since is None:
        return None
    ctx = _context(plan, state, now)
    index = max(state.step_index, plan.strategy.step_index(ctx))
    if index != state.step_index:
        ladder = plan.strategy.ladder
        events.append(
            Event(
                "step_changed",
                plan.name,
                now,
                {"from": ladder.steps[state.step_index].kind.value, "to": ladder.steps[index].kind.value,
                 "waitedSeconds": ctx.waited_seconds, "deadlineAtRisk": ctx.deadline_at_risk,
                 "secondsOnPrevious": now - (state.step_entered_at if state.step_entered_at is not None else now)},
            )
        )
        state.step_index, state.step_entered_at = index, now
    return plan.strategy.ladder.steps[state.step_index]


def _context(plan: PoolPlan, state: PoolState, now: float) -> StrategyContext:
    waited = now - (state.lost_since if state.lost_since is not None else now)
    work = plan.workload
    if plan.job_started_at is None or work.deadline_hours is None:
        return StrategyContext(waited, False, False)
    elapsed_h = max(0.0, (now - plan.job_started_at) / 3600.0)
    left = max(0.0, work.work_hours - state.work_done_hours)
    restart_h = (work.restart_seconds + work.checkpoint_load_seconds) / 3600.0
    risk = deadline_at_risk(left, work.deadline_hours - elapsed_h, restart_h)
    behind = left > 0 and state.work_done_hours < work.work_hours * min(1.0, elapsed_h / work.deadline_hours)
    return StrategyContext(waited, risk, behind)


def _size_groups(plan: PoolPlan, obs: PoolObservation, state: PoolState, step: LadderStep | None) -> list[Action]:
    """Primary at target; others grow only within the rung, the ceiling and their backoff."""
    actions: list[Action] = []
    primary = plan.primary
    seen = obs.groups.get(primary.name)
    if seen is not None:
        want = max(plan.capacity.target, len(seen.vms))
        if seen.desired != want:
            actions.append(SetDesired(primary.name, want, "keep retrying the same pool at target"))
    nonprimary_pending = sum(len(obs.groups[g.name].pending) for g in plan.growable if g.name in obs.groups)
    deficit = max(0, plan.capacity.target - obs.ready_count() - nonprimary_pending)
    for group in plan.growable:
        seen = obs.groups.get(group.name)
        if seen is None:
            continue
        live = len(seen.vms)
        add = 0
        if step is not None and _allowed(plan, group, step, state, obs.now):
            add = max(0, min(deficit, plan.limit(group) - live))
            deficit -= add
        want = live + add
        if seen.desired != want:
            why = f"{step.kind.value} step fills {add} node(s)" if step and add else "hold: keep running VMs, withdraw open requests"
            actions.append(SetDesired(group.name, want, why))
    return actions


def _allowed(plan: PoolPlan, group: GroupSpec, step: LadderStep, state: PoolState, now: float) -> bool:
    if group.role is not step.kind:
        return False  # each rung asks only its own groups; earlier rungs keep what they got
    if plan.price(group) > step.cost_ceiling_per_hour:
        return False
    backoff = state.backoff.get(group.name)
    return not (backoff and backoff.blocked(now))


def _scale_in(plan: PoolPlan, obs: PoolObservation, state: PoolState, surplus: int, events: list[Event]) -> list[Action]:
    """Drain extra non-primary VMs, most expensive first; remove each only after a later commit."""
    now = obs.now
    actions: list[Action] = []
    by_id: dict[str, Vm] = {v.id: v for g in obs.groups.values() for v in g.vms}
    for vm_id in [v for v in state.drains if v not in by_id]:
        del state.drains[vm_id]  # gone: removed by us, or lost to the cloud
    if surplus > 0:
        state.surplus_since = state.surplus_since if state.surplus_since is not None else now
    else:
        state.surplus_since = None
    if state.surplus_since is not None and now - state.surplus_since >= plan.stable_spot_seconds:
        need = surplus - len(state.drains)
        rank = {g.name: (-g.role.rank, -plan.price(g)) for g in plan.growable}
        candidates = sorted(
            (v for g in plan.growable if g.name in obs.groups for v in obs.groups[g.name].ready if v.id not in state.drains),
            key=lambda v: (rank[v.group], v.id),
        )
        for vm in candidates[: max(0, need)]:
            state.drains[vm.id] = now
            actions.append(RequestDrain(vm.group, vm.id))
            events.append(Event("drain_requested", plan.name, now, {"vm": vm.id, "group": vm.group}))
    for vm_id, asked_at in sorted(state.drains.items()):
        committed = obs.commits.get(vm_id)
        if committed is not None and committed >= asked_at and asked_at >= 0:
            actions.append(RemoveInstance(by_id[vm_id].group, vm_id))
            events.append(Event("removed", plan.name, now, {"vm": vm_id, "group": by_id[vm_id].group, "commitAt": committed}))
            state.drains[vm_id] = -1.0  # removal issued; never issue it twice
    return actions
