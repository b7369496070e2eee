"""GCP: a stalled hanging GET (the server accepts and never answers) must not hide a
preemption for more than a few seconds (issue 22, Agent contracts)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent import gcp
from spotgpu.agent.http import MetadataError, MetadataHttp
from spotgpu.contract.interruptions import InterruptionKind


@pytest.mark.timeout(60)
def test_a_preemption_behind_a_stalled_hanging_get_is_seen_within_seconds(fakes: Any, agents: Any) -> None:
    fake = fakes("gcp")
    fake.inject("wait_for_change", "stall", 1000)  # every hanging GET stalls from now on
    agent = agents(fast_config("gcp", fake.url, runtime={"hanging_get_timeout_seconds": 60}))
    wait_until(lambda: fake.count("GET", "wait_for_change=true") >= 2)  # both hanging GETs are stuck
    raised = fake.raise_preempted()
    wait_until(lambda: agent.state.phase != "running", timeout=15)
    [event] = agent.responder.store.all()
    assert event.kind is InterruptionKind.PREEMPT
    assert event.detected_at - raised < 3.0  # the plain read every 2 s, not the 65 s client timeout


@pytest.mark.timeout(30)
def test_the_hanging_get_gives_up_just_after_timeout_sec(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gcp.GcpMetadataClient(MetadataHttp(fake.url, timeout=0.5)), timeout_sec=1)
    monitor.check()  # plain read: ETag
    fake.inject("wait_for_change", "stall")
    started = time.monotonic()
    with pytest.raises(MetadataError, match="timed out"):
        monitor.check()
    assert time.monotonic() - started < 1 + gcp.HANGING_GET_SLACK_SECONDS + 0.5  # not timeout_sec + 5


def test_plain_reads_see_the_value_without_waiting_for_a_change(fakes: Any) -> None:
    fake = fakes("gcp")
    plain = gcp.PreemptedMonitor.plain_reads(gcp.GcpMetadataClient(MetadataHttp(fake.url, timeout=0.5)), every=2.0)
    assert plain.interval == 2.0
    assert plain.check() == []
    assert plain.check() == []  # still a plain read: it never hangs
    assert all("wait_for_change" not in path for _, _, path in fake.requests)
    fake.raise_preempted()
    [event] = plain.check()
    assert event.kind is InterruptionKind.PREEMPT and event.since_last_clean_poll is None  # the runner sets last_clean


def test_a_spoiled_answer_to_a_change_keeps_the_old_etag(fakes: Any) -> None:
    fake = fakes("gcp")
    monitor = gcp.PreemptedMonitor(gcp.GcpMetadataClient(MetadataHttp(fake.url, timeout=0.5)), timeout_sec=5)
    monitor.check()
    fake.inject("wait_for_change", "malformed", 1, on_answer=True)
    fake.raise_preempted()
    with pytest.raises(MetadataError, match="unexpected value"):
        monitor.check()
    started = time.monotonic()
    [event] = monitor.check()  # the change is answered at once, not after timeout_sec
    assert event.kind is InterruptionKind.PREEMPT
    assert time.monotonic() - started < 1.0
