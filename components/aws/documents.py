"""Pure IAM and resource-policy documents for an AWS spot pool.

Each function returns a plain policy document (a dict ready for ``json.dumps``)
from plain strings, so least privilege is reviewed and tested here rather than
inside a component. Components call them from ``Output.apply`` only to fill in
ARNs known after creation; no resource is ever created inside an apply.
"""

from __future__ import annotations

from typing import Any

from spotgpu.contract import tags as link

Document = dict[str, Any]

#: Object actions the node agent's checkpoint library needs. DeleteObject lets it
#: retire old generations; DeleteObjectVersion is deliberately absent, so a buggy or
#: compromised node cannot erase history the bucket's versioning still keeps.
NODE_OBJECT_ACTIONS = (
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
#: The controller keeps one small state record under the pool's prefix: read and write, no delete.
CONTROLLER_OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject")
LIFECYCLE_ACTIONS = ("autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat")
#: Resize (UpdateAutoScalingGroup only raises MaxSize with the desired count) and remove one
#: drained instance by id, decrementing the desired count, so the group never picks a victim.
GROUP_WRITE_ACTIONS = (
    "autoscaling:SetDesiredCapacity",
    "autoscaling:UpdateAutoScalingGroup",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
)
QUEUE_CONSUMER_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
FIS_SPOT_ACTION = "ec2:SendSpotInstanceInterruptions"


def document(*statements: Document) -> Document:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def assume_role_policy(service: str | None = None, principal_arn: str | None = None) -> Document:
    """Trust policy for one AWS service (``ec2.amazonaws.com``) or one IAM principal ARN."""
    if (service is None) == (principal_arn is None):
        raise ValueError("give exactly one of service or principal_arn")
    principal = {"Service": service} if service else {"AWS": principal_arn}
    return document({"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"})


def prefix_statements(
    bucket_arn: str,
    prefix: str,
    object_actions: tuple[str, ...],
    kms_key_arn: str | None = None,
    sid: str = "Checkpoints",
) -> list[Document]:
    """Object access to ``<bucket>/<prefix>/*`` only, listing limited to that prefix.

    The prefix is matched with a trailing slash, so pool ``train`` cannot reach
    ``train-2/``. With a KMS key, the role gets only the data-key calls SSE-KMS needs.
    """
    clean = prefix.strip("/")
    if not clean:
        raise ValueError("prefix must not be empty; a pool's role must never reach the whole bucket")
    statements: list[Document] = [
        {
            "Sid": f"{sid}List",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket_arn,
            "Condition": {"StringLike": {"s3:prefix": [clean, f"{clean}/*"]}},
        },
        {
            "Sid": f"{sid}Objects",
            "Effect": "Allow",
            "Action": list(object_actions),
            "Resource": f"{bucket_arn}/{clean}/*",
        },
    ]
    if kms_key_arn:
        statements.append(
            {
                "Sid": f"{sid}Kms",
                "Effect": "Allow",
                "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                "Resource": kms_key_arn,
            }
        )
    return statements


def prefix_policy(bucket_arn: str, prefix: str, kms_key_arn: str | None = None) -> Document:
    """What a pool's nodes may do in the checkpoint bucket: read/write their own prefix."""
    return document(*prefix_statements(bucket_arn, prefix, NODE_OBJECT_ACTIONS, kms_key_arn))


def group_arn_pattern(partition: str, group_name: str) -> str:
    """An Auto Scaling group ARN by name (the real ARN embeds a UUID, hence the wildcard)."""
    return f"arn:{partition}:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/{group_name}"


def node_policy(
    bucket_arn: str, prefix: str, partition: str, group_names: list[str], kms_key_arn: str | None = None
) -> Document:
    """The instance role: its checkpoint prefix, plus completing its own groups' drain hooks.

    Groups are named rather than referenced by their ARN outputs so the policy
    exists before the first instance boots (the launch template needs the role
    first, and the groups need the launch template).
    """
    statements = prefix_statements(bucket_arn, prefix, NODE_OBJECT_ACTIONS, kms_key_arn)
    if group_names:
        statements.append(
            {
                "Sid": "DrainHook",
                "Effect": "Allow",
                "Action": list(LIFECYCLE_ACTIONS),
                "Resource": [group_arn_pattern(partition, g) for g in group_names],
            }
        )
    return document(*statements)


def controller_policy(
    *,
    fallback_group_arn: str,
    spot_group_arn: str | None,
    fleet_arn: str | None,
    queue_arn: str,
    bucket_arn: str,
    prefix: str,
    kms_key_arn: str | None = None,
) -> Document:
    """Least privilege for the fallback controller.

    It resizes exactly the pool's two groups and removes drained instances from
    them (in fleet mode: the fallback group and ``ec2:ModifyFleet`` on the one
    fleet), reads the pool's interruption
    queue, describes groups and instances (these calls have no resource-level
    scoping), and keeps its state record under the pool's prefix.
    """
    if (spot_group_arn is None) == (fleet_arn is None):
        raise ValueError("give exactly one of spot_group_arn (asg mode) or fleet_arn (fleet mode)")
    groups = [fallback_group_arn] + ([spot_group_arn] if spot_group_arn else [])
    statements: list[Document] = [
        {"Sid": "ResizeGroups", "Effect": "Allow", "Action": list(GROUP_WRITE_ACTIONS), "Resource": groups},
        {"Sid": "DescribeGroups", "Effect": "Allow", "Action": "autoscaling:Describe*", "Resource": "*"},
        {"Sid": "DescribeInstances", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
        {"Sid": "Interruptions", "Effect": "Allow", "Action": list(QUEUE_CONSUMER_ACTIONS), "Resource": queue_arn},
    ]
    if fleet_arn:
        statements.append({"Sid": "ResizeFleet", "Effect": "Allow", "Action": "ec2:ModifyFleet", "Resource": fleet_arn})
        statements.append({"Sid": "DescribeFleet", "Effect": "Allow", "Action": "ec2:DescribeFleets", "Resource": "*"})
    statements += prefix_statements(bucket_arn, prefix, CONTROLLER_OBJECT_ACTIONS, kms_key_arn, sid="State")
    return document(*statements)


def deny_insecure_transport(bucket_arn: str) -> Document:
    """Bucket policy: refuse every request not made over TLS."""
    return document(
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    )


def queue_policy(queue_arn: str, rule_arns: list[str]) -> Document:
    """Let EventBridge deliver to the queue only from this pool's own rules."""
    if not rule_arns:
        raise ValueError("a queue policy needs at least one rule ARN")
    return document(
        {
            "Sid": "EventBridgeRules",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": sorted(rule_arns)}},
        }
    )


def fis_policy(partition: str, pool: str) -> Document:
    """The drill role: interrupt only Spot instances tagged with this pool."""
    return document(
        {
            "Sid": "InterruptPoolSpot",
            "Effect": "Allow",
            "Action": FIS_SPOT_ACTION,
            "Resource": f"arn:{partition}:ec2:*:*:instance/*",
            "Condition": {"StringEquals": {f"aws:ResourceTag/{link.POOL}": pool}},
        },
        {"Sid": "DescribeInstances", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
    )
