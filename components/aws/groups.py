"""Settings both Auto Scaling groups of a pool share (spot and on-demand fallback)."""

from __future__ import annotations

import json

import pulumi_aws as aws

from spotgpu_pulumi.aws.launch import template_version
from spotgpu_pulumi.aws.plan import DRAIN_HOOK, AsgOverride, MaintenancePolicy

#: Don't block `pulumi up` until GPUs are running: Spot GPU capacity can take
#: hours to appear, and the fallback group starts at 0 anyway.
WAIT_FOR_CAPACITY = "0"
#: GPU AMIs load drivers and pull the agent before the node is useful.
HEALTH_CHECK_GRACE_SECONDS = 600


def group_tags(tags: dict[str, str]) -> list[aws.autoscaling.GroupTagArgs]:
    """Group tags, propagated to every instance it launches (sorted: stable diffs)."""
    return [aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=True) for k, v in sorted(tags.items())]


def drain_hook(heartbeat_seconds: int, pool: str) -> aws.autoscaling.GroupInitialLifecycleHookArgs:
    """Termination hook: the group waits for the agent's drain (final checkpoint) before terminating.

    CONTINUE on timeout: a node that cannot finish draining must still go, the
    periodic checkpoints already protect the work.
    """
    return aws.autoscaling.GroupInitialLifecycleHookArgs(
        name=DRAIN_HOOK,
        lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
        heartbeat_timeout=heartbeat_seconds,
        default_result="CONTINUE",
        notification_metadata=json.dumps({"pool": pool}),
    )


def maintenance_policy(policy: MaintenancePolicy) -> aws.autoscaling.GroupInstanceMaintenancePolicyArgs:
    return aws.autoscaling.GroupInstanceMaintenancePolicyArgs(
        min_healthy_percentage=policy.min_healthy_percentage,
        max_healthy_percentage=policy.max_healthy_percentage,
    )


def mixed_launch_template(
    template: aws.ec2.LaunchTemplate, overrides: list[AsgOverride]
) -> aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs:
    """The template and per-type overrides that spot and fallback groups share."""
    return aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs(
        launch_template_specification=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgs(
            launch_template_id=template.id, version=template_version(template)
        ),
        overrides=[
            aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateOverrideArgs(
                instance_type=o.instance_type, weighted_capacity=o.weighted_capacity
            )
            for o in overrides
        ],
    )
