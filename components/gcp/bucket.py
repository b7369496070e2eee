"""``spotgpu:gcp:CheckpointBucket``: the pool's GCS checkpoint store.

Versioned (a bad overwrite or delete of a committed generation is recoverable for
N days), private (uniform access, public access prevention enforced), with
lifecycle rules that bound the cost of that safety net. Soft delete is switched
off: the checkpoint library deletes whole old generations on purpose, and with
the 7-day default every deleted shard would be billed for another week on top of
the noncurrent-version retention that already protects against mistakes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import storage

from spotgpu.models.pools import CheckpointStoreSpec
from spotgpu_pulumi.gcp import plan

TOKEN = "spotgpu:gcp:CheckpointBucket"


@dataclass(frozen=True)
class CheckpointBucketArgs:
    project: str
    location: str
    #: checked by whoever chose it (the pool's planner, the standalone store)
    bucket_name: str
    store: CheckpointStoreSpec
    labels: dict[str, str]
    #: who writes the checkpoints (``serviceAccount:...``)
    writer_member: pulumi.Input[str]


class CheckpointBucket(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    """The bucket's (deterministic) name."""

    def __init__(self, name: str, args: CheckpointBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        store, labels = args.store, args.labels
        bucket = storage.Bucket(
            f"{name}-bucket",
            project=args.project,
            name=args.bucket_name,
            location=args.location.upper(),
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
            f"{name}-writer", bucket=bucket.name, role="roles/storage.objectUser", member=args.writer_member, opts=child
        )
        self.register_outputs({"bucketName": self.bucket_name})
