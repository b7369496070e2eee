"""The link tags survive every cloud's limits and round-trip exactly."""

from __future__ import annotations

from spotgpu.config import parse_stack_config
from spotgpu.tags import (
    decode_ladder,
    encode_ladder,
    encode_workload,
    gcp_label_value,
    pool_links,
    workload_from_tag,
)


def test_round_trips(prod_raw) -> None:
    config = parse_stack_config(prod_raw)
    ladder = config.ladders["training"]
    decoded = decode_ladder(encode_ladder(ladder))
    assert [(s.kind, s.max_wait_seconds, s.cost_ceiling_per_hour) for s in decoded] == [
        (s.kind, s.max_wait_seconds, s.cost_ceiling_per_hour) for s in ladder.steps
    ]
    workload = config.workloads["llm-finetune"]
    assert workload_from_tag(encode_workload(workload)) == workload


def test_links_fit_cloud_limits(prod_raw) -> None:
    config = parse_stack_config(prod_raw)
    tags = pool_links(
        role="spot-pool",
        pool="train-aws",
        checkpoint_store="s3://spotgpu-prod-train-aws-ckpt/train-aws",
        fallback_group="spotgpu-prod-train-aws-od",
        ladder=config.ladders["training"],
        workload=config.workloads["llm-finetune"],
        checkpoint_interval_seconds=2548,
        notice="aws",
        waiver="x" * 400,
    )
    assert all(len(v) <= 256 for v in tags.values())
    assert "spotgpu-waiver" in tags
    assert set(pool_links(role="fallback", pool="p")) == {"spotgpu-role", "spotgpu-pool"}


def test_gcp_label_value() -> None:
    assert gcp_label_value("Train.AWS/x") == "train_aws_x"
    assert len(gcp_label_value("a" * 100)) == 63
