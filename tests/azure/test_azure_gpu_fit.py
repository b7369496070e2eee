"""An Azure VM size that cannot hold the workload's GPU need is a config error (issue 26, item 1)."""

from __future__ import annotations

import pytest
from azure_fixtures import stack_raw

from spotgpu.config import ConfigError, parse_stack_config


def _with_gpu(gpu: dict[str, object], **pool_keys: object) -> dict[str, object]:
    raw = stack_raw("prod")
    workloads = {**raw["workloads"], "llm-finetune": {**raw["workloads"]["llm-finetune"], "gpu": gpu}}
    pools = [{**p, **pool_keys} for p in raw["pools"] if p["cloud"] == "azure"]
    return {**raw, "workloads": workloads, "pools": pools}


def test_an_a100_80_gb_size_for_90_gb_shards_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(_with_gpu({"gpusPerNode": 1, "memoryPerGpuGiB": 90}))
    line = str(err.value)
    assert line.startswith("spotgpu:pools[train-az].vmSizes[0]: Standard_NC24ads_A100_v4 (1 x A100")
    assert "GiB short of the 90 GiB" in line and "fix: drop Standard_NC24ads_A100_v4" in line


def test_the_on_demand_rung_size_is_judged_too() -> None:
    keys = {"vmSizes": ["Standard_NC40ads_H100_v5", "Standard_NC80adis_H100_v5"],
            "fallbackVmSize": "Standard_NC24ads_A100_v4"}
    with pytest.raises(ConfigError, match=r"fallbackVmSize: Standard_NC24ads_A100_v4 .* taken by the on_demand rung"):
        parse_stack_config(_with_gpu({"gpusPerNode": 1, "memoryPerGpuGiB": 90}, **keys))


def test_a_target_of_1_gpu_nodes_that_cannot_hold_the_gang_is_refused() -> None:
    """The target counts primary nodes: two 1-GPU NC24ads hold 2 GPUs, and a gang of 2 x 2 GPUs needs four."""
    with pytest.raises(ConfigError) as err:
        parse_stack_config(_with_gpu({"gpusPerNode": 2}))
    line = str(err.value)
    assert line.startswith("spotgpu:pools[train-az].capacity.target: holds 2 node(s) of Standard_NC24ads_A100_v4 "
                           "(1 GPU(s) each), 2 GPUs, and workload llm-finetune's gang needs 4")  # fmt: skip
    assert "(value: 2); fix: set capacity.target to 4 (and capacity.max to at least 4)" in line
    parse_stack_config(_with_gpu({"gpusPerNode": 2}, capacity={"target": 4, "max": 8}))  # four nodes hold it
    parse_stack_config(_with_gpu({"gpusPerNode": 2, "worldSizes": [2]}))  # or it restarts at 2 GPUs (resharded)
    parse_stack_config(_with_gpu({"gpusPerNode": 2}, capacity={"target": 0, "max": 8}))  # a pool kept empty
