"""End to end: controller ticks, a real node agent and its workload share one file:// store.

The controller drains the surplus on-demand VM; the VM must be removed only after
the agent reported a commit made after the drain request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_factories import aws_controller_config

from spotgpu.agent.client import AgentClient
from spotgpu.agent.config import AgentConfig, AgentRuntime
from spotgpu.agent.daemon import Agent
from spotgpu.agent.fakes import FakeAwsImds
from spotgpu.agent.telemetry import AgentTelemetry
from spotgpu.contract.state_store import ObjectJsonStore
from spotgpu.controller.actions import RemoveInstance, RequestDrain, SetDesired
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.observe import GroupObservation, PoolObservation, Vm
from spotgpu.controller.runner import Controller
from spotgpu.models.notice import default_notice

OD_VM = "i-0123456789abcdef0"  # the instance id FakeAwsImds serves


class FakeCloud:
    """Two ready spot VMs (the target) and one surplus on-demand VM, which is our agent's VM."""

    def __init__(self) -> None:
        self.groups = {"spot-a": ["spot-1", "spot-2"], "od": [OD_VM]}
        self.desired = {"spot-a": 2, "od": 1}
        self.removed: list[tuple[str, float]] = []

    def observe(self, now: float) -> PoolObservation:
        groups = {
            g: GroupObservation(g, self.desired[g], tuple(Vm(v, g, True, ready_at=0.0) for v in vms))
            for g, vms in self.groups.items()
        }
        return PoolObservation("pool-a", now, groups)  # commits come only from the agents' store

    def apply(self, action: SetDesired | RemoveInstance) -> None:
        if isinstance(action, SetDesired):
            self.desired[action.group] = action.desired
            return
        self.groups[action.group].remove(action.vm_id)
        self.desired[action.group] -= 1
        self.removed.append((action.vm_id, time.time()))

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None


def controller_config(state_url: str) -> ControllerConfig:
    return aws_controller_config(state_url, stableSpotSeconds=60)

@pytest.fixture
def imds() -> Iterator[FakeAwsImds]:
    fake = FakeAwsImds(life_cycle="on-demand", timeout_delay=1.0)
    fake.start()
    yield fake
    fake.stop()


def test_the_vm_is_removed_only_after_the_agent_reports_a_later_commit(tmp_path: Path, imds: FakeAwsImds) -> None:
    state_url = f"file://{tmp_path}/_controller"
    cloud = FakeCloud()
    controller = Controller(controller_config(state_url), {"pool-a": cloud}, ObjectJsonStore(state_url))
    agent = Agent(
        AgentConfig(
            provider="aws",
            pool="pool-a",
            capacity_type="on-demand",
            notice=default_notice("aws").model_dump(mode="json", by_alias=True),
            checkpoint_store=f"file://{tmp_path}/ckpt",
            checkpoint_interval_seconds=600,
            control_socket="127.0.0.1:0",
            telemetry_port=0,
            control_store=state_url,
            runtime=AgentRuntime(
                metadata_url=imds.url,
                poll_interval_seconds=0.2,
                request_timeout_seconds=0.5,
                error_backoff_seconds=0.1,
                telemetry_host=None,
                events_log=None,
                control_poll_seconds=0.1,
                drain_budget_seconds=10,
            ),
        ),
        telemetry=AgentTelemetry(None),
    ).start()
    try:
        workload_client = AgentClient(agent.control.url)
        assert not workload_client.should_stop()
        # The agent reports periodic commits from the start; none of them may count.
        workload_client.report(True, "early", step=1)
        deadline = time.monotonic() + 5
        while not list(tmp_path.glob("_controller/agents/pool-a/*.json")) and time.monotonic() < deadline:
            time.sleep(0.02)

        start = time.time()
        assert not controller.tick(start - 90)["pool-a"].actions  # surplus seen, not yet stable
        drain_tick = controller.tick(start)
        assert [a for a in drain_tick["pool-a"].actions if isinstance(a, RequestDrain)] == [RequestDrain("od", OD_VM)]

        notice = workload_client.wait_for_notice(timeout=5)
        assert notice is not None and notice.kind == "drain"
        # Drain seen, no commit since the request: the VM stays.
        assert not [a for a in controller.tick(time.time())["pool-a"].actions if isinstance(a, RemoveInstance)]
        assert cloud.removed == []

        committed_at = time.time()
        workload_client.report(True, "final", step=2)  # the workload's final checkpoint committed
        removed: list[RemoveInstance] = []
        deadline = time.monotonic() + 5
        while not removed and time.monotonic() < deadline:
            time.sleep(0.05)
            removed = [a for a in controller.tick(time.time())["pool-a"].actions if isinstance(a, RemoveInstance)]
        assert removed == [RemoveInstance("od", OD_VM)]
        assert cloud.removed and cloud.removed[0][1] >= committed_at
        assert cloud.groups["od"] == [] and cloud.desired["od"] == 0
        assert agent.state.phase in ("draining", "drained")
    finally:
        agent.stop()


def test_conditional_updates_carry_the_etag_and_the_version() -> None:
    """GCS checks the generation (``version``), Azure the ETag: both must reach the put."""
    from obstore.store import MemoryStore

    from spotgpu.contract.state_store import StaleRecordError

    inner = MemoryStore()
    mine, theirs = ObjectJsonStore("memory://", store=inner), ObjectJsonStore("memory://", store=inner)
    mine.put("agents/pool-a/vm.json", {"lastCommittedAt": 1.0})
    mine.put("agents/pool-a/vm.json", {"lastCommittedAt": 2.0})  # its own last write is the base
    assert set(mine._etags["agents/pool-a/vm.json"]) <= {"e_tag", "version"}
    assert theirs.get("agents/pool-a/vm.json") == {"lastCommittedAt": 2.0}
    mine.put("agents/pool-a/vm.json", {"lastCommittedAt": 3.0})
    with pytest.raises(StaleRecordError):
        theirs.put("agents/pool-a/vm.json", {"lastCommittedAt": 0.0})  # read before the last write
