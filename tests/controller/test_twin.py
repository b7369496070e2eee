"""The digital twin: the controller's planner against trace-driven capacity and a job with real mechanics.

Hand-timed cases pin the job model (boot, load, commits, lost work); the property
tests run the production ``reconcile`` on sampled windows of the real traces and
check, on every tick:
* no group is grown above the current rung's cost ceiling;
* once the sum of the ladder's waits has passed, the pool is on on-demand or deferred;
* no VM is removed before a commit reported after its drain request;
* on-demand is never drained while the deadline is at risk;
* an interruption event a year old never changes the rung.
A last test checks that skipping quiet ticks gives exactly the decisions of ticking every time.
"""

from __future__ import annotations

from functools import cache
from itertools import pairwise

import numpy as np
import pytest
from controller_factories import OD, SPOT, ladder, workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotgpu.controller.actions import RemoveInstance, RequestDrain, SetDesired
from spotgpu.controller.observe import Interruption, PoolObservation
from spotgpu.controller.reconcile import PoolPlan, TickResult, can_give_back, commits_matter, reconcile
from spotgpu.controller.state import PoolState
from spotgpu.models.ladder import StepKind
from spotgpu.models.workload import FALLBACK_POLICIES
from spotgpu.simulation.job import TwinJob
from spotgpu.simulation.twin import TwinCloud, run_twin, twin_job_for, twin_plan, zone_groups
from spotgpu.traces import Trace, load_group

GROUPS = [("spot-a", StepKind.SAME_POOL), ("spot-b", StepKind.ALTERNATE_ZONE), ("od", StepKind.ON_DEMAND)]
YEAR = 365 * 86400.0


@cache
def traces() -> tuple[Trace, ...]:
    return tuple(load_group("1-node/aws-02-15-2023"))


def _job(**over: float) -> TwinJob:
    base = {"work_seconds": 3600.0, "deadline_seconds": 36000.0, "interval_seconds": 1200.0, "write_seconds": 60.0,
            "boot_seconds": 240.0, "load_seconds": 60.0}  # fmt: skip
    base.update(over)
    return TwinJob(**base)  # type: ignore[arg-type]


def _plan(policy: str = "ladder", deadline: float | None = 10.0, work: float = 1.0, waits=(600, 600, 600, 3600),
          od_ceiling: float = 4.0, stable: float = 300.0, start: float = 0.0, tick: float = 60.0) -> PoolPlan:  # fmt: skip
    wl = workload(deadline_hours=deadline, work_hours=work, policy=policy)
    return twin_plan(wl, ladder(waits, od_ceiling), GROUPS, start=start, interval_seconds=1200, policy=policy,
                    tick_seconds=tick, stable_spot_seconds=stable)  # fmt: skip


def test_spot_always_there_hand_timeline() -> None:
    plan = _plan()
    ones = np.ones(400, dtype=np.int64)
    cloud = TwinCloud(plan, _job(), {"spot-a": ones, "spot-b": ones}, 60, 0.0)
    r = run_twin(plan, cloud, horizon_seconds=20000)
    # 240 boot + 60 load + 1200 work + 60 write + 1200 + 60 + 1200 (done, no final write)
    assert r.finish_seconds == pytest.approx(4020)
    assert r.cost_usd == pytest.approx(4020 / 3600 * SPOT)
    assert r.on_demand_hours == 0 and r.met and r.interruptions == 0


def test_loss_costs_uncommitted_work_then_the_ladder_reaches_on_demand() -> None:
    plan = _plan()
    a = np.zeros(400, dtype=np.int64)
    a[:30] = 1  # the home zone is up for 1800 s, the other zone never
    cloud = TwinCloud(plan, _job(), {"spot-a": a, "spot-b": np.zeros(400, dtype=np.int64)}, 60, 0.0)
    r = run_twin(plan, cloud, horizon_seconds=20000)
    # 300 s to start, 1200 work, 60 write (commit at 1560), 240 s of work lost at 1800
    assert r.lost_work_hours == pytest.approx(240 / 3600)
    assert {"same_pool", "alternate_zone", "alternate_sku", "on_demand"} <= r.steps_reached
    # on-demand asked at 1800 + 1800 s of spot rungs; boot + load, then the 2400 s left + one write
    assert r.finish_seconds == pytest.approx(3600 + 300 + 2400 + 60)
    assert r.on_demand_hours == pytest.approx((300 + 2460) / 3600)


