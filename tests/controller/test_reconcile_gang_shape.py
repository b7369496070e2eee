"""Gang shape changes (issue 26, item 4): a rung of another GPU count per node keeps the gang's GPUs."""

from __future__ import annotations

import dataclasses

from controller_factories import ladder, workload

from spotgpu.controller.actions import RequestDrain, SetDesired
from spotgpu.controller.config import GroupSpec
from spotgpu.controller.observe import GroupObservation, PoolObservation, Vm
from spotgpu.controller.reconcile import PoolPlan, reconcile
from spotgpu.controller.state import PoolState
from spotgpu.controller.strategies import make_strategy
from spotgpu.models.ladder import StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import GpuRequirement


def _plan(sku_gpus: int | None = 4, od_gpus: int | None = None, primary_gpus: int | None = 8,
          job_started_at: float | None = None, deadline_hours: float | None = None) -> PoolPlan:
    groups = (
        GroupSpec(name="spot-a", role=StepKind.SAME_POOL, gpus_per_node=primary_gpus),
        GroupSpec(name="spot-b", role=StepKind.ALTERNATE_ZONE),
        GroupSpec(name="spot-sku", role=StepKind.ALTERNATE_SKU, price_per_hour=1.8, gpus_per_node=sku_gpus),
        GroupSpec(name="od", role=StepKind.ON_DEMAND, gpus_per_node=od_gpus),
    )
    return PoolPlan(name="pool-a", groups=groups, capacity=Capacity(target=2, max=8),
                    workload=workload(deadline_hours), strategy=make_strategy("ladder", ladder()),
                    job_started_at=job_started_at)


def _obs(now: float, counts: dict[str, tuple[int, int]]) -> PoolObservation:
    """counts: group -> (desired, ready)."""
    groups = {}
    for name in ("spot-a", "spot-b", "spot-sku", "od"):
        desired, ready = counts.get(name, (0, 0))
        vms = tuple(Vm(f"{name}-r{i}", name, True, ready_at=now - 60) for i in range(ready))
        groups[name] = GroupObservation(name, desired, vms)
    return PoolObservation("pool-a", now, groups)


def _desired(actions: tuple[object, ...]) -> dict[str, int]:
    return {a.group: a.desired for a in actions if isinstance(a, SetDesired)}


def _to_sku_rung(plan: PoolPlan, state: PoolState, spot_a_ready: int = 0) -> dict[str, int]:
    lost = {"spot-a": (2, spot_a_ready)}
    reconcile(plan, _obs(0, lost), state)
    reconcile(plan, _obs(600, lost), state)  # alternate_zone: spot-b asks, gets nothing
    r = reconcile(plan, _obs(1200, {**lost, "spot-b": (2 - spot_a_ready, 0)}), state)
    assert r.step is not None and r.step.kind is StepKind.ALTERNATE_SKU
    return _desired(r.actions)


def test_an_8_gpu_pool_on_a_4_gpu_rung_asks_for_twice_the_nodes() -> None:
    assert _to_sku_rung(_plan(sku_gpus=4), PoolState())["spot-sku"] == 4
    assert _to_sku_rung(_plan(sku_gpus=8), PoolState())["spot-sku"] == 2  # same shape: as many nodes
    assert _to_sku_rung(_plan(sku_gpus=None, primary_gpus=None), PoolState())["spot-sku"] == 2  # no shapes stated
    assert _to_sku_rung(_plan(sku_gpus=16), PoolState())["spot-sku"] == 1  # a 16-GPU node holds the gang


def test_a_partial_loss_is_filled_in_gpus() -> None:
    assert _to_sku_rung(_plan(sku_gpus=4), PoolState(), spot_a_ready=1)["spot-sku"] == 2  # 8 GPUs missing


def test_half_the_gpus_on_as_many_nodes_is_not_whole() -> None:
    plan, state = _plan(sku_gpus=4), PoolState()
    _to_sku_rung(plan, state)
    r = reconcile(plan, _obs(1300, {"spot-a": (2, 0), "spot-sku": (4, 2)}), state)  # 2 x 4 GPUs: 8 of 16
    assert r.step is not None and state.lost_since is not None
    r = reconcile(plan, _obs(1400, {"spot-a": (2, 0), "spot-sku": (4, 4)}), state)  # 4 x 4 GPUs: whole again
    assert r.step is None and state.lost_since is None


def test_the_whole_gang_moved_on_demand_is_counted_in_gpus() -> None:
    plan = _plan(od_gpus=4, job_started_at=0.0, deadline_hours=10.05)  # 10 h of work: at risk at once
    r = reconcile(plan, _obs(0, {"spot-a": (2, 0)}), PoolState())
    assert _desired(r.actions)["od"] == 4


def test_scale_in_drains_only_what_the_gpu_surplus_covers() -> None:
    plan, state = dataclasses.replace(_plan(sku_gpus=4), stable_spot_seconds=0.0), PoolState()
    # primary back at 2 x 8 GPUs; three 4-GPU nodes extra = 1.5 primary nodes' worth: drain all three
    r = reconcile(plan, _obs(100, {"spot-a": (2, 2), "spot-sku": (3, 3)}), state)
    assert sorted(a.vm_id for a in r.actions if isinstance(a, RequestDrain)) == ["spot-sku-r0", "spot-sku-r1", "spot-sku-r2"]
    # primary has one 8-GPU node: the three 4-GPU nodes carry 12 GPUs, only 4 of them extra: drain one
    state = PoolState()
    r = reconcile(plan, _obs(100, {"spot-a": (2, 1), "spot-sku": (3, 3)}), state)
    assert [a.vm_id for a in r.actions if isinstance(a, RequestDrain)] == ["spot-sku-r0"]


def test_the_reference_shape_defaults_to_the_workloads_gpu_block() -> None:
    base = _plan(sku_gpus=4, primary_gpus=None)
    gpu = GpuRequirement(gpus_per_node=8)
    plan = dataclasses.replace(base, workload=base.workload.model_copy(update={"gpu": gpu}))
    assert plan.units("spot-sku") == 0.5 and plan.units("spot-a") == 1.0
