"""Standalone on-demand fallback groups: a pool's on-demand rung on its own, for spot capacity built elsewhere.

Each group takes the pool it falls back for, described as for a ``GpuPool``
(the same nested types, validated by the same models), plans it with the same
planner, and builds only the pool's Python ``OnDemandFallbackGroup``
(``spotgpu:<cloud>:OnDemandFallbackGroup``) as its child: same names, tags,
bootstrap and controller grants as in a whole pool, so agents, the policy pack
and the fallback controller find it. What the group needs from the pool's other
parts (the nodes' identity, the interruption queue or subscription, the spot
group) is an ``Input[str]``: a plain value is checked (one line naming the key,
the value and the fix), an Output is handed to the provider unchanged.
"""

# No `from __future__ import annotations`: the SDK's analyzer reads the annotations as objects.
from collections.abc import Callable
from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
from pydantic import Field

from spotgpu.catalogue import names
from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.refs import REF_SERIALIZER, Ref, ref_check
from spotgpu_pulumi.package_args import (
    PACKAGE_NAME,
    AwsSubnetArgs,
    CapacityArgs,
    GcpMachineArgs,
    LadderArgs,
    WorkloadArgs,
    planned,
    pool_args_from,
    refused,
    validated,
)


def _fix(fix: str, optional: bool = False) -> Any:
    """A ``Ref`` field's default and fix hint (its pattern checks plain strings; an Output passes through)."""
    return Field(default=None, json_schema_extra=fix_hint(fix)) if optional else Field(json_schema_extra=fix_hint(fix))


_ARN = r"^arn:aws[a-z-]*:"
_AsgArn = Annotated[Ref, ref_check(_ARN + r"autoscaling:[a-z0-9-]+:\d{12}:autoScalingGroup:\S+$"), REF_SERIALIZER]
_FleetArn = Annotated[Ref, ref_check(_ARN + r"ec2:[a-z0-9-]+:\d{12}:fleet/fleet-[0-9a-f-]+$"), REF_SERIALIZER]


class _AwsIds(SpotModel):
    instance_profile_name: Annotated[Ref, ref_check(r"^[\w+=,.@-]{1,128}$"), REF_SERIALIZER] = _fix(
        "give the name of the nodes' IAM instance profile (letters, digits and +=,.@_-)"
    )
    queue_arn: Annotated[Ref, ref_check(_ARN + r"sqs:[a-z0-9-]+:\d{12}:[\w-]{1,80}(\.fifo)?$"), REF_SERIALIZER] = _fix(
        "give the interruption queue's ARN (arn:aws:sqs:REGION:ACCOUNT:NAME)"
    )
    spot_group_arn: _AsgArn = _fix(
        "mode asg: give the spot Auto Scaling group's ARN (arn:aws:autoscaling:REGION:ACCOUNT:autoScalingGroup:...)"
    )
    bucket_arn: Annotated[Ref, ref_check(_ARN + r"s3:::[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"), REF_SERIALIZER] | None = (
        _fix("give the checkpoint bucket's ARN (arn:aws:s3:::BUCKET)", optional=True)
    )


class _AwsFleetIds(_AwsIds):
    spot_group_arn: _FleetArn = _fix("mode fleet: give the EC2 Fleet's ARN (arn:aws:ec2:REGION:ACCOUNT:fleet/fleet-ID)")