def test_progress_is_the_committed_step_not_time_at_capacity() -> None:
    plan = _plan(deadline=4.0, work=1.5)
    seen: list[float] = []

    def watch(now: float, obs: PoolObservation, st_: PoolState, res: TickResult) -> None:
        seen.append(st_.work_done_hours)

    ones = np.ones(400, dtype=np.int64)
    cloud = TwinCloud(plan, _job(work_seconds=5400, deadline_seconds=14400), {"spot-a": ones, "spot-b": ones}, 60, 0.0)
    run_twin(plan, cloud, horizon_seconds=7200, jump=False, on_tick=watch)
    # first commit at 300 + 1200 + 60 = 1560 s carries 1200 s of work: nothing counts before it
    assert seen[25] == 0.0  # 1500 s: whole for 25 minutes, nothing committed yet
    assert seen[26] == pytest.approx(1200 / 3600)


def _window(policy: str, zones: tuple[int, int], start_frac: float, waits: tuple[int, ...], od_ceiling: float,
            deadline: float | None, work: float) -> tuple[PoolPlan, TwinCloud]:  # fmt: skip
    ts = traces()
    gap = ts[0].gap_seconds
    span = len(ts[0].data) * gap - 3 * 86400.0
    start = float(int(start_frac * span) // gap * gap)
    plan = _plan(policy, deadline, work, waits, od_ceiling, start=start)
    job = twin_job_for(plan.workload, 1200)
    cloud = TwinCloud(plan, job, {"spot-a": ts[zones[0]].data, "spot-b": ts[zones[1]].data}, gap, start)
    return plan, cloud


class Checker:
    """The properties, on every tick the planner ran."""

    def __init__(self, plan: PoolPlan, cloud: TwinCloud) -> None:
        self.plan, self.cloud = plan, cloud
        self.total_wait = plan.strategy.ladder.total_wait_seconds
        self.ticks = 0

    def __call__(self, now: float, obs: PoolObservation, state: PoolState, result: TickResult) -> None:
        step = result.step
        od_ready = {v.id for v in obs.groups["od"].ready}
        for a in result.actions:
            if isinstance(a, SetDesired):
                live = len(obs.groups[a.group].vms)
                assert a.desired >= live, f"{now}: {a.group} desired {a.desired} below its {live} VMs"
                group = next(g for g in self.plan.groups if g.name == a.group)
                if group.role is not StepKind.SAME_POOL and a.desired > live:
                    assert step is not None and group.role is step.kind
                    assert self.plan.price(group) <= step.cost_ceiling_per_hour, f"{now}: {a.group} above its ceiling"
            if isinstance(a, RequestDrain) and a.vm_id in od_ready:
                assert can_give_back(self.plan, state, now), f"{now}: drained on-demand while the deadline is at risk"
        if step is not None and state.lost_since is not None and now - state.lost_since >= self.total_wait:
            assert step.kind in (StepKind.ON_DEMAND, StepKind.QUEUE_DEFER), f"{now}: still on {step.kind}"
        self.ticks += 1

    def check_removals(self) -> None:
        for r in self.cloud.removals:
            assert r.drain_at is not None, f"{r.vm_id} removed without a drain request"
            assert r.last_commit is not None and r.last_commit >= r.drain_at, f"{r.vm_id} removed before committing"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(FALLBACK_POLICIES),
    zones=st.permutations(range(9)).map(lambda p: (p[0], p[1])),
    start_frac=st.floats(0, 1),
    waits=st.tuples(*[st.integers(60, 1800)] * 4),
    od_ceiling=st.sampled_from([3.0, 4.0]),
    deadline=st.sampled_from([None, 14.0, 30.0]),
)
def test_properties_hold_through_the_twin(
    policy: str, zones: tuple[int, int], start_frac: float, waits: tuple[int, int, int, int], od_ceiling: float,
    deadline: float | None,
) -> None:  # fmt: skip
    plan, cloud = _window(policy, zones, start_frac, waits, od_ceiling, deadline, 12.0)
    checker = Checker(plan, cloud)
    run_twin(plan, cloud, horizon_seconds=2 * 86400.0, on_tick=checker)
    checker.check_removals()
    assert checker.ticks > 0


