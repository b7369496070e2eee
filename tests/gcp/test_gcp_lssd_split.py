"""A tiered GCP pool whose types come with different Local SSD counts (issue 33's leftover).

Local SSDs are a template property, so the planner splits such a pool into one MIG per count.
The types the economics price and the controller grows follow that split, read from the one
function that decides it (``spotgpu.models.gcp_groups``): same_pool prices and grows only the
primary MIG's types, alternate_sku the split-off MIGs', on_demand the fallback MIG's (the primary's
template), and a split-off MIG that no rung grows is a config error naming the type.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from gcp_fixtures import REPO, gcp_pool_raw, stack_raw

from spotgpu.config import ConfigError, parse_stack_config
from spotgpu.controller.config import parse_controller_config
from spotgpu.economics.work_rate import rung_types
from spotgpu.models import StackConfig
from spotgpu.models.ladder import StepKind
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.gcp import plan_pool

#: a2-ultragpu-4g comes with 4 Local SSDs, a2-ultragpu-8g with 8: two templates, two MIGs
SPLIT = [{"machineType": "a2-ultragpu-4g"}, {"machineType": "a2-ultragpu-8g"}]
WITH_SKU = {"steps": [
    {"kind": "same_pool", "maxWaitSeconds": 900, "costCeilingPerHour": 9},
    {"kind": "alternate_zone", "maxWaitSeconds": 900, "costCeilingPerHour": 9},
    {"kind": "alternate_sku", "maxWaitSeconds": 1200, "costCeilingPerHour": 20},
    {"kind": "on_demand", "maxWaitSeconds": 14400, "costCeilingPerHour": 50},
    {"kind": "queue_defer", "maxWaitSeconds": 86400, "costCeilingPerHour": 0},
]}  # fmt: skip


def split_raw(ladder: dict[str, Any] | None = WITH_SKU, **pool_changes: Any) -> dict[str, Any]:
    """The prod stack's tiered GCP pool with SPLIT types (and, given, its ladder replaced)."""
    raw = stack_raw("prod")
    pool = {**gcp_pool_raw(raw), "machineTypes": SPLIT, **pool_changes}
    raw["pools"] = [pool]
    raw["workloads"]["llm-finetune"]["gpu"] = {"gpusPerNode": 4}
    if ladder is not None:
        raw["ladders"][pool["ladder"]] = ladder
    return raw


def split_config(ladder: dict[str, Any] | None = WITH_SKU, **pool_changes: Any) -> StackConfig:
    return parse_stack_config(split_raw(ladder, **pool_changes), project_dir=str(REPO))


def test_the_rungs_take_the_types_of_the_mig_they_resize() -> None:
    """same_pool grows the primary MIG (4 Local SSDs), so it is priced with a2-ultragpu-4g alone; the
    split-off 8-SSD MIG is alternate_sku's; on_demand's fallback MIG is built from the primary's template."""
    config = split_config()  # main refused it: "alternate_sku takes no type", counting both in the primary
    pool = config.pools[0]
    workload = config.workloads[pool.workload]
    assert rung_types(pool, StepKind.SAME_POOL, workload) == ("a2-ultragpu-4g",)
    assert rung_types(pool, StepKind.ALTERNATE_ZONE, workload) == ("a2-ultragpu-4g",)
    assert rung_types(pool, StepKind.ALTERNATE_SKU, workload) == ("a2-ultragpu-8g",)
    assert rung_types(pool, StepKind.ON_DEMAND, workload) == ("a2-ultragpu-4g",)


def test_the_controller_config_names_each_mig_with_the_types_it_launches() -> None:
    config = split_config()
    args = PoolArgs.for_pool(config, config.pools[0])
    plan = plan_pool(args)
    assert [(g.key, g.machine_types, g.local_ssds) for g in plan.groups] == [
        ("aopt-lssd4", ("a2-ultragpu-4g",), 4), ("aopt-lssd8", ("a2-ultragpu-8g",), 8)]
    assert plan.controller_job is not None
    rendered = parse_controller_config(json.loads(plan.controller_job.config))
    groups = {g.name: (g.role, g.gpus_per_node) for g in rendered.pools[0].groups}
    assert groups == {
        "train-gcp-prod-spot-aopt-lssd4": (StepKind.SAME_POOL, 4),
        "train-gcp-prod-spot-aopt-lssd8": (StepKind.ALTERNATE_SKU, 8),
        # the fallback MIG runs the primary's template and flexibility policy: a2-ultragpu-4g only
        # (main named both types, so the mixed group carried no GPU count)
        "train-gcp-prod-od": (StepKind.ON_DEMAND, 4),
    }
    assert set(groups) == {*plan.spot_migs, plan.fallback_mig}  # every group is a MIG the pool creates


def test_a_split_off_mig_no_rung_grows_is_refused_naming_the_type() -> None:
    """The prod ladder has no alternate_sku rung: the 8-SSD MIG would sit at 0 forever."""
    with pytest.raises(ConfigError) as err:
        split_config(ladder=None)
    line = str(err.value)
    assert "pools[train-gcp].machineTypes[1].machineType" in line and "a2-ultragpu-8g" in line
    assert "aopt-lssd8" in line and "alternate_sku" in line and "optOut.idleRungs" in line
    assert len(line.splitlines()) == 1


