"""Standalone checkpoint stores: a pool's hardened bucket or Blob container on its own.

For training that runs outside a spotgpu pool. Each store validates its
retention knobs with the same model as a pool's ``checkpoint`` key
(:class:`~spotgpu.models.pools.CheckpointStoreSpec`) and builds the very same
Python component a pool does (``spotgpu:aws:CheckpointBucket``,
``spotgpu:gcp:CheckpointBucket``, ``spotgpu:azure:CheckpointStorage``) as its
only child; ``checkpointStore`` is the URL the checkpoint library takes.
"""

# No `from __future__ import annotations`: the SDK's analyzer reads the annotations as objects.
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pulumi
from pydantic import Field

from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.pools import AZURE_RESOURCE_GROUP_FIX, AzureResourceGroupRef, CheckpointStoreSpec
from spotgpu.models.refs import REF_SERIALIZER, Ref, ref_check
from spotgpu_pulumi.package_args import PACKAGE_NAME, refused, validated
from spotgpu_pulumi.planning import store_url


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


class AzureCheckpointStoreArgs(TypedDict):
    """A standalone hardened Blob checkpoint store (HTTPS and Entra ID only, private, versioned, bounded retention)."""

    resource_group_name: pulumi.Input[str]
    """Existing resource group of the storage account, or an Output of one; the role assignment's scope derives from it."""
    location: str
    """Azure location, e.g. eastus."""
    storage_account_name: str
    """Storage account name (3-24 lowercase letters and digits, globally unique)."""
    prefix: str
    """Blob prefix the checkpoints live under (lowercase letters, digits, '/', '_', '-')."""
    writer_principal_id: pulumi.Input[str]
    """Principal (object) id granted Storage Blob Data Contributor on the container, or an Output of one."""
    container_name: NotRequired[str]
    """Private container the checkpoints live in (default checkpoints)."""
    sku: NotRequired[str]
    """Replication: Standard_ZRS (default), Standard_LRS, Standard_GRS or Standard_GZRS."""
    noncurrent_version_days: NotRequired[int]
    """Days a replaced or deleted version is kept (default 7)."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete an account that holds checkpoints (default false: account and container are protected)."""
    tags: NotRequired[dict[str, str]]
    """Extra tags."""


