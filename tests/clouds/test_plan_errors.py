"""One planner error (issue 34, item 2): every planner raises ``PlanError`` holding ``FieldProblem``s, and one
renderer names the keys for the stack edge and for the multi-language package; nothing rewrites a message.

The defects: AWS's planner wrote ``pool X: ...; list ...``, GCP's the stack style, Azure's neither, in three
error classes; ``offline/validate.py:_restyle`` and ``package_args.py:plan_error`` then rewrote the text with
``str.replace`` (the preview read ``spotgpu:pools[x]: pool x: subnets span ...``, a packaged pool's workload
keys kept the stack's ``x:workloads.workload.`` form).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
from cloud_fixtures import REPO, pool_args, stack_raw
from pydantic.alias_generators import to_snake

from spotgpu.config import KeyPaths, PlanError
from spotgpu.models.base import FieldProblem
from spotgpu.models.workload import GpuRequirement
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import CLOUDS
from spotgpu_pulumi.package_args import pool_args_from

#: The one line: the key path, what is wrong, the value, the fix.
STACK_LINE = re.compile(r"^spotgpu:(pools\[[a-z0-9-]+\]|workloads\.[\w-]+)\.[\w.\[\]]+: .+ \(value: .+\); fix: .+$")


def _bad_speeds(args: PoolArgs) -> PoolArgs:
    gpu = GpuRequirement(gpus_per_node=4, relative_throughput={"A100 80GB": 1.0, "H100;80GB": 2.0})
    return dataclasses.replace(args, workload=args.workload.model_copy(update={"gpu": gpu}))


#: A refusal of each planner (and of the shared planning), from a validated config where the models allow it.
REFUSALS: dict[str, tuple[str, Callable[[], PoolArgs], str]] = {
    "aws-gang": ("aws", lambda: pool_args("aws", gang={"command": ["/opt/job/train.py"], "nodes": 2, "rendezvous": {
                     "vpcId": "vpc-0abc", "privateIp": "10.0.1.10"}}, agentPackage="spotgpu[aws,torch]", securityGroupIds=[]),
                 "spotgpu:pools[train-aws].securityGroupIds: is empty"),
    "aws-bootstrap": ("aws", lambda: pool_args("aws", agentPackage="spotgpu @ https://example.com/" + "a" * 17000 + "/x.whl"),
                      "spotgpu:pools[train-aws].agentPackage: makes the bootstrap"),
    "aws-controller": ("aws", lambda: pool_args("aws", controller={"timeoutSeconds": 120}),
                       "spotgpu:pools[train-aws].controller.timeoutSeconds: is above"),
    "gcp-bucket": ("gcp", lambda: pool_args("gcp", project="google-ml-123"), "spotgpu:pools[train-gcp].project: makes"),
    "azure-placement": ("azure", lambda: pool_args("azure", platformFaultDomainCount=2),
                        "spotgpu:pools[train-az].platformFaultDomainCount: is above 1"),
    "azure-account": ("azure", lambda: pool_args("azure", storageAccountName="microsoftckpt"),
                      "spotgpu:pools[train-az].storageAccountName: contains the reserved word"),
    "workload-tag": ("aws", lambda: _bad_speeds(pool_args("aws")),
                     "spotgpu:workloads.llm-finetune.gpu.relativeThroughput: names a GPU model"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_every_planner_refuses_with_one_plan_error_in_the_one_style(case: str) -> None:
    cloud, args, start = REFUSALS[case]
    with pytest.raises(PlanError) as err:
        CLOUDS[cloud].plan(args())
    line = str(err.value)
    assert line.startswith(start) and STACK_LINE.match(line), line
    assert all(isinstance(p, FieldProblem) for p in err.value.problems)


def test_the_package_renders_the_same_finding_under_its_resource() -> None:
    with pytest.raises(PlanError) as err:
        CLOUDS["aws"].plan(pool_args("aws", controller={"timeoutSeconds": 120}))
    package = err.value.render(KeyPaths("team-pool", component=True))
    assert package == str(err.value).replace("spotgpu:pools[train-aws].", "team-pool.")  # the same finding, its key
    with pytest.raises(PlanError) as tag:
        CLOUDS["aws"].plan(_bad_speeds(pool_args("aws")))
    assert tag.value.render(KeyPaths("team-pool", component=True)).startswith(
        "team-pool.workload.gpu.relativeThroughput: names a GPU model"
    )


@pytest.mark.parametrize(
    ("parts", "stack", "component"),
    [
        (["pools", "[train]", "zones"], "spotgpu:pools[train].zones", "p.zones"),
        (["pools", "[train]", "subnets", "[0]", "id"], "spotgpu:pools[train].subnets[0].id", "p.subnets[0].id"),
        (["workloads", "llm", "gpu", "models"], "spotgpu:workloads.llm.gpu.models", "p.workload.gpu.models"),
        (["ladders", "training", "steps", "[2]", "kind"], "spotgpu:ladders.training.steps[2].kind", "p.ladder.steps[2].kind"),
        (["environment"], "spotgpu:environment", "p.environment"),
        ([], "spotgpu:<root>", "p"),
    ],
)
def test_key_paths_name_a_key_as_the_stack_file_and_as_the_package_write_it(
    parts: list[str], stack: str, component: str
) -> None:
    assert KeyPaths().path(parts) == stack
    assert KeyPaths("p", component=True).path(parts) == component


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {to_snake(k): _snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def test_a_packaged_pools_workload_key_is_named_as_its_args_hold_it() -> None:
    """Defect: the workload's keys kept the stack's form, ``team-pool:workloads.workload.workHours``."""
    raw = stack_raw("prod")
    pool = next(p for p in raw["pools"] if p["cloud"] == "aws")
    workload = {**raw["workloads"][pool["workload"]], "workHours": -1}
    args = {
        "environment": "prod", "owner": "ml-platform", "workload": _snake(workload),
        "ladder": _snake(raw["ladders"][pool["ladder"]]), "capacity": _snake(pool["capacity"]),
        "instance_types": pool["instanceTypes"], "subnets": pool["subnets"], "image_id": pool["imageId"],
    }  # fmt: skip
    with pytest.raises(pulumi.RunError) as err:
        pool_args_from("team-pool", "aws", args)
    assert str(err.value).startswith("team-pool.workload.workHours: ")


def test_a_packaged_pools_gib_keys_and_tiers_reach_the_config_as_a_stack_spells_them() -> None:
    """Defect: the schema's ``memoryPerGpuGib`` (the camelCase of ``memory_per_gpu_gib``) was refused as an
    unknown key, the stack's spelling being ``memoryPerGpuGiB``; and the workload had no checkpointTiers."""
    raw = stack_raw("prod")
    pool = next(p for p in raw["pools"] if p["cloud"] == "aws")
    workload = _snake(raw["workloads"][pool["workload"]])
    workload["gpu"] = {"gpus_per_node": 4, "memory_per_gpu_gib": 20}
    workload["checkpoint_tiers"] = {"local": {"keep": 3, "ram_disk_gib": 64}, "peer_copies": 2, "durable_interval_seconds": "1800"}
    args = {
        "environment": "prod", "owner": "ml-platform", "workload": workload,
        "ladder": _snake(raw["ladders"][pool["ladder"]]), "capacity": _snake(pool["capacity"]),
        "instance_types": pool["instanceTypes"], "subnets": pool["subnets"], "image_id": pool["imageId"],
    }  # fmt: skip
    parsed = pool_args_from("team-pool", "aws", args).workload
    assert parsed.gpu is not None and parsed.gpu.memory_per_gpu_gib == 20
    tiers = parsed.checkpoint_tiers
    assert tiers is not None
    assert (tiers.local.keep, tiers.local.ram_disk_gib, tiers.peer_copies, tiers.durable_interval_seconds) == (3, 64, 2, 1800)


def _rewrites(text: str) -> list[int]:
    """Lines that edit the text of an error after it was made: ``str(err).replace(...)``,
    ``format_error(...).replace(...)``, a rendered line's ``.partition``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        edits = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if edits and node.func.attr in ("replace", "removeprefix", "partition") and isinstance(node.func.value, ast.Call):
            inner = node.func.value.func
            if (isinstance(inner, ast.Name) and inner.id in ("str", "format_error")) or (
                isinstance(inner, ast.Attribute) and inner.attr == "render"
            ):
                found.append(node.lineno)
    return found


def test_no_error_message_is_rewritten_after_it_is_raised() -> None:
    paths = [*sorted((REPO / "components").rglob("*.py")), REPO / "spotgpu" / "config.py"]
    assert [f"{p}:{line}" for p in paths for line in _rewrites(p.read_text(encoding="utf-8"))] == []
    assert "def _restyle" not in (REPO / "components" / "offline" / "validate.py").read_text(encoding="utf-8")
    # what package_args.plan_error and validated() did, found by the same reader
    old = 'text = str(err).replace(f"spotgpu:pools[{pool}].", f"{name}.")\nraise E(format_error(err, name).replace(":", "."))'
    assert _rewrites(old) == [1, 2]
