"""Shared builders for the Google Cloud tests: real stack config, one pool, mutated per test."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from spotgpu.config import parse_stack_config, read_stack_file
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs

REPO = Path(__file__).resolve().parents[2]


def stack_raw(stack: str) -> dict[str, Any]:
    raw, _ = read_stack_file(str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
    return copy.deepcopy(raw)


def gcp_pool_raw(raw: dict[str, Any]) -> dict[str, Any]:
    pools: list[dict[str, Any]] = raw["pools"]
    return next(p for p in pools if p["cloud"] == "gcp")


def config_with(stack: str, **changes: Any) -> StackConfig:
    """The stack's config with the GCP pool's keys replaced (``None`` deletes a key)."""
    raw = stack_raw(stack)
    pool = gcp_pool_raw(raw)
    for key, value in changes.items():
        if value is None:
            pool.pop(key, None)
        else:
            pool[key] = value
    raw["pools"] = [pool]
    return parse_stack_config(raw)


def pool_args(stack: str = "prod", **changes: Any) -> PoolArgs:
    config = config_with(stack, **changes)
    return PoolArgs.for_pool(config, config.pools[0])
