"""``spotgpu:aws:OnDemandFallbackGroup``: the on-demand rung of the pool's ladder, and its controller role.

An Auto Scaling group from the same image, role and agent as the spot nodes
(its bootstrap says ``capacityType: on-demand``), 100 % on-demand, empty by
default (min = desired = 0) and capped at ``capacity.fallbackMax``. The fallback
controller grows it when the ladder reaches ``on_demand`` and shrinks it when
Spot returns; ``desiredCapacity`` is therefore ignored on later updates, so a
``pulumi up`` in the middle of an incident does not scale the fallback to 0.

The controller role is least privilege: it resizes only this pool's two groups,
reads only this pool's interruption queue, and writes only its state prefix
(``<prefix>/_controller``: record, drain requests, agent commits).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from spotgpu.bootstrap import CONTROL_STORE_SUFFIX
from spotgpu_pulumi.aws.controller_job import controller_trust_policy
from spotgpu_pulumi.aws.documents import controller_policy
from spotgpu_pulumi.aws.groups import (
    HEALTH_CHECK_GRACE_SECONDS,
    WAIT_FOR_CAPACITY,
    drain_hook,
    group_tags,
    maintenance_policy,
    mixed_launch_template,
)
from spotgpu_pulumi.aws.launch import node_launch_template
from spotgpu_pulumi.aws.plan import AwsPoolPlan, MaintenancePolicy
from spotgpu_pulumi.inputs import as_input, as_output

TOKEN = "spotgpu:aws:OnDemandFallbackGroup"


@dataclass(frozen=True)
class FallbackArgs:
    plan: AwsPoolPlan
    profile_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    queue_arn: pulumi.Output[str]
    spot_group_arn: pulumi.Output[str] | None
    fleet_arn: pulumi.Output[str] | None
    controller_principal: pulumi.Output[str]
    """IAM principal ARN trusted to assume the controller role."""


class OnDemandFallbackGroup(pulumi.ComponentResource):
    group_name: pulumi.Output[str]
    group_arn: pulumi.Output[str]
    controller_role_arn: pulumi.Output[str]
    controller_role_name: pulumi.Output[str]

    def __init__(self, name: str, args: FallbackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        plan = args.plan
        spec = plan.spec
        template = node_launch_template(
            f"{name}-template",
            plan=plan,
            template_name=plan.names.fallback_template,
            user_data=plan.fallback_user_data,
            links=plan.fallback_links,
            profile_name=args.profile_name,
            parent=self,
        )
        group = aws.autoscaling.Group(
            f"{name}-group",
            name=plan.names.fallback_group,
            min_size=0,
            desired_capacity=0,
            max_size=spec.capacity.fallback_limit,
            vpc_zone_identifiers=[as_input(s.id) for s in spec.subnets],
            mixed_instances_policy=aws.autoscaling.GroupMixedInstancesPolicyArgs(
                instances_distribution=aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgs(
                    on_demand_base_capacity=0,
                    on_demand_percentage_above_base_capacity=100,
                    # The spec's order is the preference order on-demand too.
                    on_demand_allocation_strategy="prioritized",
                ),
                launch_template=mixed_launch_template(template, plan.asg_overrides),
            ),
            initial_lifecycle_hooks=[drain_hook(plan.heartbeat_seconds, plan.pool)],
            instance_maintenance_policy=maintenance_policy(MaintenancePolicy()),
            health_check_type="EC2",
            health_check_grace_period=HEALTH_CHECK_GRACE_SECONDS,
            wait_for_capacity_timeout=WAIT_FOR_CAPACITY,
            tags=group_tags(plan.tags(plan.fallback_links, plan.names.fallback_group)),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["desiredCapacity"]),
        )
        role = aws.iam.Role(
            f"{name}-controller",
            description=f"spotgpu fallback controller for pool {plan.pool}",
            assume_role_policy=args.controller_principal.apply(
                lambda arn: controller_trust_policy(arn, lambda_job=spec.controller.enabled and plan.mode == "asg")
            ),
            tags=plan.role_tags("controller"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        policy = pulumi.Output.all(
            group.arn,
            args.queue_arn,
            args.bucket_arn,
            args.spot_group_arn if args.spot_group_arn is not None else "",
            args.fleet_arn if args.fleet_arn is not None else "",
            as_output(spec.kms_key_arn),
        ).apply(
            lambda v: json.dumps(
                controller_policy(
                    fallback_group_arn=v[0],
                    queue_arn=v[1],
                    bucket_arn=v[2],
                    spot_group_arn=v[3] or None,
                    fleet_arn=v[4] or None,
                    prefix=f"{plan.prefix}/{CONTROL_STORE_SUFFIX}",
                    kms_key_arn=v[5] or None,
                )
            )
        )
        aws.iam.RolePolicy(
            f"{name}-controller-policy", role=role.id, policy=policy, opts=pulumi.ResourceOptions(parent=self)
        )
        self.group_name = group.name
        self.group_arn = group.arn
        self.controller_role_arn = role.arn
        self.controller_role_name = role.name
        self.register_outputs(
            {"groupName": self.group_name, "groupArn": self.group_arn, "controllerRoleArn": self.controller_role_arn}
        )
