"""Factories shared by the controller tests: ladders, plans and pool configs.

A uniquely named module (not conftest) so test files can import it by name in a full-suite run."""

from __future__ import annotations

from typing import Any

from spotgpu.controller.config import ControllerConfig, GroupSpec
from spotgpu.controller.reconcile import PoolPlan
from spotgpu.controller.strategies import make_strategy
from spotgpu.models.ladder import FallbackLadder, LadderStep, StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import Prices, WorkloadProfile

SPOT, OD = 1.0, 3.0


def workload(deadline_hours: float | None = None, work_hours: float = 10.0, policy: str = "ladder") -> WorkloadProfile:
    return WorkloadProfile(
        checkpoint_bytes=10**9,
        checkpoint_write_seconds=30,
        checkpoint_load_seconds=20,
        restart_seconds=120,
        expected_reacquisition_seconds=600,
        interruptions_per_hour=0.1,
        work_hours=work_hours,
        deadline_hours=deadline_hours,
        fallback_policy=policy,
        prices=Prices(spot_per_hour=SPOT, on_demand_per_hour=OD),
    )


def ladder(
    waits: tuple[int, int, int, int] = (600, 600, 600, 3600),
    od_ceiling: float = 4.0,
    escalate: bool = True,
) -> FallbackLadder:
    return FallbackLadder(
        steps=(
            LadderStep(kind=StepKind.SAME_POOL, max_wait_seconds=waits[0], cost_ceiling_per_hour=1.5),
            LadderStep(kind=StepKind.ALTERNATE_ZONE, max_wait_seconds=waits[1], cost_ceiling_per_hour=1.5),
            LadderStep(kind=StepKind.ALTERNATE_SKU, max_wait_seconds=waits[2], cost_ceiling_per_hour=2.0),
            LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=waits[3], cost_ceiling_per_hour=od_ceiling),
            LadderStep(kind=StepKind.QUEUE_DEFER, max_wait_seconds=86400, cost_ceiling_per_hour=0),
        ),
        deadline_escalation=escalate,
    )


GROUPS = (
    GroupSpec(name="spot-a", role=StepKind.SAME_POOL),
    GroupSpec(name="spot-b", role=StepKind.ALTERNATE_ZONE),
    GroupSpec(name="spot-sku", role=StepKind.ALTERNATE_SKU, price_per_hour=1.8),
    GroupSpec(name="od", role=StepKind.ON_DEMAND),
)


def make_plan(
    the_ladder: FallbackLadder | None = None,
    *,
    target: int = 2,
    policy: str = "ladder",
    stable: float = 300.0,
    job_started_at: float | None = None,
    deadline_hours: float | None = None,
    work_hours: float = 10.0,
) -> PoolPlan:
    lad = the_ladder or ladder()
    return PoolPlan(
        name="pool-a",
        groups=GROUPS,
        capacity=Capacity(target=target, max=max(target, 4)),
        workload=workload(deadline_hours, work_hours, policy),
        strategy=make_strategy(policy, lad),
        stable_spot_seconds=stable,
        job_started_at=job_started_at,
    )


#: The groups of the one-pool AWS controller config: a primary spot group and the on-demand fallback.
TWO_GROUPS: tuple[dict[str, Any], ...] = ({"name": "spot-a", "role": "same_pool"}, {"name": "od", "role": "on_demand"})


def aws_controller_config(
    state_url: str = "file:///unused",
    *,
    groups: tuple[dict[str, Any], ...] = TWO_GROUPS,
    target: int = 2,
    max_size: int = 4,
    profile: WorkloadProfile | None = None,
    waits: tuple[int, int, int, int] | None = None,
    **top: Any,
) -> ControllerConfig:
    """A validated controller config for one AWS pool ``pool-a`` (workload ``train``, ladder ``main``);
    ``top`` adds top-level keys such as ``stableSpotSeconds``."""
    steps = ladder(waits) if waits is not None else ladder()
    return ControllerConfig.model_validate(
        {
            "stateUrl": state_url,
            **top,
            "workloads": {"train": (profile or workload()).model_dump(by_alias=True)},
            "ladders": {"main": steps.model_dump(by_alias=True, mode="json")},
            "pools": [
                {
                    "cloud": "aws",
                    "name": "pool-a",
                    "region": "us-east-1",
                    "workload": "train",
                    "ladder": "main",
                    "capacity": {"target": target, "max": max_size},
                    "groups": list(groups),
                }
            ],
        }
    )
