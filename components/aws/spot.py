"""``spotgpu:aws:SpotCapacity``: the pool's Spot GPU nodes, as an Auto Scaling group or an EC2 Fleet.

Default (``mode: asg``): an Auto Scaling group with a mixed instances policy
that is 100 % Spot, several instance types, subnets in several zones, Capacity
Rebalancing and a termination hook for the agent's drain. AWS recommends Auto
Scaling for Spot fleets (health replacement, hooks, rebalancing).

``mode: fleet``: an EC2 Fleet of type ``maintain`` with one override per
instance type x subnet and launch-before-terminate rebalancing, for teams that
already run fleets. It has no lifecycle hooks: the agent drains on the IMDS notice.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from spotgpu_pulumi.aws.groups import (
    HEALTH_CHECK_GRACE_SECONDS,
    WAIT_FOR_CAPACITY,
    drain_hook,
    group_tags,
    maintenance_policy,
    mixed_launch_template,
)
from spotgpu_pulumi.aws.launch import node_launch_template, template_version
from spotgpu_pulumi.aws.plan import AwsPoolPlan, MaintenancePolicy
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:aws:SpotCapacity"


@dataclass(frozen=True)
class SpotCapacityArgs:
    plan: AwsPoolPlan
    profile_name: pulumi.Output[str]


class SpotCapacity(pulumi.ComponentResource):
    group_name: pulumi.Output[str]
    """Auto Scaling group name (asg mode) or fleet id (fleet mode)."""
    group_arn: pulumi.Output[str] | None
    """Auto Scaling group ARN; None in fleet mode."""
    fleet_arn: pulumi.Output[str] | None
    """EC2 Fleet ARN; None in asg mode."""
    launch_template_id: pulumi.Output[str]

    def __init__(self, name: str, args: SpotCapacityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        plan = args.plan
        template = node_launch_template(
            f"{name}-template",
            plan=plan,
            template_name=plan.names.spot_template,
            user_data=plan.spot_user_data,
            links=plan.spot_links,
            profile_name=args.profile_name,
            parent=self,
        )
        self.launch_template_id = template.id
        self.group_arn = None
        self.fleet_arn = None
        if plan.mode == "asg":
            group = _spot_group(f"{name}-group", plan, template, self)
            self.group_name = group.name
            self.group_arn = group.arn
        else:
            fleet = _spot_fleet(f"{name}-fleet", plan, template, self)
            self.group_name = fleet.id
            self.fleet_arn = fleet.arn
        self.register_outputs({"groupName": self.group_name, "launchTemplateId": self.launch_template_id})


def _spot_group(
    resource_name: str, plan: AwsPoolPlan, template: aws.ec2.LaunchTemplate, parent: pulumi.Resource
) -> aws.autoscaling.Group:
    spec = plan.spec
    return aws.autoscaling.Group(
        resource_name,
        name=plan.names.spot_group,
        min_size=0,
        max_size=spec.capacity.max,
        desired_capacity=spec.capacity.target,
        vpc_zone_identifiers=[as_input(s.id) for s in spec.subnets],
        capacity_rebalance=True,
        availability_zone_distribution=aws.autoscaling.GroupAvailabilityZoneDistributionArgs(
            capacity_distribution_strategy="balanced-best-effort"
        ),
        mixed_instances_policy=aws.autoscaling.GroupMixedInstancesPolicyArgs(
            instances_distribution=aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgs(
                on_demand_base_capacity=0,
                on_demand_percentage_above_base_capacity=0,
                spot_allocation_strategy=plan.allocation_strategy,
            ),
            launch_template=mixed_launch_template(template, plan.asg_overrides),
        ),
        initial_lifecycle_hooks=[drain_hook(plan.heartbeat_seconds, plan.pool)],
        instance_maintenance_policy=maintenance_policy(MaintenancePolicy()),
        health_check_type="EC2",
        health_check_grace_period=HEALTH_CHECK_GRACE_SECONDS,
        wait_for_capacity_timeout=WAIT_FOR_CAPACITY,
        tags=group_tags(plan.tags(plan.spot_links, plan.names.spot_group)),
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _spot_fleet(
    resource_name: str, plan: AwsPoolPlan, template: aws.ec2.LaunchTemplate, parent: pulumi.Resource
) -> aws.ec2.Fleet:
    spec = plan.spec
    target = spec.capacity.target
    return aws.ec2.Fleet(
        resource_name,
        type="maintain",
        target_capacity_specification=aws.ec2.FleetTargetCapacitySpecificationArgs(
            default_target_capacity_type="spot",
            total_target_capacity=target,
            spot_target_capacity=target,
            on_demand_target_capacity=0,
        ),
        spot_options=aws.ec2.FleetSpotOptionsArgs(
            allocation_strategy=plan.allocation_strategy,
            instance_interruption_behavior=spec.notice.interruption_behavior,
            maintenance_strategies=aws.ec2.FleetSpotOptionsMaintenanceStrategiesArgs(
                capacity_rebalance=aws.ec2.FleetSpotOptionsMaintenanceStrategiesCapacityRebalanceArgs(
                    replacement_strategy="launch-before-terminate",
                    termination_delay=plan.termination_delay_seconds,
                )
            ),
        ),
        launch_template_configs=[
            aws.ec2.FleetLaunchTemplateConfigArgs(
                launch_template_specification=aws.ec2.FleetLaunchTemplateConfigLaunchTemplateSpecificationArgs(
                    launch_template_id=template.id, version=template_version(template)
                ),
                overrides=[
                    aws.ec2.FleetLaunchTemplateConfigOverrideArgs(
                        instance_type=o.instance_type,
                        subnet_id=as_input(o.subnet_id),
                        priority=o.priority,
                        weighted_capacity=o.weighted_capacity,
                    )
                    for o in plan.fleet_overrides
                ],
            )
        ],
        excess_capacity_termination_policy="termination",
        replace_unhealthy_instances=True,
        # Deleting the fleet must not leave GPU instances running (and billing) behind.
        terminate_instances=True,
        tags=plan.tags(plan.spot_links, plan.names.spot_group),
        opts=pulumi.ResourceOptions(parent=parent),
    )
