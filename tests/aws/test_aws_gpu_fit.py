"""An AWS pool type that cannot hold the workload's GPU need is a config error (issue 26, item 1)."""

from __future__ import annotations

import pytest
from aws_fixtures import pool_args, stack_raw

from spotgpu.config import ConfigError, parse_stack_config
from tests.doc_blocks import marked_block


def _with_gpu(gpu: dict[str, object]) -> dict[str, object]:
    raw = stack_raw("prod")
    raw["workloads"]["llm-finetune"]["gpu"] = gpu
    raw["pools"] = [p for p in raw["pools"] if p["cloud"] == "aws"]
    return raw


def test_a_type_short_of_memory_per_gpu_is_refused_naming_type_shortfall_and_fix() -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(_with_gpu({"gpusPerNode": 4, "memoryPerGpuGiB": 40}))
    line = str(err.value)
    assert line.startswith("spotgpu:pools[train-aws].instanceTypes[0]: g5.12xlarge (4 x A10G")
    assert "17.6 GiB short of the 40 GiB" in line
    assert "fix: drop g5.12xlarge, or use a type with at least 40 GiB per GPU (types that fit:" in line


def test_types_that_hold_the_need_pass_and_no_gpu_block_changes_nothing() -> None:
    config = parse_stack_config(_with_gpu({"gpusPerNode": 4, "memoryPerGpuGiB": 20}))
    assert config.workloads["llm-finetune"].gpu_need is not None
    assert pool_args("prod").workload.gpu is None


def test_the_documented_example_gives_the_documented_error() -> None:
    import yaml

    doc = yaml.safe_load(marked_block("configuration.md", "gpu-example"))
    gpu = doc["spotgpu:workloads"]["llm-finetune"]["gpu"]
    raw = _with_gpu(gpu)
    assert raw["workloads"]["llm-finetune"]["nodes"] == doc["spotgpu:workloads"]["llm-finetune"]["nodes"]
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw)
    assert str(err.value) == marked_block("configuration.md", "gpu-error").strip()