def test_the_ladder_meets_the_deadline_where_on_demand_alone_could() -> None:
    """us-east-1a (17% available) as home: 8 h of work due in 10 h, started every 13 h for a month."""
    ts = traces()
    gap = ts[0].gap_seconds
    for start in np.arange(0, 30 * 86400, 13 * 3600, dtype=float) // gap * gap:
        plan = _plan(deadline=10.0, work=8.0, waits=(900, 900, 1200, 14400), start=start)
        cloud = TwinCloud(plan, twin_job_for(plan.workload, 1200), {"spot-a": ts[0].data, "spot-b": ts[1].data}, gap, start)
        r = run_twin(plan, cloud, horizon_seconds=20 * 3600)
        assert r.met, f"start {start}: finished after {r.finish_seconds / 3600:.2f} h"


@settings(max_examples=25, deadline=None)
@given(
    age=st.sampled_from([YEAR, 30 * 86400.0, 7200.0]),
    lost=st.booleans(),
    waited=st.integers(0, 4000),
    risk=st.booleans(),
)
def test_an_old_event_never_changes_the_rung(age: float, lost: bool, waited: int, risk: bool) -> None:
    """Replay a tick with and without a stale interruption: same rung, same actions."""
    from test_reconcile import _lost, _whole  # the hand-built observations of the planner tests

    now = 10 * 86400.0 + waited
    plan = _plan(deadline=10.0 if risk else None, start=now - 9.5 * 3600 if risk else 0.0)
    base = PoolState(lost_since=now - waited if lost else None, step_index=0, step_entered_at=now - waited if lost else None,
                     whole_since=None if lost else now - 60, last_tick=now - 60)  # fmt: skip
    if lost:
        base.step_index = plan.strategy.walker.index_for(waited)
    old = Interruption("evt-old", "spot-a-r0", "interruption", now - age)
    obs = _lost(now) if lost else _whole(now)
    with_event = PoolObservation(obs.pool, obs.now, obs.groups, interruptions=(old,))
    a, b = PoolState.from_json(base.to_json()), PoolState.from_json(base.to_json())
    plain, stale = reconcile(plan, obs, a), reconcile(plan, with_event, b)
    assert plain.step == stale.step
    assert plain.actions == stale.actions
    assert a.lost_since == b.lost_since and a.step_index == b.step_index and b.interrupted_at is None
    assert [e.data["stale"] for e in stale.events if e.kind == "interruption"] == [True]  # recorded, not acted on


def test_a_year_old_event_cannot_skip_the_on_demand_rung() -> None:
    from test_reconcile import _lost

    plan = _plan(deadline=None)
    state = PoolState(whole_since=0.0, last_tick=YEAR - 60)
    old = Interruption("evt-2025", "spot-a-r0", "interruption", 1.0)
    obs = _lost(YEAR)
    r = reconcile(plan, PoolObservation(obs.pool, obs.now, obs.groups, interruptions=(old,)), state)
    assert r.step is not None and r.step.kind is StepKind.SAME_POOL  # the episode starts now, not a year ago
    assert state.lost_since == YEAR


