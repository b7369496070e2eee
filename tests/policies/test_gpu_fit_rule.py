"""gpu-type-holds-workload judges raw programs from the workload link tag (issue 26, item 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import raw_resources as raw
from guard_helpers import by_policy, judge

from spotgpu.contract.tags import WORKLOAD, decode_gpu, encode_workload, workload_from_tag
from spotgpu.models.workload import GpuRequirement

RULE = "gpu-type-holds-workload"


def _tag(**gpu: Any) -> dict[str, str]:
    return {WORKLOAD: encode_workload(raw.WORKLOAD.model_copy(update={"gpu": GpuRequirement(**gpu)}))}


def _messages(program: Callable[[], Any]) -> list[str]:
    return [d["message"] for d in by_policy(judge(program), RULE)]


def test_the_gpu_need_round_trips_through_the_tag_within_limits() -> None:
    gpu = GpuRequirement(gpus_per_node=8, gpus_per_rank=2, model_state_gib=900, headroom=0.3,
                         models=("H100 80GB", "A100 80GB"), world_sizes=(8, 32))
    text = _tag(**gpu.model_dump())[WORKLOAD]
    assert len(text) <= 256 and "c=8;k=2;t=900;e=0.3;v=H100 80GB+A100 80GB;a=8+32" in text
    assert workload_from_tag(text).gpu == gpu
    need = decode_gpu(text)
    assert need is not None and need.world_size == 8 and need.models == gpu.models
    assert decode_gpu(encode_workload(raw.WORKLOAD)) is None  # no gpu block: nothing judged, tag unchanged
    assert "c=" not in encode_workload(raw.WORKLOAD)


def test_an_aws_raw_pool_type_short_of_memory_is_refused() -> None:
    found = _messages(lambda: raw.aws_pool(tags=_tag(gpus_per_node=1, memory_per_gpu_gib=40)))
    assert len(found) == 2  # g5.xlarge and g6.xlarge, both 1 x ~24 GiB
    assert "g5.xlarge (1 x A10G (22.4 GiB each)) cannot hold the workload (spotgpu-workload)" in found[0]
    assert "17.6 GiB short of the 40 GiB" in found[0] and "fix: drop g5.xlarge" in found[0]


def test_gcp_and_azure_raw_pools_are_judged_too() -> None:
    gcp = _messages(lambda: raw.gcp_pool(tags=_tag(gpus_per_node=1, memory_per_gpu_gib=40)))
    assert gcp and all("L4" in m and "16 GiB short" in m for m in gcp)
    azure = _messages(lambda: raw.azure_pool(tags=_tag(gpus_per_node=1, models=("H100 NVL",))))
    assert len(azure) == 1 and "Standard_NC24ads_A100_v4" in azure[0] and "not validated on" in azure[0]


@pytest.mark.parametrize("build", [raw.aws_pool, raw.gcp_pool, raw.azure_pool])
def test_types_that_hold_the_need_pass(build: Callable[..., None]) -> None:
    assert _messages(lambda: build(tags=_tag(gpus_per_node=1, memory_per_gpu_gib=20))) == []
