"""An early notice that goes away clears: ``acceptingWork`` is true again and the phase is
``running`` (issue 22, Agent contracts). A workload sees it in the notice snapshot, and a
long poll wakes for it."""

from __future__ import annotations

import threading
from typing import Any

from agent_testkit import fast_config, wait_until

from spotgpu.agent.client import AgentClient


def snapshot(agent: Any) -> dict[str, Any]:
    doc: dict[str, Any] = AgentClient(agent.control.url, register=False)._call("GET", "/v1/notice")
    return doc


def early_then_cleared(agent: Any, raise_it: Any, withdraw_it: Any) -> dict[str, Any]:
    workload = AgentClient(agent.control.url, register=False)
    assert workload.should_stop() is False  # its watcher follows the agent from now on
    raise_it()
    wait_until(lambda: snapshot(agent)["phase"] == "early-checkpoint", timeout=10)
    wait_until(lambda: workload.checkpoint_requested() == "early", timeout=10)
    before = snapshot(agent)
    assert before["acceptingWork"] is False and before["notice"]["checkpoint"] == "early"
    woke: list[dict[str, Any]] = []
    poll = AgentClient(agent.control.url, register=False)
    listener = threading.Thread(
        target=lambda: woke.append(poll._call("GET", f"/v1/notice?since={before['version']}&wait=10", timeout=15)),
        daemon=True,
    )
    listener.start()
    withdraw_it()
    listener.join(15)
    assert woke and woke[0]["phase"] == "running"  # the long poll woke for the clear
    after = snapshot(agent)
    assert after["phase"] == "running" and after["acceptingWork"] is True and after["stop"] is False
    assert after["notice"] is None
    assert after["cleared"]["eventId"] == before["notice"]["eventId"]
    # the workload's client forgets the cleared notice (it kept asking for an early checkpoint)
    wait_until(lambda: workload.notice is None, timeout=10)
    assert workload.checkpoint_requested() is None and workload.should_stop() is False
    assert agent.telemetry.registry.get_sample_value(
        "spotgpu_agent_notices_cleared_total", {"source": before["notice"]["source"]}
    ) == 1
    return after


def test_aws_rebalance_withdrawn_clears(fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url))

    def withdraw() -> None:
        fake.rebalance = None  # 404 again

    early_then_cleared(agent, fake.raise_rebalance, withdraw)
    fake.raise_spot(lead=30)  # a later terminal notice still stops the job
    wait_until(lambda: snapshot(agent)["stop"], timeout=10)


def test_gcp_maintenance_back_to_none_clears(fakes: Any, agents: Any) -> None:
    fake = fakes("gcp")
    agent = agents(fast_config("gcp", fake.url))
    wait_until(lambda: fake.count("GET", "wait_for_change=true") >= 2)
    early_then_cleared(
        agent,
        lambda: fake.set_value("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE"),
        lambda: fake.set_value("instance/maintenance-event", "NONE"),
    )
    fake.set_value("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE")  # a new one is a new notice
    wait_until(lambda: snapshot(agent)["phase"] == "early-checkpoint", timeout=10)


def test_azure_freeze_gone_from_the_document_clears(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    agent = agents(fast_config("azure", fake.url))
    ids: list[str] = []
    early_then_cleared(agent, lambda: ids.append(fake.raise_event("Freeze", not_before_in=900)), fake.clear)


def test_azure_one_of_two_early_events_gone_keeps_the_other(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    agent = agents(fast_config("azure", fake.url))
    freeze = fake.raise_event("Freeze", not_before_in=900)
    wait_until(lambda: snapshot(agent)["phase"] == "early-checkpoint", timeout=10)
    reboot = fake.raise_event("Reboot", not_before_in=900)
    wait_until(lambda: (snapshot(agent)["notice"] or {}).get("eventId") == reboot, timeout=10)
    with fake.lock:
        fake.events = [e for e in fake.events if e["EventId"] != reboot]
        fake.incarnation += 1
    wait_until(lambda: (snapshot(agent)["notice"] or {}).get("eventId") == freeze, timeout=10)
    assert snapshot(agent)["phase"] == "early-checkpoint" and snapshot(agent)["acceptingWork"] is False
    fake.clear()
    wait_until(lambda: snapshot(agent)["acceptingWork"] is True, timeout=10)


def test_a_terminal_notice_never_clears(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    agent = agents(fast_config("azure", fake.url))
    eid = fake.raise_event("Preempt", not_before_in=20)
    wait_until(lambda: fake.acks[eid], timeout=10)  # approved: the event leaves the document
    wait_until(lambda: fake.count("GET", "scheduledevents") >= 3)
    assert snapshot(agent)["phase"] == "drained" and snapshot(agent)["acceptingWork"] is False
