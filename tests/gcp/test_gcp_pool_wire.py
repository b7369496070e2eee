"""Wire-form (camelCase) inputs of every Google Cloud resource the pool creates, under mocks."""

from __future__ import annotations

from typing import Any

import pytest
from gcp_fixtures import pool_args

from spotgpu.contract import tags
from spotgpu.contract.tags import AGENT_MARKER, decode_ladder
from spotgpu_pulumi.gcp import GpuPool, plan_pool
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import children_of, index, record

TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
MIG = "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager"


def _build(stack: str = "prod", **changes: Any) -> list[RecordedResource]:
    args = pool_args(stack, **changes)
    return record(lambda: GpuPool(args.spec.name, plan_pool(args)))


@pytest.fixture(scope="module")
def prod() -> dict[str, list[RecordedResource]]:
    return index(_build("prod"))


@pytest.fixture(scope="module")
def dev() -> dict[str, list[RecordedResource]]:
    return index(_build("dev"))


def _spot_template(by_type: dict[str, list[RecordedResource]]) -> RecordedResource:
    return next(t for t in by_type[TEMPLATE] if t.inputs["scheduling"]["provisioningModel"] == "SPOT")


def _by_name(by_type: dict[str, list[RecordedResource]], typ: str, suffix: str) -> RecordedResource:
    return next(r for r in by_type[typ] if r.name.endswith(suffix))


def test_component_tree_is_parented_and_tokened(prod: dict[str, list[RecordedResource]]) -> None:
    pool = prod["spotgpu:gcp:GpuPool"][0]
    kids = {r.type for r in children_of([r for rs in prod.values() for r in rs], pool)}
    assert kids == {
        "spotgpu:gcp:NodeIdentity",
        "spotgpu:gcp:CheckpointBucket",
        "spotgpu:gcp:PreemptionEvents",
        "spotgpu:gcp:SpotGroup",
        "spotgpu:gcp:OnDemandFallbackGroup",
        "spotgpu:gcp:ControllerJob",
    }
    for typ, resources in prod.items():
        for r in resources:
            assert typ in ("spotgpu:gcp:GpuPool", "pulumi:pulumi:Stack") or r.parent, f"{r.name} has no parent"
            if r.custom:
                assert r.inputs.get("project", "ml-prod-654321") == "ml-prod-654321"


def test_spot_template_scheduling(prod: dict[str, list[RecordedResource]]) -> None:
    t = _spot_template(prod)
    s = t.inputs["scheduling"]
    assert s["provisioningModel"] == "SPOT"
    assert s["preemptible"] is True
    assert s["automaticRestart"] is False
    assert s["onHostMaintenance"] == "TERMINATE"
    assert s["instanceTerminationAction"] == "DELETE"
    assert s["preemptionNoticeDuration"]["seconds"] == 120
    assert t.inputs["region"] == "us-central1"
    assert t.inputs["project"] == "ml-prod-654321"


def test_spot_template_shape_security_and_links(prod: dict[str, list[RecordedResource]]) -> None:
    t = _spot_template(prod).inputs
    assert t["machineType"] == "a2-ultragpu-4g"  # top-ranked; flexibility overrides it
    assert t.get("guestAccelerators", []) == []  # accelerator-optimized types carry their GPUs
    # the workload's checkpoint tier: the 4 Local SSDs both prod types come with
    assert [(d["type"], d["interface"]) for d in t["disks"][1:]] == [("SCRATCH", "NVME")] * 4
    assert t["shieldedInstanceConfig"] == {
        "enableSecureBoot": True,
        "enableVtpm": True,
        "enableIntegrityMonitoring": True,
    }
    assert "accessConfigs" not in t["networkInterfaces"][0]
    assert t["serviceAccount"]["email"].startswith("train-gcp-prod-vm@")
    assert t["serviceAccount"]["scopes"] == ["cloud-platform"]
    assert t["disks"][0]["diskSizeGb"] == 500
    md = t["metadata"]
    assert md[tags.ROLE] == "spot-pool"
    assert md[tags.POOL] == "train-gcp"
    assert md[tags.CHECKPOINT_STORE] == "gs://ml-prod-654321-train-gcp-prod-ckpt/train-gcp"
    assert md[tags.FALLBACK_GROUP] == "train-gcp-prod-od"
    assert decode_ladder(md[tags.LADDER])[0].kind.value == "same_pool"
    assert tags.decode_workload(md[tags.WORKLOAD])["checkpoint_write_seconds"] == 75
    assert int(md[tags.CHECKPOINT_INTERVAL]) > 0
    assert md[tags.NOTICE] == "gcp-120"
    assert t["labels"][tags.ROLE] == "spot-pool" and t["labels"][tags.POOL] == "train-gcp"
    script = t["metadataStartupScript"]
    assert AGENT_MARKER in script and '"provider": "gcp"' in script and '"capacityType": "spot"' in script
    assert f'"checkpointIntervalSeconds": {md[tags.CHECKPOINT_INTERVAL]}' in script
    assert '"preemption_notice_seconds": 120' in script
    # the agent reads drains and reports commits under the controller's state prefix (its IAM condition)
    assert f'"controlStore": "{md[tags.CHECKPOINT_STORE]}/_controller"' in script


