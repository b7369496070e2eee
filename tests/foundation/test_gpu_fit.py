"""The GPU-fit judgement itself (spotgpu.catalogue.fit) and the workload's gpu block."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spotgpu import catalogue
from spotgpu.catalogue.fit import GpuNeed, nodes_for, shortfalls
from spotgpu.models.workload import GpuRequirement


def _shape(name: str) -> catalogue.GpuShape:
    shape = catalogue.aws_gpu(name)
    assert shape is not None
    return shape


def test_a_40_gb_a100_cannot_hold_60_gb_shards_and_an_80_gb_h100_can() -> None:
    need = GpuNeed(nodes=2, gpus_per_node=8, memory_per_gpu_gib=60)
    short = shortfalls(need, _shape("p4d.24xlarge"))
    assert len(short) == 1
    assert "has 40 GiB per GPU, 20 GiB short of the 60 GiB" in short[0].what
    assert "p4d.24xlarge" in short[0].fix and "60 GiB" in short[0].fix
    assert shortfalls(need, _shape("p5.48xlarge")) == []


def test_the_need_is_derived_from_the_model_state_over_the_gang() -> None:
    need = GpuNeed(nodes=2, gpus_per_node=8, model_state_gib=640, headroom=0.25)
    assert need.memory_needed_gib() == pytest.approx(640 / 16 * 1.25)  # 50 GiB
    (short,) = shortfalls(need, _shape("p4d.24xlarge"))
    assert "gpu.modelStateGiB 640 / 16 GPUs x (1 + headroom 0.25)" in short.what
    assert shortfalls(need, _shape("p4de.24xlarge")) == []  # A100 80 GB


def test_unvalidated_models_are_refused_by_name() -> None:
    need = GpuNeed(nodes=1, gpus_per_node=8, models=("H100",))
    (short,) = shortfalls(need, _shape("p4de.24xlarge"))
    assert "carries A100" in short.what and "gpu.models" in short.fix
    assert shortfalls(need, _shape("p5.48xlarge")) == []


def test_gang_shape_keeps_the_gpu_count_or_an_allowed_one() -> None:
    need = GpuNeed(nodes=2, gpus_per_node=8)
    assert nodes_for(need, 8) == 2
    assert nodes_for(need, 4) == 4  # twice the nodes, same 16 GPUs
    assert nodes_for(need, 3) is None
    assert nodes_for(GpuNeed(nodes=2, gpus_per_node=8, world_sizes=(12,)), 3) == 4
    assert nodes_for(GpuNeed(nodes=1, gpus_per_node=8, gpus_per_rank=2), 1) is None
    assert shortfalls(need, _shape("g5.12xlarge")) == []  # 4 GPUs: four nodes make the gang
    (short,) = shortfalls(GpuNeed(nodes=1, gpus_per_node=8), _shape("p2.16xlarge"))  # 16 per node > 8 in all
    assert "no whole number of its nodes makes a gang of 8 GPUs" in short.what and "gpu.worldSizes" in short.fix


def test_the_gpu_block_is_camel_case_and_checked_once() -> None:
    req = GpuRequirement.model_validate({"gpusPerNode": 8, "memoryPerGpuGiB": 60, "models": ["H100 80GB"]})
    assert req.need(2).world_size == 16
    with pytest.raises(ValidationError, match="give one memory figure"):
        GpuRequirement.model_validate({"gpusPerNode": 8, "memoryPerGpuGiB": 60, "modelStateGiB": 900})
    with pytest.raises(ValidationError, match="whole number of ranks"):
        GpuRequirement.model_validate({"gpusPerNode": 6, "gpusPerRank": 4})
