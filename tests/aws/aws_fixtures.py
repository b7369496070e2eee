"""Shared builders for the AWS tests: the real stack config, one AWS pool, mutated per test."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

from spotgpu.config import parse_stack_config, read_stack_file
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import index, record

REPO = Path(__file__).resolve().parents[2]


def stack_raw(stack: str) -> dict[str, Any]:
    raw, _ = read_stack_file(str(REPO / "stacks" / f"Pulumi.{stack}.yaml"))
    return copy.deepcopy(raw)


def config_with(stack: str = "prod", **changes: Any) -> StackConfig:
    """The stack's config with only its AWS pool, keys replaced (``None`` deletes a key)."""
    raw = stack_raw(stack)
    pool = next(p for p in raw["pools"] if p["cloud"] == "aws")
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


def record_pool(args: PoolArgs) -> list[RecordedResource]:
    from spotgpu_pulumi.aws import GpuPool, plan_pool

    return record(lambda: GpuPool(args.spec.name, plan_pool(args)))


def one(resources: list[RecordedResource], typ: str, name_suffix: str = "") -> RecordedResource:
    """The single resource of ``typ`` whose name ends with ``name_suffix``."""
    hits = [r for r in index(resources)[typ] if r.name.endswith(name_suffix)]
    assert len(hits) == 1, f"expected one {typ} ending {name_suffix!r}, got {[r.name for r in hits]}"
    return hits[0]


def tags_of(resource: RecordedResource) -> dict[str, str]:
    """Tags as a map, whether the resource takes a map or an ASG's tag list."""
    tags = resource.inputs.get("tags", {})
    if isinstance(tags, list):
        return {t["key"]: t["value"] for t in tags}
    return dict(tags)


def policy_of(resource: RecordedResource, key: str = "policy") -> dict[str, Any]:
    value = resource.inputs[key]
    assert isinstance(value, str), f"{resource.name}.{key} is not a resolved string"
    return dict(json.loads(value))


def agent_config_from(user_data: str) -> dict[str, Any]:
    """The agent config embedded in base64 user data (the bootstrap's heredoc)."""
    script = base64.b64decode(user_data).decode()
    body = script.split("<<'SPOTGPU_CONFIG'\n", 1)[1].split("\nSPOTGPU_CONFIG", 1)[0]
    return dict(json.loads(body))


def user_data_config(template: RecordedResource) -> dict[str, Any]:
    """The agent config a launch template's instances boot with."""
    return agent_config_from(template.inputs["userData"])
