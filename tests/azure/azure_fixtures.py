"""Shared helpers for the Azure tests: pool args from the real stack files, spec variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spotgpu.config import parse_stack_config, read_stack_file
from spotgpu.models.pools import AzurePoolSpec
from spotgpu_pulumi.args import PoolArgs

REPO = Path(__file__).resolve().parents[2]


def stack_raw(stack: str) -> dict[str, Any]:
    raw, _ = read_stack_file(str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
    return raw


def pool_args(stack: str = "prod", on_demand_ceiling: float | None = None, **changes: Any) -> PoolArgs:
    """The stack's Azure pool; ``changes`` are camelCase spec keys, validated like YAML input;
    ``on_demand_ceiling`` raises its ladder's on_demand rung (for a dearer fallback size)."""
    raw = stack_raw(stack)
    if on_demand_ceiling is not None:
        ladder = next(p for p in raw["pools"] if p["cloud"] == "azure")["ladder"]
        step = next(s for s in raw["ladders"][ladder]["steps"] if s["kind"] == "on_demand")
        step["costCeilingPerHour"] = on_demand_ceiling
    pools = []
    for pool in raw["pools"]:
        if pool["cloud"] == "azure":
            pool = {**pool, **changes}
        pools.append(pool)
    config = parse_stack_config({**raw, "pools": pools})
    spec = config.pools_for("azure")[0]
    return PoolArgs.for_pool(config, spec)


def spec(stack: str = "prod", on_demand_ceiling: float | None = None, **changes: Any) -> AzurePoolSpec:
    result = pool_args(stack, on_demand_ceiling, **changes).spec
    assert isinstance(result, AzurePoolSpec)
    return result
