"""Pool specs: what a platform team asks for, per cloud.

A pool is a set of spot GPU capacity plus the things that make spot safe: its own
checkpoint store, an on-demand fallback group, interruption plumbing, and the
node agent installed with the pool's notice contract. Specs reference a named
workload profile and a named fallback ladder from the stack config, so one
profile or ladder serves many pools.

Networks, images and accounts are referenced, never created: they belong to the
platform team's landing zone.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import Field, field_validator, model_validator

from spotgpu.catalogue import names
from spotgpu.models import catalogue_checks
from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.gang import AwsGangSpec, AzureGangSpec, AzureImage, GcpGangSpec
from spotgpu.models.notice import AwsNoticeContract, AzureNoticeContract, GcpNoticeContract
from spotgpu.models.refs import REF_SERIALIZER, Ref, ref_check
from spotgpu.models.urls import NO_CREDENTIALS_IN_VM_IMAGE, ImageReference, PackageRequirement

_POOL_NAME = re.compile(names.whole(names.POOL_NAME))

# Ids of existing infrastructure: a plain string is checked, an Output passes through (spotgpu.models.refs).
SubnetIdRef = Annotated[Ref, ref_check(r"^subnet-[0-9a-f]{8,17}$"), REF_SERIALIZER]
AnyIdRef = Annotated[Ref, ref_check(r"^\S+$"), REF_SERIALIZER]
PrincipalArnRef = Annotated[Ref, ref_check(r"^arn:aws[a-z-]*:iam::\d{12}:(root|role/.+|user/.+)$"), REF_SERIALIZER]
AzureSubnetRef = Annotated[Ref, ref_check(r"^/subscriptions/.+/subnets/[^/]+$"), REF_SERIALIZER]
#: ARM resource group names: 1-90 letters, digits, '_', '-', '.', '(' and ')', not ending in '.'.
AZURE_RESOURCE_GROUP_PATTERN = r"^[-\w.()]{0,89}[-\w()]$"
AzureResourceGroupRef = Annotated[Ref, ref_check(AZURE_RESOURCE_GROUP_PATTERN), REF_SERIALIZER]
AZURE_RESOURCE_GROUP_FIX = (
    "name an existing resource group: 1-90 letters, digits, '_', '-', '.', '(' and ')', not ending in '.'"
)


class CheckpointStoreSpec(SpotModel):
    """Retention and hardening knobs shared by S3, GCS and Blob checkpoint stores."""

    keep_generations: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Committed generations the library keeps (K); the store keeps noncurrent versions too.",
        json_schema_extra=fix_hint("keep between 1 and 1000 generations"),
    )
    noncurrent_version_days: int = Field(
        default=7,
        ge=1,
        le=365,
        description="Days a replaced or deleted object version is kept before the store expires it (N).",
        json_schema_extra=fix_hint("use 1 to 365 days"),
    )
    prefix: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9/_-]*$",
        description="Object prefix for this pool's checkpoints; defaults to the pool name.",
        json_schema_extra=fix_hint("use lowercase letters, digits, '/', '_' and '-'"),
    )
    force_destroy: bool = Field(
        default=False,
        description="Allow `pulumi destroy` to delete a bucket that still holds checkpoints.",
    )


class Capacity(SpotModel):
    target: int = Field(ge=0, le=1000, json_schema_extra=fix_hint("set 0 to 1000 nodes"))
    max: int = Field(ge=1, le=1000, json_schema_extra=fix_hint("set 1 to 1000 nodes"))
    fallback_max: int | None = Field(
        default=None,
        ge=0,
        le=1000,
        description="Most on-demand nodes the fallback group may grow to; defaults to max.",
        json_schema_extra=fix_hint("set 0 to 1000 nodes"),
    )

    @model_validator(mode="after")
    def _ordered(self) -> Capacity:
        if self.target > self.max:
            raise ValueError(f"target {self.target} is above max {self.max}; raise max or lower target")
        return self

    @property
    def fallback_limit(self) -> int:
        return self.max if self.fallback_max is None else self.fallback_max


class OptOut(SpotModel):
    """A stated reason to accept a less diversified pool (the policy pack records it)."""

    single_zone: str | None = Field(
        default=None,
        min_length=10,
        description="Why one zone is acceptable (e.g. a placement group or reservation).",
        json_schema_extra=fix_hint("write a reason of at least 10 characters"),
    )
    single_type: str | None = Field(
        default=None,
        min_length=10,
        description="Why one GPU type or size is acceptable.",
        json_schema_extra=fix_hint("write a reason of at least 10 characters"),
    )
    idle_rungs: str | None = Field(
        default=None,
        min_length=10,
        description="Why the pool keeps ladder rungs it has no group for (alternate_zone with one zone, "
        "alternate_sku with one type, on_demand with fallbackMax 0), or a GCP MIG split off by Local SSD count "
        "that no rung grows (no alternate_sku); the preview then warns instead of failing.",
        json_schema_extra=fix_hint("write a reason of at least 10 characters"),
    )
    catalogue: str | None = Field(
        default=None,
        min_length=10,
        description="Why a type, size or region the GPU catalogue does not know is right (e.g. launched since).",
        json_schema_extra=fix_hint("write a reason of at least 10 characters"),
    )
    small_fallback: str | None = Field(
        default=None,
        min_length=10,
        description="Why the on-demand fallback may hold fewer nodes than capacity.target (or none).",
        json_schema_extra=fix_hint("write a reason of at least 10 characters"),
    )
    max_price_above_on_demand: str | None = Field(
        default=None,
        min_length=10,
        description="Why an Azure maxPrice above the size's on-demand price is intended.",
        json_schema_extra=fix_hint("write a reason of at least 10 characters"),
    )


#: CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)


class ControllerDeploySpec(SpotModel):
    """How ``pulumi up`` deploys the pool's fallback controller (one scheduled tick per run)."""

    enabled: bool = Field(
        default=True,
        description="Deploy the controller job; when false, set waiver to say who grows the fallback group instead.",
    )
    waiver: str | None = Field(
        default=None,
        min_length=10,
        description="Why no controller job is deployed (recorded as a tag the policy pack reads).",
        json_schema_extra=fix_hint("write a reason of at least 10 characters"),
    )
    schedule_minutes: int = Field(
        default=1, ge=1, le=60, description="Minutes between ticks.", json_schema_extra=fix_hint("use 1 to 60 minutes")
    )
    timeout_seconds: int = Field(
        default=60,
        ge=30,
        le=900,
        description="Longest one tick may run (Lambda timeout, job replica timeout); the lease outlives it.",
        json_schema_extra=fix_hint("use 30 to 900 seconds"),
    )
    log_retention_days: int = Field(default=30, json_schema_extra=fix_hint("use a CloudWatch retention such as 30"))
    package: str | None = Field(
        default=None,
        description="AWS: the Lambda zip from `spotgpu controller package`; defaults to dist/spotgpu-controller-lambda.zip.",
    )
    image: ImageReference | None = Field(
        default=None,
        description="GCP/Azure: the controller container image (Dockerfile.controller); a per-cloud default when unset.",
    )
    environment_id: str | None = Field(
        default=None,
        pattern=r"^/subscriptions/.+/providers/Microsoft\.App/managedEnvironments/[^/]+$",
        description="Azure: an existing Container Apps environment; the pool creates one when unset.",
        json_schema_extra=fix_hint("give the ARM id of a Microsoft.App/managedEnvironments resource"),
    )

    @field_validator("log_retention_days")
    @classmethod
    def _retention_ok(cls, v: int) -> int:
        if v not in LOG_RETENTION_DAYS:
            raise ValueError(f"logRetentionDays {v} is not a CloudWatch retention; use one of {LOG_RETENTION_DAYS[:12]}")
        return v


