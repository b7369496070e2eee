"""GpuPool under Pulumi's mock runtime: the wire-form inputs the engine (and the policy pack) sees."""

from __future__ import annotations

import base64
import json
from typing import Any

import pulumi
import pytest
from azure_fixtures import pool_args

from spotgpu.bootstrap import MAX_BOOTSTRAP_BYTES
from spotgpu.config import PlanError
from spotgpu.contract import tags
from spotgpu.contract.tags import AGENT_MARKER
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.azure import GpuPool, plan_pool
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import children_of, index, record

VMSS = "azure-native:compute:VirtualMachineScaleSet"
ASSIGN = "azure-native:authorization:RoleAssignment"
ROLE_DEF = "azure-native:authorization:RoleDefinition"
UAI = "azure-native:managedidentity:UserAssignedIdentity"
SUB = "00000000-0000-0000-0000-000000000000"


def _run(args: PoolArgs, **kw: Any) -> tuple[list[RecordedResource], dict[str, Any]]:
    exports: dict[str, Any] = {}

    def program() -> None:
        exports.update(GpuPool(args.spec.name, plan_pool(args)).exports)

    return record(program, **kw), exports


def _record(args: PoolArgs, **kw: Any) -> list[RecordedResource]:
    return _run(args, **kw)[0]


@pytest.fixture(scope="module")
def prod() -> list[RecordedResource]:
    return _record(pool_args("prod"))


def _one(resources: list[RecordedResource], typ: str, name: str) -> RecordedResource:
    (hit,) = [r for r in resources if r.type == typ and r.name == name]
    return hit


def _spot(resources: list[RecordedResource]) -> list[RecordedResource]:
    return [r for r in index(resources)[VMSS] if r.inputs["tags"][tags.ROLE] == "spot-pool"]


def test_tree_is_a_component_with_named_children(prod: list[RecordedResource]) -> None:
    by = index(prod)
    (pool,) = by["spotgpu:azure:GpuPool"]
    kids = {r.type for r in children_of(prod, pool)}
    assert kids == {
        UAI,
        VMSS,
        "spotgpu:azure:CheckpointStorage",
        "spotgpu:azure:OnDemandFallbackGroup",
        "spotgpu:azure:ScheduledEventsRoute",  # publishEventsToEventGrid: the events reach the controller
        "spotgpu:azure:ControllerIdentity",
        "spotgpu:azure:ControllerJob",
    }
    assert sorted(r.name for r in _spot(prod)) == [
        "train-az-spot-nc24ads-a100-v4",
        "train-az-spot-nc40ads-h100-v5",
        "train-az-spot-nc48ads-a100-v4",
    ]
    assert all(r.parent for r in prod if r.type != "pulumi:pulumi:Stack")


def test_spot_scale_sets_are_flexible_spot_fd1_multi_group(prod: list[RecordedResource]) -> None:
    for r in _spot(prod):
        i = r.inputs
        assert i["orchestrationMode"] == "Flexible"
        assert i["platformFaultDomainCount"] == 1
        assert i["singlePlacementGroup"] is False
        assert i["zones"] == ["1", "2", "3"] and i["zoneBalance"] is False
        assert i["resourceGroupName"] == "ml-prod" and i["location"] == "eastus"
        assert i["vmScaleSetName"].startswith("train-az-prod-")
        assert i["sku"]["tier"] == "Standard" and i["sku"]["name"].startswith("Standard_NC")
        assert i["upgradePolicy"] == {"mode": "Manual"}
        vm = i["virtualMachineProfile"]
        assert vm["priority"] == "Spot"
        assert vm["evictionPolicy"] == "Delete"
        assert vm["billingProfile"] == {"maxPrice": -1}
        assert "scheduledEventsProfile" not in vm  # Spot gets Preempt, never Terminate
        assert "priorityMixPolicy" not in i
    # Registration order is async; key by size. Target 2 on the primary (first) size, the others empty.
    assert {r.inputs["sku"]["name"]: r.inputs["sku"]["capacity"] for r in _spot(prod)} == {
        "Standard_NC24ads_A100_v4": 2,
        "Standard_NC48ads_A100_v4": 0,
        "Standard_NC40ads_H100_v5": 0,
    }