@pytest.mark.parametrize(("policy", "zones", "frac", "deadline", "work"), [
    ("ladder", (0, 1), 0.1, 10.0, 8.0), ("ladder", (0, 4), 0.5, 36.0, 24.0), ("uniform-progress", (2, 3), 0.3, 14.0, 12.0),
    ("fixed-wait", (1, 0), 0.7, None, 12.0), ("on-demand-only", (5, 6), 0.2, 30.0, 12.0),
])  # fmt: skip
def test_skipping_quiet_ticks_gives_the_same_decisions(
    policy: str, zones: tuple[int, int], frac: float, deadline: float | None, work: float
) -> None:
    logs, outcomes = [], []
    for jump in (False, True):
        plan, cloud = _window(policy, zones, frac, (900, 900, 1200, 14400), OD + 1, deadline, work)
        log: list[tuple[float, object]] = []
        r = run_twin(plan, cloud, horizon_seconds=2 * 86400.0, jump=jump,
                     on_tick=lambda now, obs, s, res, log=log: log.extend((now, a) for a in res.actions))  # fmt: skip
        logs.append(log)
        outcomes.append((r.finish_seconds, round(r.cost_usd, 9), r.interruptions, r.restarts, r.lost_work_hours))
    assert logs[0] == logs[1]
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("policy", FALLBACK_POLICIES)
@pytest.mark.parametrize(
    ("home", "frac", "deadline", "work"), [(0, 0.2, 30.0, 24.0), (3, 0.6, 13.0, 10.0), (7, 0.85, None, 20.0)]
)
def test_skipping_quiet_ticks_gives_the_same_decisions_on_all_nine_zones(
    policy: str, home: int, frac: float, deadline: float | None, work: float
) -> None:
    """The bench's shape (one primary, eight alternate zones, on-demand): backoffs, rungs and deadline timers all in play."""
    ts = traces()
    gap = ts[0].gap_seconds
    start = float(int(frac * (len(ts[0].data) * gap - 3 * 86400.0)) // gap * gap)
    groups, index = zone_groups([t.zone for t in ts], home, 1)
    wl = workload(deadline_hours=deadline, work_hours=work, policy=policy)
    runs = []
    for jump in (False, True):
        plan = twin_plan(
            wl, ladder((900, 900, 1200, 7200), OD + 1), groups, start=start, interval_seconds=1200, policy=policy
        )
        cloud = TwinCloud(plan, twin_job_for(wl, 1200), {n: ts[i].data for n, i in index.items()}, gap, start)
        log: list[tuple[float, object]] = []
        r = run_twin(plan, cloud, horizon_seconds=2 * 86400.0, jump=jump,
                     on_tick=lambda now, obs, s, res, log=log: log.extend((now, a) for a in res.actions))  # fmt: skip
        runs.append(
            (log, r.finish_seconds, round(r.cost_usd, 9), r.interruptions, r.restarts, r.failures_by_reason, r.ticks)
        )
    assert runs[0][:-1] == runs[1][:-1]
    assert runs[1][-1] < runs[0][-1]  # and it did skip ticks


def test_an_at_risk_gang_retries_on_demand_when_its_backoff_ends_with_or_without_quiet_ticks() -> None:
    """A gang of 4 at risk, whole on 2 spot + 2 on-demand VMs, on-demand quota 2: every backoff end is a retry.

    The pool is whole (no episode), so only the at-risk move of the whole gang reads the
    on-demand backoff; skipping quiet ticks must still wake at each backoff end, and the
    hold that withdraws the request between tries must not reset the backoff.
    """
    wl = workload(deadline_hours=10.0, work_hours=9.5).model_copy(update={"nodes": 4})
    runs = []
    for jump in (False, True):
        plan = twin_plan(wl, ladder(), GROUPS, start=0.0, interval_seconds=1200)
        two = np.full(400, 2, dtype=np.int64)
        cloud = TwinCloud(plan, twin_job_for(wl, 1200), {"spot-a": two, "spot-b": np.zeros(400, dtype=np.int64)}, 60, 0.0,
                          quota={"od": 2})  # fmt: skip
        asked: list[float] = []
        run_twin(plan, cloud, horizon_seconds=4 * 3600.0, jump=jump,
                 on_tick=lambda now, obs, s, res, asked=asked: asked.extend(
                     now for a in res.actions if isinstance(a, SetDesired) and a.group == "od" and a.desired > 2))  # fmt: skip
        runs.append((asked, dict(cloud.failures_by_reason)))
    asked = runs[0][0]
    assert len(asked) >= 4 and runs[0][1]["quota"] >= 4  # backed off and retried, more than once
    waits = [b - a for a, b in pairwise(asked)][:4]
    assert waits == sorted(waits) and waits[-1] > waits[0]  # exponentially: withdrawing the ask is no success
    assert runs[0] == runs[1]


def test_an_at_risk_gang_moves_whole_to_on_demand_and_gives_spot_back() -> None:
    """A gang of 4 with 2 spot nodes left and no slack: on-demand for all 4, then the spot nodes drained."""
    wl = workload(deadline_hours=10.0, work_hours=9.5).model_copy(update={"nodes": 4})
    plan = twin_plan(wl, ladder(), GROUPS, start=0.0, interval_seconds=1200)
    a = np.zeros(400, dtype=np.int64)
    a[:] = 2  # the home zone holds 2 of the 4 all along; the other zone none
    cloud = TwinCloud(plan, twin_job_for(wl, 1200), {"spot-a": a, "spot-b": np.zeros(400, dtype=np.int64)}, 60, 0.0)
    asked: list[int] = []
    drained: list[str] = []

    def watch(now: float, obs: PoolObservation, state: PoolState, res: TickResult) -> None:
        asked.extend(x.desired for x in res.actions if isinstance(x, SetDesired) and x.group == "od")
        drained.extend(x.vm_id for x in res.actions if isinstance(x, RequestDrain))

    r = run_twin(plan, cloud, horizon_seconds=12 * 3600, on_tick=watch)
    assert asked and asked[0] == 4  # the whole gang, not the 2 missing nodes
    assert sorted(drained) and all(v.startswith("spot-a") for v in drained)
    assert r.met


@pytest.mark.parametrize("frac", [0.1, 0.55])
def test_reused_group_observations_equal_ones_built_fresh_every_tick(frac: float) -> None:
    """The twin reuses a tick's group observations while nothing changed: each must equal a fresh build."""
    plan, cloud = _window("ladder", (0, 3), frac, (900, 900, 1200, 14400), OD + 1, 10.0, 6.0)
    seen: list[float] = []
    observe = cloud.observe

    def checked(now: float) -> PoolObservation:
        obs = observe(now)
        fresh = {}
        for g in cloud.groups.values():
            g.seen = None  # drop the per-group cache too: build from the VMs themselves
            fresh[g.name] = g.observation(now)
        assert obs.groups == fresh
        assert all(
            a.ready == b.ready and a.pending == b.pending
            for a, b in zip(obs.groups.values(), fresh.values(), strict=True)
        )
        seen.append(now)
        return obs

    cloud.observe = checked  # type: ignore[method-assign]
    run_twin(plan, cloud, horizon_seconds=2 * 86400.0, jump=False)
    assert len(seen) > 100


def test_plan_prices_and_limits_are_derived_once_and_only_for_its_own_groups() -> None:
    plan = _plan()
    for g in plan.groups:
        assert plan.price(g) == plan._price(g) and plan.limit(g) == plan._limit(g)
    assert [g.name for g in plan.on_demand_groups] == ["od"]
    assert plan.loss_reserve_seconds == 120 + 20 + 1200 + 2 * 30 + 60  # restart + load + interval + 2 writes + tick
    other = plan.groups[0].model_copy(update={"price_per_hour": 9.5, "max_size": 7})  # same name, not the plan's
    assert plan.price(other) == 9.5 and plan.limit(other) == 7


def test_commits_matter_only_while_at_risk_or_behind_the_line_of_a_strategy_that_reads_it() -> None:
    """The twin sleeps through periodic commits unless one could change a decision."""
    ladder_plan, up_plan = _plan("ladder", deadline=10.0, work=4.0), _plan("uniform-progress", deadline=10.0, work=4.0)
    ahead = PoolState(work_done_hours=2.0)  # 2 h of 4 done after 2 h of 10: safe, above the line (0.8 h)
    behind = PoolState(work_done_hours=0.5, lost_since=6000.0)  # safe, but below the line, in an episode
    assert not commits_matter(ladder_plan, ahead, 7200.0)
    assert not commits_matter(up_plan, ahead, 7200.0)
    assert not commits_matter(ladder_plan, behind, 7200.0)  # the ladder does not read the line
    assert commits_matter(up_plan, behind, 7200.0)
    assert can_give_back(up_plan, behind, 7200.0)
    at_risk = PoolState(work_done_hours=0.5)  # 3.5 h left with 1 h to go
    assert not can_give_back(ladder_plan, at_risk, 9.0 * 3600) and commits_matter(ladder_plan, at_risk, 9.0 * 3600)
    assert not commits_matter(_plan("ladder", deadline=None), at_risk, 9.0 * 3600)  # no deadline: never


def test_a_removal_gives_its_room_to_an_open_request_at_once() -> None:
    """Room made by removing a VM is taken by the request still open on that group, not at some later event."""
    plan = _plan()
    cloud = TwinCloud(plan, _job(), {"spot-a": np.ones(400, dtype=np.int64), "spot-b": np.ones(400, dtype=np.int64)},
                      60, 0.0)  # fmt: skip
    cloud.apply(SetDesired("spot-b", 3, "test"), 100.0)  # 1 VM of 3: short by 2 (a failure)
    first = next(iter(cloud.groups["spot-b"].vms))
    cloud.apply(RemoveInstance("spot-b", first), 200.0)  # desired 2, room 1
    vms = cloud.groups["spot-b"].vms
    assert len(vms) == 1 and first not in vms and next(iter(vms.values())).launched_at == 200.0


def _shaped_plan(sku_gpus: int, sku_model: str, speeds: dict[str, float], nodes: int = 2) -> PoolPlan:
    """A 8-GPU primary with no capacity, an alternate_sku group of another shape or model, on-demand behind."""
    from spotgpu.controller.config import GroupSpec
    from spotgpu.models.workload import GpuRequirement

    wl = workload(deadline_hours=20.0, work_hours=1.0).model_copy(
        update={"nodes": nodes, "gpu": GpuRequirement(gpus_per_node=8, relative_throughput=speeds)})
    groups = [GroupSpec(name="spot-a", role=StepKind.SAME_POOL, gpus_per_node=8, gpu_model="A100"),
              GroupSpec(name="spot-sku", role=StepKind.ALTERNATE_SKU, gpus_per_node=sku_gpus, gpu_model=sku_model),
              GroupSpec(name="od", role=StepKind.ON_DEMAND, gpus_per_node=8, gpu_model="A100")]  # fmt: skip
    return twin_plan(wl, ladder(), groups, start=0.0, interval_seconds=1200, tick_seconds=60.0)


def test_a_4_gpu_rung_standing_in_for_8_gpu_nodes_forms_a_gang_of_twice_the_nodes() -> None:
    """Issue 26, item 4: the twin models the gang shape the controller asks for."""
    plan = _shaped_plan(4, "A100", {"A100": 1.0})
    traces_ = {"spot-a": np.zeros(2000, dtype=np.int64), "spot-sku": np.full(2000, 8, dtype=np.int64)}
    r = run_twin(plan, TwinCloud(plan, twin_job_for(plan.workload, 1200), traces_, 60, 0.0), horizon_seconds=40 * 3600.0)
    assert r.met and r.on_demand_hours == 0
    assert r.gangs == [("spot-sku",) * 4]  # four 4-GPU nodes hold the 2 x 8 GPUs


def test_the_gang_works_at_its_types_measured_speed() -> None:
    """A type measured at twice the reference's speed does the hour of work in half the wall time."""
    ones = np.full(2000, 8, dtype=np.int64)

    def finish(model: str) -> float:
        plan = _shaped_plan(8, model, {"A100": 1.0, "H100": 2.0})
        traces_ = {"spot-a": np.zeros(2000, dtype=np.int64), "spot-sku": ones}
        r = run_twin(plan, TwinCloud(plan, twin_job_for(plan.workload, 1200), traces_, 60, 0.0), horizon_seconds=40 * 3600.0)
        assert r.met and r.gangs == [("spot-sku", "spot-sku")]
        return r.finish_seconds

    slow, fast = finish("A100"), finish("H100")
    # both wait out same_pool and alternate_zone (1200 s) and boot + load (140 s) before the run starts;
    # then 3600 s of work with commits every 1200 s of wall time (30 s writes): 3660 s, or 1800 + 30 at 2x
    assert slow - fast == pytest.approx((3600 + 2 * 30) - (1800 + 30))


def test_the_two_sku_bench_in_small_per_work_hour_never_costs_more() -> None:
    """``bench/two_sku.py`` on one trace set and one job: the per work-hour ladder buys the fast type and
    costs no more than the per node-hour ladder, which never buys it; every deadline met by both."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).parents[2] / "bench" / "two_sku.py"
    spec = importlib.util.spec_from_file_location("two_sku", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["two_sku"] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    pool = bench.Pool.from_catalogue(spot_share=0.4, fast_speed=3.0)
    [row] = bench.cells(pool, every=12.0, groups=["16-node/aws-08-27-2023"], jobs=((24.0, 48.0),), max_starts=6)
    per_node, per_work = row["perNodeHour"], row["perWorkHour"]
    assert per_node["fastShare"] == 0 and per_work["fastShare"] > 0
    assert per_work["meanCostUsd"] < per_node["meanCostUsd"]
    assert per_node["deadlinesMet"] == per_work["deadlinesMet"] == 1.0