def test_spot_mig(prod: dict[str, list[RecordedResource]]) -> None:
    (mig,) = [m for m in prod[MIG] if m.name.endswith("-spot-aopt-lssd4-mig")]
    m = mig.inputs
    assert m["name"] == "train-gcp-prod-spot-aopt-lssd4" and m["baseInstanceName"] == m["name"]
    assert m["distributionPolicyZones"] == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert m["distributionPolicyTargetShape"] == "ANY"
    assert m["targetSize"] == 2
    selections = m["instanceFlexibilityPolicy"]["instanceSelections"]
    assert [(s["name"], s["rank"], s["machineTypes"]) for s in selections] == [
        ("a2-ultragpu-4g", 1, ["a2-ultragpu-4g"]),
        ("a3-highgpu-2g", 2, ["a3-highgpu-2g"]),
    ]
    assert m["updatePolicy"]["instanceRedistributionType"] == "NONE"
    assert m["instanceLifecyclePolicy"]["defaultActionOnFailure"] == "REPAIR"
    assert m["allInstancesConfig"]["labels"][tags.ROLE] == "spot-pool"
    assert m["region"] == "us-central1" and m["project"] == "ml-prod-654321"
    template = _spot_template(prod)
    assert template.urn in mig.dependencies


def test_checkpoint_bucket(prod: dict[str, list[RecordedResource]]) -> None:
    b = prod["gcp:storage/bucket:Bucket"][0].inputs
    assert b["name"] == "ml-prod-654321-train-gcp-prod-ckpt"
    assert b["uniformBucketLevelAccess"] is True
    assert b["publicAccessPrevention"] == "enforced"
    assert b["versioning"] == {"enabled": True}
    assert b["softDeletePolicy"] == {"retentionDurationSeconds": 0}
    assert b["labels"][tags.ROLE] == "checkpoint-store"
    rules = [(r["action"]["type"], r["condition"]) for r in b["lifecycleRules"]]
    assert ("AbortIncompleteMultipartUpload", {"age": 1, "sendAgeIfZero": True}) in rules
    noncurrent = [c for t, c in rules if t == "Delete" and "daysSinceNoncurrentTime" in c]
    assert noncurrent == [
        {"daysSinceNoncurrentTime": 7, "sendDaysSinceNoncurrentTimeIfZero": True, "withState": "ARCHIVED"}
    ]
    newer = [c for t, c in rules if t == "Delete" and "numNewerVersions" in c]
    assert newer == [{"numNewerVersions": 5, "sendNumNewerVersionsIfZero": True, "withState": "ARCHIVED"}]


def test_bucket_grants_objects_to_pool_and_scoped_state_to_controller(prod: dict[str, list[RecordedResource]]) -> None:
    grants = {r.name: r.inputs for r in prod["gcp:storage/bucketIAMMember:BucketIAMMember"]}
    writer = grants["train-gcp-ckpt-writer"]
    assert writer["role"] == "roles/storage.objectUser"
    assert writer["member"] == "serviceAccount:train-gcp-prod-vm@project.iam.gserviceaccount.com"
    assert writer["bucket"] == "ml-prod-654321-train-gcp-prod-ckpt"
    state = grants["train-gcp-fallback-controller-state"]
    assert state["member"].startswith("serviceAccount:train-gcp-prod-ctl@")
    assert "objects/train-gcp/_controller/" in state["condition"]["expression"]
    roles = {r.inputs["role"] for r in prod["gcp:projects/iAMMember:IAMMember"] if "-vm@" in r.inputs["member"]}
    assert roles == {"roles/logging.logWriter", "roles/monitoring.metricWriter"}