def test_spot_scale_sets_use_the_pool_identity_as_a_list(prod: list[RecordedResource]) -> None:
    identity = _one(prod, UAI, "train-az-identity")
    assert identity.inputs["resourceName"] == "train-az-prod-pool"
    for r in [*_spot(prod), *[x for x in index(prod)[VMSS] if x.inputs["tags"][tags.ROLE] == "fallback"]]:
        ident = r.inputs["identity"]
        assert ident["type"] == "UserAssigned"
        assert isinstance(ident["userAssignedIdentities"], list) and len(ident["userAssignedIdentities"]) == 1
        assert "UserAssignedIdentity/train-az-identity" in ident["userAssignedIdentities"][0]
        assert identity.urn in r.dependencies


def test_os_network_and_disk_profile(prod: list[RecordedResource]) -> None:
    for r in _spot(prod):
        vm = r.inputs["virtualMachineProfile"]
        os_profile = vm["osProfile"]
        assert 1 <= len(os_profile["computerNamePrefix"]) <= 15
        assert os_profile["adminUsername"] == "spotgpu"
        linux = os_profile["linuxConfiguration"]
        assert linux["disablePasswordAuthentication"] is True
        assert linux["ssh"]["publicKeys"][0]["keyData"].startswith("ssh-ed25519 ")
        assert linux["ssh"]["publicKeys"][0]["path"] == "/home/spotgpu/.ssh/authorized_keys"
        net = vm["networkProfile"]
        assert net["networkApiVersion"] == "2020-11-01"
        (nic,) = net["networkInterfaceConfigurations"]
        assert nic["primary"] is True and nic["deleteOption"] == "Delete"
        assert nic["ipConfigurations"][0]["subnet"]["id"].endswith("/virtualNetworks/ml/subnets/gpu")
        disk = vm["storageProfile"]["osDisk"]
        assert disk["createOption"] == "FromImage" and disk["deleteOption"] == "Delete"
        assert vm["storageProfile"]["imageReference"] == {
            "publisher": "microsoft-dsvm",
            "offer": "ubuntu-hpc",
            "sku": "2204",
            "version": "latest",
        }


def _bootstrap(r: RecordedResource) -> str:
    data = base64.b64decode(r.inputs["virtualMachineProfile"]["osProfile"]["customData"])
    assert len(data) <= MAX_BOOTSTRAP_BYTES["azure"]
    return data.decode()


def _agent_config(script: str) -> dict[str, Any]:
    body = script.split("<<'SPOTGPU_CONFIG'\n", 1)[1].split("\nSPOTGPU_CONFIG", 1)[0]
    return json.loads(body)


def test_custom_data_is_the_shared_bootstrap_with_this_pools_agent_config(prod: list[RecordedResource]) -> None:
    spot = _spot(prod)[0]
    fallback = _one(prod, VMSS, "train-az-fallback-ondemand")
    s_cfg, f_cfg = _agent_config(_bootstrap(spot)), _agent_config(_bootstrap(fallback))
    assert AGENT_MARKER in _bootstrap(spot)
    assert s_cfg["provider"] == "azure" and s_cfg["capacityType"] == "spot"
    assert f_cfg["capacityType"] == "on-demand"
    assert s_cfg["checkpointStore"] == spot.inputs["tags"][tags.CHECKPOINT_STORE] == f_cfg["checkpointStore"]
    assert str(s_cfg["checkpointIntervalSeconds"]) == spot.inputs["tags"][tags.CHECKPOINT_INTERVAL]
    assert s_cfg["notice"]["provider"] == "azure"
    # the controller's state prefix, in the blob-endpoint form obstore opens without extra settings
    control = "https://spotgpuprodckpt.blob.core.windows.net/checkpoints/train-az/_controller"
    assert s_cfg["controlStore"] == f_cfg["controlStore"] == control


def test_spot_tags_link_store_fallback_ladder_workload_interval_notice(prod: list[RecordedResource]) -> None:
    t = _spot(prod)[0].inputs["tags"]
    assert t[tags.ROLE] == "spot-pool" and t[tags.POOL] == "train-az"
    assert t[tags.CHECKPOINT_STORE] == "az://spotgpuprodckpt/checkpoints/train-az"
    assert t[tags.FALLBACK_GROUP] == _one(prod, VMSS, "train-az-fallback-ondemand").inputs["vmScaleSetName"]
    assert tags.decode_ladder(t[tags.LADDER])
    assert tags.decode_workload(t[tags.WORKLOAD])
    assert int(t[tags.CHECKPOINT_INTERVAL]) > 0
    assert t[tags.NOTICE] == "azure"
    assert all(len(v) <= 256 for v in t.values())


