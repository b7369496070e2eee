"""Pure decisions: contract rebuild, deadline sanity, budget, and the action plan."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spotgpu.agent.events import EventStore, InterruptionEvent
from spotgpu.agent.response_rules import (
    contract_from_config,
    plan_response,
    resolve_deadline,
)
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.notice import Checkpoint, NoticeDocument
from spotgpu.models.notice import AwsNoticeContract, AzureNoticeContract, GcpNoticeContract, default_notice

T0 = 1_800_000_000.0


def event(kind: InterruptionKind = InterruptionKind.PREEMPT, cloud: float | None = None, **kw: object) -> InterruptionEvent:
    return InterruptionEvent("e1", kind, "test/source", T0, {}, cloud_deadline=cloud, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_contract_round_trips_through_the_bootstrap_dump(provider: str) -> None:
    contract = default_notice(provider)  # type: ignore[arg-type]
    dumped = contract.model_dump(mode="json", by_alias=True)
    assert contract_from_config(provider, dumped) == contract


def test_contract_accepts_the_snake_case_dump_the_components_write() -> None:
    contract = AwsNoticeContract(interruption_behavior="stop", safety_margin_seconds=10)
    assert contract_from_config("aws", contract.model_dump(mode="json")) == contract


def test_contract_without_provider_takes_the_pools() -> None:
    assert isinstance(contract_from_config("gcp", {"preemptionNoticeSeconds": 0}), GcpNoticeContract)


def test_contract_for_another_provider_is_refused_with_a_fix() -> None:
    with pytest.raises(ValueError, match="does not match the agent's provider 'aws'"):
        contract_from_config("aws", {"provider": "gcp"})


def test_invalid_contract_names_the_field() -> None:
    with pytest.raises(ValidationError, match="preemptionNoticeSeconds"):
        contract_from_config("gcp", {"preemptionNoticeSeconds": 60})


def test_cloud_deadline_within_the_documented_lead_is_trusted() -> None:
    d = resolve_deadline(event(cloud=T0 + 110), AwsNoticeContract())
    assert (d.at, d.basis) == (T0 + 110, "cloud")


def test_missing_cloud_deadline_uses_the_contract_notice() -> None:
    assert resolve_deadline(event(), GcpNoticeContract()).at == T0 + 120
    zero = GcpNoticeContract(preemption_notice_seconds=0)
    assert resolve_deadline(event(), zero).at == T0 + 30  # only the best-effort shutdown is left


def test_deadline_far_beyond_any_documented_lead_is_clock_skew() -> None:
    d = resolve_deadline(event(cloud=T0 + 3600), AzureNoticeContract())
    assert d.basis == "skew"
    assert d.at == T0 + 30


def test_a_deadline_in_the_past_is_due_now_not_a_skew_guess() -> None:
    """Defect (issue 36): a past time was classed as clock skew, so a maintenance event whose
    NotBefore had passed got a +3600 s deadline though it was about to start."""
    d = resolve_deadline(event(InterruptionKind.MAINTENANCE, cloud=T0 - 300), AzureNoticeContract())
    assert (d.at, d.basis) == (T0, "past")
    d = resolve_deadline(event(cloud=T0 - 300), AwsNoticeContract())
    assert (d.at, d.basis) == (T0, "past")


def test_a_documented_lead_is_used_when_the_cloud_gives_no_time() -> None:
    """Defect (issue 36): MIGRATE_ON_HOST_MAINTENANCE got the 1-hour lead; Google documents ~60 s."""
    d = resolve_deadline(event(InterruptionKind.MAINTENANCE, documented_lead=60.0), GcpNoticeContract())
    assert (d.at, d.basis) == (T0 + 60, "documented")


def test_scheduled_maintenance_may_be_announced_weeks_ahead() -> None:
    weeks = T0 + 14 * 86400
    d = resolve_deadline(event(InterruptionKind.MAINTENANCE, cloud=weeks, max_lead=float("inf")), AwsNoticeContract())
    assert (d.at, d.basis) == (weeks, "cloud")
    d = resolve_deadline(event(InterruptionKind.MAINTENANCE, cloud=weeks), AwsNoticeContract())
    assert d.basis == "skew"  # without the source's own bound, the kind's 1 h still applies


def test_slightly_past_deadline_is_now_not_skew() -> None:
    d = resolve_deadline(event(cloud=T0 - 1), AwsNoticeContract())
    assert (d.at, d.basis) == (T0, "cloud")


def test_azure_terminate_may_give_fifteen_minutes() -> None:
    d = resolve_deadline(event(InterruptionKind.TERMINATE, cloud=T0 + 600), AzureNoticeContract())
    assert (d.at, d.basis) == (T0 + 600, "cloud")


def test_hibernate_contract_leaves_no_time() -> None:
    contract = AwsNoticeContract(interruption_behavior="hibernate")
    d = resolve_deadline(event(), contract)
    assert d.at == T0
    notice = NoticeDocument.told("e", InterruptionKind.PREEMPT, "imds", Checkpoint.FINAL, T0, d.at,
                                 contract.safety_margin_seconds)  # fmt: skip
    assert notice.budget_seconds(T0) == 0.0


def test_rebalance_has_no_deadline() -> None:
    assert resolve_deadline(event(InterruptionKind.REBALANCE), AwsNoticeContract()).basis == "none"


def test_budget_is_deadline_minus_now_minus_margin_never_negative() -> None:
    def notice(deadline: float | None) -> NoticeDocument:
        return NoticeDocument.told("e", InterruptionKind.PREEMPT, "imds", Checkpoint.FINAL, T0, deadline, 15)

    assert notice(T0 + 120).budget_seconds(T0 + 10) == 95
    assert notice(T0 + 5).budget_seconds(T0) == 0.0
    assert notice(None).budget_seconds(T0) == 0.0


def test_plan_rebalance_is_an_early_checkpoint_without_drain() -> None:
    plan = plan_response(event(InterruptionKind.REBALANCE), AwsNoticeContract())
    assert (plan.act, plan.stop_new_work, plan.checkpoint, plan.drain, plan.acknowledge) == (
        True,
        True,
        "early",
        False,
        False,
    )


def test_plan_rebalance_ignored_when_the_contract_says_so() -> None:
    assert not plan_response(event(InterruptionKind.REBALANCE), AwsNoticeContract(watch_rebalance=False)).act


@pytest.mark.parametrize("kind", [InterruptionKind.PREEMPT, InterruptionKind.TERMINATE])
def test_plan_terminal_is_final_checkpoint_drain_and_acknowledge(kind: InterruptionKind) -> None:
    plan = plan_response(event(kind), AzureNoticeContract())
    assert (plan.checkpoint, plan.drain, plan.acknowledge) == ("final", True, True)


def test_plan_maintenance_is_early() -> None:
    assert plan_response(event(InterruptionKind.MAINTENANCE), GcpNoticeContract()).checkpoint == "early"


def test_event_store_deduplicates_by_source_and_id() -> None:
    store = EventStore()
    assert store.add(event())
    assert not store.add(event(cloud=T0 + 5))
    assert store.add(InterruptionEvent("e1", InterruptionKind.PREEMPT, "other/source", T0, {}))


def test_detection_latency_takes_the_tighter_bound() -> None:
    assert event(published_at=T0 - 3, since_last_clean_poll=0.4).detection_latency() == 0.4
    assert event(published_at=T0 - 0.2).detection_latency() == pytest.approx(0.2)
    assert event().detection_latency() is None
