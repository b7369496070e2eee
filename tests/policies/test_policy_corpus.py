"""A corpus of misconfigured spot GPU stacks, each rejected by the rule made for it.

Every case is a compliant raw-resource pool (tests/policies/programs/raw/raw_resources.py,
no spotgpu components) with one thing broken. The test asserts the named rule
fires, at its default level, on the named resource, with a message that says
what is wrong and how to fix it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pytest
import raw_resources as raw
from guard_helpers import by_policy, judge

MANDATORY, ADVISORY = "mandatory", "advisory"


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[], Any]
    policy: str
    resource: str  # Pulumi name of the resource the violation is reported on
    fragments: tuple[str, ...]
    level: str = MANDATORY
    config: dict[str, Any] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()


def _aws(**k: Any) -> Callable[[], None]:
    return partial(raw.aws_pool, **k)


def _gcp(**k: Any) -> Callable[[], None]:
    return partial(raw.gcp_pool, **k)


def _azure(**k: Any) -> Callable[[], None]:
    return partial(raw.azure_pool, **k)


TOKEN_PACKAGE = "spotgpu[aws] @ https://deploy:TOKEN123@artifacts.example.com/spotgpu-0.1.0-py3-none-any.whl"


def _token_in(script: str) -> str:
    """A bootstrap that installs the agent from a URL with a token in it (what agentPackage refuses)."""
    assert "pip install --quiet spotgpu\n" in script
    return script.replace("pip install --quiet spotgpu\n", f"pip install --quiet '{TOKEN_PACKAGE}'\n")


def _unknown_store_url() -> None:
    """The store URL is derived from a bucket whose outputs are unknown at preview."""
    bucket = aws.s3.Bucket("late-bucket")
    url = bucket.bucket.apply(lambda n: f"s3://{n}/p")
    raw.aws_pool(tags={"spotgpu-checkpoint-store": url})  # type: ignore[dict-item]


def _unknown_policy_document() -> None:
    """A TLS-only policy built from bucket.arn, which is unknown for a new bucket at preview."""
    raw.aws_pool(tls_policy=False)
    bucket = aws.s3.Bucket("arn-bucket", bucket="arn-bucket", tags={"spotgpu-role": "checkpoint-store"})
    aws.s3.BucketPolicy("arn-tls", bucket=bucket.id, policy=bucket.arn.apply(lambda arn: json.dumps({
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": arn,
                       "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})))


def _unknown_user_data() -> None:
    """A GPU spot launch template whose user data comes from an unknown output."""
    source = aws.s3.Bucket("script-source")
    aws.ec2.LaunchTemplate("late-template", instance_type="g5.xlarge", user_data=source.arn,
                           metadata_options={"http_tokens": "required"},
                           instance_market_options={"market_type": "spot"})


def _unknown_spot_share() -> None:
    """Whether the group uses spot is computed: it is judged as spot, and says so."""
    source = aws.s3.Bucket("pct-source")
    raw.aws_pool(on_demand_pct=source.id.apply(lambda _: 0), tags={"spotgpu-checkpoint-store": None})


def _raw_spot_vm() -> None:
    """A single Azure Spot VM on an N-series size, no links at all."""
    import pulumi_azure_native as azure_native

    azure_native.compute.VirtualMachine("lonely-vm", resource_group_name="ml", priority="Spot",
                                        hardware_profile={"vm_size": "Standard_NC6s_v3"},
                                        os_profile={"custom_data": base64.b64encode(b"#!/bin/bash\n").decode()})


def _gcp_preemptible_n1() -> None:
    """A legacy preemptible N1 template with a T4 attached, no links."""
    gcp.compute.InstanceTemplate("legacy-t4", machine_type="n1-standard-8",
                                 guest_accelerators=[{"type": "nvidia-tesla-t4", "count": 1}],
                                 disks=[{"source_image": "debian-12"}], scheduling={"preemptible": True})


def _gcp_fallback_template_elsewhere() -> None:
    """The fallback MIG uses an instance template created in another stack."""
    raw.gcp_pool(tags={"spotgpu-fallback-group": "shared-od"})
    gcp.compute.RegionInstanceGroupManager("shared-od-mig", name="shared-od", region="us-central1",
                                           base_instance_name="od", versions=[{
                                               "instance_template": "projects/p/regions/us-central1/"
                                                                    "instanceTemplates/from-another-stack"}])


def _hook_as_separate_resource() -> None:
    """No initial hook, but an aws.autoscaling.LifecycleHook bound to the group: compliant."""
    raw.aws_pool(hook=False)
    aws.autoscaling.LifecycleHook("drain", autoscaling_group_name="raw-aws-spot",
                                  lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING")


NOT_ELIGIBLE = "w=12;r=3;b=900;l=10;s=180;q=600;g=2000000000;h=4;n=1;p=1;o=1.01"

CASES = [
    # --- spot-gpu-requires-checkpoint
    Case("aws-no-store-link", _aws(tags={"spotgpu-checkpoint-store": None}), "spot-gpu-requires-checkpoint",
         "raw-aws-spot", ("no spotgpu-checkpoint-store tag", "fix: set spotgpu-checkpoint-store=s3://")),
    Case("aws-store-elsewhere", _aws(store_url="s3://team-b-bucket/x"), "spot-gpu-requires-checkpoint",
         "raw-aws-spot", ("no S3 bucket named 'team-b-bucket'", "declare the store in this stack")),
    Case("aws-store-not-url", _aws(tags={"spotgpu-checkpoint-store": "raw-aws-ckpt"}), "spot-gpu-requires-checkpoint",
         "raw-aws-spot", ("is not a store URL", "s3://BUCKET/PREFIX")),
    Case("gcp-store-elsewhere", _gcp(store_url="gs://other-project-bucket/p"), "spot-gpu-requires-checkpoint",
         "raw-gcp-template", ("no GCS bucket named 'other-project-bucket'",)),
    Case("azure-store-elsewhere", _azure(store_url="az://someaccount/c/p"), "spot-gpu-requires-checkpoint",
         "rawaz-standard-nc24ads-a100-v4", ("no storage account named 'someaccount'",)),
    Case("azure-raw-spot-vm", _raw_spot_vm, "spot-gpu-requires-checkpoint", "lonely-vm",
         ("Spot VM 'lonely-vm'", "no spotgpu-checkpoint-store tag")),
    Case("gcp-legacy-preemptible", _gcp_preemptible_n1, "spot-gpu-requires-checkpoint", "legacy-t4",
         ("Spot instance template 'legacy-t4'", "no spotgpu-checkpoint-store metadata or label")),
    Case("aws-fleet-unlinked", partial(raw.aws_fleet), "spot-gpu-requires-checkpoint", "raw-fleet",
         ("EC2 Fleet 'raw-fleet'", "no spotgpu-checkpoint-store tag")),
    Case("store-url-unknown", _unknown_store_url, "spot-gpu-requires-checkpoint", "raw-aws-spot",
         ("spotgpu-checkpoint-store cannot be read", "unknown until apply"), unknown=("late-bucket",)),
    # --- spot-gpu-requires-fallback
    Case("aws-no-fallback-link", _aws(tags={"spotgpu-fallback-group": None}), "spot-gpu-requires-fallback",
         "raw-aws-spot", ("no spotgpu-fallback-group tag", "on-demand Auto Scaling group")),
    Case("aws-fallback-missing", _aws(tags={"spotgpu-fallback-group": "ghost-group"}), "spot-gpu-requires-fallback",
         "raw-aws-spot", ("names 'ghost-group'", "declare the on-demand fallback group here")),
    Case("aws-fallback-is-spot", _aws(fallback_spot=True), "spot-gpu-requires-fallback", "raw-aws-spot",
         ("fallback Auto Scaling group 'raw-aws-fallback'", "is not on-demand")),
    Case("gcp-fallback-is-spot", _gcp(fallback_spot=True), "spot-gpu-requires-fallback", "raw-gcp-template",
         ("fallback managed instance group 'raw-gcp-od-mig'", "its instance template is Spot")),
    Case("azure-fallback-is-spot", _azure(fallback_spot=True), "spot-gpu-requires-fallback",
         "rawaz-standard-nc40ads-h100-v5", ("fallback scale set 'rawaz-od'", "its priority is Spot")),
    Case("gcp-fallback-template-elsewhere", _gcp_fallback_template_elsewhere, "spot-gpu-requires-fallback",
         "raw-gcp-template", ("cannot be established", "its instance template is not in this stack")),
    Case("ladder-ends-on-spot", _aws(tags={"spotgpu-ladder": "sp:600:0.8;az:600:0.8"}), "spot-gpu-requires-fallback",
         "raw-aws-spot", ("ends on alternate_zone", "end it with on_demand or queue_defer")),
    Case("ladder-zero-ceiling", _gcp(tags={"spotgpu-ladder": "sp:600:0;od:3600:1.5"}), "spot-gpu-requires-fallback",
         "raw-gcp-template", ("step 1 (same_pool) has cost ceiling 0", "can never run")),
    Case("ladder-unbounded-wait", _azure(tags={"spotgpu-ladder": "sp:9999999:1;od:60:2"}),
         "spot-gpu-requires-fallback", "rawaz-standard-nc24ads-a100-v4", ("waits 9999999 s", "between 1 and 604800")),
    Case("ladder-malformed", _aws(tags={"spotgpu-ladder": "same_pool then on_demand"}), "spot-gpu-requires-fallback",
         "raw-aws-spot", ("is malformed", "encode_ladder")),
    Case("ladder-missing", _gcp(tags={"spotgpu-ladder": None}), "spot-gpu-requires-fallback", "raw-gcp-template",
         ("spotgpu-ladder tag is missing", "'sp:600:3.5;od:3600:7'")),
    # --- checkpoint-store-hardened
    Case("s3-no-versioning", _aws(versioning=False), "checkpoint-store-hardened", "raw-aws-bucket",
         ("versioning is not enabled", "aws.s3.BucketVersioning(bucket=raw-aws-bucket.id")),
    Case("s3-versioning-suspended", _aws(versioning_status="Suspended"), "checkpoint-store-hardened",
         "raw-aws-bucket", ("versioning is not enabled",)),
    Case("s3-no-encryption", _aws(encryption=False), "checkpoint-store-hardened", "raw-aws-bucket",
         ("no default encryption", "BucketServerSideEncryptionConfiguration")),
    Case("s3-public-policy-allowed", _aws(block_public_policy=False), "checkpoint-store-hardened", "raw-aws-bucket",
         ("public access is not fully blocked", "block_public_policy=True")),
    Case("s3-plain-http", _aws(tls_policy=False), "checkpoint-store-hardened", "raw-aws-bucket",
         ("plain-HTTP access is not denied", "aws:SecureTransport")),
    Case("s3-policy-unknown", _unknown_policy_document, "checkpoint-store-hardened", "arn-bucket",
         ("policy document is unknown until apply", "arn:aws:s3:::NAME"), unknown=("arn-bucket",)),
    Case("s3-no-abort", _aws(abort_uploads=False), "checkpoint-store-hardened", "raw-aws-bucket",
         ("incomplete multipart uploads are never cleaned up", "abort_incomplete_multipart_upload")),
    Case("gcs-no-versioning", _gcp(versioning=False), "checkpoint-store-hardened", "raw-gcp-bucket",
         ("versioning is not enabled", "versioning={'enabled': True}")),
    Case("gcs-no-ubla", _gcp(ubla=False), "checkpoint-store-hardened", "raw-gcp-bucket",
         ("uniform bucket-level access is off",)),
    Case("gcs-public-inherited", _gcp(public_access_prevention="inherited"), "checkpoint-store-hardened",
         "raw-gcp-bucket", ("public access prevention is not enforced",)),
    Case("gcs-no-abort", _gcp(abort_uploads=False), "checkpoint-store-hardened", "raw-gcp-bucket",
         ("AbortIncompleteMultipartUpload",)),
    Case("azure-shared-key", _azure(shared_key=True), "checkpoint-store-hardened", "rawaz-account",
         ("shared-key access is allowed", "allow_shared_key_access=False")),
    Case("azure-old-tls", _azure(min_tls="TLS1_0"), "checkpoint-store-hardened", "rawaz-account",
         ("minimumTlsVersion is 'TLS1_0'", "TLS1_2")),
    Case("azure-no-blob-versioning", _azure(versioning=False), "checkpoint-store-hardened", "rawaz-account",
         ("blob versioning is not enabled", "is_versioning_enabled=True")),
    # --- notice-handled
    Case("asg-no-rebalance", _aws(capacity_rebalance=False), "notice-handled", "raw-aws-spot",
         ("capacityRebalance is not enabled", "capacity_rebalance=True")),
    Case("asg-no-hook", _aws(hook=False), "notice-handled", "raw-aws-spot",
         ("no termination lifecycle hook", "EC2_INSTANCE_TERMINATING")),
    Case("lt-imdsv1", _aws(http_tokens="optional"), "notice-handled", "raw-aws-spot",
         ("does not require IMDSv2", "'http_tokens': 'required'")),
    Case("aws-no-agent", _aws(bootstrap="#!/bin/bash\nnvidia-smi\n"), "notice-handled", "raw-aws-spot",
         ("does not start the node agent", "spotgpu-agent.service not found")),
    Case("fleet-no-rebalance", partial(raw.aws_fleet), "notice-handled", "raw-fleet",
         ("does not act on rebalance recommendations", "launch-before-terminate")),
    Case("user-data-unknown", _unknown_user_data, "notice-handled", "late-template",
         ("bootstrap", "unknown until apply"), unknown=("script-source",)),
    Case("gcp-zero-notice", _gcp(notice_seconds=0), "notice-handled", "raw-gcp-template",
         ("0 s preemption notice", "preemption_notice_duration={'seconds': 120}", "zeroNoticeWaivers")),
    Case("gcp-default-notice", _gcp(notice_seconds=None), "notice-handled", "raw-gcp-template",
         ("0 s preemption notice",)),
    Case("gcp-no-agent", _gcp(bootstrap="#!/bin/bash\necho hi\n", script_in_metadata=True), "notice-handled",
         "raw-gcp-template", ("metadata startup-script", "does not start the node agent")),
    Case("azure-no-agent", _azure(bootstrap="#cloud-config\n{}\n"), "notice-handled",
         "rawaz-standard-nc24ads-a100-v4", ("osProfile.customData", "does not start the node agent")),
    Case("notice-contract-mismatch", _gcp(tags={"spotgpu-notice": "gcp-0"}), "notice-handled", "raw-gcp-template",
         ("configured for notice contract 'gcp-0'", "provides 'gcp-120'")),
    # --- periodic-checkpoint-primary
    Case("no-interval", _aws(tags={"spotgpu-checkpoint-interval": None}), "periodic-checkpoint-primary",
         "raw-aws-spot", ("no spotgpu-checkpoint-interval tag", "primary protection")),
    Case("interval-below-write", _gcp(tags={"spotgpu-checkpoint-interval": "10"}), "periodic-checkpoint-primary",
         "raw-gcp-template", ("not longer than the 12 s checkpoint write",)),
    Case("no-workload", _azure(tags={"spotgpu-workload": None}), "periodic-checkpoint-primary",
         "rawaz-standard-nc24ads-a100-v4", ("no spotgpu-workload tag", "encode_workload")),
    Case("hibernate-loses-too-much", _aws(spot_via_template=True, interruption="hibernate",
                                          tags={"spotgpu-checkpoint-interval": "3000"}),
         "periodic-checkpoint-primary", "raw-aws-spot",
         ("cannot fit the aws notice (0 s usable of 0 s)", "loses about 1512 s", "at most 1776 s")),
    Case("azure-write-too-slow", _azure(tags={"spotgpu-workload": "w=60;b=900", "spotgpu-checkpoint-interval": "2000"}),
         "periodic-checkpoint-primary", "rawaz-standard-nc24ads-a100-v4",
         ("cannot fit the azure notice (15 s usable of 30 s)", "above the workload bound of 900 s", "at most 1680 s")),
    Case("gcp-zero-notice-slow-write", _gcp(notice_seconds=0, tags={"spotgpu-workload": "w=600;b=500"}),
         "periodic-checkpoint-primary", "raw-gcp-template",
         ("cannot fit the gcp notice (15 s usable of 30 s)", "no interval can meet the bound")),
    # --- boot-data-has-no-credentials (issue 31, item 4: the token landed in plain text in boot data)
    Case("aws-token-in-user-data", _aws(bootstrap=_token_in(raw.bootstrap("aws", "raw-aws", "s3://raw-aws-ckpt/raw-aws"))),
         "boot-data-has-no-credentials", "raw-aws-template",
         ("userData carries a URL with credentials", "https://***@artifacts.example.com", "keyring", "fix:")),
    Case("gcp-token-in-metadata", _gcp(tags={"pip-index-url": "https://ci:TOKEN123@pypi.internal.example/simple"}),
         "boot-data-has-no-credentials", "raw-gcp-template",
         ("metadata.pip-index-url carries a URL with credentials", "https://***@pypi.internal.example/simple")),
    Case("gcp-token-in-startup-script", _gcp(bootstrap=_token_in(raw.bootstrap("gcp", "raw-gcp", "gs://raw-gcp-ckpt/raw-gcp"))),
         "boot-data-has-no-credentials", "raw-gcp-template", ("metadataStartupScript carries a URL with credentials",)),
    Case("azure-token-in-custom-data", _azure(bootstrap=_token_in(raw.bootstrap("azure", "rawaz", "az://rawazacct/c/p"))),
         "boot-data-has-no-credentials", "rawaz-standard-nc24ads-a100-v4", ("customData carries a URL with credentials",)),
    # --- advisory
    Case("single-zone-single-type", _aws(subnets=["subnet-0a1b2c3d4e5f60001"], types=["g5.xlarge"]),
         "capacity-diversified", "raw-aws-spot", ("pool 'raw-aws'", "spans 1 zone(s)", "spotgpu-waiver"), ADVISORY),
    Case("gcp-one-zone", _gcp(zones=["us-central1-a"]), "capacity-diversified", "raw-gcp-template",
         ("spans 1 zone(s) ['us-central1-a']",), ADVISORY),
    Case("azure-one-size", _azure(sizes=["Standard_NC24ads_A100_v4"]), "capacity-diversified",
         "rawaz-standard-nc24ads-a100-v4", ("1 GPU type(s)/size(s) ['Standard_NC24ads_A100_v4']",), ADVISORY),
    Case("spot-not-worth-it", _aws(tags={"spotgpu-workload": NOT_ELIGIBLE}), "spot-eligible", "raw-aws-spot",
         ("spot is not worth it", "on-demand"), ADVISORY),
    # --- levels come from policy config
    Case("advisory-made-mandatory", _aws(subnets=["subnet-0a1b2c3d4e5f60001"]), "capacity-diversified",
         "raw-aws-spot", ("spans 1 zone(s)",), MANDATORY, config={"capacity-diversified": "mandatory"}),
    Case("unknown-spot-share-judged", _unknown_spot_share, "spot-gpu-requires-checkpoint", "raw-aws-spot",
         ("spot share unknown until apply; judged as spot",), unknown=("pct-source",)),
]


def test_credentials_never_reach_the_message() -> None:
    diagnostics = judge(_aws(bootstrap=_token_in(raw.bootstrap("aws", "raw-aws", "s3://raw-aws-ckpt/raw-aws"))))
    hits = by_policy(diagnostics, "boot-data-has-no-credentials")
    assert hits and not [d for d in diagnostics if "TOKEN123" in d["message"] or "deploy:" in d["message"]]


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_misconfiguration_is_rejected(case: Case) -> None:
    diagnostics = judge(case.build, case.config, case.unknown)
    hits = [d for d in by_policy(diagnostics, case.policy) if d["urn"].endswith(f"::{case.resource}")]
    assert hits, f"{case.policy} did not fire on {case.resource}; got {[(d['policy'], d['urn']) for d in diagnostics]}"
    matching = [d for d in hits if all(f in d["message"] for f in case.fragments)]
    assert matching, f"no message had {case.fragments}: {[d['message'] for d in hits]}"
    diagnostic = matching[0]
    assert diagnostic["level"] == case.level
    assert f"'{case.resource}'" in diagnostic["message"], "the message names the resource"
    assert "fix:" in diagnostic["message"] or case.policy == "capacity-diversified" or "unknown" in diagnostic["message"]


@pytest.mark.parametrize("builder", [raw.aws_pool, raw.gcp_pool, raw.azure_pool], ids=["aws", "gcp", "azure"])
def test_compliant_raw_pools_pass_every_rule(builder: Callable[[], None]) -> None:
    assert judge(builder) == []


def test_zero_notice_waiver_in_config_satisfies_notice_handled() -> None:
    config = {"notice-handled": {"zeroNoticeWaivers": {"raw-gcp": "batch eval, restarts are free"}}}
    diagnostics = judge(_gcp(notice_seconds=0), config)
    assert not [d for d in by_policy(diagnostics, "notice-handled") if "preemption notice" in d["message"]]


def test_waiver_tag_satisfies_capacity_diversified() -> None:
    waived = _aws(subnets=["subnet-0a1b2c3d4e5f60001"], types=["g5.xlarge"],
                  tags={"spotgpu-waiver": "placement group for NCCL all-reduce needs one AZ"})
    assert by_policy(judge(waived), "capacity-diversified") == []
    too_short = _aws(subnets=["subnet-0a1b2c3d4e5f60001"], tags={"spotgpu-waiver": "ok"})
    assert by_policy(judge(too_short), "capacity-diversified")


def test_startup_script_in_metadata_counts_as_bootstrap() -> None:
    assert judge(_gcp(script_in_metadata=True)) == []


def test_unknown_values_never_fall_back_to_the_sdk_advisory() -> None:
    """The SDK would turn an unknown into an advisory 'can't run policy'; the rules say it themselves."""
    diagnostics = judge(_unknown_store_url, unknown=("late-bucket",))
    assert not [d for d in diagnostics if "can't run policy" in d["message"]]
    assert [d for d in diagnostics if d["level"] == MANDATORY and "unknown until apply" in d["message"]]


def test_pulumi_stays_importable_for_the_corpus() -> None:
    assert pulumi.__name__ == "pulumi"


def test_lifecycle_hook_resource_counts_as_the_termination_hook() -> None:
    assert judge(_hook_as_separate_resource) == []
