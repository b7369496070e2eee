"""Ceilings per unit of work (issue 26, item 3): a dearer GPU that finishes sooner is judged by USD per work-hour.

A work-hour is one hour of the reference GPU's work; a node of a type does GPUs x measured speed
work-hours an hour. Per node-hour ceilings stay available and are labelled as such.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from controller_factories import workload
from pydantic import ValidationError

from spotgpu.config import ConfigError, parse_stack_config, read_stack_file
from spotgpu.controller.config import GroupSpec
from spotgpu.controller.observe import GroupObservation, PoolObservation
from spotgpu.controller.reconcile import PoolPlan, reconcile
from spotgpu.controller.render import render_controller_config
from spotgpu.controller.state import PoolState
from spotgpu.controller.strategies import make_strategy
from spotgpu.economics.report import stack_economics
from spotgpu.models.ladder import FallbackLadder, LadderStep, StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import GpuRequirement
from tests.doc_blocks import marked_block

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def prod_raw() -> dict[str, Any]:
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    return copy.deepcopy(raw)


A100_PRICE, H100_PRICE = 10.0, 24.0  # the H100 node costs 2.4x the A100 node ...
SPEEDS = {"A100": 1.0, "H100": 2.5}  # ... and trains 2.5x faster: the cheaper way to finish


def _ladder(sku: dict[str, float]) -> FallbackLadder:
    return FallbackLadder(steps=(
        LadderStep(kind=StepKind.SAME_POOL, max_wait_seconds=600, cost_ceiling_per_hour=12.0),
        LadderStep(kind=StepKind.ALTERNATE_SKU, max_wait_seconds=600, **sku),
        LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=3600, cost_ceiling_per_hour=40.0),
    ))  # fmt: skip


def _plan(sku: dict[str, float]) -> PoolPlan:
    work = workload().model_copy(update={"gpu": GpuRequirement(gpus_per_node=8, relative_throughput=SPEEDS)})
    groups = (
        GroupSpec(name="a100", role=StepKind.SAME_POOL, gpu_model="A100", gpus_per_node=8, price_per_hour=A100_PRICE),
        GroupSpec(name="h100", role=StepKind.ALTERNATE_SKU, gpu_model="H100", gpus_per_node=8, price_per_hour=H100_PRICE),
        GroupSpec(name="od", role=StepKind.ON_DEMAND, gpu_model="A100", gpus_per_node=8, price_per_hour=32.0),
    )  # fmt: skip
    return PoolPlan(name="p", groups=groups, capacity=Capacity(target=2, max=4), workload=work,
                    strategy=make_strategy("ladder", _ladder(sku)))  # fmt: skip


def _asks_h100(sku: dict[str, float]) -> bool:
    """Lose the A100s, wait out same_pool: does the alternate_sku rung ask the H100 group for nodes?"""
    plan, state = _plan(sku), PoolState()
    obs = {"a100": GroupObservation("a100", 2, ()), "h100": GroupObservation("h100", 0, ()),
           "od": GroupObservation("od", 0, ())}  # fmt: skip
    reconcile(plan, PoolObservation("p", 0.0, obs), state)
    result = reconcile(plan, PoolObservation("p", 601.0, obs), state)
    assert result.step is not None and result.step.kind is StepKind.ALTERNATE_SKU
    return any(getattr(a, "group", None) == "h100" and getattr(a, "desired", 0) > 0 for a in result.actions)


def test_a_faster_dearer_type_passes_per_work_hour_where_per_node_hour_refuses_it() -> None:
    # per node-hour: 24 > 20, refused although it costs less per unit of work
    assert not _asks_h100({"cost_ceiling_per_hour": 20.0})
    # per work-hour: 24 / (8 x 2.5) = 1.2 USD per work-hour; the A100 is 10 / 8 = 1.25
    assert _asks_h100({"cost_ceiling_per_work_hour": 1.2})
    assert not _asks_h100({"cost_ceiling_per_work_hour": 1.19})


def test_a_rung_states_exactly_one_ceiling_and_says_which_unit() -> None:
    with pytest.raises(ValidationError, match="both costCeilingPerHour and costCeilingPerWorkHour; give exactly one"):
        LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=60, cost_ceiling_per_hour=1, cost_ceiling_per_work_hour=1)
    with pytest.raises(ValidationError, match="neither costCeilingPerHour and costCeilingPerWorkHour"):
        LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=60)
    with pytest.raises(ValidationError, match="costCeilingPerWorkHour 0, so it can never run"):
        LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=60, cost_ceiling_per_work_hour=0)
    step = LadderStep(kind=StepKind.ALTERNATE_SKU, max_wait_seconds=60, cost_ceiling_per_work_hour=1.5)
    assert (step.describe_ceiling(), step.ceiling_unit) == ("$1.5/work-hour", "work-hour")
    assert step.node_hour_ceiling(16.0) == 24.0


def _prod(prod_raw: dict[str, Any], gpu: dict[str, Any] | None, sku: dict[str, float]) -> dict[str, Any]:
    raw = copy.deepcopy(prod_raw)
    if gpu is not None:
        raw["workloads"]["llm-finetune"]["gpu"] = gpu
    raw["ladders"]["training-az"]["steps"][2] = {"kind": "alternate_sku", "maxWaitSeconds": 1200, **sku}
    return raw


#: One GPU per node for 2 nodes, or 8 GPUs on the 4-GPU types (the gang each pool's capacity holds).
GPU = {"gpusPerNode": 1, "worldSizes": [8], "relativeThroughput": {"A10G": 1.0, "L4": 0.6, "L40S": 1.6, "A100": 2.0, "H100": 3.0}}


def test_a_per_work_hour_ceiling_needs_the_workloads_gpu_block(prod_raw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(_prod(prod_raw, None, {"costCeilingPerWorkHour": 1.5}))
    line = str(err.value)
    assert "\n" not in line and "spotgpu:ladders.training-az.steps[2].costCeilingPerWorkHour" in line
    assert "no gpu block to count work by" in line and "fix: add workloads.llm-finetune.gpu.gpusPerNode" in line


def test_a_per_work_hour_ceiling_below_every_type_is_one_line_naming_the_cheapest(prod_raw: dict[str, Any]) -> None:
    # Azure: of the sizes the alternate_sku rung takes (all but the first), the H100 NVL size (1 GPU x 3.0) at
    # its list-scaled spot price is the cheapest per unit of work; the first size (same_pool's) does not count.
    # A100 80GB PCIe is not in the table: its spec prior against H100 (x3.0) is 0.315 x 3 = 0.946, not 0.5
    gpu = {**GPU, "relativeThroughput": {"A100 40GB": 2.0, "H100": 3.0, "T4": 0.5}}
    raw = _prod(prod_raw, gpu, {"costCeilingPerWorkHour": 0.9})
    raw["pools"] = [p for p in raw["pools"] if p["cloud"] == "azure"]
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw)
    line = str(err.value)
    assert "\n" not in line and "steps[2].costCeilingPerWorkHour" in line
    least = round(1.47 * 6.98 / 3.67 / 3.0, 4)  # pools[train-az].spotPerHour scaled by list prices, over 3 work-hours
    assert f"spot price per work-hour {least:g} on the cheapest type per unit of work the rung may take" in line
    assert f"fix: raise it to at least {least:g}" in line


def test_the_rendered_controller_knows_each_groups_gpus_model_and_price(prod_raw: dict[str, Any]) -> None:
    raw = _prod(prod_raw, GPU, {"costCeilingPerWorkHour": 1.5})
    config = parse_stack_config(raw)
    pool = next(p for p in config.pools if p.cloud == "azure")
    sizes = ["Standard_NC24ads_A100_v4", "Standard_NC48ads_A100_v4", "Standard_NC40ads_H100_v5"]
    names = ["nc24", "nc48", "nc40"]

    def render(workload: Any, ladder: FallbackLadder) -> Any:
        return render_controller_config(
            pool, workload, ladder, state_url="az://acct/ckpt/p/_controller",
            primary_group=names[0], fallback_group="od", alternate_groups=names[1:],
            cloud={"subscriptionId": "00000000-0000-0000-0000-000000000000", "resourceGroupName": "rg"},
            group_types={**dict(zip(names, [(s,) for s in sizes], strict=True)), "od": (sizes[0],)},
        )  # fmt: skip

    groups = {g.name: g for g in render(config.workload_for(pool), config.ladder_for(pool)).pools[0].groups}
    assert [(groups[n].gpus_per_node, groups[n].gpu_model) for n in names] == [
        (1, "A100 80GB PCIe"), (2, "A100 80GB PCIe"), (1, "H100 NVL")]
    assert groups["nc24"].price_per_hour == 1.47  # the pool's own spot price is its first type's
    assert groups["nc48"].price_per_hour == pytest.approx(1.47 * 7.35 / 3.67, abs=1e-4)  # scaled by list prices
    assert groups["od"].price_per_hour is None and groups["od"].gpus_per_node == 1  # on-demand: the workload's price
    plain = parse_stack_config(prod_raw)  # without a gpu block every group is as it was
    bare = render(plain.workload_for(plain.pools[2]), plain.ladders["training-az"]).pools[0].groups
    assert all(g.gpus_per_node is None and g.gpu_model is None and g.price_per_hour is None for g in bare)


def test_the_preview_shows_usd_per_work_hour_for_every_type_each_rung_may_take(prod_raw: dict[str, Any]) -> None:
    config = parse_stack_config(_prod(prod_raw, GPU, {"costCeilingPerWorkHour": 1.5}))
    report = json.loads(json.dumps(stack_economics(config), allow_nan=False))
    rungs = {r["kind"]: r for r in report["pools"]["train-az"]["rungs"]}
    assert rungs["alternate_sku"]["ceilingUnit"] == "work-hour" and rungs["same_pool"]["ceilingUnit"] == "node-hour"
    assert [t["type"] for t in rungs["same_pool"]["types"]] == ["Standard_NC24ads_A100_v4"]  # the primary scale set
    sku = {t["type"]: t for t in rungs["alternate_sku"]["types"]}
    h100 = sku["Standard_NC40ads_H100_v5"]  # 1 x H100 NVL at speed 3: its list-scaled spot price over 3 work-hours
    assert (h100["gpus"], h100["gpuModel"], h100["speed"], h100["speedMeasured"]) == (1, "H100 NVL", 3.0, True)
    assert h100["usdPerNodeHour"] == pytest.approx(1.47 * 6.98 / 3.67, abs=1e-4)
    assert h100["usdPerWorkHour"] == pytest.approx(h100["usdPerNodeHour"] / 3, abs=1e-4) and h100["withinCeiling"]
    # GCP's accelerator-optimized types share the primary MIG, so its ladder has no alternate_sku rung (an idle one)
    gcp = {r["kind"]: r for r in report["pools"]["train-gcp"]["rungs"]}
    assert "alternate_sku" not in gcp and [t["type"] for t in gcp["same_pool"]["types"]] == ["a2-ultragpu-4g",
                                                                                           "a3-highgpu-2g"]


def test_the_documented_per_work_example_prints_the_documented_lines(tmp_path: Path) -> None:
    """docs/configuration.md, "Ceilings per unit of work": the YAML merged into the prod stack, then
    ``spotgpu cost --stack prod --pool train-az`` prints the documented lines."""
    import subprocess
    import sys

    import yaml

    doc = yaml.safe_load(marked_block("configuration.md", "per-work-example"))
    stack = yaml.safe_load((REPO / "stacks" / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    stack["config"]["spotgpu:workloads"]["llm-finetune"]["gpu"] = doc["spotgpu:workloads"]["llm-finetune"]["gpu"]
    stack["config"]["spotgpu:ladders"]["training-az"] = doc["spotgpu:ladders"]["training-az"]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.prod.yaml").write_text(yaml.safe_dump(stack, sort_keys=False), encoding="utf-8")
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "spotgpu", "cost", "--program", str(tmp_path), "--stack", "prod",
                          "--pool", "train-az"], capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert marked_block("configuration.md", "per-work-preview") in run.stdout
