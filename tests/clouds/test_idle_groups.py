"""A spot group no ladder rung grows is refused, whatever set it apart from the primary group.

Only ``alternate_sku`` grows a spot group other than the primary (``same_pool`` and ``alternate_zone``
grow the primary, ``on_demand`` the fallback group), so on a ladder without it such a group is created
and never grown. Main judged only GCP MIGs split off by Local SSD count, so the shipped dev stack's own
N1 ``t4x1`` MIG (dev-gcp) and second Azure scale set (dev-az) sat idle on the ``dev`` ladder unnoticed.
"""

from __future__ import annotations

from typing import Any

import pytest
from cloud_fixtures import REPO, stack_raw

from spotgpu.config import ConfigError, parse_stack_config
from spotgpu.models import StackConfig

#: the ladder the dev stack's single-group AWS pool uses: no alternate_sku rung
NO_SKU = "dev"


def dev_pool_raw(name: str, **changes: Any) -> dict[str, Any]:
    """The dev stack with only pool ``name``, on the ladder without alternate_sku unless ``changes`` say."""
    raw = stack_raw("dev")
    raw["pools"] = [{**next(p for p in raw["pools"] if p["name"] == name), "ladder": NO_SKU, **changes}]
    return raw


def refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw, project_dir=str(REPO))
    line = str(err.value)
    assert len(line.splitlines()) == 1, line
    return line


def test_an_n1_mig_no_rung_grows_is_refused_naming_its_type_and_why_it_is_apart() -> None:
    line = refusal(dev_pool_raw("dev-gcp"))
    assert line.startswith("spotgpu:pools[dev-gcp].machineTypes[1].machineType: ")
    assert '(value: "n1-standard-8")' in line
    assert "MIG t4x1" in line and "primary MIG aopt" in line
    assert "attaches 1 x nvidia-tesla-t4" in line  # why it has a MIG of its own: the accelerator
    assert f"ladder {NO_SKU} has none" in line and "stays at 0 nodes" in line and "optOut.idleRungs" in line


def test_a_second_azure_size_no_rung_grows_is_refused_naming_the_size_and_why_it_is_apart() -> None:
    line = refusal(dev_pool_raw("dev-az"))
    assert line.startswith("spotgpu:pools[dev-az].vmSizes[1]: ")
    assert '(value: "Standard_NC8as_T4_v3")' in line
    assert "scale set Standard_NC8as_T4_v3" in line and "primary scale set Standard_NC4as_T4_v3" in line
    assert "one VM size" in line  # why it is apart: a scale set per size
    # capacity.target 1 over two sizes: the second is created with none, and nothing grows it
    assert "stays at 0 nodes" in line and "optOut.idleRungs" in line


def test_a_second_azure_size_is_created_empty_whatever_the_target() -> None:
    """capacity.target 2 over two sizes: the primary gets both (the second set was given 1, which the
    controller bought again in the primary and then drained: tests/azure/test_azure_idle_scale_set.py)."""
    line = refusal(dev_pool_raw("dev-az", capacity={"target": 2, "max": 3}))
    assert "stays at 0 nodes" in line


def test_an_opted_out_idle_group_loads_and_the_report_warns_with_the_reason() -> None:
    from spotgpu.economics.report import stack_economics

    reason = "kept at 0 as a spare the operator grows by hand"
    config = parse_stack_config(dev_pool_raw("dev-gcp", optOut={"idleRungs": reason}), project_dir=str(REPO))
    warnings = stack_economics(config)["pools"]["dev-gcp"]["warnings"]
    assert len(warnings) == 1 and "MIG t4x1" in warnings[0] and reason in warnings[0], warnings


def test_an_aws_pool_has_one_spot_group_so_none_is_idle() -> None:
    config = parse_stack_config(dev_pool_raw("dev-aws"), project_dir=str(REPO))
    assert isinstance(config, StackConfig)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_shipped_pool_has_an_idle_group(stack: str) -> None:
    from spotgpu.economics.report import load_stack
    from spotgpu.models.stack import idle_groups

    config = load_stack(stack, REPO)
    assert {p.name: idle_groups(p, config.ladder_for(p), config.workloads[p.workload]) for p in config.pools} == {
        p.name: [] for p in config.pools}
