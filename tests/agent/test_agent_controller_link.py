"""The agent's half of the controller's drain protocol, over a file:// store.

The controller's own DrainChannel writes the request and reads the commit, so
these tests fail if the two sides disagree on keys, fields or VM ids.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.client import AgentClient
from spotgpu.agent.controller_link import ControllerLink, DrainMonitor, commit_time, controller_vm_id
from spotgpu.agent.events import InterruptionEvent
from spotgpu.agent.identity import VmIdentity
from spotgpu.agent.response_rules import plan_response, resolve_deadline
from spotgpu.agent.telemetry import AgentTelemetry
from spotgpu.bootstrap import control_store_url
from spotgpu.contract.drain import DrainChannel
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.state_store import MemoryJsonStore, ObjectJsonStore
from spotgpu.models.notice import default_notice

AWS_VM = "i-0123456789abcdef0"  # FakeAwsImds instance-id


class FakeAutoscaling:
    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []

    def complete_lifecycle_action(self, **kw: str) -> dict[str, object]:
        self.calls.append(kw)
        return {}


def channel(tmp_path: Path) -> DrainChannel:
    return DrainChannel(ObjectJsonStore(f"file://{tmp_path}/_controller"))


def linked(tmp_path: Path, provider: str, url: str, **kw: Any) -> Any:
    runtime = {"control_poll_seconds": 0.1, "drain_budget_seconds": 5.0, **kw.pop("runtime", {})}
    return fast_config(provider, url, control_store=f"file://{tmp_path}/_controller", runtime=runtime, **kw)


# -- pure rules ------------------------------------------------------------------
def test_vm_ids_are_the_ones_the_controller_adapters_use() -> None:
    aws = VmIdentity("aws", "i-abc", "g5.xlarge", "us-east-1a", "us-east-1", "spot")
    gcp = VmIdentity("gcp", "4567890123", "g2-standard-8", "us-central1-a", "us-central1", "spot", name="pool-abcd")
    azure = VmIdentity("azure", "02aab8a4-uuid", "Standard_NC4as_T4_v3", "2", "eastus", "spot", name="pool_3")
    assert controller_vm_id(aws) == "i-abc"  # ASG Instances[].InstanceId
    assert controller_vm_id(gcp) == "pool-abcd"  # listManagedInstances name, not the numeric id
    assert controller_vm_id(azure) == "pool_3"  # Flexible member VM name, not vmId
    assert controller_vm_id(azure, vm_name="override_1") == "override_1"


def test_a_commit_after_the_request_was_seen_is_reported_in_the_controllers_time() -> None:
    # the VM clock runs 30 s behind the controller: request at 1000 (controller), seen at 975 (VM)
    assert commit_time(990.0, (1000.0, 975.0)) == 1000.0
    assert commit_time(1010.0, (1000.0, 975.0)) == 1010.0
    assert commit_time(960.0, (1000.0, 975.0)) == 960.0  # before the request was seen: not lifted
    assert commit_time(960.0, None) == 960.0


def test_control_store_url_is_the_checkpoint_store_plus_controller_prefix() -> None:
    assert control_store_url("s3://bkt/train") == "s3://bkt/train/_controller"
    assert control_store_url("gs://bkt/train/") == "gs://bkt/train/_controller"
    # the components' az://ACCOUNT/CONTAINER/PREFIX form becomes a URL obstore can open
    assert control_store_url("az://acct/ckpt/train") == "https://acct.blob.core.windows.net/ckpt/train/_controller"
    with pytest.raises(ValueError, match="az://ACCOUNT/CONTAINER"):
        control_store_url("az://acct")


def test_a_controller_drain_is_a_final_checkpoint_and_drain_without_acknowledgement() -> None:
    event = InterruptionEvent("drain@1", InterruptionKind.DRAIN, "controller/drain", 100.0, {}, cloud_deadline=400.0)
    plan = plan_response(event, default_notice("aws"))
    assert (plan.act, plan.stop_new_work, plan.checkpoint, plan.drain, plan.acknowledge) == (
        True,
        True,
        "final",
        True,
        False,
    )
    deadline = resolve_deadline(event, default_notice("aws"))
    assert (deadline.at, deadline.basis) == (400.0, "controller")  # not capped at the 120 s spot notice


def test_a_drain_request_older_than_the_vm_is_ignored() -> None:
    store = MemoryJsonStore()
    ident = VmIdentity("gcp", "1", "g2", "us-central1-a", "us-central1", "spot", name="pool-abcd")

    class Link:
        url, pool = "mem://", "pool"

        def requested_at(self) -> float | None:
            return DrainChannel(store).requested_at("pool", controller_vm_id(ident))

        def drain_seen(self, requested_at: float, seen_at: float) -> None:
            self.seen = (requested_at, seen_at)

    monitor = DrainMonitor(Link(), 0.1, 60.0, not_before=1000.0)  # type: ignore[arg-type]
    assert monitor.check() == []
    DrainChannel(store).request("pool", "pool-abcd", 900.0)  # an earlier VM with the same name
    assert monitor.check() == []
    DrainChannel(store).request("pool", "pool-abcd", 1500.0)
    [event] = monitor.check()
    assert (event.kind, event.event_id, event.published_at) == (InterruptionKind.DRAIN, "drain@1500.000", 1500.0)
    assert event.cloud_deadline is not None and event.cloud_deadline - event.detected_at == pytest.approx(60.0)


def test_commit_reports_are_retried_and_never_move_backwards() -> None:
    store = MemoryJsonStore()
    opened: list[str] = []

    class Flaky(DrainChannel):
        failures = 2

        def report_commit(self, pool: str, vm_id: str, at: float, **detail: Any) -> None:
            if Flaky.failures:
                Flaky.failures -= 1
                raise OSError("503 Service Unavailable")
            super().report_commit(pool, vm_id, at, **detail)

    def factory(url: str, region: str) -> DrainChannel:
        opened.append(region)
        return Flaky(store)

    ident = VmIdentity("aws", "i-1", "g5.xlarge", "us-east-1a", "us-east-1", "on-demand")
    stop, telemetry = threading.Event(), AgentTelemetry(None)
    link = ControllerLink("mem://", "pool", lambda: ident, telemetry, stop, retry_seconds=0.02, channel_factory=factory)
    link.start()
    try:
        link.commit(10.0, step=7)
        assert wait_until(lambda: DrainChannel(store).commits("pool", ["i-1"])) == {"i-1": 10.0}
        assert store.get("agents/pool/i-1.json") == {"lastCommittedAt": 10.0, "step": 7}
        assert opened == ["us-east-1"] * 3  # reopened after each failure, with the VM's region
        link.commit(5.0)  # an older commit reported late
        link.commit(12.0)
        wait_until(lambda: link.last_reported == 12.0)
        link.commit(11.0)
        time.sleep(0.1)
        assert DrainChannel(store).commits("pool", ["i-1"]) == {"i-1": 12.0}
        errors = telemetry.registry.get_sample_value("spotgpu_agent_controller_reports_total", {"result": "error"})
        assert errors == 2
    finally:
        stop.set()


# -- the running agent -----------------------------------------------------------
def test_drain_request_commit_and_report_round_trip(tmp_path: Path, fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    asg = FakeAutoscaling()
    agent = agents(
        linked(tmp_path, "aws", fake.url, lifecycle_hook="drain-hook", autoscaling_group="pool-asg"),
        autoscaling_client=lambda: asg,
    )
    client = AgentClient(agent.control.url)
    assert not client.should_stop()
    drains = channel(tmp_path)
    requested = time.time()
    drains.request("aws-pool", AWS_VM, requested)

    notice = client.wait_for_notice(timeout=5)
    assert notice is not None
    assert (notice.kind, notice.source, notice.checkpoint) == ("drain", "controller/drain", "final")
    wait_until(client.should_stop)
    assert drains.commits("aws-pool", [AWS_VM]) == {}  # nothing committed yet: the controller must wait
    client.report(True, "final", step=42)

    commits = wait_until(lambda: drains.commits("aws-pool", [AWS_VM]))
    assert commits[AWS_VM] >= requested
    wait_until(lambda: agent.state.phase == "drained")
    doc = ObjectJsonStore(f"file://{tmp_path}/_controller").get(f"agents/aws-pool/{AWS_VM}.json")
    assert doc is not None and doc["step"] == 42 and doc["checkpoint"] == "final"
    time.sleep(0.3)
    assert asg.calls == []  # no cloud event to acknowledge: the controller removes the VM
    drains_seen = {"kind": "drain", "source": "controller/drain"}
    assert agent.telemetry.registry.get_sample_value("spotgpu_agent_notices_total", drains_seen) == 1
    assert agent.status()["controller"]["vmId"] == AWS_VM


def test_every_committed_report_is_forwarded_and_failures_are_not(tmp_path: Path, fakes: Any, agents: Any) -> None:
    fake = fakes("gcp")
    agent = agents(linked(tmp_path, "gcp", fake.url))
    client = AgentClient(agent.control.url)
    drains = channel(tmp_path)
    wait_until(lambda: agent.identity.name)
    client.report(False, "early", step=1)
    time.sleep(0.3)
    assert drains.commits("gcp-pool", ["gpu-pool-abcd"]) == {}  # a failed save is no commit
    before = time.time()
    client.report(True, "early", step=2)
    commits = wait_until(lambda: drains.commits("gcp-pool", ["gpu-pool-abcd"]))  # keyed by instance name
    assert commits["gpu-pool-abcd"] >= before - 1
    assert agent.state.phase == "running"  # a periodic commit report does not stop work


def test_a_drain_with_no_workload_reports_at_once(tmp_path: Path, fakes: Any, agents: Any) -> None:
    fake = fakes("azure")
    agent = agents(linked(tmp_path, "azure", fake.url))
    drains = channel(tmp_path)
    wait_until(lambda: agent.identity.name)
    requested = time.time()
    drains.request("azure-pool", "gpupool_3", requested)
    commits = wait_until(lambda: drains.commits("azure-pool", ["gpupool_3"]))
    assert commits["gpupool_3"] >= requested
    assert agent.state.phase == "drained" and fake.acks == {}  # no StartRequests for a controller drain


def test_without_a_control_store_the_agent_never_touches_one(tmp_path: Path, fakes: Any, agents: Any) -> None:
    fake = fakes("aws")
    agent = agents(fast_config("aws", fake.url))
    AgentClient(agent.control.url).report(True, "early")
    time.sleep(0.2)
    assert agent.link is None and agent.status()["controller"] is None
    assert not any(tmp_path.iterdir())
