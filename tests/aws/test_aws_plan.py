"""Pure planning for AWS pools: names, strategy, heartbeat, overrides, links and bootstrap."""

from __future__ import annotations

import base64

import pytest
from aws_fixtures import agent_config_from, pool_args

from spotgpu.bootstrap import MAX_BOOTSTRAP_BYTES
from spotgpu.config import PlanError
from spotgpu.contract import tags as link
from spotgpu.models.pools import AwsPoolSpec
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.aws import plan
from spotgpu_pulumi.aws.plan import plan_pool


@pytest.mark.parametrize(
    ("notice", "margin", "write", "expected"),
    [
        (120, 15, 75, 135),  # notice-bound: a reclaim lands at the end of the notice anyway
        (120, 15, 600, 615),  # write-bound: rebalancing and scale-in wait for a full final write
        (0, 15, 5, 30),  # hibernate: no notice, clamped to the API minimum
        (120, 15, 9000, 7200),  # clamped to the API maximum; the agent extends with heartbeats
        (120, 0.5, 10, 121),  # rounded up, never down
    ],
)
def test_lifecycle_heartbeat_covers_notice_or_write_plus_margin(
    notice: float, margin: float, write: float, expected: int
) -> None:
    assert plan.lifecycle_heartbeat_seconds(notice, margin, write) == expected


def test_fleet_termination_delay_stays_in_the_api_range() -> None:
    assert plan.fleet_termination_delay(30) == 120
    assert plan.fleet_termination_delay(615) == 615
    assert plan.fleet_termination_delay(9999) == 7200


def test_allocation_strategy_never_lowest_price() -> None:
    assert plan.spot_allocation_strategy(False) == "price-capacity-optimized"
    assert plan.spot_allocation_strategy(True) == "capacity-optimized-prioritized"


def test_fleet_overrides_cover_every_type_in_every_subnet_with_rank_priorities() -> None:
    subnets = [("subnet-a", "us-east-1a"), ("subnet-b", "us-east-1b")]
    overrides = plan.fleet_overrides(("g5.xlarge", "g6.xlarge", "g5.2xlarge"), subnets)
    assert len(overrides) == 6
    assert {(o.instance_type, o.subnet_id) for o in overrides} == {
        (t, s) for t in ("g5.xlarge", "g6.xlarge", "g5.2xlarge") for s in ("subnet-a", "subnet-b")
    }
    priorities = {o.instance_type: o.priority for o in overrides}
    assert priorities == {"g5.xlarge": 1.0, "g6.xlarge": 2.0, "g5.2xlarge": 3.0}
    assert min(o.priority for o in overrides) == 1.0  # 0 would be dropped by the provider
    assert all(o.weighted_capacity == 1.0 for o in overrides)
    assert len({o.key for o in overrides}) == 6
    assert overrides[0].key == "g5.xlarge@subnet-a"


def test_asg_overrides_keep_the_spec_order_and_count_nodes() -> None:
    overrides = plan.asg_overrides(("g6e.12xlarge", "g5.12xlarge"))
    assert [o.instance_type for o in overrides] == ["g6e.12xlarge", "g5.12xlarge"]
    assert [o.weighted_capacity for o in overrides] == ["1", "1"]


def test_plan_names_are_deterministic_and_fit_aws_limits() -> None:
    p = plan_pool(pool_args("prod"))
    assert p.names.spot_group == "spotgpu-prod-train-aws-spot"
    assert p.names.fallback_group == "spotgpu-prod-train-aws-fallback"
    assert p.names.bucket == "spotgpu-prod-train-aws-checkpoints"
    assert p.names.queue == "spotgpu-prod-train-aws-events"
    assert p.checkpoint_store == "s3://spotgpu-prod-train-aws-checkpoints/train-aws"
    assert plan_pool(pool_args("prod")) == p  # same input, same plan


def test_longest_names_still_fit_s3_and_sqs_limits() -> None:
    spec = pool_args("prod").spec
    assert isinstance(spec, AwsPoolSpec)
    names = plan.PoolNames.for_pool("a" * 16, spec.model_copy(update={"name": "p" * 20}))
    assert len(names.bucket) <= 63
    assert len(names.queue) <= 80


def test_bucket_name_and_prefix_overrides() -> None:
    p = plan_pool(pool_args("prod", bucketName="acme-ml-ckpt", checkpoint={"prefix": "teams/llm"}))
    assert p.names.bucket == "acme-ml-ckpt"
    assert p.prefix == "teams/llm"
    assert p.checkpoint_store == "s3://acme-ml-ckpt/teams/llm"


def test_spot_and_fallback_links_carry_the_whole_contract() -> None:
    args = pool_args("prod")
    p = plan_pool(args)
    for links, role in ((p.spot_links, "spot-pool"), (p.fallback_links, "fallback")):
        assert links[link.ROLE] == role
        assert links[link.POOL] == "train-aws"
        assert links[link.CHECKPOINT_STORE] == p.checkpoint_store
        assert links[link.FALLBACK_GROUP] == p.names.fallback_group
        assert link.decode_ladder(links[link.LADDER])[-1].kind.value == "queue_defer"
        assert link.workload_from_tag(links[link.WORKLOAD]).checkpoint_write_seconds == 75
        assert links[link.CHECKPOINT_INTERVAL] == str(args.interval.seconds)
        assert links[link.NOTICE] == "aws"
        assert link.WAIVER not in links


