"""Helpers the agent tests import by name (a uniquely named module: every test
folder has its own conftest.py, so ``from conftest import`` would pick the wrong one)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from spotgpu.agent.config import AgentConfig, AgentRuntime

NOTICES: dict[str, dict[str, object]] = {
    "aws": {"provider": "aws", "safetyMarginSeconds": 1.0},
    "gcp": {"provider": "gcp", "safetyMarginSeconds": 1.0},
    "azure": {"provider": "azure", "safetyMarginSeconds": 1.0},
}


def fast_config(provider: str, url: str, **overrides: Any) -> AgentConfig:
    tuning: dict[str, Any] = {
        "metadata_url": url,
        "poll_interval_seconds": 0.25 if provider == "azure" else 0.2,  # each provider's floor
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
