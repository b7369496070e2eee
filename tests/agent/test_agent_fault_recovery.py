"""A faulty first look at a notice costs one retry, not a backoff (the fault bench's
targets: detection p99 <= 2 s on polled sources under 500s, resets, malformed bodies and hangs)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

SLOW_BACKOFF = {"error_backoff_seconds": 1.0, "request_timeout_seconds": 2.0}


def detection_after(agent: Any, raised: float) -> float:
    wait_until(lambda: agent.responder.store.all(), timeout=10)
    return float(agent.responder.store.all()[0].detected_at - raised)


@pytest.mark.parametrize("mode", ["500", "malformed", "drop"])
def test_a_failed_poll_is_retried_at_once(fakes: Any, agents: Any, mode: str) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url, runtime=SLOW_BACKOFF))
    wait_until(lambda: fake.count("GET", "instance-action") >= 2)
    fake.inject("instance-action", mode, 1)
    raised = fake.raise_spot(lead=60)
    assert detection_after(agent, raised) < 0.2 + 0.4  # one poll interval and a retry, not the 1 s backoff


def test_a_hung_poll_is_abandoned_after_half_an_interval(fakes: Any, agents: Any) -> None:
    fake = fakes("aws", timeout_delay=5.0)
    agent = agents(fast_config("aws", fake.url, runtime={**SLOW_BACKOFF, "poll_interval_seconds": 1.0}))
    wait_until(lambda: fake.count("GET", "instance-action") >= 1)
    time.sleep(0.1)
    fake.inject("instance-action", "timeout", 1)
    raised = fake.raise_spot(lead=60)
    # The next poll hangs: given up after 0.5 s (half the interval), retried at once;
    # before, the 2 s request timeout and then the 1 s backoff.
    assert detection_after(agent, raised) < 1.0 + 0.5 + 0.4


def test_repeated_errors_still_back_off(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    fake.inject("scheduledevents", "500", 1000)
    agents(fast_config("azure", fake.url, runtime={"error_backoff_seconds": 1.0}))
    time.sleep(2.2)
    assert fake.count("GET", "scheduledevents") <= 1 + 2 * 2  # one immediate retry per streak, then 1 s apart
