"""The ladder engine against a cloud simulated from real spot traces (sampled windows).

Properties, checked on every tick of every sampled window:
* no group is ever grown at a price above the current rung's cost ceiling;
* desired is never set below the VMs a group holds (the cloud never picks a victim);
* once the sum of the ladder's waits has passed, the pool is on on-demand or deferred,
  and on the on-demand rung the fallback group covers the gap when its price allows;
* no VM is removed before its workload committed a checkpoint after the drain request.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from controller_factories import OD, ladder, make_plan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotgpu.controller.actions import SetDesired
from spotgpu.controller.observe import PoolObservation
from spotgpu.controller.plan import PoolPlan, TickResult
from spotgpu.controller.sim import SimCloud, replay
from spotgpu.controller.state import PoolState
from spotgpu.models.ladder import StepKind
from spotgpu.models.workload import FALLBACK_POLICIES
from spotgpu.traces import Trace, load_group

WINDOW_SECONDS = 86400.0
TICK = 60.0


@cache
def traces() -> tuple[Trace, ...]:
    return tuple(load_group("1-node/aws-02-15-2023"))


def _cloud(plan: PoolPlan, zones: tuple[int, int, int], start: float, target: int) -> SimCloud:
    ts = traces()
    return SimCloud(
        plan.name,
        {
            "spot-a": ts[zones[0]].data * target,
            "spot-b": ts[zones[1]].data * target,
            "spot-sku": ts[zones[2]].data * target,
            "od": None,
        },
        ts[0].gap_seconds,
        initial={"spot-a": target},
        start=start,
    )


class Checker:
    def __init__(self, plan: PoolPlan, cloud: SimCloud) -> None:
        self.plan, self.cloud = plan, cloud
        self.total_wait = plan.strategy.ladder.total_wait_seconds
        self.ticks_checked = 0

    def __call__(self, now: float, obs: PoolObservation, state: PoolState, result: TickResult) -> None:
        step = result.step
        for a in result.actions:
            if not isinstance(a, SetDesired):
                continue
            live = len(obs.groups[a.group].vms)
            assert a.desired >= live, f"{now}: {a.group} desired {a.desired} below its {live} VMs"
            group = next(g for g in self.plan.groups if g.name == a.group)
            if group.role is not StepKind.SAME_POOL and a.desired > live:
                assert step is not None and group.role is step.kind
                assert self.plan.price(group) <= step.cost_ceiling_per_hour, f"{now}: {a.group} above ceiling"
        if step is not None and state.lost_since is not None and now - state.lost_since >= self.total_wait:
            assert step.kind in (StepKind.ON_DEMAND, StepKind.QUEUE_DEFER), f"{now}: still on {step.kind}"
        if step is not None and step.kind is StepKind.QUEUE_DEFER:
            assert state.deferred
        if step is not None and step.kind is StepKind.ON_DEMAND and step.cost_ceiling_per_hour >= OD:
            backoff = state.backoff.get("od")
            if not (backoff and backoff.blocked(now)):
                held = sum(len(g.vms) for n, g in self.cloud.groups.items() if n != "spot-a")
                ready_primary = len(obs.groups["spot-a"].ready)
                od_room = self.cloud.groups["od"].desired - len(self.cloud.groups["od"].vms)
                assert ready_primary + held + od_room >= self.plan.capacity.target, f"{now}: on-demand gap left open"
        self.ticks_checked += 1

    def check_removals(self) -> None:
        for r in self.cloud.removals:
            assert r.drain_at is not None, f"{r.vm_id} removed without a drain request"
            assert r.last_commit is not None and r.last_commit >= r.drain_at, f"{r.vm_id} removed before committing"
            assert r.at >= r.last_commit


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(FALLBACK_POLICIES),
    zones=st.permutations(range(9)).map(lambda p: (p[0], p[1], p[2])),
    start_frac=st.floats(0, 1),
    waits=st.tuples(*[st.integers(60, 1800)] * 4),
    od_ceiling=st.sampled_from([2.5, 3.0, 4.0]),
    target=st.integers(1, 3),
    deadline=st.sampled_from([None, 14.0, 30.0]),
    stable=st.sampled_from([0.0, 300.0]),
)
def test_invariants_hold_on_trace_windows(
    policy: str,
    zones: tuple[int, int, int],
    start_frac: float,
    waits: tuple[int, int, int, int],
    od_ceiling: float,
    target: int,
    deadline: float | None,
    stable: float,
) -> None:
    gap = traces()[0].gap_seconds
    span = len(traces()[0].data) * gap - WINDOW_SECONDS
    start = float(int(start_frac * span) // gap * gap)
    plan = make_plan(
        ladder(waits, od_ceiling),
        target=target,
        policy=policy,
        stable=stable,
        job_started_at=start if deadline else None,
        deadline_hours=deadline,
        work_hours=12.0,
    )
    cloud = _cloud(plan, zones, start, target)
    checker = Checker(plan, cloud)
    replay(plan, cloud, start, start + WINDOW_SECONDS, TICK, checker)
    checker.check_removals()
    assert checker.ticks_checked == int(WINDOW_SECONDS / TICK)


def test_a_poor_zone_walks_to_on_demand_and_back_without_killing_work() -> None:
    """us-east-1a (17% available) as primary for three days: a full ladder round trip."""
    ts = traces()
    worst = int(np.argmin([t.mean_availability() for t in ts]))
    plan = make_plan(ladder((300, 300, 300, 3600)), target=2, stable=300)
    others = [i for i in range(9) if i != worst][:2]
    cloud = _cloud(plan, (worst, others[0], others[1]), 0.0, 2)
    checker = Checker(plan, cloud)
    report = replay(plan, cloud, 0.0, 3 * 86400.0, TICK, checker)
    checker.check_removals()
    assert {"alternate_zone", "alternate_sku", "on_demand"} <= report.steps_reached
    assert report.fallback_node_seconds > 0 and report.fallback_cost_usd > 0
    assert report.reacquisition_seconds, "the pool was never made whole again"
    assert cloud.removals, "capacity came back but no extra VM was drained"
    assert report.failures_by_reason.get("capacity", 0) > 0
