"""Events logs written by the real agent and the real controller, for the telemetry tests.

The agent log comes from :class:`spotgpu.agent.daemon.Agent` against the loopback fake IMDS
(as tests/agent does); the controller log from :class:`spotgpu.controller.runner.Controller`
ticking the digital twin of a pool (as tests/controller/test_runner_restart.py does), with the
suite's own factories. Nothing here writes a line by hand.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1]
for folder in ("agent", "controller"):  # their helper modules are uniquely named, imported by name
    if str(TESTS / folder) not in sys.path:
        sys.path.append(str(TESTS / folder))

from agent_testkit import fast_config, wait_until  # noqa: E402
from controller_factories import aws_controller_config, workload  # noqa: E402

from spotgpu.agent.daemon import Agent  # noqa: E402
from spotgpu.agent.fakes import FakeAwsImds  # noqa: E402
from spotgpu.agent.telemetry import AgentTelemetry  # noqa: E402
from spotgpu.contract.state_store import MemoryJsonStore  # noqa: E402
from spotgpu.controller.runner import Controller, build_plans  # noqa: E402
from spotgpu.controller.telemetry import ControllerTelemetry  # noqa: E402
from spotgpu.simulation.twin import TwinCloud, twin_job_for  # noqa: E402


def agent_log(path: Path, lead: float = 120.0) -> Path:
    """One spot VM's events log: started, identity, a preempt notice ``lead`` s ahead, drained."""
    fake = FakeAwsImds(timeout_delay=1.0).start()
    agent = Agent(fast_config("aws", fake.url, runtime={"events_log": str(path)}),
                  telemetry=AgentTelemetry(str(path))).start()  # fmt: skip
    try:
        wait_until(lambda: path.exists() and '"record": "identity"' in path.read_text(), timeout=10)
        time.sleep(0.3)
        fake.raise_spot(lead=lead)
        wait_until(lambda: '"record": "drained"' in path.read_text(), timeout=15)
    finally:
        agent.stop()
        fake.stop()
    return path


#: A workload that reports its step time through the real client, as a training loop does.
_REPORTER = """
import sys
from spotgpu.agent.client import AgentClient
address, seconds, reports = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
agent = AgentClient(address)
agent.ready()
for _ in range(reports):
    agent.report_throughput(seconds, steps=100)
"""


def throughput_log(path: Path, instance_type: str, instance_id: str, step_seconds: float, reports: int) -> Path:
    """One VM of ``instance_type`` whose workload process reports ``step_seconds`` per step ``reports`` times.

    The workload names no GPU model: the agent names it from its own type (the catalogue).
    """
    fake = FakeAwsImds(timeout_delay=1.0)
    fake.identity.update({"instance-type": instance_type, "instance-id": instance_id})
    fake.start()
    agent = Agent(fast_config("aws", fake.url, runtime={"events_log": str(path)}),
                  telemetry=AgentTelemetry(str(path))).start()  # fmt: skip
    try:
        wait_until(lambda: path.exists() and '"record": "identity"' in path.read_text(), timeout=10)
        done = subprocess.run([sys.executable, "-c", _REPORTER, agent.control.url, str(step_seconds), str(reports)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
    finally:
        agent.stop()
        fake.stop()
    return path


GROUPS = (
    {"name": "spot-a", "role": "same_pool"},
    {"name": "spot-b", "role": "alternate_zone"},
    {"name": "spot-sku", "role": "alternate_sku", "pricePerHour": 1.8},
    {"name": "od", "role": "on_demand"},
)


TARGET = 2


@dataclass(frozen=True)
class ControllerRun:
    path: Path
    losses: int  # VMs lost (the twin takes every VM of the zone)
    gap_seconds: float  # how long the zone stays empty each time
    boot_seconds: float  # the workload's restartSeconds: the twin's boot


def controller_log(path: Path, drops: tuple[int, ...] = (100, 250, 400), ticks_down: int = 3) -> ControllerRun:
    """The controller's events while its twin loses the primary zone at ``drops`` (60 s ticks)."""
    config = aws_controller_config(
        "file:///unused", groups=GROUPS, profile=workload(work_hours=100.0), waits=(300, 300, 300, 3600),
        target=TARGET, stableSpotSeconds=120,
    )  # fmt: skip
    plan = build_plans(config)["pool-a"]
    a = np.full(600, 4, dtype=np.int16)
    for start in drops:
        a[start : start + ticks_down] = 0
    zeros = np.zeros(600, dtype=np.int16)
    store = MemoryJsonStore()
    twin = TwinCloud(plan, twin_job_for(plan.workload, plan.checkpoint_interval_seconds),
                     {"spot-a": a, "spot-b": zeros, "spot-sku": zeros}, 60, 0.0, drain_store=store)  # fmt: skip
    lines = io.StringIO()
    controller = Controller(config, {"pool-a": _Cloud(twin)}, store, ControllerTelemetry(json_lines=lines))
    for i in range(600):
        controller.tick(i * 60.0)
    path.write_text(lines.getvalue(), encoding="utf-8")
    return ControllerRun(path, len(drops) * TARGET, ticks_down * 60.0, float(plan.workload.restart_seconds))


class _Cloud:
    def __init__(self, twin: TwinCloud) -> None:
        self.twin = twin
        self.now = 0.0

    def observe(self, now: float):  # type: ignore[no-untyped-def]
        self.now = now
        return self.twin.observe(now)

    def apply(self, action: object) -> None:
        self.twin.apply(action, self.now)  # type: ignore[arg-type]

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None
