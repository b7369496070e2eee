"""Only the workload's own calls count as contact (issue 22, Agent contracts).

A status read or a health probe is an operator or a monitor, not a workload: after
one, a notice must still find "no workload" and drain at once, not wait out the
budget for a final checkpoint nobody will write.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.client import AgentClient
from spotgpu.cli import main


def outcome(agent: Any) -> str | None:
    for name in ("committed", "failed", "timeout", "no-workload"):
        if agent.telemetry.registry.get_sample_value("spotgpu_agent_final_checkpoints_total", {"outcome": name}):
            return name
    return None


def test_status_and_healthz_reads_are_not_a_workload(fakes: Any, agents: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url))
    assert main(["agent", "status", "--control", agent.control.url, "--json"]) == 0
    assert main(["agent", "status", "--control", agent.control.url]) == 0
    capsys.readouterr()
    urllib.request.urlopen(f"http://{agent.control.url}/healthz", timeout=5).read()
    raised = time.time()
    fake.raise_spot(lead=15)  # a budget of 14 s that nobody would use
    wait_until(lambda: agent.state.phase == "drained", timeout=20)
    assert outcome(agent) == "no-workload"
    assert time.time() - raised < 3.0  # drained at once, not at +14 s


def test_a_workload_that_only_said_ready_is_waited_for(fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url))
    AgentClient(agent.control.url, register=False).ready()
    fake.raise_spot(lead=3)
    wait_until(lambda: agent.state.phase == "drained", timeout=10)
    assert outcome(agent) == "timeout"  # it waited for the final report


def test_a_workload_that_only_long_polls_is_waited_for(fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url))
    client = AgentClient(agent.control.url, register=False)
    heard: list[Any] = []
    listener = threading.Thread(target=lambda: heard.append(client.wait_for_notice(timeout=10)), daemon=True)
    listener.start()
    wait_until(lambda: agent.state.workload_seen_at is not None, timeout=5)
    fake.raise_spot(lead=3)
    listener.join(10)
    assert heard and heard[0] is not None and heard[0].stop
    wait_until(lambda: agent.state.phase == "drained", timeout=10)
    assert outcome(agent) == "timeout"
