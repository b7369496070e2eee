"""GpuPool under Pulumi's mock runtime: the wire-form (camelCase) inputs every rule depends on."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from aws_fixtures import REPO, one, policy_of, pool_args, record_pool, stack_raw, tags_of, user_data_config

from spotgpu.contract import tags as link
from spotgpu.contract.sources import AWS_QUEUE
from spotgpu_pulumi.aws import GpuPool, plan_pool
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.program import ProgramError, run_program
from spotgpu_pulumi.offline.testing import children_of, index, record

LT = "aws:ec2/launchTemplate:LaunchTemplate"
ASG = "aws:autoscaling/group:Group"
FLEET = "aws:ec2/fleet:Fleet"
BUCKET = "aws:s3/bucket:Bucket"
RULE = "aws:cloudwatch/eventRule:EventRule"
TARGET = "aws:cloudwatch/eventTarget:EventTarget"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
FIS = "aws:fis/experimentTemplate:ExperimentTemplate"

COMPONENTS = {
    "spotgpu:aws:GpuPool",
    "spotgpu:aws:CheckpointBucket",
    "spotgpu:aws:NodeIdentity",
    "spotgpu:aws:SpotCapacity",
    "spotgpu:aws:InterruptionEvents",
    "spotgpu:aws:OnDemandFallbackGroup",
    "spotgpu:aws:InterruptionDrill",
    "spotgpu:aws:ControllerJob",
}
SPOT_LINK_KEYS = {
    link.ROLE,
    link.POOL,
    link.CHECKPOINT_STORE,
    link.FALLBACK_GROUP,
    link.LADDER,
    link.WORKLOAD,
    link.CHECKPOINT_INTERVAL,
    link.NOTICE,
}


@pytest.fixture(scope="module")
def prod() -> list[RecordedResource]:
    return record_pool(pool_args("prod"))


@pytest.fixture(scope="module")
def fleet() -> list[RecordedResource]:
    return record_pool(pool_args("prod", mode="fleet"))


def _assert_links(tags: dict[str, str], role: str, store: str, fallback: str) -> None:
    assert set(tags) >= SPOT_LINK_KEYS, SPOT_LINK_KEYS - set(tags)
    assert tags[link.ROLE] == role
    assert tags[link.POOL] == "train-aws"
    assert tags[link.CHECKPOINT_STORE] == store
    assert tags[link.FALLBACK_GROUP] == fallback
    assert tags[link.NOTICE] == "aws"
    assert int(tags[link.CHECKPOINT_INTERVAL]) == pool_args("prod").interval.seconds


# --- tree -------------------------------------------------------------------------------------


def test_tree_has_every_component_with_stable_names(prod: list[RecordedResource]) -> None:
    components = {r.type for r in prod if not r.custom and r.type.startswith("spotgpu:")}
    assert components == COMPONENTS
    pool = one(prod, "spotgpu:aws:GpuPool")
    for child in children_of(prod, pool):
        assert not child.custom and child.name.startswith("train-aws-"), child.name
    names = [r.name for r in prod]
    assert len(names) == len(set(names))
    # Every cloud resource sits under one of the pool's child components.
    component_urns = {r.urn for r in prod if r.type in COMPONENTS - {"spotgpu:aws:GpuPool"}}
    assert all(r.parent in component_urns for r in prod if r.custom)
    assert not any(r.name[-1].isdigit() for r in prod if r.custom), "names come from keys, not list indices"


def test_exports_name_everything_an_operator_needs() -> None:
    seen: dict[str, Any] = {}

    def program() -> None:
        pool = GpuPool("train-aws", plan_pool(pool_args("prod")))
        keys = sorted(pool.exports)
        pulumi.Output.all(*[pool.exports[k] for k in keys]).apply(lambda v: seen.update(zip(keys, v, strict=True)))

    record(program)
    assert seen["groupName"] == "spotgpu-prod-train-aws-spot"
    assert seen["fallbackGroupName"] == "spotgpu-prod-train-aws-fallback"
    assert seen["bucketName"] == "spotgpu-prod-train-aws-checkpoints"
    assert seen["checkpointStore"] == "s3://spotgpu-prod-train-aws-checkpoints/train-aws"
    assert seen["queueUrl"].startswith("https://sqs.")
    assert seen["experimentTemplateId"]
    assert seen["roleArn"].startswith("arn:aws:iam")
    assert seen["controllerRoleArn"].startswith("arn:aws:iam")
    assert seen["mode"] == "asg"


# --- launch template --------------------------------------------------------------------------


def test_launch_templates_are_hardened_and_never_request_spot(prod: list[RecordedResource]) -> None:
    profile = one(prod, "aws:iam/instanceProfile:InstanceProfile")
    for template in index(prod)[LT]:
        i = template.inputs
        assert i["metadataOptions"] == {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": 2,
        }
        (bdm,) = i["blockDeviceMappings"]
        assert bdm["deviceName"] == "/dev/sda1"
        assert bdm["ebs"] == {
            "volumeSize": 500,
            "volumeType": "gp3",
            "encrypted": "true",
            "deleteOnTermination": "true",
        }
        assert i["iamInstanceProfile"] == {"name": profile.name}  # the mock echoes the resource name
        assert "instanceMarketOptions" not in i
        assert "instanceType" not in i
        assert i["imageId"].startswith("resolve:ssm:")
        assert i["vpcSecurityGroupIds"] == ["sg-0f1e2d3c4b5a60001"]
        assert i["updateDefaultVersion"] is True
        raw = base64.b64decode(i["userData"])
        assert len(raw) < 16 * 1024
        assert link.AGENT_MARKER.encode() in raw


def test_launch_template_tags_name_pool_store_and_fallback_on_instances_and_volumes(
    prod: list[RecordedResource],
) -> None:
    store = "s3://spotgpu-prod-train-aws-checkpoints/train-aws"
    fallback = "spotgpu-prod-train-aws-fallback"
    for suffix, role in (("spot-template", "spot-pool"), ("fallback-template", "fallback")):
        template = one(prod, LT, suffix)
        _assert_links(template.inputs["tags"], role, store, fallback)
        specs = {s["resourceType"]: s["tags"] for s in template.inputs["tagSpecifications"]}
        assert set(specs) == {"instance", "volume"}
        for tags in specs.values():
            _assert_links(tags, role, store, fallback)


def test_spot_bootstrap_names_its_group_hook_store_and_interval(prod: list[RecordedResource]) -> None:
    agent = user_data_config(one(prod, LT, "spot-template"))
    assert agent["provider"] == "aws"
    assert agent["capacityType"] == "spot"
    assert agent["pool"] == "train-aws"
    assert agent["autoscalingGroup"] == "spotgpu-prod-train-aws-spot"
    assert agent["lifecycleHook"] == "spotgpu-drain"
    assert agent["checkpointStore"] == "s3://spotgpu-prod-train-aws-checkpoints/train-aws"
    assert agent["checkpointIntervalSeconds"] == pool_args("prod").interval.seconds
    assert agent["notice"]["interruption_behavior"] == "terminate"
    fallback = user_data_config(one(prod, LT, "fallback-template"))
    assert fallback["capacityType"] == "on-demand"
    assert fallback["autoscalingGroup"] == "spotgpu-prod-train-aws-fallback"


# --- spot group -------------------------------------------------------------------------------


def test_spot_group_is_all_spot_diversified_rebalancing_with_a_drain_hook(prod: list[RecordedResource]) -> None:
    group = one(prod, ASG, "spot-group")
    template = one(prod, LT, "spot-template")
    i = group.inputs
    assert i["name"] == "spotgpu-prod-train-aws-spot"
    assert (i["minSize"], i["maxSize"], i["desiredCapacity"]) == (0, 8, 2)
    assert i["capacityRebalance"] is True
    assert len(i["vpcZoneIdentifiers"]) == 3
    assert "availabilityZones" not in i
    mip = i["mixedInstancesPolicy"]
    dist = mip["instancesDistribution"]
    assert dist["onDemandBaseCapacity"] == 0
    assert dist["onDemandPercentageAboveBaseCapacity"] == 0
    assert dist["spotAllocationStrategy"] == "price-capacity-optimized"
    spec = mip["launchTemplate"]["launchTemplateSpecification"]
    assert spec == {"launchTemplateId": f"{template.name}-id", "version": "1"}
    overrides = mip["launchTemplate"]["overrides"]
    assert [o["instanceType"] for o in overrides] == ["g5.12xlarge", "g6.12xlarge", "g6e.12xlarge", "g5.24xlarge"]
    assert all(o["weightedCapacity"] == "1" for o in overrides)
    (hook,) = i["initialLifecycleHooks"]
    assert hook["lifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
    assert hook["defaultResult"] == "CONTINUE"
    assert hook["name"] == "spotgpu-drain"
    assert 120 + 15 <= hook["heartbeatTimeout"] <= 7200
    assert i["instanceMaintenancePolicy"] == {"minHealthyPercentage": 100, "maxHealthyPercentage": 200}
    assert i["waitForCapacityTimeout"] == "0"
    assert all(t["propagateAtLaunch"] is True for t in i["tags"])
    _assert_links(
        tags_of(group),
        "spot-pool",
        "s3://spotgpu-prod-train-aws-checkpoints/train-aws",
        "spotgpu-prod-train-aws-fallback",
    )


def test_ranked_types_use_capacity_optimized_prioritized() -> None:
    resources = record_pool(pool_args("prod", rankedTypes=True))
    dist = one(resources, ASG, "spot-group").inputs["mixedInstancesPolicy"]["instancesDistribution"]
    assert dist["spotAllocationStrategy"] == "capacity-optimized-prioritized"


def test_heartbeat_grows_with_a_long_checkpoint_write() -> None:
    args = pool_args("prod")
    slow = args.workload.model_copy(update={"checkpoint_write_seconds": 900.0})
    import dataclasses

    resources = record_pool(dataclasses.replace(args, workload=slow))
    (hook,) = one(resources, ASG, "spot-group").inputs["initialLifecycleHooks"]
    assert hook["heartbeatTimeout"] == 915


# --- fleet mode -------------------------------------------------------------------------------


def test_fleet_mode_maintains_spot_with_one_override_per_type_and_subnet(fleet: list[RecordedResource]) -> None:
    assert [g.name for g in index(fleet)[ASG]] == ["train-aws-fallback-group"]
    f = one(fleet, FLEET).inputs
    assert f["type"] == "maintain"
    assert f["targetCapacitySpecification"] == {
        "defaultTargetCapacityType": "spot",
        "totalTargetCapacity": 2,
        "spotTargetCapacity": 2,
        "onDemandTargetCapacity": 0,
    }
    spot = f["spotOptions"]
    assert spot["allocationStrategy"] == "price-capacity-optimized"
    rebalance = spot["maintenanceStrategies"]["capacityRebalance"]
    assert rebalance["replacementStrategy"] == "launch-before-terminate"
    assert 120 <= rebalance["terminationDelay"] <= 7200
    (config,) = f["launchTemplateConfigs"]
    overrides = config["overrides"]
    assert len(overrides) == 4 * 3
    assert {(o["instanceType"], o["subnetId"]) for o in overrides} == {
        (t, s)
        for t in ("g5.12xlarge", "g6.12xlarge", "g6e.12xlarge", "g5.24xlarge")
        for s in ("subnet-0f1e2d3c4b5a60001", "subnet-0f1e2d3c4b5a60002", "subnet-0f1e2d3c4b5a60003")
    }
    assert sorted({o["priority"] for o in overrides}) == [1, 2, 3, 4]
    assert f["terminateInstances"] is True
    _assert_links(
        f["tags"], "spot-pool", "s3://spotgpu-prod-train-aws-checkpoints/train-aws", "spotgpu-prod-train-aws-fallback"
    )
    assert "instanceMarketOptions" not in one(fleet, LT, "spot-template").inputs


def test_fleet_mode_events_and_controller_follow_the_fleet(fleet: list[RecordedResource]) -> None:
    fleet_arn = "arn:aws:ec2:us-east-1:123456789012:train-aws-spot-fleet"  # the mock's ARN
    rule = one(fleet, RULE, "events-fleet")
    assert json.loads(rule.inputs["eventPattern"])["resources"] == [fleet_arn]
    statements = {s["Sid"]: s for s in policy_of(one(fleet, ROLE_POLICY, "controller-policy"))["Statement"]}
    assert statements["ResizeFleet"]["Resource"] == fleet_arn
    assert statements["ResizeGroups"]["Resource"] == [
        "arn:aws:autoscaling:us-east-1:123456789012:train-aws-fallback-group"
    ]
    node = {s["Sid"]: s for s in policy_of(one(fleet, ROLE_POLICY, "node-policy"))["Statement"]}
    assert [r.rsplit("/", 1)[1] for r in node["DrainHook"]["Resource"]] == ["spotgpu-prod-train-aws-fallback"]


# --- checkpoint bucket ------------------------------------------------------------------------


def test_checkpoint_bucket_is_versioned_private_encrypted_tls_only_with_bounded_versions(
    prod: list[RecordedResource],
) -> None:
    bucket = one(prod, BUCKET)
    assert bucket.inputs["bucket"] == "spotgpu-prod-train-aws-checkpoints"
    assert "objectLockEnabled" not in bucket.inputs
    assert tags_of(bucket)[link.ROLE] == "checkpoint-store"
    assert tags_of(bucket)[link.POOL] == "train-aws"
    name = bucket.inputs["bucket"]
    versioning = one(prod, "aws:s3/bucketVersioning:BucketVersioning").inputs
    assert versioning == {"bucket": name, "versioningConfiguration": {"status": "Enabled"}}
    sse = one(prod, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration").inputs
    assert sse["rules"] == [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]
    pab = one(prod, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(
        pab[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    own = one(prod, "aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs
    assert own["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
    policy = policy_of(one(prod, "aws:s3/bucketPolicy:BucketPolicy"))["Statement"][0]
    assert policy["Effect"] == "Deny"
    assert policy["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rules = {
        r["id"]: r
        for r in one(prod, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"]
    }
    assert rules["abort-incomplete-multipart"]["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 1}
    assert rules["expire-noncurrent-versions"]["noncurrentVersionExpiration"] == {
        "noncurrentDays": 7,
        "newerNoncurrentVersions": 5,
    }
    assert all(r["status"] == "Enabled" for r in rules.values())


def test_bucket_policy_waits_for_the_public_access_block(prod: list[RecordedResource]) -> None:
    pab = one(prod, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert pab.urn in one(prod, "aws:s3/bucketPolicy:BucketPolicy").dependencies
    versioning = one(prod, "aws:s3/bucketVersioning:BucketVersioning")
    assert versioning.urn in one(prod, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").dependencies


def test_kms_key_switches_to_sse_kms_with_bucket_key_and_grants_data_keys() -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/0000-1111"
    resources = record_pool(pool_args("dev", kmsKeyArn=key))
    sse = one(
        resources, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    ).inputs
    assert sse["rules"] == [
        {
            "applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": key},
            "bucketKeyEnabled": True,
        }
    ]
    node = {s["Sid"]: s for s in policy_of(one(resources, ROLE_POLICY, "node-policy"))["Statement"]}
    assert node["CheckpointsKms"]["Resource"] == key
    rules = {
        r["id"]: r
        for r in one(resources, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"]
    }
    assert rules["expire-noncurrent-versions"]["noncurrentVersionExpiration"] == {
        "noncurrentDays": 3,
        "newerNoncurrentVersions": 3,
    }
    assert one(resources, BUCKET).inputs["forceDestroy"] is True


def test_object_lock_is_opt_in_and_sets_default_retention() -> None:
    from spotgpu_pulumi.aws import CheckpointBucket, CheckpointBucketArgs, ObjectLock

    resources = record(
        lambda: CheckpointBucket(
            "locked",
            CheckpointBucketArgs("b-locked", "p", 3, 7, object_lock=ObjectLock(days=2)),
        )
    )
    assert one(resources, BUCKET).inputs["objectLockEnabled"] is True
    lock = one(resources, "aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration").inputs
    assert lock["rule"] == {"defaultRetention": {"mode": "GOVERNANCE", "days": 2}}


def test_node_role_reaches_only_its_prefix_and_hooks(prod: list[RecordedResource]) -> None:
    bucket_arn = "arn:aws:s3:us-east-1:123456789012:train-aws-checkpoints-bucket"  # the mock's ARN
    node = {s["Sid"]: s for s in policy_of(one(prod, ROLE_POLICY, "node-policy"))["Statement"]}
    assert node["CheckpointsObjects"]["Resource"] == f"{bucket_arn}/train-aws/*"
    assert node["CheckpointsList"]["Condition"]["StringLike"]["s3:prefix"] == ["train-aws", "train-aws/*"]
    hooks = sorted(r.rsplit("/", 1)[1] for r in node["DrainHook"]["Resource"])
    assert hooks == ["spotgpu-prod-train-aws-fallback", "spotgpu-prod-train-aws-spot"]
    role = one(prod, ROLE, "node-role")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    # Belongs to the pool, but is not itself a spot pool the policy pack should judge.
    assert tags_of(role)[link.POOL] == "train-aws"
    assert link.ROLE not in tags_of(role)


# --- fallback ---------------------------------------------------------------------------------


def test_fallback_group_is_on_demand_empty_capped_and_linked(prod: list[RecordedResource]) -> None:
    group = one(prod, ASG, "fallback-group")
    i = group.inputs
    assert i["name"] == "spotgpu-prod-train-aws-fallback"
    assert (i["minSize"], i["desiredCapacity"], i["maxSize"]) == (0, 0, 4)  # capacity.fallbackMax
    dist = i["mixedInstancesPolicy"]["instancesDistribution"]
    assert dist["onDemandBaseCapacity"] == 0
    assert dist["onDemandPercentageAboveBaseCapacity"] == 100
    assert "capacityRebalance" not in i
    assert i["vpcZoneIdentifiers"] == one(prod, ASG, "spot-group").inputs["vpcZoneIdentifiers"]
    template = one(prod, LT, "fallback-template")
    assert (
        i["mixedInstancesPolicy"]["launchTemplate"]["launchTemplateSpecification"]["launchTemplateId"]
        == f"{template.name}-id"
    )
    tags = tags_of(group)
    assert tags[link.ROLE] == "fallback"
    assert link.decode_ladder(tags[link.LADDER])[2].kind.value == "on_demand"
    assert "desiredCapacity" in list(group.request.ignoreChanges)
    # The spot side names this group as its fallback.
    assert tags_of(one(prod, ASG, "spot-group"))[link.FALLBACK_GROUP] == i["name"]


def test_every_pool_has_its_bucket_and_fallback_linked(prod: list[RecordedResource]) -> None:
    """A pool without a checkpoint store or a fallback is impossible: both always exist and are named."""
    bucket = one(prod, BUCKET).inputs["bucket"]
    fallback = one(prod, ASG, "fallback-group").inputs["name"]
    for resource in [*index(prod)[LT], one(prod, ASG, "spot-group")]:
        tags = tags_of(resource)
        assert tags[link.CHECKPOINT_STORE].startswith(f"s3://{bucket}/")
        assert tags[link.FALLBACK_GROUP] == fallback


def test_controller_role_is_scoped_to_the_pools_groups_queue_and_prefix(prod: list[RecordedResource]) -> None:
    arn = "arn:aws:{service}:us-east-1:123456789012:{name}".format  # the mock's ARNs
    statements = {s["Sid"]: s for s in policy_of(one(prod, ROLE_POLICY, "controller-policy"))["Statement"]}
    assert statements["ResizeGroups"]["Action"] == [
        "autoscaling:SetDesiredCapacity",
        "autoscaling:UpdateAutoScalingGroup",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
    ]
    assert statements["ResizeGroups"]["Resource"] == [
        arn(service="autoscaling", name="train-aws-fallback-group"),
        arn(service="autoscaling", name="train-aws-spot-group"),
    ]
    assert statements["Interruptions"]["Resource"] == arn(service="sqs", name="train-aws-events-queue")
    assert (
        statements["StateObjects"]["Resource"]
        == arn(service="s3", name="train-aws-checkpoints-bucket") + "/train-aws/_controller/*"
    )
    trust = json.loads(one(prod, ROLE, "controller").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert tags_of(one(prod, ROLE, "controller"))[link.ROLE] == "controller"


def test_controller_principal_can_be_configured() -> None:
    principal = "arn:aws:iam::123456789012:role/spotgpu-controller-runtime"
    resources = record_pool(pool_args("dev", controllerPrincipalArn=principal))
    trust = json.loads(one(resources, ROLE, "controller").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"AWS": principal}


# --- events -----------------------------------------------------------------------------------


def test_events_reach_one_encrypted_queue_only_from_the_pools_rules(prod: list[RecordedResource]) -> None:
    queue = one(prod, "aws:sqs/queue:Queue")
    assert queue.inputs["sqsManagedSseEnabled"] is True
    assert queue.inputs["name"] == "spotgpu-prod-train-aws-events"
    # The settings the controller assumes (spotgpu.contract.sources.AWS_QUEUE) are the ones the queue gets.
    assert queue.inputs["visibilityTimeoutSeconds"] == AWS_QUEUE.visibility_timeout_seconds
    assert queue.inputs["receiveWaitTimeSeconds"] == AWS_QUEUE.receive_wait_seconds
    rules = {r.name.removeprefix("train-aws-events-"): r for r in index(prod)[RULE]}
    assert set(rules) == {"spot-signals", "state-changes", "launches", "terminations", "scheduled-changes"}
    patterns = {k: json.loads(r.inputs["eventPattern"]) for k, r in rules.items()}
    assert "EC2 Spot Instance Interruption Warning" in patterns["spot-signals"]["detail-type"]
    assert "EC2 Instance Rebalance Recommendation" in patterns["spot-signals"]["detail-type"]
    groups = ["spotgpu-prod-train-aws-fallback", "spotgpu-prod-train-aws-spot"]
    assert patterns["launches"]["detail"]["AutoScalingGroupName"] == groups
    assert "EC2 Instance Launch Unsuccessful" in patterns["launches"]["detail-type"]
    assert patterns["terminations"]["detail"]["AutoScalingGroupName"] == groups
    queue_arn = "arn:aws:sqs:us-east-1:123456789012:train-aws-events-queue"
    targets = index(prod)[TARGET]
    assert sorted(t.inputs["rule"] for t in targets) == sorted(r.name for r in rules.values())
    assert all(t.inputs["arn"] == queue_arn and "roleArn" not in t.inputs for t in targets)
    statement = policy_of(one(prod, "aws:sqs/queuePolicy:QueuePolicy"))["Statement"][0]
    assert statement["Resource"] == queue_arn
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == sorted(
        f"arn:aws:cloudwatch:us-east-1:123456789012:{r.name}" for r in rules.values()
    )


# --- drill ------------------------------------------------------------------------------------


def test_drill_interrupts_one_running_spot_node_of_this_pool(prod: list[RecordedResource]) -> None:
    template = one(prod, FIS).inputs
    (action,) = template["actions"]
    assert action["actionId"] == "aws:ec2:send-spot-instance-interruptions"
    assert action["parameters"] == [{"key": "durationBeforeInterruption", "value": "PT2M"}]
    (target,) = template["targets"]
    assert action["target"] == {"key": "SpotInstances", "value": target["name"]}
    assert target["resourceType"] == "aws:ec2:spot-instance"
    assert target["selectionMode"] == "COUNT(1)"
    assert target["resourceTags"] == [{"key": "spotgpu-pool", "value": "train-aws"}]
    assert template["stopConditions"] == [{"source": "none"}]
    assert template["tags"]["spotgpu-pool"] == "train-aws"  # how `spotgpu drill aws` finds it
    role = one(prod, ROLE, "drill-role")
    assert template["roleArn"] == f"arn:aws:iam:us-east-1:123456789012:{role.name}"
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "fis.amazonaws.com"}
    actions = {s["Action"] for s in policy_of(one(prod, ROLE_POLICY, "drill-policy"))["Statement"]}
    assert actions == {"ec2:SendSpotInstanceInterruptions", "ec2:DescribeInstances"}


def test_drill_stop_alarm_and_count_come_from_the_spec() -> None:
    alarm = "arn:aws:cloudwatch:us-east-1:123456789012:alarm:train-loss-diverged"
    resources = record_pool(pool_args("dev", drill={"instanceCount": 2, "stopAlarmArn": alarm}))
    template = one(resources, FIS).inputs
    assert template["stopConditions"] == [{"source": "aws:cloudwatch:alarm", "value": alarm}]
    assert template["targets"][0]["selectionMode"] == "COUNT(2)"


# --- errors and stacks ------------------------------------------------------------------------


def test_single_type_stack_fails_preview_with_the_fix(tmp_path: Path) -> None:
    raw = stack_raw("dev")
    aws_pool = next(p for p in raw["pools"] if p["cloud"] == "aws")
    aws_pool["instanceTypes"] = ["g5.xlarge"]
    engine = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    engine["config"]["spotgpu:pools"] = [aws_pool]
    (tmp_path / "Pulumi.yaml").write_text(
        yaml.safe_dump({"name": "spotgpu", "runtime": "python", "main": str(REPO / "stacks"), "stackConfigDir": "."})
    )
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump(engine))
    with pytest.raises(ProgramError, match=r"1 GPU type\(s\).*optOut.singleType"):
        run_program(tmp_path, "bad")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_preview_shows_the_whole_aws_tree(stack: str) -> None:
    recording = run_program(REPO, stack)
    aws = [r for r in recording.resources if r.cloud == "aws"]
    assert {r.type for r in aws if not r.custom} == COMPONENTS
    types = {r.type for r in aws if r.custom}
    assert {LT, ASG, BUCKET, RULE, FIS, "aws:sqs/queue:Queue"} <= types
    assert plan_pool(pool_args(stack)).names.spot_group in {r.inputs.get("name") for r in aws}