def test_bootstraps_differ_only_in_capacity_type_and_group() -> None:
    args = pool_args("prod")
    p = plan_pool(args)
    spot, fallback = agent_config_from(p.spot_user_data), agent_config_from(p.fallback_user_data)
    assert spot["provider"] == "aws"
    assert spot["capacityType"] == "spot"
    assert fallback["capacityType"] == "on-demand"
    assert spot["autoscalingGroup"] == p.names.spot_group
    assert fallback["autoscalingGroup"] == p.names.fallback_group
    assert spot["lifecycleHook"] == fallback["lifecycleHook"] == plan.DRAIN_HOOK
    assert spot["checkpointStore"] == p.checkpoint_store
    assert spot["checkpointIntervalSeconds"] == args.interval.seconds
    assert spot["notice"] == {
        "provider": "aws",
        "interruption_behavior": "terminate",
        "watch_rebalance": True,
        "safety_margin_seconds": 15.0,
    }
    assert len(base64.b64decode(p.spot_user_data)) <= MAX_BOOTSTRAP_BYTES["aws"]
    assert "spotgpu-agent.service" in base64.b64decode(p.spot_user_data).decode()


def test_fleet_mode_agent_has_no_group_and_no_hook() -> None:
    p = plan_pool(pool_args("prod", mode="fleet"))
    spot = agent_config_from(p.spot_user_data)
    assert "autoscalingGroup" not in spot and "lifecycleHook" not in spot
    assert agent_config_from(p.fallback_user_data)["autoscalingGroup"] == p.names.fallback_group


def test_single_zone_pool_is_refused_by_the_spec_with_the_fix() -> None:
    with pytest.raises(Exception, match=r"1 zone\(s\).*optOut.singleZone"):
        pool_args(
            "prod",
            subnets=[
                {"id": "subnet-0f1e2d3c4b5a60001", "zone": "us-east-1a"},
                {"id": "subnet-0f1e2d3c4b5a60009", "zone": "us-east-1a"},
            ],
        )


def test_opt_out_with_reason_is_allowed_and_recorded_as_waiver() -> None:
    args = pool_args(
        "prod",
        instanceTypes=["g6e.12xlarge"],
        optOut={"singleType": "only L40S nodes fit the 70B model in memory"},
    )
    p = plan_pool(args)
    # keyed as the config writes it, the same text on every cloud (it read "single-type: ..." on AWS only)
    assert p.spot_links[link.WAIVER] == "singleType: only L40S nodes fit the 70B model in memory"
    assert p.fallback_links[link.WAIVER] == p.spot_links[link.WAIVER]
    assert len(p.asg_overrides) == 1


def test_non_aws_spec_is_refused_with_a_clear_error() -> None:
    from aws_fixtures import stack_raw

    from spotgpu.config import parse_stack_config

    config = parse_stack_config(stack_raw("prod"))
    gcp = next(p for p in config.pools if p.cloud == "gcp")
    with pytest.raises(PlanError) as err:
        plan_pool(PoolArgs.for_pool(config, gcp))
    assert str(err.value) == (
        'spotgpu:pools[train-gcp].cloud: spotgpu_pulumi.aws.plan_pool plans only AWS pools (value: "gcp"); '
        "fix: plan it with spotgpu_pulumi.gcp.plan_pool, or let spotgpu_pulumi.platform.deploy pick the cloud"
    )


@pytest.mark.parametrize(
    ("given", "installed"),
    [
        ("spotgpu", "spotgpu[aws]"),
        ("spotgpu==0.1.0", "spotgpu[aws]==0.1.0"),
        ("spotgpu>=0.1,<0.2", "spotgpu[aws]>=0.1,<0.2"),  # the user's version text is kept as written
        ("SpotGPU==1.0", "SpotGPU[aws]==1.0"),
        ('spotgpu==1.0; python_version >= "3.11"', 'spotgpu[aws]==1.0; python_version >= "3.11"'),
        ("spotgpu[aws,gcp]==1.0", "spotgpu[aws,gcp]==1.0"),  # extras chosen explicitly: left alone
        ("spotgpu @ https://example.com/spotgpu-0.1.0-py3-none-any.whl", None),
        ("https://example.com/spotgpu-0.1.0-py3-none-any.whl", None),
        ("./dist/spotgpu-0.1.0-py3-none-any.whl", None),
        ("spotgpu-agent==1.0", None),  # another distribution
    ],
)
def test_the_aws_extra_is_added_only_to_a_plain_spotgpu_requirement(given: str, installed: str | None) -> None:
    assert plan.with_aws_extra(given) == (installed or given)


def _installed(user_data: str) -> str:
    script = base64.b64decode(user_data).decode()
    return next(line for line in script.splitlines() if "pip install" in line).rsplit(" ", 1)[1]


def test_agents_that_complete_a_lifecycle_hook_get_boto3() -> None:
    p = plan_pool(pool_args("prod"))
    assert _installed(p.spot_user_data) == _installed(p.fallback_user_data) == "'spotgpu[aws]'"
    fleet = plan_pool(pool_args("prod", mode="fleet"))
    assert _installed(fleet.spot_user_data) == "spotgpu"  # fleet instances have no hook to complete
    assert _installed(fleet.fallback_user_data) == "'spotgpu[aws]'"


def test_agents_report_to_the_controllers_state_prefix() -> None:
    p = plan_pool(pool_args("prod"))
    for user_data in (p.spot_user_data, p.fallback_user_data):
        assert agent_config_from(user_data)["controlStore"] == f"{p.checkpoint_store}/_controller"
