"""effective_cost: each term against a hand-computed case, plus properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotgpu.economics.cost import (
    effective_cost,
    expected_lost_seconds,
    lateness,
    reacquisition_outcome,
    spot_wait_seconds,
)
from spotgpu.economics.interval import IntervalDecision
from spotgpu.models import AwsNoticeContract, AzureNoticeContract, FallbackLadder, WorkloadProfile

AWS = AwsNoticeContract()
AZURE = AzureNoticeContract()


def profile(**over: object) -> WorkloadProfile:
    base: dict[str, object] = {
        "checkpointBytes": 10_000_000_000,
        "checkpointWriteSeconds": 60,
        "checkpointLoadSeconds": 120,
        "restartSeconds": 240,
        "expectedReacquisitionSeconds": 600,
        "checkpointIntervalSeconds": 1800,
        "interruptionsPerHour": 0.1,
        "workHours": 10,
        "maxLostWorkSeconds": 3600,
        "nodes": 1,
        "prices": {"spotPerHour": 1.0, "onDemandPerHour": 3.0, "storagePerGbMonth": 0.02, "requestPer1000": 0.005},
    }
    base.update(over)
    return WorkloadProfile.model_validate(base)


LADDER = FallbackLadder.model_validate(
    {
        "steps": [
            {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 2},
            {"kind": "alternate_zone", "maxWaitSeconds": 600, "costCeilingPerHour": 2},
            {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 4},
        ]
    }
)


def test_no_interruptions_costs_compute_plus_checkpoints() -> None:
    p = profile(interruptionsPerHour=0)
    bill = effective_cost(p, AWS)
    # 10 h of work, 20 checkpoints (every 1800 s), each stalls 60 s at $1/h.
    assert bill.term("spot_compute").usd == pytest.approx(10.0)
    stall_usd = 10 * 60 / 1800 * 1.0
    months = (10 + 10 * 60 / 1800) / 730
    storage_usd = 10.0 * 5 * months * 0.02
    writes = math.ceil(10e9 / (16 * 1024 * 1024)) + 2  # 16 MiB parts + manifest + commit marker
    request_usd = 20 * writes * 0.005 / 1000
    assert bill.term("checkpoint_storage_io").usd == pytest.approx(stall_usd + storage_usd + request_usd)
    for name in ("restart_reload", "lost_compute", "reacquisition_idle", "fallback", "deadline_penalty"):
        assert bill.term(name).usd == 0.0
    assert bill.expected_interruptions == 0.0
    assert bill.on_demand_total == pytest.approx(30.0)
    assert bill.spot_eligible
    assert bill.savings_fraction == pytest.approx(1 - bill.spot_total / 30.0)


def test_part_size_matches_the_checkpoint_library() -> None:
    from spotgpu.economics.cost import UPLOAD_PART_BYTES
    from spotgpu.storage.object_store import PART_SIZE

    assert UPLOAD_PART_BYTES == PART_SIZE


def test_interruption_terms_match_the_renewal_formula() -> None:
    p = profile(interruptionsPerHour=0.1, nodes=2)
    bill = effective_cost(p, AWS)  # no ladder: no fallback, full latency waited
    lam = 0.1 * 2
    lost_s = 1800 / 2 + 60  # T/2 + C, no notice credit by default
    o_h = (lost_s + 240 + 120) / 3600
    productive = 10 * (1 + 60 / 1800)
    n = lam * productive / (1 - lam * o_h)
    assert bill.expected_interruptions == pytest.approx(n)
    assert bill.term("lost_compute").usd == pytest.approx(n * lost_s / 3600 * 2 * 1.0)
    assert bill.term("restart_reload").usd == pytest.approx(n * 360 / 3600 * 2 * 1.0)
    # one surviving node is billed while the replacement is found (600 s mean, no cap)
    assert bill.term("reacquisition_idle").usd == pytest.approx(n * 600 / 3600 * 1 * 1.0)
    assert bill.term("fallback").usd == 0.0
    assert bill.expected_finish_hours == pytest.approx(productive + n * (o_h + 600 / 3600))
    assert bill.term("lost_compute").inputs["lost_seconds_per_interruption"] == lost_s


def test_ladder_fallback_share_and_idle_cap() -> None:
    p = profile(interruptionsPerHour=0.2)
    bill = effective_cost(p, AWS, LADDER)
    s = 1200.0  # spot rungs wait 600 + 600 before on-demand
    p_fb = math.exp(-s / 600)
    lam, o_h = 0.2, (900 + 60 + 360) / 3600
    k = p_fb / (1 - lam * o_h)
    phi = k / (1 + k)
    assert bill.details["fallbackProbability"] == pytest.approx(p_fb)
    assert bill.on_demand_share == pytest.approx(phi)
    assert bill.term("fallback").usd == pytest.approx(10 * phi * 3.0)
    assert bill.term("spot_compute").usd == pytest.approx(10 * (1 - phi) * 1.0)
    assert bill.term("reacquisition_idle").inputs["expected_idle_seconds"] == pytest.approx(600 * (1 - p_fb))


def test_on_demand_rung_above_its_ceiling_is_unreachable() -> None:
    cheap = FallbackLadder.model_validate(
        {
            "steps": [
                {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 2},
                {"kind": "on_demand", "maxWaitSeconds": 600, "costCeilingPerHour": 2.5},
            ]
        }
    )
    assert spot_wait_seconds(cheap, on_demand_per_hour=3.0) == math.inf
    assert spot_wait_seconds(cheap, on_demand_per_hour=2.0) == 600


def test_reacquisition_outcome_empirical_and_exponential() -> None:
    out = reacquisition_outcome(0, LADDER, 3.0, samples=[100, 500, 2000, 5000])
    assert out.fallback_probability == pytest.approx(0.5)
    assert out.expected_idle_seconds == pytest.approx((100 + 500 + 1200 + 1200) / 4)
    exp = reacquisition_outcome(1200, LADDER, 3.0)
    assert exp.fallback_probability == pytest.approx(math.exp(-1))
    assert exp.expected_idle_seconds == pytest.approx(1200 * (1 - math.exp(-1)))
    with pytest.raises(ValueError, match="non-negative"):
        reacquisition_outcome(0, LADDER, 3.0, samples=[-1])


def test_notice_credit_only_when_the_final_checkpoint_fits() -> None:
    assert expected_lost_seconds(1800, 60, final_fits=True, notice_delivery_probability=1.0) == 60
    assert expected_lost_seconds(1800, 60, final_fits=False, notice_delivery_probability=1.0) == 960
    assert expected_lost_seconds(1800, 60, final_fits=True, notice_delivery_probability=0.5) == pytest.approx(510)
    fits = effective_cost(profile(), AWS, notice_delivery_probability=1.0)  # 60 s fits AWS's 105 s budget
    not_fits = effective_cost(profile(), AZURE, notice_delivery_probability=1.0)  # Azure leaves 15 s
    assert fits.term("lost_compute").usd < not_fits.term("lost_compute").usd


def test_lateness_against_a_poisson_hand_case() -> None:
    # base 10 h, +1 h per interruption, mean 2, deadline 11.5: late when K >= 2
    miss, late = lateness(10.0, 1.0, 2.0, 11.5)
    p0, p1 = math.exp(-2), 2 * math.exp(-2)
    assert miss == pytest.approx(1 - p0 - p1)
    expected_late = sum(math.exp(-2) * 2**k / math.factorial(k) * (10 + k - 11.5) for k in range(2, 60))
    assert late == pytest.approx(expected_late)


def test_deadline_penalty_and_verdict() -> None:
    tight = profile(interruptionsPerHour=1.0, deadlineHours=10.5, prices={"spotPerHour": 1.0, "onDemandPerHour": 3.0,
                    "deadlinePenaltyPerHour": 100})  # fmt: skip
    bill = effective_cost(tight, AWS)  # no ladder: no escalation
    assert bill.deadline_miss_probability > 0.9
    assert bill.term("deadline_penalty").usd > 0
    assert not bill.spot_eligible
    assert any("no on-demand escalation" in r for r in bill.reasons)
    escalating = effective_cost(tight, AWS, LADDER)
    assert any("escalates" in r for r in escalating.reasons)


def test_loss_bound_violation_is_not_eligible() -> None:
    p = profile(maxLostWorkSeconds=600, checkpointIntervalSeconds=3600)
    bill = effective_cost(p, AWS)
    assert not bill.spot_eligible
    assert any("maxLostWorkSeconds" in r for r in bill.reasons)


def test_runaway_interruptions_are_not_eligible_and_serialise() -> None:
    p = profile(interruptionsPerHour=5.0, checkpointIntervalSeconds=3600)
    bill = effective_cost(p, AWS)
    assert not bill.spot_eligible
    assert math.isinf(bill.expected_finish_hours)
    doc = bill.to_dict()
    assert doc["expectedFinishHours"] is None  # JSON has no infinity
    import json

    json.dumps(doc)


def test_prices_close_to_on_demand_are_not_eligible() -> None:
    p = profile(interruptionsPerHour=0.5, prices={"spotPerHour": 2.9, "onDemandPerHour": 3.0})
    bill = effective_cost(p, AWS, LADDER)
    assert not bill.spot_eligible
    assert bill.spot_total >= bill.on_demand_total


FIXED = IntervalDecision(1800, "configured", True, ())


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(min_value=0.0, max_value=1.0),
    bump=st.floats(min_value=0.001, max_value=1.0),
    nodes=st.integers(min_value=1, max_value=8),
    deadline_extra=st.one_of(st.none(), st.floats(min_value=0.0, max_value=30.0)),
)
def test_cost_is_monotone_in_interruption_rate(
    rate: float, bump: float, nodes: int, deadline_extra: float | None
) -> None:
    deadline = None if deadline_extra is None else 10 + deadline_extra
    prices = {"spotPerHour": 1.0, "onDemandPerHour": 3.0, "deadlinePenaltyPerHour": 50}
    lo = effective_cost(profile(interruptionsPerHour=rate, nodes=nodes, deadlineHours=deadline, prices=prices),
                        AWS, LADDER, interval=FIXED)  # fmt: skip
    hi = effective_cost(profile(interruptionsPerHour=rate + bump, nodes=nodes, deadlineHours=deadline, prices=prices),
                        AWS, LADDER, interval=FIXED)  # fmt: skip
    if math.isfinite(hi.spot_total):
        assert hi.spot_total >= lo.spot_total - 1e-9
        assert hi.expected_interruptions >= lo.expected_interruptions


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(min_value=0.0, max_value=0.5), nodes=st.integers(min_value=1, max_value=16))
def test_spot_never_costs_less_than_its_compute(rate: float, nodes: int) -> None:
    bill = effective_cost(profile(interruptionsPerHour=rate, nodes=nodes), AWS, LADDER)
    assert bill.spot_total >= 10 * nodes * 1.0 - 1e-9
    assert all(t.usd >= 0 for t in bill.terms)
    assert {t.name for t in bill.terms} == {
        "spot_compute", "checkpoint_storage_io", "restart_reload", "lost_compute",
        "reacquisition_idle", "fallback", "deadline_penalty",
    }  # fmt: skip


def _gang_profile(**over: object) -> WorkloadProfile:
    base = {"checkpointBytes": 10**10, "checkpointWriteSeconds": 60, "checkpointLoadSeconds": 60, "restartSeconds": 240,
            "expectedReacquisitionSeconds": 900, "interruptionsPerHour": 0.1, "workHours": 24, "nodes": 4,
            "prices": {"spotPerHour": 1.0, "onDemandPerHour": 3.0}}  # fmt: skip
    base.update(over)
    return WorkloadProfile.model_validate(base)


def test_gang_interval_uses_the_gangs_time_between_interruptions() -> None:
    from spotgpu.economics.interval import choose_interval, daly_interval

    gang = choose_interval(_gang_profile(), AwsNoticeContract())
    assert gang.seconds == int(daly_interval(60, 3600 / 0.4))  # 4 nodes x 0.1/h
    measured = choose_interval(_gang_profile(), AwsNoticeContract(), gang_interruptions_per_hour=0.2)
    assert measured.seconds == int(daly_interval(60, 3600 / 0.2)) and measured.seconds > gang.seconds


def test_measured_gang_rate_replaces_independent_nodes() -> None:
    profile = _gang_profile()
    assumed = effective_cost(profile, AwsNoticeContract())
    measured = effective_cost(profile, AwsNoticeContract(), gang_interruptions_per_hour=0.2)
    assert assumed.details["gangInterruptionsPerHour"] == pytest.approx(0.4)
    assert measured.details["gangInterruptionsPerHour"] == pytest.approx(0.2)
    assert measured.expected_interruptions < assumed.expected_interruptions


def test_interval_is_capped_by_the_deadline_slack() -> None:
    from spotgpu.economics.interval import choose_interval

    loose = choose_interval(_gang_profile(interruptionsPerHour=0.001, nodes=1), AwsNoticeContract())
    tight = choose_interval(_gang_profile(interruptionsPerHour=0.001, nodes=1, deadlineHours=25), AwsNoticeContract())
    assert tight.seconds == 3600 // 2 - 300 - 60 and tight.seconds < loose.seconds
    assert "slack" in tight.method


def test_deadline_penalty_counts_escalation_to_on_demand() -> None:
    """A tight deadline with a steep penalty: priced as lateness it sinks spot; with escalation it is on-demand hours."""
    from spotgpu.models import FallbackLadder

    profile = _gang_profile(nodes=1, interruptionsPerHour=0.5, workHours=8, deadlineHours=9,
                            prices={"spotPerHour": 0.918, "onDemandPerHour": 3.06, "deadlinePenaltyPerHour": 500})  # fmt: skip
    steps = [{"kind": "same_pool", "maxWaitSeconds": 900, "costCeilingPerHour": 1.5},
             {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 4}]  # fmt: skip
    no_escalation = FallbackLadder.model_validate({"steps": steps, "deadlineEscalation": False})
    escalating = FallbackLadder.model_validate({"steps": steps})
    priced_late = effective_cost(profile, AwsNoticeContract(), no_escalation)
    escalated = effective_cost(profile, AwsNoticeContract(), escalating)
    late_h = priced_late.term("deadline_penalty").inputs["expected_hours_late"]
    assert late_h > 0 and not priced_late.spot_eligible
    assert escalated.term("deadline_penalty").usd == pytest.approx(late_h * 3.06)
    assert escalated.term("deadline_penalty").inputs["escalates_to_on_demand"] is True
    assert escalated.spot_eligible