class _GcpIds(SpotModel):
    node_service_account: Annotated[Ref, ref_check(r"^[^@\s]+@[a-z0-9.-]+\.gserviceaccount\.com$"), REF_SERIALIZER] = (
        _fix("give the VMs' service account email (NAME@PROJECT.iam.gserviceaccount.com)")
    )
    subscription_name: Annotated[
        Ref,
        ref_check(rf"^(projects/{names.GCP_PROJECT}/subscriptions/)?[A-Za-z][\w.~+%-]{{2,254}}$"),
        REF_SERIALIZER,
    ] = _fix("give the preemption subscription's name or projects/PROJECT/subscriptions/NAME")
    bucket_name: Annotated[Ref, ref_check(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$"), REF_SERIALIZER] | None = _fix(
        "give the pool's checkpoint bucket name", optional=True
    )


class _AzureIds(SpotModel):
    identity_id: Annotated[
        Ref,
        ref_check(
            r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/[^/]+$"
        ),
        REF_SERIALIZER,
    ] = _fix("give the ARM id of a user-assigned identity (/subscriptions/.../userAssignedIdentities/NAME)")


def _same_store(name: str, key: str, given: Any, bucket_of: Callable[[str], str], bucket: str, fix: str) -> None:
    """A plain bucket value must name the bucket the agents' ``checkpointStore`` names; an Output is trusted."""
    if isinstance(given, str) and bucket_of(given) != bucket:
        raise refused(
            name,
            FieldProblem(f"is not the pool's checkpoint bucket {bucket!r}, which the agents write to",
                         at=key, value=given, fix=fix),
        )


# The pool keys below repeat the GpuPool args on purpose: the SDK's analyzer reads a field's
# description from the source of the class that declares it, so an inherited TypedDict field
# would reach the schema with no description (checked against pulumi 3.272's analyzer).


class AwsFallbackGroupArgs(TypedDict):
    """The on-demand fallback group of an AWS pool whose spot side is built elsewhere (docs/package.md)."""

    environment: str
    """Short environment name (dev, prod): tags the group and names it as in a pool."""
    owner: str
    """Owning team; tags every resource."""
    workload: WorkloadArgs
    """The work the pool runs; sets the agents' checkpoint interval."""
    ladder: LadderArgs
    """The reacquisition ladder; the controller grows this group at its on_demand step."""
    capacity: CapacityArgs
    """Pool sizes: the group grows to capacity.fallbackMax (default max)."""
    pool_name: NotRequired[str]
    """Stable pool key the group's names derive from (3-20 chars); defaults to the resource name."""
    workload_name: NotRequired[str]
    """The workload profile's name in the controller's config and telemetry; defaults to "workload"."""
    ladder_name: NotRequired[str]
    """The ladder's name in the controller's config and telemetry; defaults to "ladder"."""
    settings: NotRequired[dict[str, Any]]
    """Any other pool key of docs/configuration.md, camelCase (checkpoint, notice, bucketName, controllerPrincipalArn, ...)."""

    instance_types: list[str]
    """GPU instance types the group launches, in preference order (at least 2, or settings.optOut.singleType)."""
    subnets: list[AwsSubnetArgs]
    """Subnets in at least 2 zones (or settings.optOut.singleZone)."""
    image_id: pulumi.Input[str]
    """AMI id or resolve:ssm:/parameter path."""
    security_group_ids: NotRequired[list[pulumi.Input[str]]]
    """Security groups of the nodes."""
    region: NotRequired[str]
    """The pool's region; the provider's region when unset."""
    mode: NotRequired[str]
    """The spot side's mode: asg (default) or fleet; decides what spotGroupArn names."""
    kms_key_arn: NotRequired[pulumi.Input[str]]
    """KMS key of the checkpoint bucket, for the controller's state access; SSE-S3 when unset."""

    instance_profile_name: pulumi.Input[str]
    """The nodes' IAM instance profile (the spot side's node identity), or an Output of one."""
    queue_arn: pulumi.Input[str]
    """ARN of the pool's interruption queue, which the controller reads, or an Output of one."""
    spot_group_arn: pulumi.Input[str]
    """ARN of the spot capacity the controller also resizes: the Auto Scaling group (mode asg) or EC2 Fleet (mode fleet)."""
    bucket_arn: NotRequired[pulumi.Input[str]]
    """ARN of the checkpoint bucket checkpointStore names, or an Output of it; defaults to that bucket's ARN."""


class AwsFallbackGroup(pulumi.ComponentResource):
    """An AWS pool's on-demand fallback Auto Scaling group (empty until the controller grows it) and controller role."""

    group_name: pulumi.Output[str]
    """Name of the on-demand fallback Auto Scaling group."""
    group_arn: pulumi.Output[str]
    """ARN of the fallback group."""
    controller_role_arn: pulumi.Output[str]
    """The fallback controller's least-privilege IAM role."""
    controller_role_name: pulumi.Output[str]
    """Name of the controller role."""
    checkpoint_store: pulumi.Output[str]
    """The store the group's agents checkpoint to: s3://bucket/prefix."""

    def __init__(self, name: str, args: AwsFallbackGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        import pulumi_aws as aws

        from spotgpu_pulumi.aws.fallback import FallbackArgs, OnDemandFallbackGroup
        from spotgpu_pulumi.aws.plan import plan_pool
        from spotgpu_pulumi.aws.pool import controller_principal_output, region_options

        plan = planned(name, plan_pool, pool_args_from(name, "aws", args, exclude=tuple(_AwsIds.model_fields)))
        validated(name, _AwsFleetIds if plan.mode == "fleet" else _AwsIds, args)
        bucket = plan.names.bucket
        given = args.get("bucket_arn")
        fix = f"pass the ARN of {bucket}, or name the bucket in settings.bucketName"
        _same_store(name, "bucketArn", given, lambda arn: arn.rsplit(":", 1)[-1], bucket, fix)
        super().__init__(f"{PACKAGE_NAME}:index:AwsFallbackGroup", name, None, opts)
        child, invoke = region_options(name, plan.spec.region, self)
        partition = aws.get_partition_output(opts=invoke).partition
        spot = pulumi.Output.from_input(args["spot_group_arn"])
        group = OnDemandFallbackGroup(
            f"{name}-fallback",
            FallbackArgs(
                plan=plan,
                profile_name=pulumi.Output.from_input(args["instance_profile_name"]),
                bucket_arn=pulumi.Output.from_input(given)
                if given is not None
                else partition.apply(lambda p: f"arn:{p}:s3:::{bucket}"),
                queue_arn=pulumi.Output.from_input(args["queue_arn"]),
                spot_group_arn=spot if plan.mode == "asg" else None,
                fleet_arn=spot if plan.mode == "fleet" else None,
                controller_principal=controller_principal_output(plan.spec.controller_principal_arn, partition, invoke),
            ),
            child,
        )
        self.group_name = group.group_name
        self.group_arn = group.group_arn
        self.controller_role_arn = group.controller_role_arn
        self.controller_role_name = group.controller_role_name
        self.checkpoint_store = pulumi.Output.from_input(plan.checkpoint_store)
        self.register_outputs(
            {
                "groupName": self.group_name,
                "groupArn": self.group_arn,
                "controllerRoleArn": self.controller_role_arn,
                "controllerRoleName": self.controller_role_name,
                "checkpointStore": self.checkpoint_store,
            }
        )


class GcpFallbackGroupArgs(TypedDict):
    """The on-demand fallback MIG of a Google Cloud pool whose spot side is built elsewhere (docs/package.md)."""

    environment: str
    """Short environment name (dev, prod): labels the group and names it as in a pool."""
    owner: str
    """Owning team; labels every resource."""
    workload: WorkloadArgs
    """The work the pool runs; sets the agents' checkpoint interval."""
    ladder: LadderArgs
    """The reacquisition ladder; the controller grows this group at its on_demand step."""
    capacity: CapacityArgs
    """Pool sizes: the group grows to capacity.fallbackMax (default max)."""
    pool_name: NotRequired[str]
    """Stable pool key the group's names derive from (3-20 chars); defaults to the resource name."""
    workload_name: NotRequired[str]
    """The workload profile's name in the controller's config and telemetry; defaults to "workload"."""
    ladder_name: NotRequired[str]
    """The ladder's name in the controller's config and telemetry; defaults to "ladder"."""
    settings: NotRequired[dict[str, Any]]
    """Any other pool key of docs/configuration.md, camelCase (checkpoint, notice, optOut, ...)."""

    project: str
    """Project id; names derive from it."""
    region: str
    """Region of the MIG, e.g. us-central1."""
    zones: list[str]
    """Zones in the region (at least 2, or settings.optOut.singleZone)."""
    machine_types: list[GcpMachineArgs]
    """Ranked machine types: the group runs the first one's accelerator group."""
    image: pulumi.Input[str]
    """Boot image self link or family path."""
    network: pulumi.Input[str]
    """VPC network self link or name."""
    subnetwork: pulumi.Input[str]
    """Subnetwork self link or name."""

    node_service_account: pulumi.Input[str]
    """Email of the service account the VMs run as (the spot side's node identity), or an Output of one."""
    subscription_name: pulumi.Input[str]
    """The pool's preemption Pub/Sub subscription, which the controller reads, or an Output of one."""
    bucket_name: NotRequired[pulumi.Input[str]]
    """The checkpoint bucket checkpointStore names (<project>-<pool>-<environment>-ckpt), or an Output of it."""


class GcpFallbackGroup(pulumi.ComponentResource):
    """A Google Cloud pool's on-demand fallback MIG (size 0 until the controller grows it) and controller identity."""

    mig_name: pulumi.Output[str]
    """Name of the on-demand fallback regional MIG."""
    controller_email: pulumi.Output[str]
    """The fallback controller's service account email."""
    checkpoint_store: pulumi.Output[str]
    """The store the group's agents checkpoint to: gs://bucket/prefix."""

    def __init__(self, name: str, args: GcpFallbackGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        from spotgpu_pulumi.gcp.fallback import OnDemandFallbackGroup, OnDemandFallbackGroupArgs
        from spotgpu_pulumi.gcp.plan import plan_pool

        plan = planned(name, plan_pool, pool_args_from(name, "gcp", args, exclude=tuple(_GcpIds.model_fields)))
        validated(name, _GcpIds, args)
        given = args.get("bucket_name")
        _same_store(name, "bucketName", given, str, plan.bucket, f"pass {plan.bucket}, the pool's bucket name")
        super().__init__(f"{PACKAGE_NAME}:index:GcpFallbackGroup", name, None, opts)
        store = plan.checkpoint_store
        group = OnDemandFallbackGroup(
            f"{name}-fallback",
            OnDemandFallbackGroupArgs(
                plan,
                node_service_account=args["node_service_account"],
                bucket_name=given if given is not None else plan.bucket,
                subscription_name=args["subscription_name"],
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.mig_name = group.mig_name
        self.controller_email = group.controller_email
        self.checkpoint_store = pulumi.Output.from_input(store)
        self.register_outputs(
            {"migName": self.mig_name, "controllerEmail": self.controller_email, "checkpointStore": store}
        )


class AzureFallbackGroupArgs(TypedDict):
    """The on-demand fallback scale set of an Azure pool whose spot side is built elsewhere (docs/package.md)."""

    environment: str
    """Short environment name (dev, prod): tags the group and names it as in a pool."""
    owner: str
    """Owning team; tags every resource."""
    workload: WorkloadArgs
    """The work the pool runs; sets the agents' checkpoint interval."""
    ladder: LadderArgs
    """The reacquisition ladder; the controller grows this group at its on_demand step."""
    capacity: CapacityArgs
    """Pool sizes: the group grows to capacity.fallbackMax (default max)."""
    pool_name: NotRequired[str]
    """Stable pool key the group's names derive from (3-20 chars); defaults to the resource name."""
    workload_name: NotRequired[str]
    """The workload profile's name in the controller's config and telemetry; defaults to "workload"."""
    ladder_name: NotRequired[str]
    """The ladder's name in the controller's config and telemetry; defaults to "ladder"."""
    settings: NotRequired[dict[str, Any]]
    """Any other pool key of docs/configuration.md, camelCase (checkpoint, notice, fallbackVmSize, ...)."""

    resource_group_name: pulumi.Input[str]
    """Existing resource group of the scale set, or an Output of one (a ResourceGroup's name)."""
    location: str
    """Azure location, e.g. eastus."""
    vm_sizes: list[str]
    """The pool's GPU sizes; the group runs settings.fallbackVmSize, else the first."""
    zones: list[str]
    """Zones as strings: '1', '2', '3'."""
    subnet_id: pulumi.Input[str]
    """ARM id of an existing subnet, or an Output of one."""
    ssh_public_key: str
    """OpenSSH public key of the admin user."""
    storage_account_name: str
    """The pool's checkpoint storage account, which checkpointStore names (3-24 lowercase letters and digits)."""

    identity_id: pulumi.Input[str]
    """ARM id of the user-assigned identity the VMs run as (the spot side's pool identity), or an Output of one."""


class AzureFallbackGroup(pulumi.ComponentResource):
    """An Azure pool's Regular-priority fallback scale set (capacity 0, Terminate notifications)."""

    scale_set_name: pulumi.Output[str]
    """Name of the on-demand fallback scale set."""
    scale_set_id: pulumi.Output[str]
    """ARM id of the fallback scale set, for the controller's scoped grants."""
    checkpoint_store: pulumi.Output[str]
    """The store the group's agents checkpoint to: az://account/container/prefix."""

    def __init__(self, name: str, args: AzureFallbackGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        from spotgpu_pulumi.azure.fallback import OnDemandFallbackGroup, OnDemandFallbackGroupArgs
        from spotgpu_pulumi.azure.plan import plan_pool

        plan = planned(name, plan_pool, pool_args_from(name, "azure", args, exclude=tuple(_AzureIds.model_fields)))
        validated(name, _AzureIds, args)
        super().__init__(f"{PACKAGE_NAME}:index:AzureFallbackGroup", name, None, opts)
        group = OnDemandFallbackGroup(
            f"{name}-fallback",
            OnDemandFallbackGroupArgs(plan, args["identity_id"]),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.scale_set_name = pulumi.Output.from_input(group.scale_set_name)
        self.scale_set_id = group.scale_set.id
        self.checkpoint_store = pulumi.Output.from_input(plan.checkpoint_store)
        self.register_outputs(
            {"scaleSetName": self.scale_set_name, "scaleSetId": self.scale_set_id, "checkpointStore": plan.checkpoint_store}
        )
