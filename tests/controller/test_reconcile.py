"""reconcile(): one tick's decisions from hand-built observations."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from spotgpu.controller.actions import Defer, RemoveInstance, RequestDrain, Resume, SetDesired
from spotgpu.controller.observe import FailureReason, GroupObservation, Interruption, LaunchFailure, PoolObservation, Vm
from spotgpu.controller.reconcile import PoolPlan, reconcile
from spotgpu.controller.state import PoolState
from spotgpu.controller.telemetry import ControllerTelemetry
from spotgpu.models.ladder import StepKind

Factory = Callable[..., PoolPlan]


def _obs(now: float, counts: dict[str, tuple[int, int, int]], **kw: object) -> PoolObservation:
    """counts: group -> (desired, ready, pending)."""
    groups = {}
    for name, (desired, ready, pending) in counts.items():
        vms = [Vm(f"{name}-r{i}", name, True, ready_at=now - 60) for i in range(ready)]
        vms += [Vm(f"{name}-p{i}", name, False) for i in range(pending)]
        groups[name] = GroupObservation(name, desired, tuple(vms))
    return PoolObservation("pool-a", now, groups, **kw)  # type: ignore[arg-type]


def _whole(now: float) -> PoolObservation:
    return _obs(now, {"spot-a": (2, 2, 0), "spot-b": (0, 0, 0), "spot-sku": (0, 0, 0), "od": (0, 0, 0)})


def _lost(now: float, od: tuple[int, int, int] = (0, 0, 0), **kw: object) -> PoolObservation:
    return _obs(now, {"spot-a": (2, 0, 0), "spot-b": (0, 0, 0), "spot-sku": (0, 0, 0), "od": od}, **kw)


def _desired(actions: tuple[object, ...]) -> dict[str, int]:
    return {a.group: a.desired for a in actions if isinstance(a, SetDesired)}


def test_whole_pool_needs_no_action(plan_factory: Factory) -> None:
    result = reconcile(plan_factory(), _whole(1000), PoolState())
    assert result.actions == () and result.step is None


def test_walks_the_ladder_and_grows_each_allowed_group(plan_factory: Factory) -> None:
    plan, state = plan_factory(), PoolState()
    assert _desired(reconcile(plan, _lost(0), state).actions) == {}  # same_pool: the cloud retries
    assert _desired(reconcile(plan, _lost(600), state).actions) == {"spot-b": 2}
    # spot-b got one VM; the next rung withdraws its open request and asks spot-sku for the rest
    r = reconcile(
        plan, _obs(1200, {"spot-a": (2, 0, 0), "spot-b": (2, 1, 0), "spot-sku": (0, 0, 0), "od": (0, 0, 0)}), state
    )
    assert r.step is not None and r.step.kind is StepKind.ALTERNATE_SKU
    assert _desired(r.actions) == {"spot-b": 1, "spot-sku": 1}
    r = reconcile(
        plan, _obs(1800, {"spot-a": (2, 0, 0), "spot-b": (1, 1, 0), "spot-sku": (1, 0, 0), "od": (0, 0, 0)}), state
    )
    assert r.step is not None and r.step.kind is StepKind.ON_DEMAND
    assert _desired(r.actions) == {"spot-sku": 0, "od": 1}


def test_failures_are_counted_once_and_back_off_the_group(plan_factory: Factory) -> None:
    plan, state = plan_factory(), PoolState()
    reconcile(plan, _lost(0), state)
    reconcile(plan, _lost(600), state)
    fail = LaunchFailure("spot-b", FailureReason.CAPACITY, "InsufficientInstanceCapacity", 690, "act-1")
    obs = _obs(
        700, {"spot-a": (2, 0, 0), "spot-b": (2, 0, 0), "spot-sku": (0, 0, 0), "od": (0, 0, 0)}, failures=(fail,)
    )
    r = reconcile(plan, obs, state)
    assert _desired(r.actions) == {"spot-b": 0}  # backed off: open request withdrawn until the backoff ends
    assert [e.data["reason"] for e in r.events if e.kind == "launch_failure"] == ["capacity"]
    # the same failure redelivered is not counted again
    r2 = reconcile(plan, obs, state)
    assert not [e for e in r2.events if e.kind == "launch_failure"]
    assert state.backoff["spot-b"].attempts == 1
    assert _desired(
        reconcile(
            plan, _obs(761, {"spot-a": (2, 0, 0), "spot-b": (0, 0, 0), "spot-sku": (0, 0, 0), "od": (0, 0, 0)}), state
        ).actions
    ) == {"spot-b": 2}


def test_on_demand_growth_respects_the_cost_ceiling(
    plan_factory: Factory, ladder_factory: Callable[..., object]
) -> None:
    cheap = plan_factory(ladder_factory(od_ceiling=2.5))  # on-demand costs 3.0/h
    state = PoolState()
    reconcile(cheap, _lost(0), state)
    r = reconcile(cheap, _lost(1800), state)
    assert r.step is not None and r.step.kind is StepKind.ON_DEMAND
    assert "od" not in _desired(r.actions)
    ok = plan_factory()
    state = PoolState()
    reconcile(ok, _lost(0), state)
    assert _desired(reconcile(ok, _lost(1800), state).actions)["od"] == 2


def test_deadline_at_risk_escalates_at_once(plan_factory: Factory) -> None:
    # 10 h of work, 11 h deadline, 1 h already gone with no progress: at risk
    plan = plan_factory(job_started_at=0.0, deadline_hours=11.0)
    r = reconcile(plan, _lost(3600), PoolState())
    assert r.step is not None and r.step.kind is StepKind.ON_DEMAND
    assert _desired(r.actions) == {"od": 2}
    assert any(e.kind == "step_changed" and e.data["deadlineAtRisk"] for e in r.events)


def test_queue_defer_tells_the_scheduler_once_and_resumes(plan_factory: Factory) -> None:
    plan, state = plan_factory(), PoolState()
    reconcile(plan, _lost(0), state)
    r = reconcile(plan, _lost(5400), state)
    assert r.step is not None and r.step.kind is StepKind.QUEUE_DEFER
    assert [a for a in r.actions if isinstance(a, Defer)]
    assert not [a for a in reconcile(plan, _lost(5500), state).actions if isinstance(a, Defer)]
    back = reconcile(plan, _whole(6000), state)
    assert Resume("pool-a") in back.actions
    assert [e.data["latencySeconds"] for e in back.events if e.kind == "reacquired"] == [6000 - 60 - 0]


def test_reacquisition_latency_starts_at_the_interruption(plan_factory: Factory) -> None:
    plan, state = plan_factory(), PoolState()
    reconcile(plan, _whole(0), state)
    notice = Interruption("evt-1", "spot-a-r0", "interruption", 100)
    reconcile(plan, _lost(130, interruptions=(notice,)), state)
    assert state.lost_since == 100
    r = reconcile(plan, _whole(900), state)
    assert [e.data["latencySeconds"] for e in r.events if e.kind == "reacquired"] == [900 - 60 - 100]


def test_scale_in_waits_for_a_commit_after_the_drain_request(plan_factory: Factory) -> None:
    plan, state = plan_factory(stable=0), PoolState()
    counts = {"spot-a": (2, 2, 0), "spot-b": (0, 0, 0), "spot-sku": (0, 0, 0), "od": (2, 2, 0)}
    r = reconcile(plan, _obs(100, counts), state)
    drains = [a for a in r.actions if isinstance(a, RequestDrain)]
    assert sorted(a.vm_id for a in drains) == ["od-r0", "od-r1"]
    assert not [a for a in r.actions if isinstance(a, RemoveInstance)]
    # a commit from *before* the drain request does not count
    r = reconcile(plan, _obs(130, counts, commits={"od-r0": 90.0, "od-r1": 90.0}), state)
    assert not [a for a in r.actions if isinstance(a, RemoveInstance)]
    r = reconcile(plan, _obs(160, counts, commits={"od-r0": 140.0, "od-r1": 90.0}), state)
    assert [a for a in r.actions if isinstance(a, RemoveInstance)] == [RemoveInstance("od", "od-r0")]
    # never issued twice while the cloud still lists the VM
    r = reconcile(plan, _obs(190, counts, commits={"od-r0": 140.0, "od-r1": 90.0}), state)
    assert not [a for a in r.actions if isinstance(a, RemoveInstance)]


def test_never_lowers_desired_below_running_vms(plan_factory: Factory) -> None:
    plan = plan_factory()
    counts = {"spot-a": (2, 2, 0), "spot-b": (3, 1, 0), "spot-sku": (0, 0, 0), "od": (5, 1, 1)}
    r = reconcile(plan, _obs(0, counts), PoolState())
    assert _desired(r.actions) == {"spot-b": 1, "od": 2}


def test_commits_without_a_step_are_reported_once_as_unreported_progress(plan_factory: Factory) -> None:
    plan = plan_factory(job_started_at=0.0, deadline_hours=11.0)
    state = PoolState()
    seen = []
    for now in (600.0, 660.0, 720.0):
        blind = _whole(now)
        blind = PoolObservation(blind.pool, now, blind.groups, commits={"spot-a-r0": now - 30})
        seen += [e for e in reconcile(plan, blind, state).events if e.kind == "progress_unreported"]
    assert len(seen) == 1 and seen[0].data["commits"] == 1 and "step=" in seen[0].data["why"]
    telemetry = ControllerTelemetry()
    telemetry.emit(seen[0])
    assert telemetry.registry.get_sample_value("spotgpu_progress_unreported", {"pool": plan.name}) == 1
    assert state.work_done_hours == 0.0  # nothing to count it from
    told = _whole(780.0)
    told = PoolObservation(told.pool, 780.0, told.groups, commits={"spot-a-r0": 750.0}, steps={"spot-a-r0": 3600})
    assert not [e for e in reconcile(plan, told, PoolState()).events if e.kind == "progress_unreported"]
    no_deadline = plan_factory()
    assert not [e for e in reconcile(no_deadline, blind, PoolState()).events if e.kind == "progress_unreported"]
    stepped, counted = dataclasses.replace(plan, total_steps=36000), PoolState()
    reconcile(stepped, told, counted)  # a step was counted: this workload reports steps
    assert counted.committed_at == 750.0
    ack = PoolObservation(told.pool, 840.0, told.groups, commits={"spot-a-r1": 830.0})  # an idle VM acks its drain
    assert not [e for e in reconcile(stepped, ack, counted).events if e.kind == "progress_unreported"]
    assert [e for e in reconcile(stepped, ack, PoolState()).events if e.kind == "progress_unreported"]  # none counted yet
