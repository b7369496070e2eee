"""Trace replay of the baselines: hand-timed cases, policy properties, and the real traces.

The ladder is the controller's planner through the twin (tests/controller/test_twin.py);
here it appears only in the real-trace comparison, as ``spotgpu simulate`` runs it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotgpu.economics.estimate import aligned_availability, aligned_counts
from spotgpu.models.ladder import default_ladder
from spotgpu.simulation.baselines import FixedWait, OnDemandOnly, UniformProgress
from spotgpu.simulation.compare import build_policies, compare, start_grid
from spotgpu.simulation.replay import Job, replay
from spotgpu.traces import load_group


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


def test_fixed_wait_goes_on_demand_after_its_wait() -> None:
    avail = np.zeros((1, 400), dtype=bool)
    avail[0, :30] = True
    r = replay(FixedWait(900), job(), avail, 60, np.array([0]))
    assert r.state.finish[0] == pytest.approx(1800 + 900 + 300 + 2400 + 60)


def test_uniform_progress_takes_available_spot() -> None:
    r = replay(UniformProgress(), job(), np.ones((1, 200), dtype=bool), 60, np.array([0]))
    assert r.state.on_demand_seconds[0] == 0 and r.met[0]


def test_batch_equals_one_job_at_a_time() -> None:
    rng = np.random.default_rng(3)
    avail = rng.random((3, 3000)) < 0.7
    starts = np.array([0, 100, 700, 1500])
    homes = np.array([0, 1, 2, 1])
    j = job(work_hours=6.0, deadline_hours=12.0)
    for policy in (UniformProgress(), FixedWait(600)):
        batch = replay(policy, j, avail, 60, starts, homes)
        for i in range(len(starts)):
            one = replay(policy, j, avail, 60, starts[i : i + 1], homes[i : i + 1])
            assert one.state.cost[0] == pytest.approx(batch.state.cost[i])
            assert one.state.finish[0] == pytest.approx(batch.state.finish[i])


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


@pytest.mark.parametrize(("work", "deadline"), [(8.0, 10.0), (24.0, 36.0), (12.0, 16.0)])
def test_real_traces_controller_ladder_meets_every_deadline_and_beats_uniform_progress(work: float, deadline: float) -> None:
    traces = load_group("1-node/aws-02-15-2023")
    avail = aligned_availability(traces)
    gap = traces[0].gap_seconds
    j = Job(work_hours=work, deadline_hours=deadline, interval_seconds=1336, checkpoint_write_seconds=75,
            restart_seconds=390, load_seconds=90, spot_per_hour=0.918, on_demand_per_hour=3.06)  # fmt: skip
    starts = start_grid(avail.shape[1], gap, deadline, every_hours=24 * 7)
    st_, homes = np.tile(starts, 9), np.repeat(np.arange(9), len(starts))
    ladder = default_ladder(0.918, 3.06)
    policies = [OnDemandOnly(), UniformProgress(), *build_policies(["ladder"], ladder)]
    rows, _ = compare(j, avail, gap, st_, homes, policies, counts=aligned_counts(traces), zones=[t.zone for t in traces])
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
    ):
        step = replay(make(), j, avail, gap, starts, homes, jump=False).state
        fast = replay(make(), j, avail, gap, starts, homes, jump=True).state
        for field in ("cost", "finish", "lost_work_seconds", "spot_seconds", "on_demand_seconds", "idle_seconds"):
            np.testing.assert_allclose(getattr(fast, field), getattr(step, field), rtol=1e-9, atol=1e-6)
        np.testing.assert_array_equal(fast.preemptions, step.preemptions)
        np.testing.assert_array_equal(fast.restarts, step.restarts)


def test_no_policy_name_means_both_a_baseline_and_a_controller_strategy() -> None:
    """Defect (issue 24): ``fixed-wait`` and ``uniform-progress`` named both the simulator's baselines and the
    controller's strategies; the baselines are ``baseline-*`` now, and the old names map to them."""
    from spotgpu.controller.strategies import registered
    from spotgpu.simulation.compare import POLICY_NAMES, RENAMED_POLICIES

    baselines = [n for n in POLICY_NAMES if n != "ladder"]
    assert baselines and all(n.startswith("baseline-") for n in baselines)
    assert not set(POLICY_NAMES) & (set(registered()) - {"ladder"})
    ladder = default_ladder(0.9, 3.0)
    old = [type(p).__name__ for p in build_policies(list(RENAMED_POLICIES), ladder)]
    assert old == [type(p).__name__ for p in build_policies([RENAMED_POLICIES[n] for n in RENAMED_POLICIES], ladder)]


def test_the_ladder_entry_runs_the_workloads_own_strategy_through_the_twin() -> None:
    """``simulate``'s ``ladder`` is the controller's planner with the workload's fallbackPolicy, the strategy the
    controller would run for it."""
    ladder = default_ladder(0.9, 3.0)
    [plain] = build_policies(["ladder"], ladder)
    [fixed] = build_policies(["ladder"], ladder, strategy="fixed-wait")
    assert (plain.policy, plain.name) == ("ladder", "spotgpu ladder")  # type: ignore[union-attr]
    assert (fixed.policy, fixed.name) == ("fixed-wait", "spotgpu fixed-wait")  # type: ignore[union-attr]