def test_fallback_group(prod: dict[str, list[RecordedResource]]) -> None:
    t = next(t for t in prod[TEMPLATE] if t.inputs["scheduling"]["provisioningModel"] == "STANDARD").inputs
    assert t["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert "preemptionNoticeDuration" not in t["scheduling"]
    assert t["metadata"][tags.ROLE] == "fallback" and tags.LADDER in t["metadata"]
    assert t["labels"][tags.ROLE] == "fallback"
    assert '"capacityType": "on-demand"' in t["metadataStartupScript"]
    assert t["disks"][0]["sourceImage"] == _spot_template(prod).inputs["disks"][0]["sourceImage"]
    mig = _by_name(prod, MIG, "-fallback-mig")
    assert mig.inputs["name"] == "train-gcp-prod-od" and mig.inputs["targetSize"] == 0
    assert len(mig.inputs["distributionPolicyZones"]) == 3


def test_controller_least_privilege(prod: dict[str, list[RecordedResource]]) -> None:
    role = prod["gcp:projects/iAMCustomRole:IAMCustomRole"][0].inputs
    assert sorted(role["permissions"]) == ["compute.instanceGroupManagers.get", "compute.instanceGroupManagers.update"]
    binding = _by_name(prod, "gcp:projects/iAMMember:IAMMember", "-controller-migs").inputs
    expr = binding["condition"]["expression"]
    assert (
        "instanceGroupManagers/train-gcp-prod-spot-aopt-lssd4" in expr and "instanceGroupManagers/train-gcp-prod-od" in expr
    )
    sub = prod["gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember"][0].inputs
    assert sub["role"] == "roles/pubsub.subscriber" and sub["subscription"] == "train-gcp-prod-preempted-ctl"


def test_preemption_events(prod: dict[str, list[RecordedResource]]) -> None:
    sink = prod["gcp:logging/projectSink:ProjectSink"][0].inputs
    assert sink["destination"] == "pubsub.googleapis.com/projects/ml-prod-654321/topics/train-gcp-prod-preempted"
    assert 'protoPayload.methodName="compute.instances.preempted"' in sink["filter"]
    assert 'protoPayload.resourceName:"/instances/train-gcp-prod-spot"' in sink["filter"]
    assert sink["uniqueWriterIdentity"] is True
    pub = prod["gcp:pubsub/topicIAMMember:TopicIAMMember"][0].inputs
    assert pub["role"] == "roles/pubsub.publisher"
    assert pub["member"].endswith("@gcp-sa-logging.iam.gserviceaccount.com")
    sub = prod["gcp:pubsub/subscription:Subscription"][0].inputs
    assert sub["name"] == "train-gcp-prod-preempted-ctl" and sub["expirationPolicy"] == {"ttl": ""}


def test_exports_name_every_handle() -> None:
    args = pool_args("prod")
    pools: list[GpuPool] = []
    record(lambda: pools.append(GpuPool(args.spec.name, plan_pool(args))))
    assert set(pools[0].exports) >= {
        "mig",
        "fallbackMig",
        "serviceAccount",
        "bucket",
        "topic",
        "subscription",
        "controllerServiceAccount",
    }


def test_dev_mixes_n1_and_accelerator_optimized_in_separate_groups(dev: dict[str, list[RecordedResource]]) -> None:
    spot = {t.name: t.inputs for t in dev[TEMPLATE] if t.inputs["scheduling"]["provisioningModel"] == "SPOT"}
    assert spot["dev-gcp-spot-aopt-template"]["machineType"] == "g2-standard-4"
    assert spot["dev-gcp-spot-aopt-template"].get("guestAccelerators", []) == []
    n1 = spot["dev-gcp-spot-t4x1-template"]
    assert n1["machineType"] == "n1-standard-8"
    assert n1["guestAccelerators"] == [{"type": "nvidia-tesla-t4", "count": 1}]
    sizes = {m.inputs["name"]: m.inputs["targetSize"] for m in dev[MIG]}
    assert sizes == {"dev-gcp-dev-spot-aopt": 1, "dev-gcp-dev-spot-t4x1": 0, "dev-gcp-dev-od": 0}


def test_notice_zero_omits_duration_and_links_gcp_0() -> None:
    by_type = index(_build("prod", notice={"preemptionNoticeSeconds": 0}))
    t = _spot_template(by_type).inputs
    assert "preemptionNoticeDuration" not in t["scheduling"]
    assert t["metadata"][tags.NOTICE] == "gcp-0"


def test_stop_action_external_ip_and_shape() -> None:
    by_type = index(_build("prod", terminationAction="STOP", externalIp=True, targetShape="EVEN"))
    t = _spot_template(by_type).inputs
    assert t["scheduling"]["instanceTerminationAction"] == "STOP"
    assert t["networkInterfaces"][0]["accessConfigs"] == [{}]
    mig = _by_name(by_type, MIG, "-spot-aopt-lssd4-mig").inputs
    assert mig["distributionPolicyTargetShape"] == "EVEN"
    assert mig["updatePolicy"]["instanceRedistributionType"] == "PROACTIVE"


def test_autoscaled_pool_gets_autoscaler_and_no_fixed_size() -> None:
    by_type = index(_build("prod", targetShape="BALANCED", autoscaling={"minReplicas": 1, "maxReplicas": 6}))
    mig = _by_name(by_type, MIG, "-spot-aopt-lssd4-mig")
    assert "targetSize" not in mig.inputs
    (scaler,) = by_type["gcp:compute/regionAutoscaler:RegionAutoscaler"]
    assert scaler.inputs["autoscalingPolicy"]["maxReplicas"] == 6
    assert scaler.inputs["region"] == "us-central1"


def test_autoscaling_with_any_shape_is_a_clear_error() -> None:
    with pytest.raises(Exception, match=r"targetShape: cannot be autoscaled.*\(value: .ANY.\).*EVEN or\s+BALANCED"):
        _build("prod", autoscaling={"maxReplicas": 4})


def test_a_single_zone_pool_with_a_stated_reason_builds_and_records_the_waiver() -> None:
    """Without the reason the spec refuses it (tests/gcp/test_gcp_plan.py); the planner does not check it again."""
    args = pool_args("prod", zones=["us-central1-a"], optOut={"singleZone": "a compact placement is required", "idleRungs": "shared ladder"})
    ok = index(record(lambda: GpuPool("p", plan_pool(args))))
    assert "singleZone" in _spot_template(ok).inputs["metadata"][tags.WAIVER]


def test_preview_with_unknown_ids_keeps_links_plain() -> None:
    """During a real preview ids are unknown; the links a policy reads must not depend on them."""
    args = pool_args("prod")
    by_type = index(record(lambda: GpuPool(args.spec.name, plan_pool(args)), preview=True))
    md = _spot_template(by_type).inputs["metadata"]
    assert md[tags.FALLBACK_GROUP] == "train-gcp-prod-od"
    assert md[tags.CHECKPOINT_STORE].startswith("gs://ml-prod-654321-train-gcp-prod-ckpt/")


def test_the_component_builds_exactly_what_the_pure_planner_decided(prod: dict[str, list[RecordedResource]]) -> None:
    """``spotgpu preview`` validates with ``plan.plan_pool`` before any resource exists; the component
    must build from the same layout, or a name the planner accepted could still fail at build time."""
    from spotgpu_pulumi.gcp import plan

    args = pool_args("prod")
    layout = plan.plan_pool(args)
    assert sorted(m.inputs["name"] for m in prod[MIG]) == sorted((*layout.spot_migs, layout.fallback_mig))
    accounts = {r.inputs["accountId"] for r in prod["gcp:serviceaccount/account:Account"]}
    assert {layout.node_account_id, layout.controller_account_id} <= accounts
    assert [b.inputs["name"] for b in prod["gcp:storage/bucket:Bucket"]] == [layout.bucket]