def test_spot_restore_and_event_grid_follow_the_spec(prod: list[RecordedResource]) -> None:
    for r in _spot(prod):
        assert r.inputs["spotRestorePolicy"] == {"enabled": True, "restoreTimeout": "PT1H"}
        assert r.inputs["scheduledEventsPolicy"] == {
            "scheduledEventsAdditionalPublishingTargets": {"eventGridAndResourceGraph": {"enable": True}}
        }
    dev = _record(pool_args("dev"))
    for r in _spot(dev):
        assert "spotRestorePolicy" not in r.inputs and "scheduledEventsPolicy" not in r.inputs


def test_capacity_is_left_to_the_controller_after_creation(prod: list[RecordedResource]) -> None:
    for r in index(prod)[VMSS]:
        assert list(r.request.ignoreChanges) == ["sku.capacity"]


def test_fallback_group_is_regular_empty_with_terminate_notice(prod: list[RecordedResource]) -> None:
    r = _one(prod, VMSS, "train-az-fallback-ondemand")
    i = r.inputs
    assert i["vmScaleSetName"] == "train-az-prod-ondemand"
    assert i["orchestrationMode"] == "Flexible" and i["platformFaultDomainCount"] == 1
    assert i["sku"]["capacity"] == 0 and i["sku"]["name"] == "Standard_NC24ads_A100_v4"
    vm = i["virtualMachineProfile"]
    assert vm["priority"] == "Regular"
    assert "evictionPolicy" not in vm and "billingProfile" not in vm
    assert vm["scheduledEventsProfile"] == {
        "terminateNotificationProfile": {"enable": True, "notBeforeTimeout": "PT10M"}
    }
    assert i["tags"][tags.ROLE] == "fallback" and i["tags"][tags.LADDER]
    assert "spotRestorePolicy" not in i
    parent = _one(prod, "spotgpu:azure:OnDemandFallbackGroup", "train-az-fallback")
    assert r.parent == parent.urn


def test_checkpoint_account_is_hardened(prod: list[RecordedResource]) -> None:
    acct = _one(prod, "azure-native:storage:StorageAccount", "train-az-checkpoints-account")
    i = acct.inputs
    assert i["accountName"] == "spotgpuprodckpt" and i["kind"] == "StorageV2"
    assert i["enableHttpsTrafficOnly"] is True
    assert i["minimumTlsVersion"] == "TLS1_2"
    assert i["allowBlobPublicAccess"] is False
    assert i["allowSharedKeyAccess"] is False
    assert i["sku"] == {"name": "Standard_ZRS"}
    assert i["tags"][tags.ROLE] == "checkpoint-store"
    assert acct.request.protect is True  # prod: forceDestroy false


def test_blob_versioning_retention_container_and_lifecycle(prod: list[RecordedResource]) -> None:
    svc = _one(prod, "azure-native:storage:BlobServiceProperties", "train-az-checkpoints-blob-service").inputs
    assert svc["blobServicesName"] == "default" and svc["isVersioningEnabled"] is True
    assert svc["deleteRetentionPolicy"] == {"enabled": True, "days": 7}
    box = _one(prod, "azure-native:storage:BlobContainer", "train-az-checkpoints-container").inputs
    assert box["containerName"] == "checkpoints" and box["publicAccess"] == "None"
    rule = _one(prod, "azure-native:storage:ManagementPolicy", "train-az-checkpoints-lifecycle").inputs
    assert rule["managementPolicyName"] == "default"
    (r,) = rule["policy"]["rules"]
    assert r["type"] == "Lifecycle" and r["enabled"] is True
    assert r["definition"]["filters"] == {"blobTypes": ["blockBlob"], "prefixMatch": ["checkpoints/train-az/"]}
    actions = r["definition"]["actions"]
    assert actions["version"]["delete"]["daysAfterCreationGreaterThan"] == 7
    assert actions["snapshot"]["delete"]["daysAfterCreationGreaterThan"] == 7
    assert "baseBlob" not in actions  # committed generations are the library's to expire


def test_pool_identity_gets_blob_contributor_on_the_container_only(prod: list[RecordedResource]) -> None:
    grant = _one(prod, ASSIGN, "train-az-checkpoints-pool-blob")
    i = grant.inputs
    assert i["scope"] == (
        f"/subscriptions/{SUB}/resourceGroups/ml-prod/providers/Microsoft.Storage/storageAccounts/spotgpuprodckpt"
        "/blobServices/default/containers/checkpoints"
    )
    assert i["roleDefinitionId"].endswith("/roleDefinitions/ba92f5b4-2d11-453d-a403-e96b0029c9fe")
    assert i["principalType"] == "ServicePrincipal"
    assert i["principalId"]  # the pool identity's principal id (mock output)
    container = _one(prod, "azure-native:storage:BlobContainer", "train-az-checkpoints-container")
    assert container.urn in grant.dependencies