class _PoolBase(SpotModel):
    name: str = Field(
        description="Stable key for the pool; child resource names derive from it.",
        json_schema_extra=fix_hint(names.POOL_NAME_FIX),
    )
    workload: str = Field(json_schema_extra=fix_hint("name a key of spotgpu:workloads"))
    ladder: str = Field(json_schema_extra=fix_hint("name a key of spotgpu:ladders"))
    capacity: Capacity
    checkpoint: CheckpointStoreSpec = CheckpointStoreSpec()
    opt_out: OptOut = OptOut()
    agent_package: PackageRequirement = Field(
        default="spotgpu",
        description="pip requirement the bootstrap installs on every VM (a version pin or wheel URL).",
        json_schema_extra=fix_hint("give a pip requirement such as spotgpu==0.1.0"),
    )
    controller: ControllerDeploySpec = ControllerDeploySpec()
    spot_per_hour: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        description="This pool's own spot USD per node-hour (its types, its region); default: the workload's "
        "prices.spotPerHour. Pools sharing a workload rarely see one spot price.",
        json_schema_extra=fix_hint("set the pool's spot USD per node-hour, e.g. 3.9"),
    )

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _POOL_NAME.match(v):
            raise ValueError(
                f"pool name {v!r} must be 3-20 chars of lowercase letters, digits and '-', "
                "starting with a letter and not ending with '-'"
            )
        return v

    @model_validator(mode="after")
    def _gang_has_torch(self) -> _PoolBase:
        """A gang pool's VMs run torchrun: a plain ``spotgpu`` requirement must list the torch
        extra (a wheel URL, a path or another package is the platform team's own choice)."""
        if getattr(self, "gang", None) is None:
            return self
        try:
            req: Requirement | None = Requirement(self.agent_package)
        except InvalidRequirement:
            req = None
        if req is not None and req.name.lower() == "spotgpu" and not req.url and "torch" not in req.extras:
            raise FieldProblem(
                "has no torch, which the gang launch (torchrun) needs on every VM", at="agentPackage",
                value=self.agent_package, fix="list the extra, e.g. spotgpu[<cloud>,torch]==VERSION",
            )  # fmt: skip
        return self

    @model_validator(mode="after")
    def _fallback_sized(self) -> _PoolBase:
        """The on-demand fallback must be able to replace the spot nodes it stands in for."""
        cap, reason = self.capacity, self.opt_out.small_fallback
        fb = cap.fallback_max
        if fb is None:
            return self
        if fb > cap.max:
            raise FieldProblem(
                f"is above capacity.max {cap.max}; the fallback replaces spot nodes, so it never needs more",
                at="capacity.fallbackMax", value=fb, fix=f"set fallbackMax to at most {cap.max}, or leave it out",
            )
        if fb == 0 and not reason:
            raise FieldProblem(
                "is 0, so the on_demand rung can never add a node", at="capacity.fallbackMax", value=fb,
                fix=f"set fallbackMax to at least capacity.target ({cap.target}), or set optOut.smallFallback to a stated reason",
            )
        if fb < cap.target and not reason:
            raise FieldProblem(
                f"is below capacity.target {cap.target}, so a full spot loss cannot be replaced on-demand",
                at="capacity.fallbackMax", value=fb,
                fix=f"set fallbackMax to at least {cap.target}, or set optOut.smallFallback to a stated reason",
            )
        return self

    def _diversity(self, zones: int, types: int, zone_key: str = "zones", type_key: str = "types",
                   zone_value: object = None, type_value: object = None) -> None:
        if zones < 2 and not self.opt_out.single_zone:
            raise FieldProblem(
                f"pool {self.name} spans {zones} zone(s)", at=zone_key, value=zone_value,
                fix="list at least 2 zones, or set optOut.singleZone to a stated reason",
            )
        if types < 2 and not self.opt_out.single_type:
            raise FieldProblem(
                f"pool {self.name} has {types} GPU type(s)", at=type_key, value=type_value,
                fix="list at least 2, or set optOut.singleType to a stated reason",
            )


