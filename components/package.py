"""The spotgpu components for every Pulumi language: a source-based component package.

``provider/__main__.py`` hosts :data:`COMPONENTS` with the Python SDK's
``component_provider_host``: the pools below, the standalone checkpoint stores
(``package_stores.py``) and fallback groups (``package_fallback.py``), with the
nested arg types they share in ``package_args.py``. The SDK's analyzer reads their ``args`` TypedDicts
and output annotations (with the attribute docstrings) into the package schema,
from which ``pulumi package add`` generates TypeScript, Go, C#, Java and YAML
SDKs (``docs/package.md``).

Each class is a thin adapter: it turns its typed args into the same config
document a Python stack writes, validates it with the same pydantic models
(one-line errors naming the key), and builds the very same Python component
(``spotgpu:<cloud>:GpuPool`` and so on) as its child. Ids of existing
infrastructure are ``Input[str]``: an Output from the consuming program is
passed through to the provider unchanged.
"""

# No `from __future__ import annotations`: the SDK's analyzer reads the annotations as objects.
from typing import Any, NotRequired, TypedDict

import pulumi

from spotgpu_pulumi.outputs import COMMON_KEYS
from spotgpu_pulumi.package_args import (
    PACKAGE_NAME,
    AwsSubnetArgs,
    CapacityArgs,
    GcpMachineArgs,
    LadderArgs,
    LadderStepArgs,
    PricesArgs,
    WorkloadArgs,
    planned,
    pool_args_from,
)
from spotgpu_pulumi.package_fallback import AwsFallbackGroup, AzureFallbackGroup, GcpFallbackGroup
from spotgpu_pulumi.package_stores import AwsCheckpointStore, AzureCheckpointStore, GcpCheckpointStore


class AwsGpuPoolArgs(TypedDict):
    """An AWS spot GPU pool (docs/aws.md)."""

    environment: str
    """Short environment name (dev, prod): tags every resource and names buckets and groups."""
    owner: str
    """Owning team; tags every resource."""
    workload: WorkloadArgs
    """The work the pool runs; sets the checkpoint interval and the economics."""
    ladder: LadderArgs
    """The reacquisition ladder the fallback controller walks."""
    capacity: CapacityArgs
    """Spot and fallback sizes."""
    pool_name: NotRequired[str]
    """Stable pool key child names derive from (3-20 chars); defaults to the resource name."""
    workload_name: NotRequired[str]
    """The workload profile's name in the controller's config and telemetry; defaults to "workload"."""
    ladder_name: NotRequired[str]
    """The ladder's name in the controller's config and telemetry; defaults to "ladder"."""
    settings: NotRequired[dict[str, Any]]
    """Any other pool key of docs/configuration.md, camelCase (checkpoint, notice, optOut, drill, ...)."""

    instance_types: list[str]
    """GPU instance types, e.g. g5.12xlarge and g6.12xlarge (at least 2, or settings.optOut.singleType)."""
    subnets: list[AwsSubnetArgs]
    """Subnets in at least 2 zones (or settings.optOut.singleZone)."""
    image_id: pulumi.Input[str]
    """AMI id or resolve:ssm:/parameter path."""
    security_group_ids: NotRequired[list[pulumi.Input[str]]]
    """Security groups of the nodes."""
    region: NotRequired[str]
    """The pool's region; the provider's region when unset."""
    mode: NotRequired[str]
    """asg (default) or fleet."""
    kms_key_arn: NotRequired[pulumi.Input[str]]
    """KMS key of the checkpoint bucket; SSE-S3 when unset."""


class GcpGpuPoolArgs(TypedDict):
    """A Google Cloud spot GPU pool (docs/gcp.md)."""

    environment: str
    """Short environment name (dev, prod): tags every resource and names buckets and groups."""
    owner: str
    """Owning team; tags every resource."""
    workload: WorkloadArgs
    """The work the pool runs; sets the checkpoint interval and the economics."""
    ladder: LadderArgs
    """The reacquisition ladder the fallback controller walks."""
    capacity: CapacityArgs
    """Spot and fallback sizes."""
    pool_name: NotRequired[str]
    """Stable pool key child names derive from (3-20 chars); defaults to the resource name."""
    workload_name: NotRequired[str]
    """The workload profile's name in the controller's config and telemetry; defaults to "workload"."""
    ladder_name: NotRequired[str]
    """The ladder's name in the controller's config and telemetry; defaults to "ladder"."""
    settings: NotRequired[dict[str, Any]]
    """Any other pool key of docs/configuration.md, camelCase (checkpoint, notice, optOut, drill, ...)."""

    project: str
    """Project id; names derive from it."""
    region: str
    """Region of the MIGs, e.g. us-central1."""
    zones: list[str]
    """Zones in the region (at least 2, or settings.optOut.singleZone)."""
    machine_types: list[GcpMachineArgs]
    """Ranked machine types: the first is preferred."""
    image: pulumi.Input[str]
    """Boot image self link or family path."""
    network: pulumi.Input[str]
    """VPC network self link or name."""
    subnetwork: pulumi.Input[str]
    """Subnetwork self link or name."""