def test_an_opted_out_idle_mig_loads_and_the_report_warns() -> None:
    from spotgpu.economics.report import stack_economics

    config = split_config(ladder=None, optOut={"idleRungs": "kept at 0 as a manual spare for drills"})
    warnings = stack_economics(config)["pools"]["train-gcp"]["warnings"]
    assert any("aopt-lssd8" in w and "a2-ultragpu-8g" in w for w in warnings), warnings


def test_without_tiers_the_types_share_one_mig_and_same_pool_takes_both() -> None:
    raw = split_raw(ladder=None)
    raw["workloads"]["llm-finetune"].pop("checkpointTiers")
    config = parse_stack_config(raw, project_dir=str(REPO))
    pool = config.pools[0]
    workload = config.workloads[pool.workload]
    assert rung_types(pool, StepKind.SAME_POOL, workload) == ("a2-ultragpu-4g", "a2-ultragpu-8g")
    assert rung_types(pool, StepKind.ALTERNATE_SKU, workload) == ()


# --- the split itself: pure functions of the models layer -----------------------------------------

def _choices(*types: str) -> tuple[Any, ...]:
    from spotgpu.models.pools import GcpMachineChoice

    return tuple(GcpMachineChoice.model_validate({"machineType": t}) for t in types)


def test_the_split_groups_by_local_ssd_count_in_rank_order_and_marks_the_split_off_groups() -> None:
    from spotgpu.models.gcp_groups import group_machine_choices

    choices = _choices("a2-ultragpu-4g", "a2-highgpu-8g", "a3-highgpu-2g", "a2-ultragpu-8g")  # 4, 0, 4, 8 SSDs
    groups = group_machine_choices(choices, local_ssd=True)
    assert [(g.key, g.machine_types, g.local_ssds, g.ssd_split) for g in groups] == [
        ("aopt-lssd4", ("a2-ultragpu-4g", "a3-highgpu-2g"), 4, False),
        ("aopt", ("a2-highgpu-8g",), 0, True),
        ("aopt-lssd8", ("a2-ultragpu-8g",), 8, True),
    ]
    untiered = group_machine_choices(choices)
    assert [(g.key, g.machine_types, g.ssd_split) for g in untiered] == [
        ("aopt", ("a2-ultragpu-4g", "a2-highgpu-8g", "a3-highgpu-2g", "a2-ultragpu-8g"), False)]


def test_an_n1_group_is_apart_by_its_accelerator_not_split_off_by_the_tier() -> None:
    from spotgpu.models.gcp_groups import group_machine_choices
    from spotgpu.models.pools import GcpMachineChoice

    n1 = GcpMachineChoice.model_validate({"machineType": "n1-standard-8", "accelerator": {"type": "nvidia-tesla-t4", "count": 1}})
    groups = group_machine_choices((*_choices("g2-standard-48"), n1, *_choices("a3-highgpu-4g")), local_ssd=True)
    assert [(g.key, g.local_ssds, g.ssd_split) for g in groups] == [("aopt", 0, False), ("t4x1", 0, False),
                                                                    ("aopt-lssd8", 8, True)]
    assert groups[1].describe() == "MIG t4x1 (1 x nvidia-tesla-t4 attached)"
    assert groups[2].describe() == "MIG aopt-lssd8 (accelerator-optimized, 8 Local SSDs per VM)"


def test_the_type_lists_read_the_planners_groups() -> None:
    """primary, alternate and fallback types are the planner's MIGs, for every pool of both shipped stacks
    and for the split pool: one function decides, the planner and the economics read it."""
    from spotgpu.economics.report import load_stack
    from spotgpu.models.pool_types import alternate_types, fallback_types, primary_types
    from spotgpu.models.pools import GcpPoolSpec

    configs = [load_stack("dev", REPO), load_stack("prod", REPO), split_config()]
    for config in configs:
        for pool in config.pools:
            if not isinstance(pool, GcpPoolSpec):
                continue
            workload = config.workloads[pool.workload]
            plan = plan_pool(PoolArgs.for_pool(config, pool))
            assert primary_types(pool, workload) == plan.groups[0].machine_types
            assert fallback_types(pool, workload) == plan.groups[0].machine_types  # the od template is the primary's
            assert alternate_types(pool, workload) == tuple(t for g in plan.groups[1:] for t in g.machine_types)


def test_the_documented_split_example_fails_as_documented() -> None:
    """docs/gcp.md: the prod pool with the page's machineTypes, as written, fails with the page's line."""
    import yaml

    from tests.doc_blocks import marked_block

    types = yaml.safe_load(marked_block("gcp.md", "lssd-split-example"))["machineTypes"]
    raw = stack_raw("prod")
    raw["pools"] = [{**gcp_pool_raw(raw), "machineTypes": types}]
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw, project_dir=str(REPO))
    assert str(err.value) == marked_block("gcp.md", "lssd-split-error").strip()
