"""``spotgpu:aws:RendezvousHost``: the on-demand host of a gang pool's rendezvous store.

torchrun's c10d rendezvous lives in a TCPStore; hosted on a spot VM it dies with that VM's
notice. This host runs ``spotgpu gang store`` on demand, at a fixed private address the
pool's bootstrap names before it exists (plain strings keep the user data free of unknowns),
behind a security group that admits the store's port from the pool's security groups only.

:func:`plan_rendezvous` decides everything (pure, tested directly); the component only
turns the plan into a security group, its rules and one instance, all children of itself.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from spotgpu.bootstrap import render_store_bootstrap
from spotgpu.config import PlanError
from spotgpu.gang.launch import GangLaunch
from spotgpu.models.base import FieldProblem
from spotgpu.models.pools import AwsPoolSpec
from spotgpu.models.refs import Ref
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:aws:RendezvousHost"


@dataclass(frozen=True)
class RendezvousPlan:
    """The host, its network rule and the launch every VM of the pool gets."""

    name: str  # physical name of the security group and the instance's Name tag
    vpc_id: Ref
    subnet_id: Ref
    private_ip: str
    port: int
    instance_type: str
    image_id: Ref
    sources: list[tuple[str, Ref]]  # (stable key, pool security group) allowed to reach the port
    user_data: str  # base64
    launch: GangLaunch
    tags: dict[str, str]


def plan_rendezvous(spec: AwsPoolSpec, base_name: str, tags: dict[str, str]) -> RendezvousPlan | None:
    """The pool's rendezvous host, or None for a pool that runs no gang (nothing changes then).

    ``base_name`` is the pool's physical prefix (``spotgpu-<environment>-<pool>``). Raises
    :class:`~spotgpu.config.PlanError` for a gang the host cannot serve safely.
    """
    gang = spec.gang
    if gang is None:
        return None
    if not spec.security_group_ids:
        raise PlanError(
            FieldProblem(
                "is empty, and a gang's store port is opened to the pool's security groups only",
                at="securityGroupIds", value=[], fix="list the security groups the pool's VMs use",
            ),
            pool=spec.name,
        )
    host = gang.rendezvous
    package = spec.agent_package
    return RendezvousPlan(
        name=f"{base_name}-rendezvous",
        vpc_id=host.vpc_id,
        subnet_id=host.subnet_id if host.subnet_id is not None else spec.subnets[0].id,
        private_ip=host.private_ip,
        port=gang.port,
        instance_type=host.instance_type,
        image_id=host.image_id if host.image_id is not None else spec.image_id,
        sources=[
            (sg if isinstance(sg, str) else f"sg{i}", sg) for i, sg in enumerate(spec.security_group_ids)
        ],
        user_data=base64.b64encode(render_store_bootstrap(gang.port, package).encode()).decode(),
        launch=gang.launch(spec.name, host.private_ip),
        tags=tags,
    )


class RendezvousHost(pulumi.ComponentResource):
    """A security group (the port from the pool's VMs only) and one on-demand instance."""

    def __init__(self, name: str, plan: RendezvousPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            f"{name}-sg",
            name=plan.name,
            description=f"spotgpu gang rendezvous store: port {plan.port} from the pool's VMs only",
            vpc_id=as_input(plan.vpc_id),
            egress=[
                aws.ec2.SecurityGroupEgressArgs(  # pip install at boot
                    protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"], ipv6_cidr_blocks=["::/0"]
                )
            ],
            tags={**plan.tags, "Name": plan.name},
            opts=child,
        )
        for key, source in plan.sources:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-from-{key}",
                security_group_id=group.id,
                referenced_security_group_id=as_input(source),
                ip_protocol="tcp",
                from_port=plan.port,
                to_port=plan.port,
                description="torchrun c10d rendezvous from the pool's VMs",
                tags=plan.tags,
                opts=child,
            )
        instance = aws.ec2.Instance(
            f"{name}-host",
            ami=as_input(plan.image_id),
            instance_type=plan.instance_type,
            subnet_id=as_input(plan.subnet_id),
            private_ip=plan.private_ip,
            vpc_security_group_ids=[group.id],
            user_data_base64=plan.user_data,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_endpoint="enabled", http_tokens="required"),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(encrypted=True, volume_type="gp3"),
            tags={**plan.tags, "Name": plan.name},
            opts=child,
        )
        self.address = pulumi.Output.from_input(plan.private_ip)
        self.instance_id = instance.id
        self.security_group_id = group.id
        self.register_outputs({"address": self.address, "instanceId": instance.id, "securityGroupId": group.id})
