"""Spot GPU pools built from raw pulumi_aws / pulumi_gcp / pulumi_azure_native resources.

No spotgpu component is used: the links are plain tags/metadata written with the
contract helpers in :mod:`spotgpu.contract.tags`, as any team could write them by hand.
Each builder makes a *compliant* pool; keyword knobs break one thing at a time,
so the policy tests (and this directory's Pulumi program) can show each rule
rejecting exactly the misconfiguration it exists for.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_azure_native as azure_native
import pulumi_gcp as gcp

from spotgpu.agent.config import AgentConfig
from spotgpu.bootstrap import render_bootstrap
from spotgpu.contract.tags import pool_links
from spotgpu.models import FallbackLadder, WorkloadProfile

WORKLOAD = WorkloadProfile.model_validate({
    "checkpointBytes": 2_000_000_000, "checkpointWriteSeconds": 12, "checkpointLoadSeconds": 10,
    "restartSeconds": 180, "expectedReacquisitionSeconds": 600, "interruptionsPerHour": 0.1,
    "workHours": 4, "deadlineHours": 12, "maxLostWorkSeconds": 900,
    "prices": {"spotPerHour": 0.45, "onDemandPerHour": 1.01, "deadlinePenaltyPerHour": 5},
})
LADDER = FallbackLadder.model_validate({"steps": [
    {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 0.8},
    {"kind": "alternate_zone", "maxWaitSeconds": 600, "costCeilingPerHour": 0.8},
    {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 1.5},
]})
INTERVAL = 900


def links(pool: str, store: str, fallback: str, notice: str, overrides: dict[str, Any] | None) -> dict[str, str]:
    """The contract tags; an override of None drops a key, a string replaces it."""
    tags = pool_links(role="spot-pool", pool=pool, checkpoint_store=store, fallback_group=fallback,
                      ladder=LADDER, workload=WORKLOAD, checkpoint_interval_seconds=INTERVAL, notice=notice)
    for key, value in (overrides or {}).items():
        if value is None:
            tags.pop(key, None)
        else:
            tags[key] = value
    return tags


def bootstrap(provider: str, pool: str, store: str) -> str:
    notice = {"aws": {"provider": "aws"}, "gcp": {"provider": "gcp", "preemptionNoticeSeconds": 120},
              "azure": {"provider": "azure"}}[provider]
    return render_bootstrap(AgentConfig(provider=provider, pool=pool, notice=notice, checkpoint_store=store,
                                        checkpoint_interval_seconds=INTERVAL))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def controller_tags(pool: str, k: dict[str, Any]) -> dict[str, str]:
    """What a controller job carries: role controller, and the pool it targets (``controller_for`` overrides it)."""
    return pool_links(role="controller", pool=k.get("controller_for", pool))


def aws_pool(name: str = "raw-aws", **k: Any) -> None:
    """Spot ASG (mixed instances, 0 % on-demand) + launch template + on-demand fallback ASG + S3 store."""
    bucket_name = k.get("bucket_name", f"{name}-ckpt")
    store = k.get("store_url", f"s3://{bucket_name}/{name}")
    fallback = f"{name}-fallback"
    bucket = aws.s3.Bucket(f"{name}-bucket", bucket=bucket_name, tags={"spotgpu-role": "checkpoint-store"})
    if k.get("versioning", True):
        aws.s3.BucketVersioning(f"{name}-versioning", bucket=bucket.id,
                                versioning_configuration={"status": k.get("versioning_status", "Enabled")})
    if k.get("encryption", True):
        aws.s3.BucketServerSideEncryptionConfiguration(f"{name}-sse", bucket=bucket.id, rules=[
            {"apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"}}])
    aws.s3.BucketPublicAccessBlock(f"{name}-pab", bucket=bucket.id, block_public_acls=True,
                                   block_public_policy=k.get("block_public_policy", True),
                                   ignore_public_acls=True, restrict_public_buckets=True)
    if k.get("tls_policy", True):
        aws.s3.BucketPolicy(f"{name}-tls", bucket=bucket.id, policy=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{bucket_name}", f"arn:aws:s3:::{bucket_name}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}))
    if k.get("abort_uploads", True):
        aws.s3.BucketLifecycleConfiguration(f"{name}-lifecycle", bucket=bucket.id, rules=[{
            "id": "abort", "status": "Enabled", "filter": {"prefix": ""},
            "abort_incomplete_multipart_upload": {"days_after_initiation": 1}}])
    script = k.get("bootstrap", bootstrap("aws", name, store))
    market: Any = {"market_type": "spot", "spot_options": {"instance_interruption_behavior": k["interruption"]}} \
        if "interruption" in k else None
    template = aws.ec2.LaunchTemplate(
        f"{name}-template", image_id="ami-0123456789abcdef0", instance_type=k.get("instance_type", "g5.xlarge"),
        user_data=b64(script), metadata_options={"http_endpoint": "enabled", "http_tokens": k.get("http_tokens", "required")},
        instance_market_options=market)
    types = k.get("types", ["g5.xlarge", "g6.xlarge"])
    subnets = k.get("subnets", ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"])
    tags = links(name, store, fallback, "aws", k.get("tags"))
    spot_share: dict[str, Any] = {"mixed_instances_policy": {
        "launch_template": {"launch_template_specification": {"launch_template_id": template.id, "version": "$Latest"},
                            "overrides": [{"instance_type": t} for t in types]},
        "instances_distribution": {"on_demand_percentage_above_base_capacity": k.get("on_demand_pct", 0),
                                   "spot_allocation_strategy": "price-capacity-optimized"}}}
    if k.get("spot_via_template"):
        spot_share = {"launch_template": {"id": template.id, "version": "$Latest"}}
    hooks: Any = [{"name": "spotgpu-drain", "lifecycle_transition": "autoscaling:EC2_INSTANCE_TERMINATING",
              "heartbeat_timeout": 300}] if k.get("hook", True) else None
    aws.autoscaling.Group(
        f"{name}-spot", name=f"{name}-spot", min_size=0, max_size=4, vpc_zone_identifiers=subnets,
        desired_capacity=k.get("desired"),
        capacity_rebalance=k.get("capacity_rebalance", True), initial_lifecycle_hooks=hooks,
        tags=[{"key": key, "value": v, "propagate_at_launch": True} for key, v in tags.items()], **spot_share)
    fallback_template = aws.ec2.LaunchTemplate(
        f"{name}-od-template", image_id="ami-0123456789abcdef0", instance_type="g5.xlarge", user_data=b64(script),
        metadata_options={"http_tokens": "required"})
    fallback_od = 0 if k.get("fallback_spot") else 100
    aws.autoscaling.Group(
        f"{name}-fallback", name=fallback, min_size=0, max_size=k.get("fallback_max", 2), vpc_zone_identifiers=subnets,
        mixed_instances_policy={
            "launch_template": {"launch_template_specification": {"launch_template_id": fallback_template.id},
                                "overrides": [{"instance_type": "g5.xlarge"}]},
            "instances_distribution": {"on_demand_percentage_above_base_capacity": fallback_od}},
        tags=[{"key": "spotgpu-role", "value": "fallback", "propagate_at_launch": True}])
    if k.get("controller", True):
        aws.lambda_.Function(f"{name}-controller", role="arn:aws:iam::123456789012:role/raw-controller",
                             runtime="python3.11", handler="spotgpu.controller.aws_lambda.handler",
                             code=pulumi.FileArchive("controller.zip"), reserved_concurrent_executions=1,
                             tags=controller_tags(name, k))


def aws_fleet(name: str = "raw-fleet", **k: Any) -> None:
    """A spot EC2 Fleet on a GPU launch template (links on the fleet)."""
    template = aws.ec2.LaunchTemplate(f"{name}-template", image_id="ami-0123456789abcdef0", instance_type="g5.xlarge",
                                      user_data=b64(k.get("bootstrap", "#!/bin/bash\necho no agent\n")),
                                      metadata_options={"http_tokens": "required"})
    aws.ec2.Fleet(f"{name}", type="maintain", tags=k.get("tags", {}), launch_template_configs=[{
        "launch_template_specification": {"launch_template_id": template.id, "version": "$Latest"},
        "overrides": [{"instance_type": "g5.xlarge", "subnet_id": "subnet-0a1b2c3d4e5f60001"}]}],
        target_capacity_specification={"default_target_capacity_type": "spot", "total_target_capacity": 1})


def gcp_pool(name: str = "raw-gcp", **k: Any) -> None:
    """Spot region instance template + regional MIG over 2 zones + on-demand fallback MIG + GCS store."""
    bucket_name = k.get("bucket_name", f"{name}-ckpt")
    store = k.get("store_url", f"gs://{bucket_name}/{name}")
    fallback = f"{name}-od"
    rules: Any = [{"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": 1}}] \
        if k.get("abort_uploads", True) else []
    gcp.storage.Bucket(f"{name}-bucket", name=bucket_name, location="US-CENTRAL1",
                       versioning={"enabled": k.get("versioning", True)},
                       uniform_bucket_level_access=k.get("ubla", True),
                       public_access_prevention=k.get("public_access_prevention", "enforced"),
                       lifecycle_rules=rules, labels={"spotgpu-role": "checkpoint-store"})
    metadata = links(name, store, fallback, "gcp-120", k.get("tags"))
    script = k.get("bootstrap", bootstrap("gcp", name, store))
    scheduling: Any = {"provisioning_model": "SPOT", "preemptible": True, "automatic_restart": False,
                                  "on_host_maintenance": "TERMINATE", "instance_termination_action": "DELETE"}
    if k.get("notice_seconds", 120) is not None:
        scheduling["preemption_notice_duration"] = {"seconds": k.get("notice_seconds", 120)}
    if k.get("script_in_metadata"):
        metadata = {**metadata, "startup-script": script}
    template = gcp.compute.RegionInstanceTemplate(
        f"{name}-template", region="us-central1", machine_type=k.get("machine_type", "g2-standard-8"),
        disks=[{"source_image": "projects/deeplearning-platform-release/global/images/family/common-cu124"}],
        network_interfaces=[{"subnetwork": "ml"}], scheduling=scheduling, metadata=metadata,
        metadata_startup_script=None if k.get("script_in_metadata") else script)
    gcp.compute.RegionInstanceGroupManager(
        f"{name}-mig", name=f"{name}-spot", region="us-central1", base_instance_name=name,
        versions=[{"instance_template": template.self_link}],
        distribution_policy_zones=k.get("zones", ["us-central1-a", "us-central1-b"]),
        instance_flexibility_policy={"instance_selections": [
            {"name": "l4", "machine_types": k.get("types", ["g2-standard-8", "g2-standard-12"])}]})
    od_scheduling: Any = {"provisioning_model": "SPOT" if k.get("fallback_spot") else "STANDARD",
                     "on_host_maintenance": "TERMINATE"}
    od_template = gcp.compute.RegionInstanceTemplate(
        f"{name}-od-template", region="us-central1", machine_type="g2-standard-8",
        disks=[{"source_image": "projects/deeplearning-platform-release/global/images/family/common-cu124"}],
        network_interfaces=[{"subnetwork": "ml"}], scheduling=od_scheduling, metadata_startup_script=script)
    gcp.compute.RegionInstanceGroupManager(f"{name}-od-mig", name=fallback, region="us-central1",
                                           base_instance_name=f"{name}-od",
                                           versions=[{"instance_template": od_template.self_link}])
    if k.get("controller", True):
        gcp.cloudrunv2.Job(f"{name}-controller", location="us-central1", deletion_protection=False,
                           labels=controller_tags(name, k),
                           template={"template": {"containers": [{"image": "us-docker.pkg.dev/p/spotgpu/controller:0"}]}})


def azure_pool(name: str = "rawaz", **k: Any) -> None:
    """Two Spot Flexible scale sets (one per GPU size) + a Regular fallback scale set + a storage account."""
    account_name = k.get("account_name", f"{name}ckpt")
    store = k.get("store_url", f"az://{account_name}/checkpoints/{name}")
    fallback = f"{name}-od"
    account = azure_native.storage.StorageAccount(
        f"{name}-account", account_name=account_name, resource_group_name="ml", kind="StorageV2",
        sku={"name": "Standard_ZRS"}, enable_https_traffic_only=True,
        minimum_tls_version=k.get("min_tls", "TLS1_2"), allow_blob_public_access=False,
        allow_shared_key_access=k.get("shared_key", False), tags={"spotgpu-role": "checkpoint-store"})
    azure_native.storage.BlobServiceProperties(f"{name}-blob", account_name=account.name, resource_group_name="ml",
                                               blob_services_name="default",
                                               is_versioning_enabled=k.get("versioning", True))
    script = k.get("bootstrap", bootstrap("azure", name, store))
    sizes = k.get("sizes", ["Standard_NC24ads_A100_v4", "Standard_NC40ads_H100_v5"])
    for size in sizes:
        azure_native.compute.VirtualMachineScaleSet(
            f"{name}-{size.lower().replace('_', '-')}", resource_group_name="ml", vm_scale_set_name=f"{name}-{size}",
            orchestration_mode="Flexible", platform_fault_domain_count=1, zones=k.get("zones", ["1", "2"]),
            sku={"name": size, "capacity": 1}, tags=links(name, store, fallback, "azure", k.get("tags")),
            virtual_machine_profile={"priority": "Spot", "eviction_policy": "Delete", "billing_profile": {"max_price": k.get("max_price", -1)},
                                     "os_profile": {"computer_name_prefix": "gpu", "admin_username": "spotgpu",
                                                    "custom_data": b64(script)}})
    azure_native.compute.VirtualMachineScaleSet(
        f"{name}-od", resource_group_name="ml", vm_scale_set_name=fallback, orchestration_mode="Flexible",
        platform_fault_domain_count=1, zones=["1", "2"], sku={"name": sizes[0], "capacity": 0},
        virtual_machine_profile={"priority": "Spot" if k.get("fallback_spot") else "Regular",
                                 "os_profile": {"computer_name_prefix": "od", "custom_data": b64(script)}})
    if k.get("controller", True):
        azure_native.app.Job(f"{name}-controller", resource_group_name="ml", location="eastus",
                             environment_id="/subscriptions/0/resourceGroups/ml/providers/Microsoft.App/managedEnvironments/e",
                             configuration={"trigger_type": "Schedule", "replica_timeout": 60,
                                            "schedule_trigger_config": {"cron_expression": "*/1 * * * *", "parallelism": 1}},
                             template={"containers": [{"name": "controller", "image": "ghcr.io/spotgpu/controller:0"}]},
                             tags=controller_tags(name, k))


BUILDERS = {"aws": aws_pool, "aws-fleet": aws_fleet, "gcp": gcp_pool, "azure": azure_pool}


def build(pools: list[dict[str, Any]]) -> None:
    """``[{cloud: aws, knobs...}, ...]`` from a stack config (the Pulumi program's entry)."""
    for spec in pools:
        spec = dict(spec)
        BUILDERS[spec.pop("cloud")](**spec)
        pulumi.log.debug(f"built raw {spec}")