class AzureGpuPoolArgs(TypedDict):
    """An Azure spot GPU pool (docs/azure.md)."""

    environment: str
    """Short environment name (dev, prod): tags every resource and names buckets and groups."""
    owner: str
    """Owning team; tags every resource."""
    workload: WorkloadArgs
    """The work the pool runs; sets the checkpoint interval and the economics."""
    ladder: LadderArgs
    """The reacquisition ladder the fallback controller walks."""
    capacity: CapacityArgs
    """Spot and fallback sizes."""
    pool_name: NotRequired[str]
    """Stable pool key child names derive from (3-20 chars); defaults to the resource name."""
    workload_name: NotRequired[str]
    """The workload profile's name in the controller's config and telemetry; defaults to "workload"."""
    ladder_name: NotRequired[str]
    """The ladder's name in the controller's config and telemetry; defaults to "ladder"."""
    settings: NotRequired[dict[str, Any]]
    """Any other pool key of docs/configuration.md, camelCase (checkpoint, notice, optOut, drill, ...)."""

    resource_group_name: pulumi.Input[str]
    """Existing resource group, or an Output of one (a ResourceGroup's name); the role scopes derive from it."""
    location: str
    """Azure location, e.g. eastus."""
    vm_sizes: list[str]
    """GPU sizes: one Flexible spot scale set per size."""
    zones: list[str]
    """Zones as strings: '1', '2', '3'."""
    subnet_id: pulumi.Input[str]
    """ARM id of an existing subnet, or an Output of one."""
    ssh_public_key: str
    """OpenSSH public key of the admin user."""
    storage_account_name: str
    """Checkpoint storage account name (3-24 lowercase letters and digits, globally unique)."""


class _PackagedPool(pulumi.ComponentResource):
    """Shared body: build the pool's cloud's ``GpuPool`` (from :data:`spotgpu_pulumi.clouds.CLOUDS`) as the
    only child, expose its common outputs.

    The output annotations are repeated on each class below (the SDK's analyzer
    reads attribute docstrings from the class's own source only); a test keeps
    them equal to :class:`spotgpu_pulumi.outputs.PoolOutputs`.
    """

    _cloud = ""

    def _build(self, name: str, args: Any, opts: pulumi.ResourceOptions | None) -> None:
        from spotgpu_pulumi.clouds import CLOUDS

        cloud = CLOUDS[self._cloud]
        # Planned once, before registering, as the fallback groups are: a bad pool is one line keyed by this resource.
        plan = planned(name, cloud.plan, pool_args_from(name, self._cloud, args))
        super().__init__(f"{PACKAGE_NAME}:index:{type(self).__name__}", name, None, opts)
        pool = cloud.component(plan.pool, plan, pulumi.ResourceOptions(parent=self))
        outputs: dict[str, Any] = {}
        for key in COMMON_KEYS:
            attribute = "".join("_" + c.lower() if c.isupper() else c for c in key)
            setattr(self, attribute, getattr(pool, attribute))
            outputs[key] = getattr(pool, attribute)
        self.register_outputs(outputs)