class AwsSubnet(SpotModel):
    id: SubnetIdRef = Field(json_schema_extra=fix_hint("use a subnet id like subnet-0abc12345"))
    zone: str = Field(pattern=names.whole(names.AWS_ZONE), json_schema_extra=fix_hint(names.AWS_ZONE_FIX))


class AwsDrillSpec(SpotModel):
    """The pool's FIS spot-interruption drill (``spotgpu drill aws``)."""

    instance_count: int = Field(
        default=1, ge=1, le=100, json_schema_extra=fix_hint("interrupt 1 to 100 instances per drill")
    )
    duration_before_interruption: str = Field(
        default="PT2M",
        pattern=r"^PT([2-9]|1[0-5])M$",
        description="FIS durationBeforeInterruption: when the interruption lands after the rebalance signal.",
        json_schema_extra=fix_hint("use PT2M to PT15M"),
    )
    stop_alarm_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:cloudwatch:[a-z0-9-]+:\d{12}:alarm:.+$",
        description="CloudWatch alarm that stops the drill; none when unset.",
        json_schema_extra=fix_hint("give a CloudWatch alarm ARN (arn:aws:cloudwatch:REGION:ACCOUNT:alarm:NAME)"),
    )


class AwsPoolSpec(_PoolBase):
    cloud: Literal["aws"] = "aws"
    mode: Literal["asg", "fleet"] = Field(
        default="asg", json_schema_extra=fix_hint("use asg (recommended) or fleet")
    )
    instance_types: tuple[str, ...] = Field(
        min_length=1,
        description="GPU instance types, most preferred first when rankedTypes is true.",
        json_schema_extra=fix_hint("list instance types, e.g. [g5.2xlarge, g6.2xlarge, g5.4xlarge]"),
    )
    ranked_types: bool = Field(
        default=False,
        description="Use capacity-optimized-prioritized with instanceTypes in rank order.",
    )
    subnets: tuple[AwsSubnet, ...] = Field(
        min_length=1, json_schema_extra=fix_hint("list subnets as [{id: subnet-..., zone: us-east-1a}, ...]")
    )
    image_id: AnyIdRef = Field(
        json_schema_extra=fix_hint("give an AMI id (ami-...) or resolve:ssm:/path/to/parameter")
    )
    security_group_ids: tuple[AnyIdRef, ...] = Field(
        default=(), json_schema_extra=fix_hint("list security group ids (sg-...)")
    )
    gang: AwsGangSpec | None = Field(
        default=None, description="Run a gang job: a rendezvous host and the launch unit (off when unset)."
    )
    region: str | None = Field(
        default=None,
        pattern=names.whole(names.AWS_REGION),
        description="AWS region of this pool; the stack's aws:region (or the provider passed in) when unset.",
        json_schema_extra=fix_hint(names.AWS_REGION_FIX),
    )
    root_volume_gb: int = Field(default=200, ge=20, le=16384, json_schema_extra=fix_hint("use 20 to 16384 GiB"))
    notice: AwsNoticeContract = AwsNoticeContract()
    kms_key_arn: AnyIdRef | None = Field(
        default=None,
        description="KMS key for the checkpoint bucket; AES256 when unset.",
        json_schema_extra=fix_hint("give a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
    )
    bucket_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="Checkpoint bucket name; defaults to spotgpu-<environment>-<pool>-checkpoints.",
        json_schema_extra=fix_hint("use a valid S3 bucket name (3-63 lowercase letters, digits, '.', '-')"),
    )
    root_device_name: str = Field(
        default="/dev/sda1",
        pattern=r"^/dev/[a-z0-9]+$",
        description="The AMI's root device (/dev/sda1 on Ubuntu AMIs, /dev/xvda on Amazon Linux).",
        json_schema_extra=fix_hint("use the AMI's root device name, e.g. /dev/sda1 or /dev/xvda"),
    )
    controller_principal_arn: PrincipalArnRef | None = Field(
        default=None,
        description="IAM principal allowed to assume the fallback controller role; the account root when unset.",
        json_schema_extra=fix_hint("give an IAM role or account-root ARN"),
    )
    drill: AwsDrillSpec = AwsDrillSpec()

    @field_validator("instance_types")
    @classmethod
    def _types_ok(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for t in v:
            if not re.match(r"^[a-z][a-z0-9-]*\d[a-z0-9-]*\.[a-z0-9]+$", t):
                raise ValueError(f"instance type {t!r} is not an EC2 type name like g5.2xlarge")
        if len(set(v)) != len(v):
            raise ValueError("instanceTypes lists a type twice; list each once")
        return v

    @property
    def zones(self) -> tuple[str, ...]:
        return tuple(sorted({s.zone for s in self.subnets}))

    @property
    def subnet_region(self) -> str | None:
        """The region the subnets' zones are in (``us-east-1a`` -> ``us-east-1``)."""
        regions = {z[:-1] for z in self.zones}
        return next(iter(regions)) if len(regions) == 1 else None

    @model_validator(mode="after")
    def _in_catalogue(self) -> AwsPoolSpec:
        stated = self.opt_out.catalogue
        catalogue_checks.aws_instance_types(self.instance_types, stated)
        region = catalogue_checks.aws_region_of_zones(tuple(s.zone for s in self.subnets), stated)
        if region is not None:
            catalogue_checks.aws_types_in_region(self.instance_types, region, stated)
        return self

    @model_validator(mode="after")
    def _diverse(self) -> AwsPoolSpec:
        self._diversity(len(self.zones), len(self.instance_types), "subnets", "instanceTypes",
                        list(self.zones), list(self.instance_types))
        return self


class GcpAccelerator(SpotModel):
    type: str = Field(json_schema_extra=fix_hint("use an accelerator type such as nvidia-tesla-t4"))
    count: int = Field(ge=1, le=16, json_schema_extra=fix_hint("use 1 to 16 GPUs"))


class GcpMachineChoice(SpotModel):
    machine_type: str = Field(json_schema_extra=fix_hint("use a machine type such as g2-standard-8"))
    accelerator: GcpAccelerator | None = Field(
        default=None,
        description="Only for N1: accelerator-optimized types (A2, A3, G2) carry their GPUs.",
    )


class GcpAutoscaling(SpotModel):
    """Optional MIG autoscaler; Google allows it only with the EVEN or BALANCED target shape."""

    min_replicas: int = Field(default=0, ge=0, le=1000, json_schema_extra=fix_hint("use 0 to 1000 nodes"))
    max_replicas: int = Field(ge=1, le=1000, json_schema_extra=fix_hint("use 1 to 1000 nodes"))
    cpu_utilization_target: float = Field(
        default=0.6, gt=0, le=1, json_schema_extra=fix_hint("use a fraction such as 0.6")
    )
    cooldown_seconds: int = Field(default=300, ge=60, le=3600, json_schema_extra=fix_hint("use 60 to 3600 s"))

    @model_validator(mode="after")
    def _ordered(self) -> GcpAutoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"autoscaling minReplicas {self.min_replicas} is above maxReplicas {self.max_replicas}; "
                "raise maxReplicas or lower minReplicas"
            )
        return self


