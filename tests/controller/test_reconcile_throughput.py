"""Speed per GPU model in the deadline test (issue 26, item 2): slower escalates earlier, faster later."""

from __future__ import annotations

import pytest
from controller_factories import ladder, workload

from spotgpu.controller.config import GroupSpec
from spotgpu.controller.observe import GroupObservation, PoolObservation
from spotgpu.controller.reconcile import PoolPlan, can_give_back, reconcile
from spotgpu.controller.state import PoolState
from spotgpu.controller.strategies import make_strategy
from spotgpu.models.ladder import StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import GpuRequirement

#: Measured speeds relative to the type workHours was measured on (the primary's A100s).
TABLE = {"A100": 1.0, "A10G": 0.5, "H100": 2.0}


def _plan(deadline_hours: float, od_model: str | None, table: dict[str, float] | None = TABLE) -> PoolPlan:
    work = workload(deadline_hours, work_hours=10.0)
    if table is not None:
        work = work.model_copy(update={"gpu": GpuRequirement(gpus_per_node=8, relative_throughput=table)})
    groups = (
        GroupSpec(name="spot-a", role=StepKind.SAME_POOL, gpu_model="A100"),
        GroupSpec(name="od", role=StepKind.ON_DEMAND, gpu_model=od_model),
    )
    return PoolPlan(name="pool-a", groups=groups, capacity=Capacity(target=2, max=4), workload=work,
                    strategy=make_strategy("ladder", ladder()), job_started_at=0.0)


def _lost_step(plan: PoolPlan) -> StepKind:
    groups = {"spot-a": GroupObservation("spot-a", 2, ()), "od": GroupObservation("od", 0, ())}
    result = reconcile(plan, PoolObservation("pool-a", 0.0, groups), PoolState())
    assert result.step is not None
    return result.step.kind


def test_a_slower_on_demand_type_escalates_earlier() -> None:
    # 10 h of reference work, 15 h to the deadline: on A100s there is slack; on A10Gs (half speed) there is not
    assert _lost_step(_plan(15.0, "A100")) is StepKind.SAME_POOL
    assert _lost_step(_plan(15.0, "A10G")) is StepKind.ON_DEMAND


def test_a_faster_on_demand_type_escalates_later() -> None:
    # 10.5 h to the deadline: A100s cannot absorb a loss any more, H100s (twice the speed) can
    assert _lost_step(_plan(10.5, "A100")) is StepKind.ON_DEMAND
    assert _lost_step(_plan(10.5, "H100")) is StepKind.SAME_POOL
    assert can_give_back(_plan(10.5, "H100"), PoolState(), 0.0)


def test_an_unmeasured_type_takes_its_spec_prior_and_a_nameless_one_the_slowest_measured_speed() -> None:
    """Issue 35: an unmeasured model is its spec-sheet prior against the table's reference (an L4 against the
    A100: the lower of 121/312 TFLOPS and 300/1555 GB/s), never 1.0 and not a guess from the other models."""
    from spotgpu.catalogue import spec_prior

    prior = spec_prior("L4", "A100")
    assert prior is not None and prior.speed == pytest.approx(300 / 1555, abs=1e-4)
    plan = _plan(15.0, "L4")
    assert plan.on_demand_speed == pytest.approx(prior.speed) and plan.unmeasured_models == ("L4",)
    assert _lost_step(plan) is StepKind.ON_DEMAND
    assert _plan(15.0, None).on_demand_speed == pytest.approx(0.5)  # no model named: the slowest measured speed


def test_a_gpu_block_without_a_table_takes_priors_against_the_primary_groups_model() -> None:
    """Without gpu.relativeThroughput the primary group's model is the reference (what the preview takes too)."""
    plan = _plan(15.0, "H100", table={})
    assert plan.on_demand_speed == pytest.approx(min(989 / 312, 3350 / 1555), abs=1e-3)  # H100 SXM vs A100 40GB
    assert _plan(15.0, "A100", table={}).on_demand_speed == 1.0


def test_no_table_keeps_every_type_at_the_reference_speed() -> None:
    plan = _plan(15.0, "A10G", table=None)
    assert plan.on_demand_speed == 1.0 and plan.unmeasured_models == ()
    assert _lost_step(plan) is StepKind.SAME_POOL


def test_an_unmeasured_on_demand_type_is_said_once() -> None:
    plan, state = _plan(15.0, "L4"), PoolState()
    groups = {"spot-a": GroupObservation("spot-a", 2, ()), "od": GroupObservation("od", 0, ())}
    first = reconcile(plan, PoolObservation("pool-a", 0.0, groups), state)
    again = reconcile(plan, PoolObservation("pool-a", 30.0, groups), state)
    said = [e for e in first.events + again.events if e.kind == "throughput_unmeasured"]
    assert len(said) == 1 and said[0].data["models"] == ["L4"]
