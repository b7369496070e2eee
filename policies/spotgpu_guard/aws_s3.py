"""S3 checkpoint buckets and the companion resources that harden them."""

from __future__ import annotations

import json
from typing import Any

from spotgpu_guard.inventory import Inventory, Res, known_name, names_of
from spotgpu_guard.links import ROLE, links_of
from spotgpu_guard.model import Gap, Store
from spotgpu_guard.values import UNKNOWN, as_list, as_number, dig

BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
VERSIONING = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
PUBLIC_ACCESS_BLOCK = ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",)
BUCKET_POLICY = ("aws:s3/bucketPolicy:BucketPolicy",)
LIFECYCLE = (
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2",
)


def _secure_transport_denied(policy: Any) -> bool:
    doc = policy
    if isinstance(policy, str):
        try:
            doc = json.loads(policy)
        except ValueError:
            return False
    statements = dig(doc, "Statement")
    statements = statements if isinstance(statements, list) else [statements]
    for st in statements:
        if not isinstance(st, dict) or st.get("Effect") != "Deny":
            continue
        value = dig(st, "Condition", "Bool", "aws:SecureTransport")
        if value in ("false", False, ["false"]):
            return True
    return False


def _bucket_gaps(inv: Inventory, bucket: Res, names: set[str]) -> list[Gap]:
    def companion(types: tuple[str, ...]) -> list[Res]:
        return inv.companions(bucket, types, "bucket", target_names=names)

    ref = f"bucket={bucket.name}.id"
    gaps: list[Gap] = []
    versioning = [v.get("versioningConfiguration", "status") for v in companion(VERSIONING)]
    if "Enabled" not in versioning:
        gaps.append(Gap("versioning is not enabled" + (" (status unknown until apply)" if UNKNOWN in versioning else "")
                        + f"; fix: add aws.s3.BucketVersioning({ref}, versioning_configuration={{'status': 'Enabled'}})"))
    algorithms = [dig(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm")
                  for e in companion(ENCRYPTION) for rule in as_list(e.get("rules"))]
    if not any(a in ("AES256", "aws:kms", "aws:kms:dsse") for a in algorithms):
        gaps.append(Gap("no default encryption is declared; fix: add aws.s3.BucketServerSideEncryptionConfiguration("
                        f"{ref}, rules=[{{'apply_server_side_encryption_by_default': {{'sse_algorithm': 'aws:kms'}}}}])"))
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    if not any(all(b.get(f) is True for f in flags) for b in companion(PUBLIC_ACCESS_BLOCK)):
        gaps.append(Gap("public access is not fully blocked; fix: add aws.s3.BucketPublicAccessBlock("
                        f"{ref}, block_public_acls=True, block_public_policy=True, ignore_public_acls=True, "
                        "restrict_public_buckets=True)"))
    policies = [p.get("policy") for p in companion(BUCKET_POLICY)]
    if not any(_secure_transport_denied(p) for p in policies):
        why = (" (the policy document is unknown until apply: build it from the bucket *name*, "
               "arn:aws:s3:::NAME, not from bucket.arn)") if UNKNOWN in policies else ""
        gaps.append(Gap(f"plain-HTTP access is not denied{why}; fix: add an aws.s3.BucketPolicy with a Deny "
                        "statement on Condition {'Bool': {'aws:SecureTransport': 'false'}}"))
    aborts = [dig(rule, "abortIncompleteMultipartUpload", "daysAfterInitiation")
              for lc in companion(LIFECYCLE) for rule in as_list(lc.get("rules"))
              if dig(rule, "status") == "Enabled"]
    if not any(as_number(d) for d in aborts):
        gaps.append(Gap("incomplete multipart uploads are never cleaned up; fix: add an "
                        "aws.s3.BucketLifecycleConfiguration rule with abort_incomplete_multipart_upload="
                        "{'days_after_initiation': 1}"))
    return gaps


def stores(inv: Inventory) -> list[Store]:
    out = []
    for bucket in inv.of_type(*BUCKETS):
        names = names_of(bucket) | ({n} if isinstance(n := known_name(bucket, "bucket"), str) else set())
        role = links_of(bucket).get(ROLE) == "checkpoint-store"
        out.append(Store(bucket, "aws", "S3 bucket", names, _bucket_gaps(inv, bucket, names), role))
    return out