class GcpPoolSpec(_PoolBase):
    cloud: Literal["gcp"] = "gcp"
    project: str = Field(pattern=names.whole(names.GCP_PROJECT), json_schema_extra=fix_hint(names.GCP_PROJECT_FIX))
    region: str = Field(pattern=names.whole(names.GCP_REGION), json_schema_extra=fix_hint(names.GCP_REGION_FIX))
    zones: tuple[str, ...] = Field(
        min_length=1, json_schema_extra=fix_hint("list zones, e.g. [us-central1-a, us-central1-b]")
    )
    machine_types: tuple[GcpMachineChoice, ...] = Field(
        min_length=1,
        description="Ranked machine types: the first is preferred, the rest are fallbacks.",
        json_schema_extra=fix_hint("list machine types as [{machineType: g2-standard-8}, ...]"),
    )
    image: Annotated[AnyIdRef, NO_CREDENTIALS_IN_VM_IMAGE] = Field(
        json_schema_extra=fix_hint("give an image self link or family path")
    )
    network: AnyIdRef = Field(json_schema_extra=fix_hint("give the VPC network self link or name"))
    subnetwork: AnyIdRef = Field(json_schema_extra=fix_hint("give the subnetwork self link or name"))
    target_shape: Literal["ANY", "BALANCED", "EVEN", "ANY_SINGLE_ZONE"] = Field(
        default="ANY", json_schema_extra=fix_hint("use ANY (batch), BALANCED, EVEN or ANY_SINGLE_ZONE")
    )
    termination_action: Literal["DELETE", "STOP"] = Field(
        default="DELETE", json_schema_extra=fix_hint("use DELETE (default) or STOP")
    )
    gang: GcpGangSpec | None = Field(
        default=None, description="Run a gang job: a rendezvous host and the launch unit (off when unset)."
    )
    external_ip: bool = False
    boot_disk_gb: int = Field(default=200, ge=20, le=65536, json_schema_extra=fix_hint("use 20 to 65536 GB"))
    bucket_location: str | None = Field(
        default=None, description="GCS location for the checkpoint bucket; defaults to the region."
    )
    notice: GcpNoticeContract = GcpNoticeContract()
    autoscaling: GcpAutoscaling | None = Field(
        default=None,
        description="Autoscale the spot MIG instead of a fixed capacity.target (needs targetShape EVEN or BALANCED).",
    )
    boot_disk_type: str = Field(
        default="pd-balanced",
        pattern=r"^(pd|hyperdisk)-[a-z-]+$",
        json_schema_extra=fix_hint("use a disk type the machine series supports, e.g. pd-balanced or hyperdisk-balanced"),
    )
    secure_boot: bool = Field(
        default=True,
        description="Shielded VM Secure Boot; needs signed GPU drivers (vTPM and integrity monitoring stay on).",
    )

    @model_validator(mode="after")
    def _checks(self) -> GcpPoolSpec:
        for z in self.zones:
            if not z.startswith(self.region + "-"):
                raise FieldProblem(f"zone is not in region {self.region}", at="zones", value=z,
                                   fix=f"use zones of the region, like {self.region}-a")
        if len(set(self.zones)) != len(self.zones):
            raise FieldProblem("lists a zone twice", at="zones", value=list(self.zones), fix="list each zone once")
        catalogue_checks.gcp_region(self.region, self.opt_out.catalogue)
        for i, choice in enumerate(self.machine_types):
            acc = choice.accelerator
            catalogue_checks.gcp_machine(i, choice.machine_type, (acc.type, acc.count) if acc else None, self.opt_out.catalogue)
        signatures = [(c.machine_type, c.accelerator) for c in self.machine_types]
        if len(set(signatures)) != len(signatures):
            raise FieldProblem("lists a machine type twice with the same accelerator", at="machineTypes",
                               value=[c.machine_type for c in self.machine_types], fix="list each choice once")
        if self.autoscaling is not None and self.target_shape not in ("EVEN", "BALANCED"):
            raise FieldProblem(
                "cannot be autoscaled (Google's regional autoscaler needs EVEN or BALANCED)",
                at="targetShape", value=self.target_shape,
                fix="set targetShape to EVEN or BALANCED, or remove autoscaling and size the pool with capacity.target",
            )
        for choice in self.machine_types:
            if choice.machine_type.startswith("n1-") and choice.accelerator is None:
                raise ValueError(
                    f"machine type {choice.machine_type} is N1 and carries no GPU; add "
                    "accelerator: {type: nvidia-tesla-t4, count: 1} or use an A2/A3/G2 type"
                )
        self._diversity(len(self.zones), len(self.machine_types), "zones", "machineTypes",
                        list(self.zones), [c.machine_type for c in self.machine_types])
        return self