def test_controller_identity_roles_are_scoped_to_the_pool(prod: list[RecordedResource]) -> None:
    defs = {r.name: r.inputs for r in index(prod)[ROLE_DEF]}
    cap = defs["train-az-controller-role-capacity"]
    assert cap["permissions"] == [
        {
            "actions": [
                "Microsoft.Compute/virtualMachineScaleSets/read",
                "Microsoft.Compute/virtualMachineScaleSets/write",
                "Microsoft.Compute/virtualMachineScaleSets/delete/action",
            ]
        }
    ]
    assert cap["assignableScopes"] == [f"/subscriptions/{SUB}/resourceGroups/ml-prod"]
    grants = {r.name: r for r in index(prod)[ASSIGN] if r.name.startswith("train-az-controller-")}
    capacity = [g for n, g in grants.items() if "-capacity-" in n]
    scopes = sorted(g.inputs["scope"].rsplit("/", 1)[1] for g in capacity)
    assert scopes == sorted(r.inputs["vmScaleSetName"] for r in index(prod)[VMSS])
    for g in capacity:
        assert g.inputs["roleDefinitionId"].endswith(cap["roleDefinitionId"])
    assert grants["train-az-controller-blob"].inputs["scope"].endswith("/containers/checkpoints")
    assert grants["train-az-controller-member-reader"].inputs["scope"] == f"/subscriptions/{SUB}/resourceGroups/ml-prod"
    controller = _one(prod, UAI, "train-az-controller-identity")
    assert controller.inputs["tags"][tags.ROLE] == "controller"


def test_role_assignment_names_are_stable_guids(prod: list[RecordedResource]) -> None:
    again = _record(pool_args("prod"))
    first = {r.name: r.inputs["roleAssignmentName"] for r in index(prod)[ASSIGN]}
    second = {r.name: r.inputs["roleAssignmentName"] for r in index(again)[ASSIGN]}
    assert first == second and len(set(first.values())) == len(first) == 9


def test_exports_name_what_operators_and_the_controller_need() -> None:
    _, e = _run(pool_args("prod"))
    sets = ["train-az-prod-nc24ads-a100-v4", "train-az-prod-nc48ads-a100-v4", "train-az-prod-nc40ads-h100-v5"]
    assert e["scaleSets"] == sets and e["spotGroups"] == sets  # lists, not comma-joined strings
    assert e["fallbackScaleSet"] == "train-az-prod-ondemand"
    assert e["checkpointStore"] == "az://spotgpuprodckpt/checkpoints/train-az"
    for key in ("identityClientId", "identityPrincipalId", "storageAccount", "container", "controllerClientId"):
        assert isinstance(e[key], pulumi.Output)


def test_options_reach_the_wire() -> None:
    args = pool_args(
        "prod",
        on_demand_ceiling=8,  # the H100 fallback size lists at 6.98
        evictionPolicy="Deallocate",
        maxPrice=3.25,
        priorityMix={"baseRegularPriorityCount": 1, "regularPriorityPercentageAboveBase": 25},
        terminateNotificationTimeout="PT15M",
        fallbackVmSize="Standard_NC40ads_H100_v5",
        checkpoint={"forceDestroy": True, "noncurrentVersionDays": 30},
    )
    res = _record(args)
    for r in _spot(res):
        vm = r.inputs["virtualMachineProfile"]
        assert vm["evictionPolicy"] == "Deallocate" and vm["billingProfile"] == {"maxPrice": 3.25}
        assert r.inputs["priorityMixPolicy"] == {
            "baseRegularPriorityCount": 1,
            "regularPriorityPercentageAboveBase": 25,
        }
    fb = _one(res, VMSS, "train-az-fallback-ondemand").inputs
    assert fb["sku"]["name"] == "Standard_NC40ads_H100_v5"
    assert (
        fb["virtualMachineProfile"]["scheduledEventsProfile"]["terminateNotificationProfile"]["notBeforeTimeout"]
        == "PT15M"
    )
    acct = _one(res, "azure-native:storage:StorageAccount", "train-az-checkpoints-account")
    assert acct.request.protect is False
    svc = _one(res, "azure-native:storage:BlobServiceProperties", "train-az-checkpoints-blob-service").inputs
    assert svc["deleteRetentionPolicy"]["days"] == 30


