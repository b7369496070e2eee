"""A running agent serves the contract's status and snapshot, and its readers parse them through it
(audit of issue 34): ``GET /v1/status`` is :class:`AgentStatus`, ``GET /v1/notice`` :class:`WorkloadSnapshot`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.cli import render_status
from spotgpu.agent.client import AgentClient
from spotgpu.agent.daemon import Agent
from spotgpu.agent.fakes import FakeAwsImds
from spotgpu.agent.telemetry import AgentTelemetry
from spotgpu.contract.agent_status import AgentStatus, WorkloadSnapshot


@pytest.fixture
def agent() -> Iterator[Agent]:
    fake = FakeAwsImds(timeout_delay=1.0).start()
    running = Agent(fast_config("aws", fake.url), telemetry=AgentTelemetry(None)).start()
    yield running
    running.stop()
    fake.stop()


def test_the_served_status_is_the_contracts_and_its_readers_read_it(agent: Agent) -> None:
    client = AgentClient(agent.control.url, register=False)
    assert wait_until(client.zone) == "us-east-1b"  # the fake's placement, once the agent read its identity
    client.report_restore(40, "g-40", source="store", seconds=1.0, nbytes=10)
    served = client._call("GET", "/v1/status")
    status = AgentStatus.from_json(served)
    assert status.to_json() == served  # nothing served around the contract
    assert status.workload.restored is not None and status.workload.restored.step == 40
    assert status.reports == [status.workload.restored] and status.pool == agent.config.pool
    assert f"pool:      {agent.config.pool} (aws)" in render_status(served)
    snapshot = client._call("GET", "/v1/notice")
    assert WorkloadSnapshot.from_json(snapshot).to_json() == snapshot


def test_a_snapshot_the_client_cannot_read_keeps_its_notice_and_moves_its_version(agent: Agent) -> None:
    """An agent of another version: the client warns and keeps what it knew, and long-polls past the
    version it was served (else every poll would be answered at once)."""
    client = AgentClient(agent.control.url, register=False)
    assert client._absorb({"version": 9, "phase": "running", "notice": {"kind": "exploded"}}) is None
    assert client._version == 9 and not client._stop_flag.is_set()


def test_a_newer_agents_phase_or_report_value_does_not_hide_a_terminal_notice(agent: Agent) -> None:
    """Defect (review): the client parsed the whole snapshot, so one value it does not know (a newer agent's
    phase, a restore source) made it keep its old view and ignore a final notice on the same snapshot."""
    client = AgentClient(agent.control.url, register=False)
    notice = {"eventId": "e-1", "kind": "preempt", "source": "aws/spot-instance-action", "checkpoint": "final",
              "detectedAt": 1.0e9, "deadline": 1.0e9 + 120, "budgetDeadline": 1.0e9 + 100}  # fmt: skip
    newer = {"version": 4, "phase": "evacuating", "stop": True, "notice": notice,
             "restored": {"checkpoint": "restore", "committed": True, "source": "nvme"}}  # fmt: skip
    with pytest.raises(ValueError):
        WorkloadSnapshot.from_json(newer)  # the strict reader (agent status) still refuses it
    seen = client._absorb(newer)
    assert seen is not None and seen.event_id == "e-1" and seen.stop and client._stop_flag.is_set()
    assert client._version == 4
    # an agent that serves no ``stop`` key: the phase says it
    assert WorkloadSnapshot.notice_of({**newer, "stop": None, "phase": "draining"})[2] is True
    assert WorkloadSnapshot.notice_of({**newer, "stop": None, "phase": "evacuating"})[2] is False
