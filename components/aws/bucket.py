"""``spotgpu:aws:CheckpointBucket``: the S3 bucket a pool's checkpoints live in.

Checkpoints are the primary protection against interruption, so the bucket is
hardened by default: versioning (an overwritten or deleted generation can be
recovered), default encryption, no public access, bucket-owner-enforced
ownership (ACLs off), TLS only, and a lifecycle that bounds what versioning
costs: noncurrent versions expire after N days while the newest K are kept,
and abandoned multipart uploads (a node reclaimed mid-upload) are aborted
after a day.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_aws as aws

from spotgpu_pulumi.aws.documents import deny_insecure_transport

TOKEN = "spotgpu:aws:CheckpointBucket"


@dataclass(frozen=True)
class ObjectLock:
    """Default retention for new checkpoint objects (write-once for ``days``).

    Off by default, because it conflicts with the bucket's own retention: a
    locked version cannot be deleted until its retention ends, so the
    noncurrent-version expiry (N days, newest K) cannot shrink the bucket
    before ``days``, the checkpoint library cannot retire old generations, and
    ``force_destroy`` fails. Turn it on only when checkpoints are also audit
    records, with ``days`` no longer than the retention you intend to pay for.
    """

    days: int
    mode: Literal["GOVERNANCE", "COMPLIANCE"] = "GOVERNANCE"


@dataclass(frozen=True)
class CheckpointBucketArgs:
    bucket_name: str
    prefix: str
    keep_generations: int
    noncurrent_version_days: int
    kms_key_arn: pulumi.Input[str] | None = None
    force_destroy: bool = False
    object_lock: ObjectLock | None = None
    tags: dict[str, str] = field(default_factory=dict)


class CheckpointBucket(pulumi.ComponentResource):
    """A versioned, encrypted, private, TLS-only bucket with bounded version retention."""

    bucket_name: pulumi.Output[str]
    """The bucket's name (deterministic, so the bootstrap can name it before creation)."""
    arn: pulumi.Output[str]
    """The bucket ARN, for prefix-scoped IAM policies."""

    def __init__(self, name: str, args: CheckpointBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket=args.bucket_name,
            force_destroy=args.force_destroy,
            object_lock_enabled=True if args.object_lock else None,
            tags=args.tags,
            # Protected like every cloud's checkpoint store: `pulumi destroy` stops here
            # unless checkpoint.forceDestroy says the checkpoints may go.
            opts=pulumi.ResourceOptions(parent=self, protect=not args.force_destroy),
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=bucket.id,
            rules=[_encryption_rule(args.kms_key_arn)],
            opts=child,
        )
        public_block = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        # After the public access block: S3 rejects concurrent bucket-policy and block
        # updates, and a Deny-only policy is never "public", so the block allows it.
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            # Built from the planned name, not bucket.arn: a new bucket's ARN is unknown
            # at a first preview, which would leave the policy pack nothing to judge.
            policy=aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition.apply(
                lambda partition: json.dumps(deny_insecure_transport(f"arn:{partition}:s3:::{args.bucket_name}"))
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public_block]),
        )
        # Lifecycle rules on noncurrent versions only make sense once versioning is on.
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=lifecycle_rules(args.noncurrent_version_days, args.keep_generations),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        if args.object_lock:
            aws.s3.BucketObjectLockConfiguration(
                f"{name}-object-lock",
                bucket=bucket.id,
                object_lock_enabled="Enabled",
                rule=aws.s3.BucketObjectLockConfigurationRuleArgs(
                    default_retention=aws.s3.BucketObjectLockConfigurationRuleDefaultRetentionArgs(
                        mode=args.object_lock.mode, days=args.object_lock.days
                    )
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
            )
        self.bucket_name = bucket.bucket
        self.arn = bucket.arn
        self.register_outputs({"bucketName": self.bucket_name, "arn": self.arn})


def _encryption_rule(kms_key_arn: pulumi.Input[str] | None) -> aws.s3.BucketServerSideEncryptionConfigurationRuleArgs:
    """SSE-KMS with a bucket key (fewer KMS calls per checkpoint shard) when a key is given, else SSE-S3."""
    if kms_key_arn:
        return aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
            apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                sse_algorithm="aws:kms", kms_master_key_id=kms_key_arn
            ),
            bucket_key_enabled=True,
        )
    return aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
        apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
            sse_algorithm="AES256"
        )
    )


def lifecycle_rules(
    noncurrent_version_days: int, keep_generations: int
) -> list[aws.s3.BucketLifecycleConfigurationRuleArgs]:
    """Abort stale multipart uploads after 1 day; expire noncurrent versions after N days, keeping K."""
    everything = aws.s3.BucketLifecycleConfigurationRuleFilterArgs()
    return [
        aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="abort-incomplete-multipart",
            status="Enabled",
            filter=everything,
            abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                days_after_initiation=1
            ),
        ),
        aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="expire-noncurrent-versions",
            status="Enabled",
            filter=everything,
            noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=noncurrent_version_days, newer_noncurrent_versions=keep_generations
            ),
            # Once a deleted object's versions have expired, drop its lone delete marker too.
            expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(expired_object_delete_marker=True),
        ),
    ]
