"""End to end per provider: fake notice -> agent -> real workload process writes a final
checkpoint through the checkpoint library (file:// store) -> agent acknowledges in budget."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.checkpoint import CheckpointManager

WORKLOAD = Path(__file__).with_name("agent_workload.py")


class FakeAutoscaling:
    def __init__(self) -> None:
        self.calls: list[tuple[float, dict[str, str]]] = []

    def complete_lifecycle_action(self, **kw: str) -> dict[str, object]:
        self.calls.append((time.time(), kw))
        return {}


def start_workload(tmp_path: Path, address: str) -> tuple[subprocess.Popen[str], str]:
    url = f"file://{tmp_path / 'ckpt'}"
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, str(WORKLOAD), url, address, str(ready)], stdout=subprocess.PIPE, text=True
    )
    wait_until(ready.exists, timeout=30)
    time.sleep(0.3)  # some training and at least one periodic checkpoint
    return proc, url


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def check_final_checkpoint(agent: Any, result: dict[str, Any], url: str) -> None:
    assert result["committed"], result
    report = agent.state.final_report
    assert report is not None and report.committed and report.step == result["step"]
    assert (
        agent.telemetry.registry.get_sample_value("spotgpu_agent_final_checkpoints_total", {"outcome": "committed"})
        == 1
    )
    restored = CheckpointManager(url).restore()
    assert restored is not None and restored.step == result["step"]
    assert float(restored.state["w"][0]) == result["step"]  # the state at the notice, not an older one


@pytest.mark.timeout(90)
def test_aws_end_to_end(fakes: Any, agents: Any, tmp_path: Path) -> None:
    fake = fakes("aws")
    asg = FakeAutoscaling()
    agent = agents(
        fast_config("aws", fake.url, lifecycle_hook="drain", autoscaling_group="asg"), autoscaling_client=lambda: asg
    )
    proc, url = start_workload(tmp_path, agent.control.url)
    raised = fake.raise_spot(lead=30)
    result = finish(proc)
    wait_until(lambda: asg.calls, timeout=30)
    acked_at = asg.calls[0][0]
    assert acked_at - raised < 30 - 1  # within the budget (lead minus the safety margin)
    check_final_checkpoint(agent, result, url)


@pytest.mark.timeout(90)
def test_gcp_end_to_end(fakes: Any, agents: Any, tmp_path: Path) -> None:
    fake = fakes("gcp")
    agent = agents(fast_config("gcp", fake.url))
    proc, url = start_workload(tmp_path, agent.control.url)
    raised = fake.raise_preempted()
    result = finish(proc)
    wait_until(lambda: agent.state.phase == "drained", timeout=30)
    assert time.time() - raised < 120 - 1
    check_final_checkpoint(agent, result, url)


@pytest.mark.timeout(90)
def test_azure_end_to_end(fakes: Any, agents: Any, tmp_path: Path) -> None:
    fake = fakes("azure")
    agent = agents(fast_config("azure", fake.url))
    proc, url = start_workload(tmp_path, agent.control.url)
    eid = fake.raise_event("Preempt", not_before_in=20)
    raised = fake.raised_at
    result = finish(proc)
    wait_until(lambda: fake.acks[eid], timeout=30)
    assert time.time() - raised < 20
    time.sleep(0.5)
    assert fake.acks[eid] == 1
    check_final_checkpoint(agent, result, url)