class AzurePriorityMix(SpotModel):
    """Spot priority mix inside each Flexible scale set: a Regular base, then a Regular share."""

    base_regular_priority_count: int = Field(
        default=0, ge=0, le=1000, json_schema_extra=fix_hint("use 0 to 1000 Regular VMs")
    )
    regular_priority_percentage_above_base: int = Field(
        default=0, ge=0, le=100, json_schema_extra=fix_hint("use a percentage from 0 to 100")
    )


#: An Azure AD object id (a managed identity's principal): a GUID.
AzurePrincipalIdRef = Annotated[
    Ref, ref_check(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"), REF_SERIALIZER
]


class AzureEventsTopic(SpotModel):
    """An existing Scheduled Events system topic for ``publishEventsToEventGrid`` to subscribe to.

    Azure allows one ``MaintenanceResources`` system topic per subscription. Within one stack
    the first such pool creates it and the others share it by themselves; a pool in another
    stack (or a topic the platform team made) is named here: the topic's resource group, its
    name, and its system identity's principal id, which this pool grants its queue to. A pool
    that creates the topic exports all three as ``eventsTopic``.
    """

    resource_group: AzureResourceGroupRef = Field(json_schema_extra=fix_hint(AZURE_RESOURCE_GROUP_FIX))
    name: str = Field(
        pattern=r"^[A-Za-z0-9-]{3,128}$",
        json_schema_extra=fix_hint("give the system topic's name: 3-128 letters, digits and '-'"),
    )
    principal_id: AzurePrincipalIdRef = Field(
        json_schema_extra=fix_hint(
            "give the topic's system identity principal id (a GUID: the owning pool's eventsTopic.principalId export)"
        ),
    )


class AzurePoolSpec(_PoolBase):
    cloud: Literal["azure"] = "azure"
    resource_group_name: AzureResourceGroupRef = Field(
        description="The pool's existing resource group: its name, or an Output of one (a ResourceGroup's name, "
        "a StackReference value).",
        json_schema_extra=fix_hint(AZURE_RESOURCE_GROUP_FIX),
    )
    location: str = Field(pattern=r"^[a-z0-9]+$", json_schema_extra=fix_hint("use a location like eastus"))
    vm_sizes: tuple[str, ...] = Field(
        min_length=1,
        description="GPU sizes; one Flexible scale set is created per size (instance mix cannot mix GPU sizes).",
        json_schema_extra=fix_hint("list sizes, e.g. [Standard_NC24ads_A100_v4, Standard_NC40ads_H100_v5]"),
    )
    zones: tuple[str, ...] = Field(
        min_length=1, json_schema_extra=fix_hint("list zones as strings, e.g. ['1', '2', '3']")
    )
    subnet_id: AzureSubnetRef = Field(
        json_schema_extra=fix_hint("give the full ARM id of an existing subnet"),
    )
    image: AzureImage = AzureImage()
    gang: AzureGangSpec | None = Field(
        default=None, description="Run a gang job: a rendezvous host and the launch unit (off when unset)."
    )
    admin_username: str = Field(default="spotgpu", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    ssh_public_key: str = Field(
        pattern=r"^(ssh-rsa|ssh-ed25519|ecdsa-sha2-\S+) ",
        json_schema_extra=fix_hint("give an OpenSSH public key (ssh-ed25519 AAAA...)"),
    )
    eviction_policy: Literal["Delete", "Deallocate"] = Field(
        default="Delete",
        json_schema_extra=fix_hint("use Delete (recommended) or Deallocate (keeps quota and disk cost)"),
    )
    max_price: float = Field(
        default=-1,
        description="USD/hour ceiling per VM; -1 pays up to the on-demand price and is never evicted for price.",
        json_schema_extra=fix_hint("use -1 or a positive USD/hour price"),
    )
    spot_restore_timeout: str | None = Field(
        default=None,
        pattern=r"^PT\d+[HM]$",
        description="Enable Spot restore with this ISO 8601 timeout (e.g. PT1H).",
        json_schema_extra=fix_hint("use an ISO 8601 duration like PT1H"),
    )
    publish_events_to_event_grid: bool = Field(
        default=False,
        description="Publish the scale sets' Scheduled Events to the subscription's Event Grid system topic and "
        "route them to a queue the controller reads (evictions of deleted VMs included). Left unset with "
        "evictionPolicy Delete, the preview warns: evictions are then read from the VM list, which misses most.",
    )
    scheduled_events_topic: AzureEventsTopic | None = Field(
        default=None,
        description="With publishEventsToEventGrid: subscribe to this existing system topic instead of creating "
        "one (Azure allows one per subscription; pools of one stack share theirs by themselves).",
    )
    storage_account_name: str = Field(
        pattern=r"^[a-z0-9]{3,24}$",
        json_schema_extra=fix_hint("use 3-24 lowercase letters and digits (Azure storage account rule)"),
    )
    notice: AzureNoticeContract = AzureNoticeContract()
    platform_fault_domain_count: int = Field(
        default=1,
        ge=1,
        le=5,
        description="Flexible scale-set fault domains; N-series (GPU) sizes need 1.",
        json_schema_extra=fix_hint("use 1 for GPU sizes"),
    )
    single_placement_group: bool = Field(
        default=False,
        description="Caps a scale set at 100 VMs and forbids a priority mix; only for InfiniBand jobs.",
    )
    priority_mix: AzurePriorityMix | None = Field(
        default=None, description="Regular VMs mixed into each spot scale set (Flexible, no single placement group)."
    )
    fallback_vm_size: str | None = Field(
        default=None, description="Size of the on-demand fallback scale set; defaults to the first of vmSizes."
    )
    terminate_notification_timeout: str = Field(
        default="PT10M",
        pattern=r"^PT([5-9]|1[0-5])M$",
        description="Terminate notice the fallback scale set gives before scale-in (PT5M to PT15M).",
        json_schema_extra=fix_hint("use PT5M to PT15M"),
    )
    os_disk_gb: int = Field(default=200, ge=30, le=4095, json_schema_extra=fix_hint("use 30 to 4095 GiB"))
    accelerated_networking: bool = Field(
        default=True, description="Accelerated networking on the NIC (every current N-series size supports it)."
    )
    storage_sku: Literal["Standard_LRS", "Standard_ZRS", "Standard_GRS", "Standard_GZRS"] = Field(
        default="Standard_ZRS",
        description="Replication of the checkpoint account; ZRS survives the loss of one zone.",
        json_schema_extra=fix_hint("use Standard_ZRS (recommended), Standard_LRS, Standard_GRS or Standard_GZRS"),
    )

    @field_validator("zones")
    @classmethod
    def _zones_ok(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for z in v:
            if z not in ("1", "2", "3"):
                raise ValueError(f"zone {z!r} is not an Azure zone; use '1', '2' or '3'")
        if len(set(v)) != len(v):
            raise ValueError(f"zones {list(v)} lists a zone twice; list each zone once")
        return v

    @model_validator(mode="after")
    def _checks(self) -> AzurePoolSpec:
        if self.max_price != -1 and self.max_price <= 0:
            raise ValueError(f"maxPrice {self.max_price} must be -1 or a positive USD/hour price")
        catalogue_checks.azure_location(self.location, self.opt_out.catalogue)
        catalogue_checks.azure_sizes(self.vm_sizes, "vmSizes", self.opt_out.catalogue)
        if self.fallback_vm_size is not None:
            catalogue_checks.azure_sizes((self.fallback_vm_size,), "fallbackVmSize", self.opt_out.catalogue)
        self._diversity(len(self.zones), len(self.vm_sizes), "zones", "vmSizes", list(self.zones), list(self.vm_sizes))
        if self.scheduled_events_topic is not None and not self.publish_events_to_event_grid:
            raise FieldProblem(
                "names a topic, but the pool publishes no Scheduled Events to Event Grid",
                at="scheduledEventsTopic", value=self.scheduled_events_topic.name,
                fix="set publishEventsToEventGrid: true, or remove scheduledEventsTopic",
            )  # fmt: skip
        return self


PoolSpec = Annotated[AwsPoolSpec | GcpPoolSpec | AzurePoolSpec, Field(discriminator="cloud")]