class AwsGpuPool(_PackagedPool):
    """A diversified AWS spot GPU pool with checkpoint bucket, on-demand fallback, interruption events and drill."""

    cloud: pulumi.Output[str]
    """aws, gcp or azure."""
    region: pulumi.Output[str]
    """Region (Azure: location) the pool runs in."""
    checkpoint_store: pulumi.Output[str]
    """URL of the pool's checkpoint store (s3://, gs:// or az://, with the pool's prefix)."""
    spot_groups: pulumi.Output[list[str]]
    """Names of the spot groups (Auto Scaling group or EC2 Fleet id, MIGs, scale sets)."""
    fallback_group: pulumi.Output[str]
    """Name of the on-demand fallback group."""
    events: pulumi.Output[str]
    """Where interruption events arrive: SQS queue URL, Pub/Sub subscription, "" on Azure."""
    node_identity: pulumi.Output[str]
    """The VMs' identity: IAM role ARN, service account email, managed identity client id."""
    controller_identity: pulumi.Output[str]
    """The fallback controller's identity: IAM role ARN, service account email, managed identity client id."""
    controller_state_url: pulumi.Output[str]
    """Where the fallback controller keeps its state, next to the checkpoints."""

    _cloud = "aws"

    def __init__(self, name: str, args: AwsGpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        self._build(name, args, opts)


class GcpGpuPool(_PackagedPool):
    """A regional Google Cloud spot GPU pool (MIGs with the 120 s notice), checkpoint bucket and on-demand fallback."""

    cloud: pulumi.Output[str]
    """aws, gcp or azure."""
    region: pulumi.Output[str]
    """Region (Azure: location) the pool runs in."""
    checkpoint_store: pulumi.Output[str]
    """URL of the pool's checkpoint store (s3://, gs:// or az://, with the pool's prefix)."""
    spot_groups: pulumi.Output[list[str]]
    """Names of the spot groups (Auto Scaling group or EC2 Fleet id, MIGs, scale sets)."""
    fallback_group: pulumi.Output[str]
    """Name of the on-demand fallback group."""
    events: pulumi.Output[str]
    """Where interruption events arrive: SQS queue URL, Pub/Sub subscription, "" on Azure."""
    node_identity: pulumi.Output[str]
    """The VMs' identity: IAM role ARN, service account email, managed identity client id."""
    controller_identity: pulumi.Output[str]
    """The fallback controller's identity: IAM role ARN, service account email, managed identity client id."""
    controller_state_url: pulumi.Output[str]
    """Where the fallback controller keeps its state, next to the checkpoints."""

    _cloud = "gcp"

    def __init__(self, name: str, args: GcpGpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        self._build(name, args, opts)


class AzureGpuPool(_PackagedPool):
    """Azure Flexible spot scale sets (one per GPU size) with checkpoint storage, fallback and controller identity."""

    cloud: pulumi.Output[str]
    """aws, gcp or azure."""
    region: pulumi.Output[str]
    """Region (Azure: location) the pool runs in."""
    checkpoint_store: pulumi.Output[str]
    """URL of the pool's checkpoint store (s3://, gs:// or az://, with the pool's prefix)."""
    spot_groups: pulumi.Output[list[str]]
    """Names of the spot groups (Auto Scaling group or EC2 Fleet id, MIGs, scale sets)."""
    fallback_group: pulumi.Output[str]
    """Name of the on-demand fallback group."""
    events: pulumi.Output[str]
    """Where interruption events arrive: SQS queue URL, Pub/Sub subscription, "" on Azure."""
    node_identity: pulumi.Output[str]
    """The VMs' identity: IAM role ARN, service account email, managed identity client id."""
    controller_identity: pulumi.Output[str]
    """The fallback controller's identity: IAM role ARN, service account email, managed identity client id."""
    controller_state_url: pulumi.Output[str]
    """Where the fallback controller keeps its state, next to the checkpoints."""

    _cloud = "azure"

    def __init__(self, name: str, args: AzureGpuPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        self._build(name, args, opts)


#: What ``provider/__main__.py`` hosts: the pools, the standalone checkpoint stores and fallback groups.
COMPONENTS: list[type[pulumi.ComponentResource]] = [
    AwsGpuPool,
    GcpGpuPool,
    AzureGpuPool,
    AwsCheckpointStore,
    GcpCheckpointStore,
    AzureCheckpointStore,
    AwsFallbackGroup,
    GcpFallbackGroup,
    AzureFallbackGroup,
]

__all__ = [
    "COMPONENTS",
    "PACKAGE_NAME",
    "AwsCheckpointStore",
    "AwsFallbackGroup",
    "AwsGpuPool",
    "AwsGpuPoolArgs",
    "AwsSubnetArgs",
    "AzureCheckpointStore",
    "AzureFallbackGroup",
    "AzureGpuPool",
    "AzureGpuPoolArgs",
    "CapacityArgs",
    "GcpCheckpointStore",
    "GcpFallbackGroup",
    "GcpGpuPool",
    "GcpGpuPoolArgs",
    "GcpMachineArgs",
    "LadderArgs",
    "LadderStepArgs",
    "PricesArgs",
    "WorkloadArgs",
    "pool_args_from",
]
