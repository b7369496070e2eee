"""Shared builders for the registry tests: the real stack files, one pool of a cloud, mutated per test."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi

from spotgpu.config import parse_stack_config, read_stack_file
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.offline.mocks import RecordedResource, RecordingMocks, RecordingMonitor

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("aws", "azure", "gcp")


def stack_raw(stack: str) -> dict[str, Any]:
    raw, _ = read_stack_file(str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
    return copy.deepcopy(raw)


def config_with(cloud: str, stack: str = "prod", **changes: Any) -> StackConfig:
    """The stack's config with only its ``cloud`` pool; ``changes`` are camelCase pool keys, validated as YAML is."""
    raw = stack_raw(stack)
    raw["pools"] = [{**next(p for p in raw["pools"] if p["cloud"] == cloud), **changes}]
    return parse_stack_config(raw)


def pool_args(cloud: str, stack: str = "prod", **changes: Any) -> PoolArgs:
    config = config_with(cloud, stack, **changes)
    return PoolArgs.for_pool(config, config.pools[0])


def registered_until_failure(program: Callable[[], Any]) -> tuple[list[RecordedResource], Exception]:
    """Run ``program`` under mocks; it must fail. Returns what it registered first (the stack left out)."""
    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="spotgpu", stack="test", preview=False, monitor=monitor)
    try:
        pulumi.runtime.test(program)()
    except Exception as err:
        return [r for r in monitor.recorded if r.type != "pulumi:pulumi:Stack"], err
    raise AssertionError("the program did not fail")
