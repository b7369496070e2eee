"""A real Prometheus server scrapes a running ``spotgpu agent run`` and a controller's endpoint on
loopback: every dashboard expression returns data, and the alert rules load.

The agent is the real daemon (a subprocess, as systemd runs it) against the loopback fake Azure
IMDS, with a workload registered through ``AgentClient`` that reports its final checkpoint. The
controller is the real :class:`~spotgpu.controller.runner.Controller` ticking a deadline-tracking
pool on the digital twin's cloud (a replayed availability trace), its registry served by
``prometheus_client.start_http_server`` as ``spotgpu controller run`` serves it. Everything binds
127.0.0.1; every process started here is stopped by PID, with hard timeouts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from spotgpu.agent.client import AgentClient
from spotgpu.agent.config import AgentConfig, AgentRuntime
from spotgpu.agent.fakes import FakeAzureImds
from spotgpu.contract.sources import DropReason
from spotgpu.contract.state_store import MemoryJsonStore
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.observe import Dropped
from spotgpu.controller.runner import Controller, build_plans
from spotgpu.controller.telemetry import ControllerTelemetry
from spotgpu.observability import AGENT_JOB, CONTROLLER_JOB, alerts_text, dashboard_expressions
from spotgpu.simulation.twin import TwinCloud, twin_job_for
from spotgpu.traces import load_group

PROMETHEUS = shutil.which("prometheus")
#: Grafana's variables, as the dashboard's "All" pool and a 10 minute range resolve them.
VARIABLES = {"$pool": ".*", "$__range": "10m", "$__rate_interval": "1m"}

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None and not os.path.exists("/usr/bin/apt-get"),
    reason="no prometheus binary and no apt-get to install Debian's prometheus package (./run test does)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def wait_until(predicate: Any, timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def controller_config() -> ControllerConfig:
    """One AWS pool with a deadline (so the deadline gauges exist), four rungs of groups."""
    return ControllerConfig.model_validate({
        "stateUrl": "file:///unused",
        "stableSpotSeconds": 120,
        "workloads": {"train": {
            "checkpointBytes": 10**9, "checkpointWriteSeconds": 30, "checkpointLoadSeconds": 20, "restartSeconds": 120,
            "expectedReacquisitionSeconds": 600, "interruptionsPerHour": 0.1, "workHours": 100, "deadlineHours": 400,
            "prices": {"spotPerHour": 1.0, "onDemandPerHour": 3.0},
        }},
        "ladders": {"main": {"steps": [
            {"kind": "same_pool", "maxWaitSeconds": 300, "costCeilingPerHour": 1.5},
            {"kind": "alternate_zone", "maxWaitSeconds": 300, "costCeilingPerHour": 1.5},
            {"kind": "alternate_sku", "maxWaitSeconds": 300, "costCeilingPerHour": 2.0},
            {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 4.0},
            {"kind": "queue_defer", "maxWaitSeconds": 86400, "costCeilingPerHour": 0},
        ]}},
        "pools": [{
            "cloud": "aws", "name": "pool-a", "region": "us-east-1", "workload": "train", "ladder": "main",
            "capacity": {"target": 2, "max": 4}, "jobStartedAt": 0, "totalSteps": 100000,
            "groups": [
                {"name": "spot-a", "role": "same_pool"}, {"name": "spot-b", "role": "alternate_zone"},
                {"name": "spot-sku", "role": "alternate_sku", "pricePerHour": 1.8}, {"name": "od", "role": "on_demand"},
            ],
        }],
    })  # fmt: skip


#: Ticks whose queue also held a message no parser reads (a real adapter's drop, as the SQS one counts it);
#: more than one, spread over scrapes, so increase() sees the counter change after it first appears.
GARBLED_TICKS = (150, 450, 750)


class TwinAdapter:
    """The twin's cloud as the controller's adapter (observe, apply, ack)."""

    def __init__(self, sim: TwinCloud) -> None:
        self.sim, self.now = sim, 0.0

    def observe(self, now: float) -> Any:
        self.now = now
        obs = self.sim.observe(now)
        if round(now / 60.0) in GARBLED_TICKS:
            obs = dataclasses.replace(obs, dropped=(Dropped(DropReason.NOT_JSON, "sqs", "not json at all"),))
        return obs

    def apply(self, action: Any) -> None:
        self.sim.apply(action, self.now)

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[Any]]]:
    started: list[subprocess.Popen[Any]] = []
    yield started
    for process in reversed(started):
        stop(process)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_prometheus_scrapes_agent_and_controller_and_every_panel_has_data(
    tmp_path: Path, processes: list[subprocess.Popen[Any]]
) -> None:
    assert PROMETHEUS is not None, "prometheus is missing: ./run test installs Debian's prometheus package"
    fake = FakeAzureImds(timeout_delay=1.0).start()
    try:
        # --- the agent, as systemd runs it -------------------------------------------------------
        sock = os.path.join(tempfile.mkdtemp(prefix="sgobs"), "agent.sock")
        agent_port = free_port()
        config = AgentConfig(
            provider="azure", pool="pool-a", notice={"provider": "azure", "safetyMarginSeconds": 1.0},
            checkpoint_store="file:///tmp/x", checkpoint_interval_seconds=600, control_socket=sock,
            telemetry_port=agent_port,
            runtime=AgentRuntime(metadata_url=fake.url, poll_interval_seconds=0.25, request_timeout_seconds=0.5,
                                 error_backoff_seconds=0.1, telemetry_host="127.0.0.1", events_log=None),
        )  # fmt: skip
        agent_json = tmp_path / "agent.json"
        agent_json.write_text(json.dumps(config.model_dump(mode="json", by_alias=True, exclude_none=True)))
        agent = subprocess.Popen([sys.executable, "-m", "spotgpu", "agent", "run", "--config", str(agent_json)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        processes.append(agent)

        # --- the controller's registry on its endpoint --------------------------------------------
        from prometheus_client import start_http_server

        cfg = controller_config()
        plan = build_plans(cfg)["pool-a"]
        traces = load_group("1-node/aws-02-15-2023")
        store = MemoryJsonStore()
        sim = TwinCloud(plan, twin_job_for(plan.workload, plan.checkpoint_interval_seconds),
                        {"spot-a": traces[0].data * 2, "spot-b": traces[1].data * 2, "spot-sku": traces[2].data * 2},
                        traces[0].gap_seconds, 0.0, drain_store=store)  # fmt: skip
        telemetry = ControllerTelemetry()
        controller = Controller(cfg, {"pool-a": TwinAdapter(sim)}, store, telemetry)
        controller_port = free_port()
        server, thread = start_http_server(controller_port, addr="127.0.0.1", registry=telemetry.registry)

        # --- Prometheus, scraping both every second, with the shipped rules -----------------------
        rules = tmp_path / "alerts.yaml"
        rules.write_text(alerts_text())
        prom_port = free_port()
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {"job_name": AGENT_JOB, "static_configs": [{"targets": [f"127.0.0.1:{agent_port}"]}]},
                {"job_name": CONTROLLER_JOB, "static_configs": [{"targets": [f"127.0.0.1:{controller_port}"]}]},
            ],
        }))  # fmt: skip
        prometheus = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        processes.append(prometheus)
        api = f"http://127.0.0.1:{prom_port}/api/v1"

        def targets_up() -> bool:
            active = get_json(f"{api}/targets")["data"]["activeTargets"]
            return len(active) == 2 and all(t["health"] == "up" for t in active)

        try:
            wait_until(targets_up, 60, "both targets scraped")
            time.sleep(2.0)  # a few samples before anything happens: increase() sees every change

            # --- things happen: a notice on the VM, a final checkpoint, a controller's week -------
            workload = AgentClient(sock)
            event = fake.raise_event("Preempt", not_before_in=20)
            assert workload.wait_for_notice(timeout=10) is not None
            workload.report(types.SimpleNamespace(committed=True, seconds=2.5, generation="g1", reason=None), "final", 7)
            wait_until(lambda: fake.acks[event], 15, "the notice acknowledged")
            for tick in range(900):
                controller.tick(tick * 60.0)
                # spread over scrapes, a series' first change being invisible to increase(): the trace's
                # interruptions come at ticks 809 and 851, so one pause falls between them
                if tick % 100 == 99 or tick == 830:
                    time.sleep(1.2)
            time.sleep(3.0)  # scrapes after the last change

            empty = []
            for title, expr in dashboard_expressions():
                query = expr
                for name, value in VARIABLES.items():
                    query = query.replace(name, value)
                result = get_json(f"{api}/query?" + urllib.parse.urlencode({"query": query}))["data"]["result"]
                values = [float(r["value"][1]) for r in result]
                # a count over the range must have counted something (increase() can miss a series'
                # first change and return a finite 0); a gauge may read 0 or -1
                counts = "increase(" in query or "_over_time(" in query
                if not any(math.isfinite(v) and (v != 0 or not counts) for v in values):
                    empty.append(f"{title}: {query} -> {values}")
            assert empty == [], "\n".join(empty)
            groups = get_json(f"{api}/rules")["data"]["groups"]
            loaded = [r for g in groups for r in g["rules"]]
            assert len(loaded) == alerts_text().count("- alert:")
            assert all(r["health"] == "ok" for r in loaded), [r for r in loaded if r["health"] != "ok"]
        finally:
            server.shutdown()
            thread.join(timeout=5)
    finally:
        fake.stop()
