"""A notice whose time cannot be read is acted on at once, with the shortest safe budget
(the contract's minimum notice), and logged with the value (issue 22, Agent contracts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent import aws, azure
from spotgpu.agent.http import MetadataHttp
from spotgpu.agent.response_rules import contract_from_config, resolve_deadline
from spotgpu.agent.telemetry import AgentTelemetry
from spotgpu.contract.interruptions import InterruptionKind

UNREADABLE = ["garbage", "Tuesday-ish 18:00", 1764698400, {"at": 1}]


@pytest.mark.parametrize("not_before", UNREADABLE, ids=repr)
def test_azure_event_with_an_unreadable_not_before_is_kept(fakes: Any, not_before: object) -> None:
    fake = fakes("azure")
    eid = fake.raise_event("Preempt", not_before=not_before)
    monitor = azure.ScheduledEventsMonitor(azure.AzureImdsClient(MetadataHttp(fake.url, timeout=0.5)))
    [event] = monitor.check()
    assert (event.event_id, event.kind, event.acknowledge_ids) == (eid, InterruptionKind.PREEMPT, (eid,))
    assert event.unparsed_time == repr(not_before)
    deadline = resolve_deadline(event, contract_from_config("azure", {}))
    assert deadline.basis == "unparseable"
    assert deadline.at == pytest.approx(event.detected_at + 30)  # Azure's documented minimum Preempt notice


@pytest.mark.timeout(60)
def test_azure_unreadable_not_before_drains_and_approves_at_once(fakes: Any, agents: Any, tmp_path: Path) -> None:
    fake = fakes("azure")
    log = tmp_path / "events.jsonl"
    agent = agents(fast_config("azure", fake.url), telemetry=AgentTelemetry(str(log)))
    eid = fake.raise_event("Preempt", not_before="Tuesday-ish")
    wait_until(lambda: fake.acks[eid], timeout=10)  # no workload: drained and approved at once
    notice = agent.state.snapshot()["notice"]
    assert notice["deadline"] - notice["detectedAt"] == pytest.approx(30, abs=0.01)
    [record] = [r for r in map(json.loads, log.read_text().splitlines()) if r["record"] == "notice"]
    assert record["deadlineBasis"] == "unparseable" and record["unparsedTime"] == "'Tuesday-ish'"


def test_aws_instance_action_with_an_unreadable_time_is_a_preempt_now(fakes: Any) -> None:
    fake = fakes("aws")
    fake.instance_action = {"action": "terminate", "time": "soon"}
    monitor = aws.SpotInterruptionMonitor(aws.ImdsV2Client(MetadataHttp(fake.url, timeout=0.5)))
    [event] = monitor.check()
    assert event.kind is InterruptionKind.PREEMPT and event.unparsed_time == "'soon'"
    assert event.cloud_deadline is None and event.published_at is None
    deadline = resolve_deadline(event, contract_from_config("aws", {}))
    assert (deadline.basis, deadline.at) == ("unparseable", pytest.approx(event.detected_at + 120))
