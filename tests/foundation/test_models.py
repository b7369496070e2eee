"""Notice contracts, ladders and workload profiles: the rules every other part relies on."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spotgpu.models import (
    AwsNoticeContract,
    AzureNoticeContract,
    FallbackLadder,
    GcpNoticeContract,
    StepKind,
    WorkloadProfile,
)

PRICES = {"spotPerHour": 1.0, "onDemandPerHour": 3.0}
PROFILE = {
    "checkpointBytes": 10**9,
    "checkpointWriteSeconds": 30,
    "checkpointLoadSeconds": 20,
    "restartSeconds": 120,
    "expectedReacquisitionSeconds": 300,
    "interruptionsPerHour": 0.1,
    "workHours": 10,
    "prices": PRICES,
}


@pytest.mark.parametrize(
    ("contract", "notice", "budget"),
    [
        (AwsNoticeContract(), 120, 105),
        (AwsNoticeContract(interruption_behavior="hibernate"), 0, 0),
        (GcpNoticeContract(), 120, 105),
        (GcpNoticeContract(preemption_notice_seconds=0), 30, 15),
        (AzureNoticeContract(), 30, 15),
        (AzureNoticeContract(safety_margin_seconds=5), 30, 25),
    ],
)
def test_notice_budgets_per_provider(contract, notice: float, budget: float) -> None:
    assert contract.notice_seconds == notice
    assert contract.final_checkpoint_budget_seconds == budget
    assert contract.guaranteed is False


def test_final_checkpoint_fit() -> None:
    assert AwsNoticeContract().final_checkpoint_fits(100)
    assert not AzureNoticeContract().final_checkpoint_fits(16)


def test_azure_margin_cannot_exceed_the_notice() -> None:
    with pytest.raises(ValidationError, match="exceeds Azure's"):
        AzureNoticeContract(safety_margin_seconds=45)


def _ladder(*steps: tuple[str, int, float]) -> FallbackLadder:
    return FallbackLadder.model_validate(
        {"steps": [{"kind": k, "maxWaitSeconds": w, "costCeilingPerHour": c} for k, w, c in steps]}
    )


def test_ladder_accessors() -> None:
    ladder = _ladder(("same_pool", 600, 2), ("on_demand", 1800, 5), ("queue_defer", 3600, 0))
    assert ladder.total_wait_seconds == 2400
    assert ladder.on_demand_ceiling_per_hour == 5
    assert ladder.step(StepKind.ALTERNATE_SKU) is None


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ((("same_pool", 600, 2), ("alternate_zone", 600, 2)), "no on_demand and no queue_defer"),
        ((("on_demand", 600, 2), ("same_pool", 600, 2)), "steps must follow the order"),
        ((("on_demand", 600, 2), ("on_demand", 600, 2)), "steps must follow the order"),
        ((("same_pool", 600, 0), ("on_demand", 600, 2)), "can never run"),
    ],
)
def test_bad_ladders(steps, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _ladder(*steps)


def test_queue_defer_alone_is_a_valid_last_resort() -> None:
    assert _ladder(("same_pool", 60, 1), ("queue_defer", 60, 0)).steps[-1].kind is StepKind.QUEUE_DEFER


def test_profile_rules() -> None:
    profile = WorkloadProfile.model_validate(PROFILE)
    assert profile.checkpoint_interval_seconds == "auto"
    with pytest.raises(ValidationError, match="not longer than checkpointWriteSeconds"):
        WorkloadProfile.model_validate({**PROFILE, "checkpointIntervalSeconds": 20})
    with pytest.raises(ValidationError, match="shorter than workHours"):
        WorkloadProfile.model_validate({**PROFILE, "deadlineHours": 5})
    with pytest.raises(ValidationError, match="fallbackPolicy"):
        WorkloadProfile.model_validate({**PROFILE, "fallbackPolicy": "yolo"})
    with pytest.raises(ValidationError, match="above onDemandPerHour"):
        WorkloadProfile.model_validate({**PROFILE, "prices": {"spotPerHour": 4, "onDemandPerHour": 3}})


def test_models_are_frozen() -> None:
    profile = WorkloadProfile.model_validate(PROFILE)
    with pytest.raises(ValidationError):
        profile.work_hours = 3  # type: ignore[misc]
