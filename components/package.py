"""The spotgpu components for every Pulumi language: a source-based component package.

``provider/__main__.py`` hosts the classes below with the Python SDK's
``component_provider_host``; the SDK's analyzer reads their ``args`` TypedDicts
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
from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from spotgpu.config import ConfigError, format_error, parse_stack_config
from spotgpu.models.pools import CheckpointStoreSpec
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.outputs import COMMON_KEYS

PACKAGE_NAME = "spotgpu"
_WORKLOAD_KEY = "workload"
_LADDER_KEY = "ladder"


class PricesArgs(TypedDict):
    """USD prices the cost model uses, per node-hour unless stated."""

    spot_per_hour: float
    """Spot price per node-hour."""
    on_demand_per_hour: float
    """On-demand price per node-hour."""
    storage_per_gb_month: NotRequired[float]
    """Checkpoint storage, USD per GB-month (default 0.023)."""
    request_per_1000: NotRequired[float]
    """Checkpoint write requests, USD per 1000 (default 0.005)."""
    deadline_penalty_per_hour: NotRequired[float]
    """Cost of each hour past the deadline (default 0)."""


class WorkloadArgs(TypedDict):
    """Measured figures of the work the pool runs (docs/configuration.md, spotgpu:workloads)."""

    checkpoint_bytes: int
    """Size of one full checkpoint."""
    checkpoint_write_seconds: float
    """Measured seconds to save and commit one checkpoint."""
    checkpoint_load_seconds: float
    """Measured seconds to restore one checkpoint."""
    restart_seconds: float
    """Boot to training-ready, excluding the load."""
    expected_reacquisition_seconds: float
    """Mean seconds from an interruption to a replacement running."""
    interruptions_per_hour: float
    """Interruption exposure per node-hour."""
    work_hours: float
    """Wall-clock hours of useful compute one job needs on all its nodes."""
    prices: PricesArgs
    """Spot, on-demand and storage prices."""
    checkpoint_interval_seconds: NotRequired[str]
    """Seconds between checkpoints, or "auto" (default): the optimum bounded by the loss bound."""
    deadline_hours: NotRequired[float]
    """Hours from submission the job must finish within."""
    max_lost_work_seconds: NotRequired[float]
    """Bound on expected work lost per interruption (default 3600)."""
    nodes: NotRequired[int]
    """Nodes per job (default 1)."""
    fallback_policy: NotRequired[str]
    """ladder (default), fixed-wait, uniform-progress or on-demand-only."""


class LadderStepArgs(TypedDict):
    """One rung of the reacquisition ladder."""

    kind: str
    """same_pool, alternate_zone, alternate_sku, on_demand or queue_defer (in this order, each once)."""
    max_wait_seconds: int
    """Longest wait on this rung before the next."""
    cost_ceiling_per_hour: float
    """Most this rung may cost per node-hour (0 only for queue_defer)."""


class LadderArgs(TypedDict):
    """How capacity is reacquired after an interruption (docs/configuration.md, spotgpu:ladders)."""

    steps: list[LadderStepArgs]
    """The rungs, in order; at least on_demand or queue_defer."""
    deadline_escalation: NotRequired[bool]
    """Let a deadline at risk skip to on-demand (default true)."""


class CapacityArgs(TypedDict):
    """Pool size in nodes."""

    target: int
    """Nodes the spot group aims for."""
    max: int
    """Most nodes the spot group may grow to."""
    fallback_max: NotRequired[int]
    """Most on-demand nodes the fallback group may grow to (default max)."""


class AwsSubnetArgs(TypedDict):
    """A subnet of the landing zone."""

    id: pulumi.Input[str]
    """Subnet id (subnet-...), or an Output of one."""
    zone: str
    """Its availability zone (us-east-1a): spread and names are planned from it."""


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


class GcpMachineArgs(TypedDict):
    """A ranked machine type."""

    machine_type: str
    """Machine type, e.g. a2-highgpu-1g or g2-standard-8."""
    accelerator_type: NotRequired[str]
    """Only for N1: the attached GPU type, e.g. nvidia-tesla-t4."""
    accelerator_count: NotRequired[int]
    """Only for N1: GPUs per VM."""


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

    resource_group_name: str
    """Existing resource group; role names and scopes derive from it."""
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


def _workload(args: WorkloadArgs) -> dict[str, Any]:
    workload: dict[str, Any] = dict(args)
    interval = workload.get("checkpoint_interval_seconds")
    if isinstance(interval, str) and interval.isdigit():
        workload["checkpoint_interval_seconds"] = int(interval)
    return workload


def _gcp_machines(machines: list[GcpMachineArgs]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in machines:
        choice: dict[str, Any] = {"machine_type": m["machine_type"]}
        if "accelerator_type" in m:
            choice["accelerator"] = {"type": m["accelerator_type"], "count": m.get("accelerator_count", 1)}
        out.append(choice)
    return out


_COMMON_FIELDS = (
    "environment", "owner", "workload", "ladder", "capacity", "pool_name", "workload_name", "ladder_name", "settings",
)


def _camel_keys(value: Any) -> Any:
    """Schema-typed values arrive with Python names; errors must name the keys as the user wrote them."""
    if isinstance(value, dict):
        return {to_camel(k): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def pool_args_from(name: str, cloud: str, args: Any) -> PoolArgs:
    """The typed args as the stack config document, validated by the same models as a Python stack."""
    pool: dict[str, Any] = {k: v for k, v in dict(args).items() if k not in _COMMON_FIELDS}
    if cloud == "gcp" and "machine_types" in pool:
        pool["machine_types"] = _gcp_machines(pool["machine_types"])
    pool = _camel_keys(pool)
    pool.update(dict(args.get("settings") or {}))  # already camelCase, as in docs/configuration.md
    pool.update(
        cloud=cloud,
        name=args.get("pool_name") or name,
        workload=args.get("workload_name") or _WORKLOAD_KEY,
        ladder=args.get("ladder_name") or _LADDER_KEY,
        capacity=_camel_keys(dict(args["capacity"])),
    )
    raw = {
        "environment": args["environment"],
        "owner": args["owner"],
        "workloads": {pool["workload"]: _camel_keys(_workload(args["workload"]))},
        "ladders": {pool["ladder"]: _camel_keys(dict(args["ladder"]))},
        "pools": [pool],
    }
    try:
        config = parse_stack_config(raw, namespace=name)
    except ConfigError as err:
        raise pulumi.RunError(str(err).replace(f"{name}:pools[{pool['name']}].", f"{name}.")) from None
    return PoolArgs.for_pool(config, config.pools[0])


class _PackagedPool(pulumi.ComponentResource):
    """Shared body: build the Python GpuPool as the only child, expose its common outputs.

    The output annotations are repeated on each class below (the SDK's analyzer
    reads attribute docstrings from the class's own source only); a test keeps
    them equal to :class:`spotgpu_pulumi.outputs.PoolOutputs`.
    """

    _cloud = ""

    def _build(self, name: str, args: Any, opts: pulumi.ResourceOptions | None) -> None:
        import importlib

        from spotgpu_pulumi.platform import CLOUD_MODULES

        pool_args = pool_args_from(name, self._cloud, args)
        super().__init__(f"{PACKAGE_NAME}:index:{type(self).__name__}", name, None, opts)
        module = importlib.import_module(CLOUD_MODULES[self._cloud])
        pool = module.GpuPool(pool_args.spec.name, pool_args, pulumi.ResourceOptions(parent=self))
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


#: What ``provider/__main__.py`` hosts.
COMPONENTS: list[type[pulumi.ComponentResource]] = [AwsGpuPool, GcpGpuPool, AzureGpuPool]


class AwsCheckpointStoreArgs(TypedDict):
    """A standalone hardened S3 checkpoint bucket (versioned, encrypted, private, TLS-only, bounded retention)."""

    bucket_name: str
    """Bucket name (global, 3-63 lowercase letters, digits, '.', '-')."""
    prefix: str
    """Object prefix the checkpoints live under (lowercase letters, digits, '/', '_', '-')."""
    keep_generations: NotRequired[int]
    """Committed generations the checkpoint library keeps (default 5)."""
    noncurrent_version_days: NotRequired[int]
    """Days a replaced or deleted version is kept (default 7)."""
    kms_key_arn: NotRequired[pulumi.Input[str]]
    """KMS key for SSE-KMS; SSE-S3 when unset."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete a bucket that holds checkpoints (default false: the bucket is protected)."""
    tags: NotRequired[dict[str, str]]
    """Extra tags."""


class GcpCheckpointStoreArgs(TypedDict):
    """A standalone hardened GCS checkpoint bucket (versioned, uniform access, public access prevented)."""

    project: str
    """Project id."""
    location: str
    """GCS location (region or multi-region)."""
    bucket_name: str
    """Bucket name (global)."""
    prefix: str
    """Object prefix the checkpoints live under."""
    writer_member: pulumi.Input[str]
    """IAM member granted object access (serviceAccount:...), or an Output of one."""
    keep_generations: NotRequired[int]
    """Committed generations the checkpoint library keeps (default 5)."""
    noncurrent_version_days: NotRequired[int]
    """Days a replaced or deleted version is kept (default 7)."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete a bucket that holds checkpoints (default false: the bucket is protected)."""
    labels: NotRequired[dict[str, str]]
    """Extra labels."""


def _store_spec(name: str, args: Any) -> CheckpointStoreSpec:
    """Retention knobs validated by the same model as a pool's ``checkpoint`` key."""

    fields = ("prefix", "keep_generations", "noncurrent_version_days", "force_destroy")
    try:
        return CheckpointStoreSpec.model_validate({to_camel(k): args[k] for k in fields if k in args})
    except ValidationError as err:
        raise pulumi.RunError(format_error(err, name, CheckpointStoreSpec).replace(f"{name}:", f"{name}.")) from None


class AwsCheckpointStore(pulumi.ComponentResource):
    """The pool's S3 checkpoint bucket on its own, for training that runs outside a spotgpu pool."""

    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    arn: pulumi.Output[str]
    """The bucket ARN, for prefix-scoped IAM policies."""
    checkpoint_store: pulumi.Output[str]
    """The checkpoint library's store URL: s3://bucket/prefix."""

    def __init__(self, name: str, args: AwsCheckpointStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        from spotgpu_pulumi.aws.bucket import CheckpointBucket, CheckpointBucketArgs

        spec = _store_spec(name, args)
        super().__init__(f"{PACKAGE_NAME}:index:AwsCheckpointStore", name, None, opts)
        bucket = CheckpointBucket(
            f"{name}-checkpoints",
            CheckpointBucketArgs(
                bucket_name=args["bucket_name"],
                prefix=args["prefix"],
                keep_generations=spec.keep_generations,
                noncurrent_version_days=spec.noncurrent_version_days,
                kms_key_arn=args.get("kms_key_arn"),
                force_destroy=spec.force_destroy,
                tags={"managed-by": "spotgpu", **dict(args.get("tags") or {})},
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.bucket_name = bucket.bucket_name
        self.arn = bucket.arn
        self.checkpoint_store = pulumi.Output.from_input(f"s3://{args['bucket_name']}/{args['prefix']}")
        self.register_outputs({"bucketName": self.bucket_name, "arn": self.arn, "checkpointStore": self.checkpoint_store})


class GcpCheckpointStore(pulumi.ComponentResource):
    """The pool's GCS checkpoint bucket on its own, with object access for one member."""

    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    checkpoint_store: pulumi.Output[str]
    """The checkpoint library's store URL: gs://bucket/prefix."""

    def __init__(self, name: str, args: GcpCheckpointStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        from spotgpu_pulumi.gcp.bucket import CheckpointBucket

        spec = _store_spec(name, args)
        super().__init__(f"{PACKAGE_NAME}:index:GcpCheckpointStore", name, None, opts)
        bucket = CheckpointBucket(
            f"{name}-ckpt",
            project=args["project"],
            location=args["location"],
            bucket_name=args["bucket_name"],
            store=spec,
            labels={"managed-by": "spotgpu", **dict(args.get("labels") or {})},
            writer_member=args["writer_member"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.bucket_name = bucket.bucket_name
        self.checkpoint_store = pulumi.Output.from_input(f"gs://{args['bucket_name']}/{args['prefix']}")
        self.register_outputs({"bucketName": self.bucket_name, "checkpointStore": self.checkpoint_store})


COMPONENTS += [AwsCheckpointStore, GcpCheckpointStore]