def test_bad_spec_fails_with_one_line_before_any_resource() -> None:
    args = pool_args("prod", platformFaultDomainCount=3)
    with pytest.raises(PlanError, match=r"^spotgpu:pools\[train-az\]\.platformFaultDomainCount: is above 1 with N-series"):
        plan_pool(args)  # the plan GpuPool builds from: nothing exists yet


def test_preview_mode_registers_the_same_static_tree() -> None:
    res = _record(pool_args("prod"), preview=True)
    assert len(index(res)[VMSS]) == 4 and len(index(res)[ASSIGN]) == 9


def test_every_taggable_resource_carries_the_base_tags(prod: list[RecordedResource]) -> None:
    taggable = [r for r in prod if r.custom and r.type.split(":")[1] in {"compute", "storage", "managedidentity"}]
    with_tags = [r for r in taggable if "tags" in r.inputs]
    assert {r.type for r in with_tags} == {VMSS, UAI, "azure-native:storage:StorageAccount"}
    for r in with_tags:
        assert r.inputs["tags"]["spotgpu-environment"] == "prod"
        assert r.inputs["tags"]["managed-by"] == "spotgpu"
        assert r.inputs["tags"][tags.POOL] == "train-az"


def test_scheduled_events_reach_a_queue_the_controller_reads(prod: list[RecordedResource]) -> None:
    """Defect (issue 36): publishEventsToEventGrid published the pool's Scheduled Events "for the
    controller", but nothing routed them anywhere the controller reads."""
    from spotgpu.contract.sources import AZURE_QUEUE, AZURE_SCHEDULED_EVENT, AZURE_SYSTEM_TOPIC_TYPE
    from spotgpu.controller.config import parse_controller_config
    from spotgpu.controller.render import CONFIG_ENV
    from spotgpu_pulumi.azure.roles import STORAGE_QUEUE_DATA_MESSAGE_PROCESSOR, STORAGE_QUEUE_DATA_MESSAGE_SENDER

    queue = _one(prod, "azure-native:storage:Queue", "train-az-events-queue").inputs
    assert queue["queueName"] == "scheduled-events"
    assert queue["accountName"] == "train-az-checkpoints-account"  # the checkpoint account's name (the mock echoes it)
    topic = _one(prod, "azure-native:eventgrid:SystemTopic", "train-az-events-topic").inputs
    assert topic["topicType"] == AZURE_SYSTEM_TOPIC_TYPE and topic["location"] == "global"
    assert topic["source"].startswith("/subscriptions/") and topic["identity"] == {"type": "SystemAssigned"}
    sub = _one(prod, "azure-native:eventgrid:SystemTopicEventSubscription", "train-az-events-subscription").inputs
    assert sub["filter"]["includedEventTypes"] == [AZURE_SCHEDULED_EVENT]
    assert sub["filter"]["subjectBeginsWith"].endswith("/resourceGroups/ml-prod/")
    delivery = sub["deliveryWithResourceIdentity"]
    assert delivery["identity"] == {"type": "SystemAssigned"}  # the account refuses shared keys
    assert delivery["destination"]["endpointType"] == "StorageQueue"
    assert delivery["destination"]["queueName"] == "scheduled-events"
    assert delivery["destination"]["queueMessageTimeToLiveInSeconds"] == AZURE_QUEUE.message_ttl_seconds
    grants = {r.name: r.inputs for r in index(prod)[ASSIGN]}
    queue_scope = "/queueServices/default/queues/scheduled-events"
    reader, writer = grants["train-az-controller-events-queue"], grants["train-az-events-eventgrid-events-queue"]
    assert reader["scope"].endswith(queue_scope) and reader["roleDefinitionId"].endswith(STORAGE_QUEUE_DATA_MESSAGE_PROCESSOR)
    assert writer["scope"].endswith(queue_scope) and writer["roleDefinitionId"].endswith(STORAGE_QUEUE_DATA_MESSAGE_SENDER)
    job = next(r for r in index(prod)["azure-native:app:Job"])
    env = {e["name"]: e.get("value") for e in job.inputs["template"]["containers"][0]["env"]}
    [pool] = parse_controller_config(json.loads(env[CONFIG_ENV])).pools
    assert pool.events_queue_url == "https://spotgpuprodckpt.queue.core.windows.net/scheduled-events"  # type: ignore[union-attr]
