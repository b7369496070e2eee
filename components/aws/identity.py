"""``spotgpu:aws:NodeIdentity``: the IAM role and instance profile every pool node runs as.

Spot and fallback nodes share one identity: they run the same agent against the
same checkpoint prefix. The role may touch only that prefix and complete the
drain hooks of its own two groups.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from spotgpu.models.refs import Ref
from spotgpu_pulumi.aws.documents import assume_role_policy, node_policy
from spotgpu_pulumi.inputs import as_output

TOKEN = "spotgpu:aws:NodeIdentity"


@dataclass(frozen=True)
class NodeIdentityArgs:
    bucket_arn: pulumi.Output[str]
    prefix: str
    partition: pulumi.Output[str]
    group_names: list[str]
    kms_key_arn: Ref | None = None
    tags: dict[str, str] = field(default_factory=dict)


class NodeIdentity(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]
    """ARN of the node role."""
    profile_name: pulumi.Output[str]
    """Instance profile name, for the launch templates."""

    def __init__(self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-role",
            description="spotgpu pool node: own checkpoint prefix, own drain hooks",
            assume_role_policy=json.dumps(assume_role_policy(service="ec2.amazonaws.com")),
            tags=args.tags,
            opts=child,
        )
        policy = pulumi.Output.all(args.bucket_arn, args.partition, as_output(args.kms_key_arn)).apply(
            lambda v: json.dumps(node_policy(v[0], args.prefix, v[1], args.group_names, v[2] or None))
        )
        aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=policy, opts=child)
        profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=args.tags, opts=child)
        self.role_arn = role.arn
        self.profile_name = profile.name
        self.register_outputs({"roleArn": self.role_arn, "profileName": self.profile_name})
