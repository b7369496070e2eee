"""The whole agent (threads, queue, responder, control endpoint) against faulty fakes.

The agent must never crash, must act on the first valid notice, and must approve
an Azure event exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.client import AgentClient
from spotgpu.agent.telemetry import AgentTelemetry


class FakeAutoscaling:
    def __init__(self, fail_first: int = 0) -> None:
        self.calls: list[dict[str, str]] = []
        self.fail_first = fail_first

    def complete_lifecycle_action(self, **kw: str) -> dict[str, object]:
        if self.fail_first:
            self.fail_first -= 1
            raise RuntimeError("Throttling")
        self.calls.append(kw)
        return {}


def sample(agent: Any, name: str, **labels: str) -> float:
    return agent.telemetry.registry.get_sample_value(name, labels) or 0.0


def test_aws_survives_every_fault_then_acts_on_the_first_valid_notice(fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    fake.raise_spot(lead=60)  # the notice is there from the start, behind a run of faults
    for mode, count in (("500", 3), ("malformed", 2), ("timeout", 1), ("drop", 1), ("401", 2)):
        fake.inject("instance-action", mode, count)
    fake.inject("/latest/api/token", "500", 1)
    asg = FakeAutoscaling(fail_first=1)
    agent = agents(
        fast_config("aws", fake.url, lifecycle_hook="drain-hook", autoscaling_group="pool-asg"),
        autoscaling_client=lambda: asg,
    )
    wait_until(lambda: agent.state.phase == "drained", timeout=15)
    assert not any(f[2] for f in fake.faults)  # every fault was served before the valid answer
    wait_until(lambda: asg.calls)
    assert asg.calls == [
        {
            "AutoScalingGroupName": "pool-asg",
            "LifecycleHookName": "drain-hook",
            "LifecycleActionResult": "CONTINUE",
            "InstanceId": "i-0123456789abcdef0",
        }
    ]
    fake.expire_tokens()  # a 401 on an expired token mid-run: refreshed, not fatal
    time.sleep(0.6)  # the notice is re-served on every poll: still one action
    assert sample(agent, "spotgpu_agent_notices_total", kind="preempt", source="aws/spot-instance-action") == 1
    assert sample(agent, "spotgpu_agent_duplicate_notices_total", source="aws/spot-instance-action") >= 1
    src = "aws/spot-instance-action"
    assert sample(agent, "spotgpu_agent_metadata_errors_total", source=src, reason="http_500") >= 3
    assert sample(agent, "spotgpu_agent_metadata_errors_total", source=src, reason="malformed") >= 2
    assert len(asg.calls) == 1
    assert all(r.is_alive() for r in agent.runners)


def test_aws_rebalance_asks_for_an_early_checkpoint_without_draining(fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url))
    client = AgentClient(agent.control.url)
    fake.raise_rebalance()
    notice = client.wait_for_notice(timeout=5)
    assert notice is not None and notice.checkpoint == "early" and not notice.stop
    assert client.checkpoint_requested() == "early"
    assert not client.should_stop()
    snap = agent.state.snapshot()
    assert snap["acceptingWork"] is False and snap["phase"] == "early-checkpoint"
    fake.raise_spot(lead=60)
    wait_until(client.should_stop)
    assert client.checkpoint_requested() == "final"


def test_aws_rebalance_ignored_when_the_contract_opts_out(fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url, notice={"provider": "aws", "watchRebalance": False}))
    fake.raise_rebalance()
    wait_until(
        lambda: sample(agent, "spotgpu_agent_notices_total", kind="rebalance", source="aws/rebalance-recommendation")
    )
    time.sleep(0.3)
    assert agent.state.phase == "running"


def test_gcp_faults_then_preempted_uses_the_contract_deadline(fakes: Any, agents: Any) -> None:
    fake = fakes("gcp")
    fake.inject("preempted", "500", 2)
    fake.inject("preempted", "timeout", 1)
    agent = agents(fast_config("gcp", fake.url))
    wait_until(lambda: not any(f[2] for f in fake.faults), timeout=15)
    raised = fake.raise_preempted()
    wait_until(lambda: agent.state.phase == "drained")
    notice = agent.state.snapshot()["notice"]
    assert notice["deadline"] == pytest.approx(raised + 120, abs=1)
    assert notice["budgetDeadline"] == pytest.approx(raised + 119, abs=1)  # safety margin 1 s in tests


def test_azure_acknowledges_its_own_event_exactly_once_through_churn_and_duplicates(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    fake.churn = True
    fake.duplicate = True
    agent = agents(fast_config("azure", fake.url))
    other = fake.raise_event("Preempt", resources=["gpupool_9"])
    time.sleep(0.5)
    assert agent.state.phase == "running"  # another VM's eviction is not ours
    fake.inject("scheduledevents", "500", 1, method="POST")  # the first approval attempt fails
    fake.inject("scheduledevents", "malformed", 1)
    mine = fake.raise_event("Preempt", not_before_in=20)
    wait_until(lambda: fake.acks[mine] >= 1)
    time.sleep(0.6)
    assert fake.count("POST", "scheduledevents") == 2  # one failed attempt, one approval
    assert fake.acks[mine] == 1
    assert fake.acks[other] == 0
    assert agent.responder.acknowledged == [mine]
    assert sample(agent, "spotgpu_agent_notices_total", kind="preempt", source="azure/scheduledevents") == 1


def test_azure_second_event_for_this_vm_is_approved_after_the_drain(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    agent = agents(fast_config("azure", fake.url))
    first = fake.raise_event("Preempt", not_before_in=20)
    wait_until(lambda: fake.acks[first])
    second = fake.raise_event("Terminate", not_before_in=300)
    wait_until(lambda: fake.acks[second])
    time.sleep(0.5)
    assert (fake.acks[first], fake.acks[second]) == (1, 1)
    assert agent.state.phase == "drained"


def test_azure_clock_skew_is_clamped_to_the_contract(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    fake.clock_skew = 3600.0  # the host clock runs an hour ahead of the VM's
    agent = agents(fast_config("azure", fake.url))
    fake.raise_event("Preempt", not_before_in=30)
    wait_until(lambda: agent.state.phase == "drained")
    notice = agent.state.snapshot()["notice"]
    assert notice["deadline"] - notice["detectedAt"] == pytest.approx(30, abs=0.01)


def test_azure_budget_spent_without_an_answer_still_acknowledges_in_time(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    agent = agents(fast_config("azure", fake.url))
    client = AgentClient(agent.control.url)  # a registered workload that never reports
    assert client.should_stop() is False
    eid = fake.raise_event("Preempt", not_before_in=3)
    not_before = time.time() + 3
    wait_until(lambda: fake.acks[eid], timeout=6)
    assert time.time() < not_before
    assert sample(agent, "spotgpu_agent_final_checkpoints_total", outcome="timeout") == 1


def test_azure_polling_stays_under_the_imds_rate_limit(fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    agents(fast_config("azure", fake.url))
    time.sleep(1.5)
    start = time.time() - 1.0
    recent = [t for t, m, p in fake.requests if t >= start]
    assert 1 <= len(recent) <= 5


def test_signal_hook_prometheus_and_json_log(fakes: Any, agents: Any, tmp_path: Path) -> None:
    fake = fakes("gcp")
    got_signal = tmp_path / "signalled"
    hook_out = tmp_path / "hook"
    events_log = tmp_path / "events.jsonl"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import signal,time,pathlib\n"
            f"signal.signal(signal.SIGUSR1, lambda *a: pathlib.Path({str(got_signal)!r}).write_text('x'))\n"
            f"time.sleep(20)",
        ],
        start_new_session=True,
    )
    pid_file = tmp_path / "workload.pid"
    pid_file.write_text(str(os.getpgid(child.pid)))
    try:
        config = fast_config(
            "gcp",
            fake.url,
            runtime={
                "notice_signal": "SIGUSR1",
                "workload_pid_file": str(pid_file),
                "notice_hook": ["sh", "-c", f'echo "$SPOTGPU_EVENT_KIND $SPOTGPU_CHECKPOINT" > {hook_out}'],
                "telemetry_host": "127.0.0.1",
                "events_log": str(events_log),
            },
        )
        agent = agents(config, telemetry=AgentTelemetry(str(events_log)))
        time.sleep(0.3)
        fake.raise_preempted()
        wait_until(got_signal.exists)
        wait_until(lambda: hook_out.exists() and hook_out.read_text().strip())
        assert hook_out.read_text().split() == ["preempt", "final"]
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{agent.telemetry.http_port}/metrics").read().decode()
        assert 'spotgpu_agent_notices_total{kind="preempt",source="gcp/preempted"} 1.0' in metrics
        assert 'spotgpu_agent_info{capacity="spot"' in metrics
        assert "spotgpu_agent_boot_to_ready_seconds" in metrics
        wait_until(lambda: '"record": "drained"' in events_log.read_text())
        records = events_log.read_text()
        assert '"record": "notice"' in records and '"record": "identity"' in records
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


def test_unix_socket_control_endpoint(fakes: Any, agents: Any) -> None:
    import tempfile

    fake = fakes("aws")
    sock = os.path.join(tempfile.mkdtemp(prefix="sg"), "agent.sock")
    agent = agents(fast_config("aws", fake.url, control_socket=sock))
    client = AgentClient(sock)
    assert agent.state.workload_pgids == {os.getpgrp()}
    assert client.should_stop() is False
    fake.raise_spot(lead=60)
    wait_until(client.should_stop, timeout=5)


def test_gcp_maintenance_event_asks_for_an_early_checkpoint(fakes: Any, agents: Any) -> None:
    fake = fakes("gcp")
    agent = agents(fast_config("gcp", fake.url))
    client = AgentClient(agent.control.url)
    time.sleep(0.3)
    fake.set_value("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE")
    notice = client.wait_for_notice(timeout=5)
    assert notice is not None and (notice.kind, notice.checkpoint, notice.stop) == ("maintenance", "early", False)


def test_broken_hooks_and_a_failing_acknowledger_never_stop_the_drain(fakes: Any, agents: Any) -> None:
    fake = fakes("aws")

    class Refusing:
        def complete_lifecycle_action(self, **kw: str) -> None:
            raise RuntimeError("AccessDenied")

    agent = agents(
        fast_config(
            "aws",
            fake.url,
            lifecycle_hook="h",
            autoscaling_group="g",
            runtime={"notice_hook": ["/nonexistent/hook"], "drain_hook": ["/nonexistent/drain"]},
        ),
        autoscaling_client=Refusing,
    )
    agent.responder.ack_grace_seconds = 0.5
    fake.raise_spot(lead=2)  # acknowledgement retries stop 0.5 s after the deadline
    wait_until(lambda: agent.state.phase == "drained")
    errors = lambda: sample(agent, "spotgpu_agent_acknowledgements_total", result="error")  # noqa: E731
    wait_until(lambda: errors() >= 2)
    assert all(r.is_alive() for r in agent.runners)
    fake.raise_rebalance()  # the agent still consumes events afterwards
    wait_until(
        lambda: sample(agent, "spotgpu_agent_notices_total", kind="rebalance", source="aws/rebalance-recommendation"),
        timeout=15,
    )


def test_aws_lifecycle_call_matches_the_botocore_model(fakes: Any, agents: Any) -> None:
    """A real boto3 client under botocore's Stubber: parameters are validated against the service model."""
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import Stubber

    client = boto3.client("autoscaling", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stubber = Stubber(client)
    stubber.add_response(
        "complete_lifecycle_action",
        {},
        {
            "AutoScalingGroupName": "pool-asg",
            "LifecycleHookName": "spotgpu-drain",
            "LifecycleActionResult": "CONTINUE",
            "InstanceId": "i-0123456789abcdef0",
        },
    )
    fake = fakes("aws")
    with stubber:
        agent = agents(
            fast_config("aws", fake.url, lifecycle_hook="spotgpu-drain", autoscaling_group="pool-asg"),
            autoscaling_client=lambda: client,
        )
        fake.raise_spot(lead=60)
        wait_until(lambda: agent.responder.acknowledged)
        stubber.assert_no_pending_responses()
    assert sample(agent, "spotgpu_agent_acknowledgements_total", result="ok") == 1
