"""Fixtures: loopback fake metadata servers and agents with test-speed timings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spotgpu.agent.client import AgentClient
from spotgpu.agent.config import AgentConfig
from spotgpu.agent.daemon import Agent, wire_cloud
from spotgpu.agent.fakes import FakeAwsImds, FakeAzureImds, FakeGcpMetadata, FakeMetadataServer
from spotgpu.agent.telemetry import AgentTelemetry


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
        agent = Agent(config, wiring=wiring, telemetry=kw.pop("telemetry", AgentTelemetry(None)), **kw).start()
        started.append(agent)
        return agent

    yield make
    for agent in started:
        agent.stop()


@pytest.fixture(autouse=True)
def closed_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every AgentClient a test here makes is closed after it (its watcher would poll on)."""
    made: list[AgentClient] = []
    init = AgentClient.__init__

    def tracked(self: AgentClient, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(AgentClient, "__init__", tracked)
    yield
    for client in made:
        client.close()