class _AzureStoreSettings(SpotModel):
    """The Azure store's own keys, checked as a pool's are (one line naming the key, the value and the fix)."""

    resource_group_name: AzureResourceGroupRef = Field(json_schema_extra=fix_hint(AZURE_RESOURCE_GROUP_FIX))
    location: str = Field(pattern=r"^[a-z0-9]+$", json_schema_extra=fix_hint("use a location like eastus"))
    storage_account_name: str = Field(
        pattern=r"^[a-z0-9]{3,24}$",
        json_schema_extra=fix_hint("use 3-24 lowercase letters and digits (Azure storage account rule)"),
    )
    writer_principal_id: Annotated[
        Ref, ref_check(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$"), REF_SERIALIZER
    ] = Field(json_schema_extra=fix_hint("give the identity's principal (object) id, a GUID"))
    container_name: str = Field(
        default="checkpoints",
        min_length=3,
        max_length=63,
        pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$",
        json_schema_extra=fix_hint("use 3-63 lowercase letters, digits and single dashes"),
    )
    sku: Literal["Standard_LRS", "Standard_ZRS", "Standard_GRS", "Standard_GZRS"] = Field(
        default="Standard_ZRS",
        json_schema_extra=fix_hint("use Standard_ZRS (recommended), Standard_LRS, Standard_GRS or Standard_GZRS"),
    )


def _store_spec(name: str, args: Any) -> CheckpointStoreSpec:
    """Retention knobs validated by the same model as a pool's ``checkpoint`` key."""
    return validated(name, CheckpointStoreSpec, args)


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
        self.checkpoint_store = pulumi.Output.from_input(store_url("s3", args["bucket_name"], args["prefix"]))
        self.register_outputs(
            {"bucketName": self.bucket_name, "arn": self.arn, "checkpointStore": self.checkpoint_store}
        )


class GcpCheckpointStore(pulumi.ComponentResource):
    """The pool's GCS checkpoint bucket on its own, with object access for one member."""

    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    checkpoint_store: pulumi.Output[str]
    """The checkpoint library's store URL: gs://bucket/prefix."""

    def __init__(self, name: str, args: GcpCheckpointStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        from spotgpu_pulumi.gcp.bucket import CheckpointBucket, CheckpointBucketArgs
        from spotgpu_pulumi.gcp.plan import bucket_name_problem

        spec = _store_spec(name, args)
        google = bucket_name_problem(args["bucket_name"], "bucketName", "choose a name without 'google'")
        if google is not None:
            raise refused(name, google)
        super().__init__(f"{PACKAGE_NAME}:index:GcpCheckpointStore", name, None, opts)
        bucket = CheckpointBucket(
            f"{name}-ckpt",
            CheckpointBucketArgs(
                project=args["project"],
                location=args["location"],
                bucket_name=args["bucket_name"],
                store=spec,
                labels={"managed-by": "spotgpu", **dict(args.get("labels") or {})},
                writer_member=args["writer_member"],
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.bucket_name = bucket.bucket_name
        self.checkpoint_store = pulumi.Output.from_input(store_url("gs", args["bucket_name"], args["prefix"]))
        self.register_outputs({"bucketName": self.bucket_name, "checkpointStore": self.checkpoint_store})


class AzureCheckpointStore(pulumi.ComponentResource):
    """The pool's Blob checkpoint storage on its own: account, versioning, private container, lifecycle, one writer."""

    account_name: pulumi.Output[str]
    """The storage account's name."""
    container_name: pulumi.Output[str]
    """The private checkpoint container."""
    checkpoint_store: pulumi.Output[str]
    """The checkpoint library's store URL: az://account/container/prefix."""

    def __init__(self, name: str, args: AzureCheckpointStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        import pulumi_azure_native.authorization as authorization

        from spotgpu_pulumi.azure import naming
        from spotgpu_pulumi.azure.plan import StoragePlan
        from spotgpu_pulumi.azure.roles import STORAGE_BLOB_DATA_CONTRIBUTOR, Grant, Scope
        from spotgpu_pulumi.azure.storage import CheckpointStorage, CheckpointStorageArgs

        spec = _store_spec(name, args)
        own = validated(name, _AzureStoreSettings, args)
        account, group, container = own.storage_account_name, own.resource_group_name, own.container_name
        problem = naming.storage_account_problem(account)
        if problem is not None:
            raise refused(name, problem)
        if not spec.prefix:
            raise refused(name, FieldProblem("is not set", at="prefix", value=None,
                                             fix="give the blob prefix the checkpoints live under"))
        prefix = spec.prefix
        url = naming.checkpoint_store_url(account, container, prefix)
        super().__init__(f"{PACKAGE_NAME}:index:AzureCheckpointStore", name, None, opts)
        client = authorization.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=self))
        storage = CheckpointStorage(
            f"{name}-checkpoints",
            CheckpointStorageArgs(
                plan=StoragePlan(
                    account=account,
                    container=container,
                    prefix=prefix.strip("/"),
                    url=url,
                    sku=own.sku,
                    version_days=spec.noncurrent_version_days,
                    protect=not spec.force_destroy,
                    tags={"managed-by": "spotgpu", **dict(args.get("tags") or {})},
                ),
                resource_group=group,
                location=own.location,
                subscription_id=client.subscription_id,
                writer_principal_id=args["writer_principal_id"],
                writer_grant=Grant(
                    key="writer-blob",
                    principal="pool",
                    role=STORAGE_BLOB_DATA_CONTRIBUTOR,
                    custom_role=None,
                    scope=Scope("container", group, container, account),
                    guid=naming.stable_guid(
                        account, naming.resource_group_key(group), name, "writer", "blob", container
                    ),
                ),
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.account_name = storage.account_name
        self.container_name = storage.container_name
        self.checkpoint_store = pulumi.Output.from_input(url)
        self.register_outputs(
            {"accountName": self.account_name, "containerName": self.container_name, "checkpointStore": url}
        )
