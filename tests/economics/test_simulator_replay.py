"""Trace replay: hand-timed cases, policy properties, and the real traces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotgpu.controller.ladder import LadderWalker
from spotgpu.economics.compare import compare, default_ladder, start_grid
from spotgpu.economics.estimate import aligned_availability
from spotgpu.economics.policies import FixedWait, LadderPolicy, OnDemandOnly, UniformProgress
from spotgpu.economics.simulator import Job, replay
from spotgpu.models import FallbackLadder
from spotgpu.traces import load_group

LADDER = FallbackLadder.model_validate(
    {
        "steps": [
            {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 2},
            {"kind": "alternate_zone", "maxWaitSeconds": 600, "costCeilingPerHour": 2},
            {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 4},
        ]
    }
)


def job(**over: float) -> Job:
    base = {"work_hours": 1.0, "deadline_hours": 10.0, "interval_seconds": 1200.0, "checkpoint_write_seconds": 60.0,
            "restart_seconds": 300.0, "spot_per_hour": 1.0, "on_demand_per_hour": 3.0}  # fmt: skip
    base.update(over)
    return Job(**base)  # type: ignore[arg-type]


def test_on_demand_hand_timeline() -> None:
    # 300 s boot, 1200 work, 60 write, 1200 work, 60 write, 1200 work (done, no final write)
    r = replay(OnDemandOnly(), job(), np.zeros((1, 200), dtype=bool), 60, np.array([0]))
    assert r.state.finish[0] == pytest.approx(4020)
    assert r.state.cost[0] == pytest.approx(4020 / 3600 * 3.0)
    assert r.met[0] and r.state.preemptions[0] == 0


def test_spot_always_available_never_pays_on_demand() -> None:
    r = replay(LadderPolicy(LADDER), job(), np.ones((2, 200), dtype=bool), 60, np.array([0]))
    assert r.state.finish[0] == pytest.approx(4020)
    assert r.state.cost[0] == pytest.approx(4020 / 3600 * 1.0)
    assert r.state.on_demand_seconds[0] == 0


def test_preemption_loses_uncommitted_work_then_ladder_reaches_on_demand() -> None:
    avail = np.zeros((2, 400), dtype=bool)
    avail[0, :30] = True  # home zone up for 1800 s, then gone; the other zone never has capacity
    r = replay(LadderPolicy(LADDER), job(), avail, 60, np.array([0]))
    s = r.state
    # on spot: 300 boot + 1200 work + 60 write (commit) + 240 work, lost at 1800 s
    assert s.lost_work_seconds[0] == pytest.approx(240)
    assert s.preemptions[0] == 1
    # same_pool 600 s + alternate_zone 600 s, then on-demand at 3000 s: boot + 1200 + write + 1200
    assert s.idle_seconds[0] == pytest.approx(1200)
    assert s.finish[0] == pytest.approx(3000 + 300 + 2400 + 60)
    assert s.spot_seconds[0] == pytest.approx(1800)
    assert s.on_demand_seconds[0] == pytest.approx(2760)
    assert s.cost[0] == pytest.approx(1800 / 3600 * 1.0 + 2760 / 3600 * 3.0)


def test_ladder_moves_zone_before_on_demand() -> None:
    avail = np.zeros((2, 400), dtype=bool)
    avail[0, :30] = True
    avail[1, 35:] = True  # the other zone is up from 2100 s, while the ladder is still on same_pool
    r = replay(LadderPolicy(LADDER), job(), avail, 60, np.array([0]))
    assert r.state.on_demand_seconds[0] == 0
    # the alternate_zone rung opens 600 s after the loss (2400 s); then boot + 2400 work + one write
    assert r.state.finish[0] == pytest.approx(2400 + 300 + 2400 + 60)


def test_fixed_wait_goes_on_demand_after_its_wait() -> None:
    avail = np.zeros((1, 400), dtype=bool)
    avail[0, :30] = True
    r = replay(FixedWait(900), job(), avail, 60, np.array([0]))
    assert r.state.finish[0] == pytest.approx(1800 + 900 + 300 + 2400 + 60)


def test_uniform_progress_takes_available_spot() -> None:
    r = replay(UniformProgress(), job(), np.ones((1, 200), dtype=bool), 60, np.array([0]))
    assert r.state.on_demand_seconds[0] == 0 and r.met[0]


def test_ladder_deadline_escalation_goes_on_demand_for_good() -> None:
    avail = np.ones((1, 400), dtype=bool)
    avail[0, ::20] = False  # spot flaps every 20 minutes: progress stalls
    tight = job(work_hours=2.0, deadline_hours=3.0)
    r = replay(LadderPolicy(LADDER), tight, avail, 60, np.array([0]))
    assert r.met[0]
    assert r.state.on_demand_seconds[0] > 0


def test_batch_equals_one_job_at_a_time() -> None:
    rng = np.random.default_rng(3)
    avail = rng.random((3, 3000)) < 0.7
    starts = np.array([0, 100, 700, 1500])
    homes = np.array([0, 1, 2, 1])
    j = job(work_hours=6.0, deadline_hours=12.0)
    for policy in (LadderPolicy(LADDER), UniformProgress(), FixedWait(600)):
        batch = replay(policy, j, avail, 60, starts, homes)
        for i in range(len(starts)):
            one = replay(policy, j, avail, 60, starts[i : i + 1], homes[i : i + 1])
            assert one.state.cost[0] == pytest.approx(batch.state.cost[i])
            assert one.state.finish[0] == pytest.approx(batch.state.finish[i])


@settings(max_examples=80, deadline=None)
@given(waited=st.floats(min_value=0, max_value=10_000, allow_nan=False))
def test_ladder_rungs_are_the_walkers(waited: float) -> None:
    policy = LadderPolicy(LADDER)
    rung = int(np.searchsorted(policy.entered, waited, side="right") - 1)
    assert rung == LadderWalker(LADDER).index_for(waited)


@settings(max_examples=40, deadline=None)
@given(
    work=st.floats(min_value=0.2, max_value=20),
    interval=st.floats(min_value=120, max_value=7200),
    write=st.floats(min_value=1, max_value=110),
    restart=st.floats(min_value=0, max_value=900),
    gap=st.sampled_from([60, 195, 300]),
)
def test_on_demand_meets_any_deadline_it_can(
    work: float, interval: float, write: float, restart: float, gap: int
) -> None:
    need_h = (restart + work * 3600 + np.floor(work * 3600 / interval - 1e-9) * write) / 3600
    j = job(work_hours=work, deadline_hours=need_h + gap / 3600, interval_seconds=interval,
            checkpoint_write_seconds=write, restart_seconds=restart)  # fmt: skip
    r = replay(OnDemandOnly(), j, np.zeros((1, 10), dtype=bool), gap, np.array([0]))
    assert r.state.finish[0] == pytest.approx(need_h * 3600, abs=1e-3)
    assert r.met[0]


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="deadline_hours"):
        job(work_hours=5, deadline_hours=4)
    with pytest.raises(ValueError, match="start ticks"):
        replay(OnDemandOnly(), job(), np.ones((1, 10), dtype=bool), 60, np.array([10]))
    with pytest.raises(ValueError, match="zones, ticks"):
        replay(OnDemandOnly(), job(), np.ones(10, dtype=bool), 60, np.array([0]))
    with pytest.raises(ValueError, match="deadline"):
        start_grid(100, 60, 10, 1)


@pytest.mark.parametrize(("work", "deadline"), [(48.0, 52.0), (36.0, 72.0), (12.0, 16.0)])
def test_real_traces_ladder_meets_every_deadline_and_beats_uniform_progress(work: float, deadline: float) -> None:
    traces = load_group("1-node/aws-02-15-2023")
    avail = aligned_availability(traces)
    gap = traces[0].gap_seconds
    j = Job(work_hours=work, deadline_hours=deadline, interval_seconds=1336, checkpoint_write_seconds=75,
            restart_seconds=390, spot_per_hour=0.918, on_demand_per_hour=3.06)  # fmt: skip
    starts = start_grid(avail.shape[1], gap, deadline, every_hours=24 * 7)
    st_, homes = np.tile(starts, 9), np.repeat(np.arange(9), len(starts))
    ladder = default_ladder(0.918, 3.06)
    rows, _ = compare(j, avail, gap, st_, homes, [OnDemandOnly(), UniformProgress(), LadderPolicy(ladder)])
    od, up, ours = rows
    assert od.deadlines_met == 1.0 and od.relative_cost == pytest.approx(1.0)
    assert ours.deadlines_met == 1.0
    assert up.deadlines_met == 1.0
    assert ours.relative_cost <= up.relative_cost


@pytest.mark.parametrize(("work", "deadline"), [(48.0, 52.0), (12.0, 16.0), (200.0, 400.0)])
def test_quiet_stretch_jumps_change_nothing(work: float, deadline: float) -> None:
    """Advancing quiet stretches in one step must equal stepping every tick, for every policy."""
    traces = load_group("1-node/aws-02-15-2023")
    avail = aligned_availability(traces)
    gap = traces[0].gap_seconds
    rng = np.random.default_rng(int(work))
    starts = rng.integers(0, avail.shape[1] - int(deadline * 3600 / gap) - 1, 6)
    homes = rng.integers(0, 9, 6)
    j = Job(work_hours=work, deadline_hours=deadline, interval_seconds=1336, checkpoint_write_seconds=75,
            restart_seconds=390, spot_per_hour=0.918, on_demand_per_hour=3.06)  # fmt: skip
    for make in (
        OnDemandOnly,
        lambda: FixedWait(1800),
        UniformProgress,
        lambda: LadderPolicy(default_ladder(0.918, 3.06)),
    ):
        step = replay(make(), j, avail, gap, starts, homes, jump=False).state
        fast = replay(make(), j, avail, gap, starts, homes, jump=True).state
        for field in ("cost", "finish", "lost_work_seconds", "spot_seconds", "on_demand_seconds", "idle_seconds"):
            np.testing.assert_allclose(getattr(fast, field), getattr(step, field), rtol=1e-9, atol=1e-6)
        np.testing.assert_array_equal(fast.preemptions, step.preemptions)
        np.testing.assert_array_equal(fast.restarts, step.restarts)
