"""LadderWalker: rung by elapsed wait, deadline escalation, and the final-step guarantee."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spotgpu.controller.ladder import LadderWalker
from spotgpu.models.ladder import FallbackLadder, LadderStep, StepKind


def _ladder(escalate: bool = True, with_od: bool = True) -> FallbackLadder:
    steps = [
        LadderStep(kind=StepKind.SAME_POOL, max_wait_seconds=300, cost_ceiling_per_hour=2),
        LadderStep(kind=StepKind.ALTERNATE_ZONE, max_wait_seconds=600, cost_ceiling_per_hour=2),
        LadderStep(kind=StepKind.ALTERNATE_SKU, max_wait_seconds=900, cost_ceiling_per_hour=3),
    ]
    if with_od:
        steps.append(LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=1800, cost_ceiling_per_hour=5))
    steps.append(LadderStep(kind=StepKind.QUEUE_DEFER, max_wait_seconds=3600, cost_ceiling_per_hour=0))
    return FallbackLadder(steps=tuple(steps), deadline_escalation=escalate)


@pytest.mark.parametrize(
    ("waited", "kind"),
    [
        (0, StepKind.SAME_POOL),
        (299.9, StepKind.SAME_POOL),
        (300, StepKind.ALTERNATE_ZONE),
        (899, StepKind.ALTERNATE_ZONE),
        (900, StepKind.ALTERNATE_SKU),
        (1800, StepKind.ON_DEMAND),
        (3599, StepKind.ON_DEMAND),
        (3600, StepKind.QUEUE_DEFER),
        (10**9, StepKind.QUEUE_DEFER),
    ],
)
def test_step_by_elapsed_wait(waited: float, kind: StepKind) -> None:
    assert LadderWalker(_ladder()).step_for(waited, deadline_at_risk=False).kind is kind


def test_deadline_at_risk_jumps_to_on_demand() -> None:
    walker = LadderWalker(_ladder())
    assert walker.step_for(0, deadline_at_risk=True).kind is StepKind.ON_DEMAND
    # never moves back up: past on-demand the queue stays the queue
    assert walker.step_for(5000, deadline_at_risk=True).kind is StepKind.QUEUE_DEFER


def test_escalation_disabled_or_impossible() -> None:
    assert LadderWalker(_ladder(escalate=False)).step_for(0, True).kind is StepKind.SAME_POOL
    assert LadderWalker(_ladder(escalate=False, with_od=False)).step_for(0, True).kind is StepKind.SAME_POOL


def test_escalation_without_an_on_demand_rung_is_rejected_and_the_default_is_off() -> None:
    with pytest.raises(ValueError, match="deadlineEscalation is true but the ladder has no on_demand step"):
        _ladder(escalate=True, with_od=False)
    steps = _ladder(with_od=False, escalate=False).steps
    assert FallbackLadder(steps=steps).deadline_escalation is False  # not set: no rung, no escalation
    assert FallbackLadder(steps=_ladder().steps).deadline_escalation is True


def test_rejects_negative_or_nan_wait() -> None:
    walker = LadderWalker(_ladder())
    with pytest.raises(ValueError, match="waited_seconds"):
        walker.step_for(-1, False)
    with pytest.raises(ValueError, match="waited_seconds"):
        walker.step_for(float("nan"), False)


def test_entered_at_and_seconds_left() -> None:
    walker = LadderWalker(_ladder())
    assert [walker.entered_at(i) for i in range(5)] == [0, 300, 900, 1800, 3600]
    assert walker.seconds_left(100) == 200
    assert walker.seconds_left(4000) is None


_kinds = st.lists(st.sampled_from(list(StepKind)), min_size=1, unique=True).map(
    lambda ks: sorted(ks, key=lambda k: k.rank)
).filter(lambda ks: StepKind.ON_DEMAND in ks or StepKind.QUEUE_DEFER in ks)


@st.composite
def ladders(draw: st.DrawFn) -> FallbackLadder:
    kinds = draw(_kinds)
    steps = tuple(
        LadderStep(
            kind=k,
            max_wait_seconds=draw(st.integers(1, 7200)),
            cost_ceiling_per_hour=0.0 if k is StepKind.QUEUE_DEFER else draw(st.floats(0.1, 50)),
        )
        for k in kinds
    )
    escalate = draw(st.booleans()) and StepKind.ON_DEMAND in kinds
    return FallbackLadder(steps=steps, deadline_escalation=escalate)


@given(ladders(), st.floats(0, 1e6), st.floats(0, 1e6), st.booleans())
def test_monotone_and_terminal(ladder: FallbackLadder, a: float, b: float, risk: bool) -> None:
    walker = LadderWalker(ladder)
    lo, hi = sorted((a, b))
    assert walker.index_for(lo, risk) <= walker.index_for(hi, risk)
    if hi >= ladder.total_wait_seconds:
        assert walker.step_for(hi, risk).kind in (StepKind.ON_DEMAND, StepKind.QUEUE_DEFER)
    assert walker.index_for(lo, risk) >= walker.index_for(lo, False)


@pytest.mark.parametrize(
    ("policy", "waited", "risk", "behind", "kind"),
    [
        ("ladder", 400, False, True, StepKind.ALTERNATE_ZONE),
        ("ladder", 400, True, False, StepKind.ON_DEMAND),
        ("fixed-wait", 400, False, False, StepKind.SAME_POOL),  # never widens
        ("fixed-wait", 1799, False, False, StepKind.SAME_POOL),
        ("fixed-wait", 1800, False, False, StepKind.ON_DEMAND),
        ("fixed-wait", 10, True, False, StepKind.ON_DEMAND),
        ("uniform-progress", 400, False, False, StepKind.ALTERNATE_ZONE),
        ("uniform-progress", 10, False, True, StepKind.ON_DEMAND),  # behind the line: on-demand now
        ("on-demand-only", 0, False, False, StepKind.ON_DEMAND),
        ("on-demand-only", 3600, False, False, StepKind.QUEUE_DEFER),
    ],
)
def test_strategies(policy: str, waited: float, risk: bool, behind: bool, kind: StepKind) -> None:
    from spotgpu.controller.strategies import StrategyContext, make_strategy

    strategy = make_strategy(policy, _ladder())
    assert strategy.ladder.steps[strategy.step_index(StrategyContext(waited, risk, behind))].kind is kind


def test_on_demand_only_without_on_demand_defers() -> None:
    from spotgpu.controller.strategies import StrategyContext, make_strategy

    strategy = make_strategy("on-demand-only", _ladder(escalate=False, with_od=False))
    assert strategy.ladder.steps[strategy.step_index(StrategyContext(0, False, False))].kind is StepKind.QUEUE_DEFER
