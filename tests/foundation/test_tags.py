"""The link tags survive every cloud's limits and round-trip exactly."""

from __future__ import annotations

from spotgpu.config import parse_stack_config
from spotgpu.contract.tags import (
    decode_ladder,
    encode_ladder,
    encode_workload,
    gcp_label_value,
    pool_links,
    workload_from_tag,
)
from spotgpu.models.ladder import FallbackLadder
from spotgpu.models.tiers import ram_disk_gib, tier_commit_seconds, tier_load_seconds, tier_write_seconds
from spotgpu.models.workload import WorkloadProfile


def test_round_trips(prod_raw) -> None:
    config = parse_stack_config(prod_raw)
    ladder = config.ladders["training-aws"]
    decoded = decode_ladder(encode_ladder(ladder))
    assert [(s.kind, s.max_wait_seconds, s.ceiling, s.per_work_hour) for s in decoded] == [
        (s.kind, s.max_wait_seconds, s.cost_ceiling_per_hour, False) for s in ladder.steps
    ]
    workload = config.workload_for(config.pools[0])  # priced for the pool, as the components tag it
    tiers = workload.checkpoint_tiers
    assert tiers is not None  # the prod stack keeps checkpoint tiers
    # the link carries the tier's figures resolved (priors made explicit), so the policy pack needs no model
    b, n = workload.checkpoint_bytes, workload.nodes
    resolved = tiers.model_copy(update={"local": tiers.local.model_copy(update={
        "write_seconds": tier_write_seconds(tiers, b, n)[0], "commit_seconds": tier_commit_seconds(tiers, b, n)[0],
        "load_seconds": tier_load_seconds(tiers, b, n)[0], "ram_disk_gib": float(ram_disk_gib(tiers, b, n))})})
    assert workload_from_tag(encode_workload(workload)) == workload.model_copy(
        update={"sources": {}, "checkpoint_tiers": resolved})


_FIGURES = {
    "checkpointBytes": 2_000_000_000, "checkpointWriteSeconds": 12, "checkpointLoadSeconds": 10,
    "restartSeconds": 180, "expectedReacquisitionSeconds": 600, "interruptionsPerHour": 0.1,
    "workHours": 4, "maxLostWorkSeconds": 900, "nodes": 2,
    "prices": {"spotPerHour": 0.45, "onDemandPerHour": 1.01},
}


def test_per_work_hour_ceilings_and_gpu_speeds_round_trip() -> None:
    """A ceiling per work-hour keeps its unit in the link (``1.1w``), and the speeds per GPU model travel
    in the workload link (``u=``), so the policy pack compares the ceiling per unit of work too."""
    ladder = FallbackLadder.model_validate({"steps": [
        {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 3.5},
        {"kind": "alternate_sku", "maxWaitSeconds": 900, "costCeilingPerWorkHour": 1.1},
        {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerWorkHour": 2.25},
    ]})  # fmt: skip
    text = encode_ladder(ladder)
    assert text == "sp:600:3.5;as:900:1.1w;od:3600:2.25w"
    assert [(s.ceiling, s.per_work_hour) for s in decode_ladder(text)] == [(3.5, False), (1.1, True), (2.25, True)]
    workload = WorkloadProfile.model_validate({
        **_FIGURES, "gpu": {"gpusPerNode": 8, "relativeThroughput": {"A100 40GB": 1.0, "H100 80GB": 2.5}}})
    tag = encode_workload(workload)
    assert tag.endswith(";u=A100 40GB:1+H100 80GB:2.5")
    assert workload_from_tag(tag) == workload


def test_links_fit_cloud_limits(prod_raw) -> None:
    config = parse_stack_config(prod_raw)
    tags = pool_links(
        role="spot-pool",
        pool="train-aws",
        checkpoint_store="s3://spotgpu-prod-train-aws-ckpt/train-aws",
        fallback_group="spotgpu-prod-train-aws-od",
        ladder=config.ladders["training-aws"],
        workload=config.workload_for(config.pools[0]),
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
