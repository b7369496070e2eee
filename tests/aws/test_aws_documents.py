"""Pure IAM / resource-policy documents and EventBridge patterns for AWS pools."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spotgpu_pulumi.aws import documents as docs
from spotgpu_pulumi.aws.patterns import event_patterns, fleet_pattern

BUCKET = "arn:aws:s3:::spotgpu-prod-train-checkpoints"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:spotgpu-prod-train-events"
FALLBACK = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:uuid-1:autoScalingGroupName/f"
SPOT = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:uuid-2:autoScalingGroupName/s"
FLEET = "arn:aws:ec2:us-east-1:123456789012:fleet/fleet-0123"
KMS = "arn:aws:kms:us-east-1:123456789012:key/abcd"


def _by_sid(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    json.dumps(document)  # must serialise as-is
    assert document["Version"] == "2012-10-17"
    return {s["Sid"]: s for s in document["Statement"]}


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def test_prefix_policy_reaches_only_the_pools_prefix() -> None:
    s = _by_sid(docs.prefix_policy(BUCKET, "train"))
    assert set(s) == {"CheckpointsList", "CheckpointsObjects"}
    assert s["CheckpointsList"]["Resource"] == BUCKET
    assert s["CheckpointsList"]["Condition"] == {"StringLike": {"s3:prefix": ["train", "train/*"]}}
    # trailing slash: pool "train" cannot reach "train-2/..."
    assert s["CheckpointsObjects"]["Resource"] == f"{BUCKET}/train/*"
    assert all(s["Effect"] == "Allow" for s in s.values())


def test_prefix_policy_lets_nodes_retire_generations_but_never_erase_versions() -> None:
    actions = _actions(_by_sid(docs.prefix_policy(BUCKET, "train"))["CheckpointsObjects"])
    assert {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"} <= actions
    assert "s3:DeleteObjectVersion" not in actions
    assert not any("*" in a for a in actions)


def test_prefix_policy_adds_only_data_key_calls_for_kms() -> None:
    s = _by_sid(docs.prefix_policy(BUCKET, "/teams/llm/", KMS))
    assert s["CheckpointsObjects"]["Resource"] == f"{BUCKET}/teams/llm/*"
    assert s["CheckpointsKms"] == {
        "Sid": "CheckpointsKms",
        "Effect": "Allow",
        "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
        "Resource": KMS,
    }


def test_empty_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="prefix must not be empty"):
        docs.prefix_policy(BUCKET, "/")


def test_node_policy_completes_only_its_own_groups_hooks() -> None:
    s = _by_sid(
        docs.node_policy(BUCKET, "train", "aws-us-gov", ["spotgpu-prod-train-spot", "spotgpu-prod-train-fallback"])
    )
    hook = s["DrainHook"]
    assert _actions(hook) == {"autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"}
    assert hook["Resource"] == [
        "arn:aws-us-gov:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/spotgpu-prod-train-spot",
        "arn:aws-us-gov:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/spotgpu-prod-train-fallback",
    ]


def test_controller_policy_is_exactly_least_privilege_in_asg_mode() -> None:
    s = _by_sid(
        docs.controller_policy(
            fallback_group_arn=FALLBACK,
            spot_group_arn=SPOT,
            fleet_arn=None,
            queue_arn=QUEUE,
            bucket_arn=BUCKET,
            prefix="train",
        )
    )
    assert set(s) == {
        "ResizeGroups",
        "DescribeGroups",
        "DescribeInstances",
        "Interruptions",
        "StateList",
        "StateObjects",
    }
    assert _actions(s["ResizeGroups"]) == {
        "autoscaling:SetDesiredCapacity",
        "autoscaling:UpdateAutoScalingGroup",
        "autoscaling:TerminateInstanceInAutoScalingGroup",  # remove one drained VM, never a victim
    }
    assert s["ResizeGroups"]["Resource"] == [FALLBACK, SPOT]
    assert s["DescribeGroups"]["Action"] == "autoscaling:Describe*"
    assert s["DescribeInstances"]["Action"] == "ec2:DescribeInstances"
    assert _actions(s["Interruptions"]) == {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    assert s["Interruptions"]["Resource"] == QUEUE
    assert _actions(s["StateObjects"]) == {"s3:GetObject", "s3:PutObject"}
    assert s["StateObjects"]["Resource"] == f"{BUCKET}/train/*"
    # Only Describe* may use "*": every write is scoped to a named resource.
    for sid, statement in s.items():
        if statement["Resource"] == "*":
            assert all(a.split(":")[1].startswith("Describe") for a in _actions(statement)), sid


def test_controller_policy_in_fleet_mode_resizes_the_fleet_not_a_spot_group() -> None:
    s = _by_sid(
        docs.controller_policy(
            fallback_group_arn=FALLBACK,
            spot_group_arn=None,
            fleet_arn=FLEET,
            queue_arn=QUEUE,
            bucket_arn=BUCKET,
            prefix="train",
        )
    )
    assert s["ResizeGroups"]["Resource"] == [FALLBACK]
    assert s["ResizeFleet"] == {"Sid": "ResizeFleet", "Effect": "Allow", "Action": "ec2:ModifyFleet", "Resource": FLEET}


def test_controller_policy_needs_exactly_one_spot_capacity() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        docs.controller_policy(
            fallback_group_arn=FALLBACK,
            spot_group_arn=SPOT,
            fleet_arn=FLEET,
            queue_arn=QUEUE,
            bucket_arn=BUCKET,
            prefix="t",
        )


def test_bucket_policy_denies_plain_http_for_bucket_and_objects() -> None:
    s = _by_sid(docs.deny_insecure_transport(BUCKET))["DenyInsecureTransport"]
    assert s["Effect"] == "Deny"
    assert s["Principal"] == "*"
    assert s["Resource"] == [BUCKET, f"{BUCKET}/*"]
    assert s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_queue_policy_admits_only_the_pools_rules() -> None:
    rules = ["arn:aws:events:us-east-1:1:rule/b", "arn:aws:events:us-east-1:1:rule/a"]
    s = _by_sid(docs.queue_policy(QUEUE, rules))["EventBridgeRules"]
    assert s["Principal"] == {"Service": "events.amazonaws.com"}
    assert s["Action"] == "sqs:SendMessage"
    assert s["Resource"] == QUEUE
    assert s["Condition"] == {"ArnEquals": {"aws:SourceArn": sorted(rules)}}
    with pytest.raises(ValueError, match="at least one rule"):
        docs.queue_policy(QUEUE, [])


def test_fis_policy_interrupts_only_instances_tagged_with_the_pool() -> None:
    s = _by_sid(docs.fis_policy("aws", "train"))
    assert s["InterruptPoolSpot"]["Action"] == "ec2:SendSpotInstanceInterruptions"
    assert s["InterruptPoolSpot"]["Resource"] == "arn:aws:ec2:*:*:instance/*"
    assert s["InterruptPoolSpot"]["Condition"] == {"StringEquals": {"aws:ResourceTag/spotgpu-pool": "train"}}
    assert s["DescribeInstances"]["Action"] == "ec2:DescribeInstances"


def test_trust_policies() -> None:
    assert docs.assume_role_policy(service="fis.amazonaws.com")["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "fis.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ]
    root = "arn:aws:iam::123456789012:root"
    assert docs.assume_role_policy(principal_arn=root)["Statement"][0]["Principal"] == {"AWS": root}
    with pytest.raises(ValueError):
        docs.assume_role_policy()


def test_event_patterns_filter_group_events_by_this_pools_groups() -> None:
    patterns = event_patterns(["spotgpu-prod-train-spot", "spotgpu-prod-train-fallback"])
    assert set(patterns) == {"spot-signals", "state-changes", "launches", "terminations", "scheduled-changes"}
    assert patterns["spot-signals"] == {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation"],
    }
    groups = ["spotgpu-prod-train-fallback", "spotgpu-prod-train-spot"]
    assert patterns["launches"]["detail"] == {"AutoScalingGroupName": groups}
    assert "EC2 Instance Launch Unsuccessful" in patterns["launches"]["detail-type"]
    assert patterns["terminations"] == {
        "source": ["aws.autoscaling"],
        "detail-type": ["EC2 Instance-terminate Lifecycle Action"],
        "detail": {"AutoScalingGroupName": groups},
    }
    assert patterns["state-changes"]["detail"]["state"] == ["stopping", "stopped", "shutting-down", "terminated"]
    assert patterns["scheduled-changes"] == {"source": ["aws.health"], "detail-type": ["AWS Health Event"],
                                             "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]}}  # fmt: skip
    for pattern in patterns.values():
        assert len(json.dumps(pattern)) < 2048  # EventBridge's default pattern size limit


def test_fleet_pattern_matches_only_that_fleet() -> None:
    pattern = fleet_pattern(FLEET)
    assert pattern["source"] == ["aws.ec2fleet"]
    assert pattern["resources"] == [FLEET]
    assert "EC2 Fleet Error" in pattern["detail-type"]
    with pytest.raises(ValueError):
        event_patterns([])
