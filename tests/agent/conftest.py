"""Fixtures: loopback fake metadata servers and agents with test-speed timings."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spotgpu.agent.daemon import Agent, wire_cloud
from spotgpu.agent.fakes import FakeAwsImds, FakeAzureImds, FakeGcpMetadata, FakeMetadataServer
from spotgpu.agent.telemetry import Telemetry
from spotgpu.bootstrap import AgentConfig, AgentRuntime

NOTICES: dict[str, dict[str, object]] = {
    "aws": {"provider": "aws", "safetyMarginSeconds": 1.0},
    "gcp": {"provider": "gcp", "safetyMarginSeconds": 1.0},
    "azure": {"provider": "azure", "safetyMarginSeconds": 1.0},
}


def fast_config(provider: str, url: str, **overrides: Any) -> AgentConfig:
    tuning: dict[str, Any] = {
        "metadata_url": url,
        "poll_interval_seconds": 0.2,
        "hanging_get_timeout_seconds": 2,
        "request_timeout_seconds": 0.5,
        "error_backoff_seconds": 0.1,
        "telemetry_host": None,
        "events_log": None,
    }
    tuning.update(overrides.pop("runtime", {}))
    runtime = AgentRuntime(**tuning)
    fields: dict[str, Any] = {
        "provider": provider,
        "pool": f"{provider}-pool",
        "notice": overrides.pop("notice", NOTICES[provider]),
        "checkpoint_store": "file:///tmp/x",
        "checkpoint_interval_seconds": 600,
        "control_socket": "127.0.0.1:0",
        "telemetry_port": 0,
        "runtime": runtime,
    }
    fields.update(overrides)
    return AgentConfig(**fields)


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, step: float = 0.02) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


@pytest.fixture
def fakes() -> Iterator[Callable[..., Any]]:
    started: list[FakeMetadataServer] = []

    def make(provider: str, **kw: Any) -> Any:
        cls = {"aws": FakeAwsImds, "gcp": FakeGcpMetadata, "azure": FakeAzureImds}[provider]
        fake = cls(timeout_delay=kw.pop("timeout_delay", 1.0), **kw).start()
        started.append(fake)
        return fake

    yield make
    for fake in started:
        fake.stop()


@pytest.fixture
def agents() -> Iterator[Callable[..., Agent]]:
    started: list[Agent] = []

    def make(config: AgentConfig, autoscaling_client: Any = None, **kw: Any) -> Agent:
        wiring = wire_cloud(config, autoscaling_client) if autoscaling_client else None
        agent = Agent(config, wiring=wiring, telemetry=kw.pop("telemetry", Telemetry(None)), **kw).start()
        started.append(agent)
        return agent

    yield make
    for agent in started:
        agent.stop()
