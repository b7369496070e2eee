"""The launch template both the spot and the fallback group start nodes from.

One builder, so spot and on-demand nodes differ only in their bootstrap (the
agent's ``capacityType``) and their link tags. The template never requests Spot
itself (no ``instance_market_options``): Auto Scaling rejects a mixed instances
policy over a Spot template, and an EC2 Fleet's own spot options decide the
market. It names no instance type either; the group's overrides do.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from spotgpu_pulumi.aws.plan import AwsPoolPlan
from spotgpu_pulumi.inputs import as_input

#: IMDS hop limit 2: the agent (or a training container) may run one network hop
#: away from the host, and IMDSv2's PUT response would not reach it with 1.
IMDS_HOP_LIMIT = 2


def node_launch_template(
    resource_name: str,
    *,
    plan: AwsPoolPlan,
    template_name: str,
    user_data: str,
    links: dict[str, str],
    profile_name: pulumi.Output[str],
    parent: pulumi.Resource,
) -> aws.ec2.LaunchTemplate:
    """IMDSv2-only, encrypted root volume, instance profile, agent bootstrap, link tags."""
    spec = plan.spec
    tags = plan.tags(links, template_name)
    return aws.ec2.LaunchTemplate(
        resource_name,
        name=template_name,
        description=f"spotgpu pool {plan.pool}: GPU node with the spotgpu agent",
        image_id=as_input(spec.image_id),
        vpc_security_group_ids=[as_input(g) for g in spec.security_group_ids] or None,
        iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(name=profile_name),
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled",
            http_tokens="required",
            http_put_response_hop_limit=IMDS_HOP_LIMIT,
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=spec.root_device_name,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=spec.root_volume_gb,
                    volume_type="gp3",
                    encrypted="true",
                    delete_on_termination="true",
                ),
            )
        ],
        user_data=user_data,
        update_default_version=True,
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags) for kind in ("instance", "volume")
        ],
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def template_version(template: aws.ec2.LaunchTemplate) -> pulumi.Output[str]:
    """The template's latest version, so a changed bootstrap shows up as a group diff."""
    return template.latest_version.apply(str)
