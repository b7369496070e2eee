"""``spotgpu:gcp:CheckpointBucket``: the pool's GCS checkpoint store.

Versioned (a bad overwrite or delete of a committed generation is recoverable for
N days), private (uniform access, public access prevention enforced), with
lifecycle rules that bound the cost of that safety net. Soft delete is switched
off: the checkpoint library deletes whole old generations on purpose, and with
the 7-day default every deleted shard would be billed for another week on top of
the noncurrent-version retention that already protects against mistakes.
"""

from __future__ import annotations

import pulumi
from pulumi_gcp import storage

from spotgpu.models.pools import CheckpointStoreSpec
from spotgpu_pulumi.gcp import plan

TOKEN = "spotgpu:gcp:CheckpointBucket"


class CheckpointBucket(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    """The bucket's (deterministic) name."""

    def __init__(
        self,
        name: str,
        *,
        project: str,
        location: str,
        bucket_name: str,
        store: CheckpointStoreSpec,
        labels: dict[str, str],
        writer_member: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = storage.Bucket(
            f"{name}-bucket",
            project=project,
            name=plan.check_bucket_name(bucket_name),
            location=location.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning={"enabled": True},
            soft_delete_policy={"retention_duration_seconds": 0},
            lifecycle_rules=plan.bucket_lifecycle_rules(store.keep_generations, store.noncurrent_version_days),
            force_destroy=store.force_destroy,
            labels=labels,
            # Protected like every cloud's checkpoint store, unless checkpoint.forceDestroy.
            opts=pulumi.ResourceOptions(parent=self, protect=not store.force_destroy),
        )
        self.bucket_name = bucket.name
        # objectUser: create/read/overwrite/delete objects and multipart uploads, on this bucket only.
        storage.BucketIAMMember(
            f"{name}-writer", bucket=bucket.name, role="roles/storage.objectUser", member=writer_member, opts=child
        )
        self.register_outputs({"bucketName": self.bucket_name})
