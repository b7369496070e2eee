"""The standalone components: the Azure checkpoint store and one fallback group per cloud.

Run in its own interpreter with ``provider_checks.py`` by ``test_package_provider.py``
(``pulumi.provider`` and the Google Cloud client libraries cannot share one process).
Each construct call goes through the component provider under the mock runtime and
must build the same tree as the Python component a pool builds; a bad plain value
fails as one line naming the key, and an Output passes through unchecked.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pytest
from provider_checks import _construct_inputs, _prod_pool, _schema, _tree
from pulumi.provider.experimental.component import ComponentProvider

from spotgpu.config import parse_stack_config
from spotgpu_pulumi.clouds import plan_stack
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import record
from spotgpu_pulumi.package import COMPONENTS, PACKAGE_NAME
from spotgpu_pulumi.platform import deploy

ACCOUNT = "arn:aws:{}:us-east-1:123456789012:{}"  # the mocks' ARNs (spotgpu_pulumi.offline.mocks)


def _provider() -> ComponentProvider:
    return ComponentProvider(COMPONENTS, PACKAGE_NAME, version="0.1.0")


def _construct(name: str, component: str, inputs: dict[str, Any], seen: dict[str, Any] | None = None) -> Any:
    """A construct call as the engine makes it; ``seen`` receives the resolved outputs."""
    state = _provider().construct(name, f"spotgpu:index:{component}", inputs, pulumi.ResourceOptions()).state
    if seen is not None:
        pulumi.Output.all(**state).apply(seen.update)
    return state


def _one(resources: list[RecordedResource], typ: str, suffix: str = "") -> RecordedResource:
    found = [r for r in resources if r.type == typ and r.name.endswith(suffix)]
    assert len(found) == 1, (typ, suffix, [r.name for r in found])
    return found[0]


def _fails(name: str, component: str, inputs: dict[str, Any], pattern: str) -> str:
    with pytest.raises(Exception, match=pattern) as err:
        record(lambda: _construct(name, component, inputs))
    message = str(err.value)
    assert "\n" not in message.strip(), message  # one line
    return message


def test_schema_lists_the_standalone_components_with_their_inputs_and_outputs() -> None:
    resources = _schema()["resources"]
    pool_inputs = {"environment", "owner", "workload", "ladder", "capacity"}
    expected = {
        "AzureCheckpointStore": (
            {"resourceGroupName", "location", "storageAccountName", "prefix", "writerPrincipalId"},
            ["accountName", "containerName", "checkpointStore"],
        ),
        "AwsFallbackGroup": (
            pool_inputs | {"instanceTypes", "subnets", "imageId", "instanceProfileName", "queueArn", "spotGroupArn"},
            ["groupName", "groupArn", "controllerRoleArn", "controllerRoleName", "checkpointStore"],
        ),
        "GcpFallbackGroup": (
            pool_inputs
            | {"project", "region", "zones", "machineTypes", "image", "network", "subnetwork"}
            | {"nodeServiceAccount", "subscriptionName"},
            ["migName", "controllerEmail", "checkpointStore"],
        ),
        "AzureFallbackGroup": (
            pool_inputs
            | {"resourceGroupName", "location", "vmSizes", "zones", "subnetId", "sshPublicKey", "storageAccountName"}
            | {"identityId"},
            ["scaleSetName", "scaleSetId", "checkpointStore"],
        ),
    }
    for component, (required, outputs) in expected.items():
        resource = resources[f"spotgpu:index:{component}"]
        assert resource["isComponent"] is True and resource["description"], component
        assert set(resource["requiredInputs"]) == required, component
        assert list(resource["properties"]) == outputs and set(resource["required"]) == set(outputs), component
        for key, prop in [*resource["inputProperties"].items(), *resource["properties"].items()]:
            assert prop.get("description"), f"{component}.{key} has no description"
    ids = {
        "AzureCheckpointStore": ["writerPrincipalId", "resourceGroupName"],
        "AwsFallbackGroup": ["instanceProfileName", "queueArn", "spotGroupArn", "bucketArn", "imageId"],
        "GcpFallbackGroup": ["nodeServiceAccount", "subscriptionName", "bucketName", "image"],
        "AzureFallbackGroup": ["identityId", "subnetId", "resourceGroupName"],
    }
    for component, keys in ids.items():  # Input[str]: an Output of the consuming program is accepted
        inputs = resources[f"spotgpu:index:{component}"]["inputProperties"]
        assert all("plain" not in inputs[k] for k in keys), component
    # Names and scopes derive from these: plain.
    assert resources["spotgpu:index:AwsFallbackGroup"]["inputProperties"]["instanceTypes"]["plain"] is True
    assert resources["spotgpu:index:AwsFallbackGroup"]["inputProperties"]["workload"]["$ref"].endswith(":WorkloadArgs")


# --- Azure checkpoint store ---------------------------------------------------------------------------------------

PRINCIPAL = "11111111-2222-3333-4444-555555555555"
STORE: dict[str, Any] = {
    "resourceGroupName": "ml-prod",
    "location": "eastus",
    "storageAccountName": "teamckpt01",
    "prefix": "llm/run-1",
    "writerPrincipalId": PRINCIPAL,
    "noncurrentVersionDays": 3,
}


def test_azure_checkpoint_store_is_the_pool_storage_component() -> None:
    from spotgpu_pulumi.azure import naming
    from spotgpu_pulumi.azure.plan import StoragePlan
    from spotgpu_pulumi.azure.roles import STORAGE_BLOB_DATA_CONTRIBUTOR, Grant, Scope
    from spotgpu_pulumi.azure.storage import CheckpointStorage, CheckpointStorageArgs

    seen: dict[str, Any] = {}
    built = record(lambda: _construct("ckpt", "AzureCheckpointStore", STORE, seen))
    grant = Grant(
        key="writer-blob",
        principal="pool",
        role=STORAGE_BLOB_DATA_CONTRIBUTOR,
        custom_role=None,
        scope=Scope("container", "ml-prod", "checkpoints", "teamckpt01"),
        guid=naming.stable_guid("teamckpt01", "ml-prod", "ckpt", "writer", "blob", "checkpoints"),
    )
    plan = StoragePlan(
        account="teamckpt01", container="checkpoints", prefix="llm/run-1", url="az://teamckpt01/checkpoints/llm/run-1",
        sku="Standard_ZRS", version_days=3, protect=True, tags={"managed-by": "spotgpu"},
    )  # fmt: skip
    direct = record(lambda: CheckpointStorage("ckpt-checkpoints", CheckpointStorageArgs(
        plan=plan, resource_group="ml-prod", location="eastus",
        subscription_id=pulumi.Output.from_input("00000000-0000-0000-0000-000000000000"),
        writer_principal_id=PRINCIPAL, writer_grant=grant)))  # fmt: skip
    root = "spotgpu:azure:CheckpointStorage"
    assert _tree(built, root) == _tree(direct, root)
    wrapper = _one(built, "spotgpu:index:AzureCheckpointStore")
    assert _one(built, root).parent == wrapper.urn
    account = _one(built, "azure-native:storage:StorageAccount")
    assert account.request.protect is True and account.inputs["allowSharedKeyAccess"] is False
    assert _one(built, "azure-native:storage:BlobContainer").request.protect is True
    assignment = _one(built, "azure-native:authorization:RoleAssignment")
    assert assignment.inputs["scope"].endswith(
        "/storageAccounts/teamckpt01/blobServices/default/containers/checkpoints"
    )
    rule = _one(built, "azure-native:storage:ManagementPolicy").inputs["policy"]["rules"][0]
    assert rule["definition"]["filters"]["prefixMatch"] == ["checkpoints/llm/run-1/"]
    assert seen["checkpointStore"] == "az://teamckpt01/checkpoints/llm/run-1"  # the checkpoint library's az:// form


def test_azure_checkpoint_store_checks_plain_values_and_passes_outputs() -> None:
    _fails("ckpt", "AzureCheckpointStore", {**STORE, "storageAccountName": "Team_Ckpt"},
           r'^ckpt\.storageAccountName: .*"Team_Ckpt".*fix: use 3-24 lowercase letters and digits')  # fmt: skip
    _fails("ckpt", "AzureCheckpointStore", {**STORE, "storageAccountName": "azure"},
           r"^ckpt\.storageAccountName: contains the reserved word 'azure' .*fix: choose a name")  # fmt: skip
    _fails("ckpt", "AzureCheckpointStore", {**STORE, "writerPrincipalId": "team-identity"},
           r'^ckpt\.writerPrincipalId: .*"team-identity".*fix: give the identity.s principal \(object\) id')  # fmt: skip
    _fails("ckpt", "AzureCheckpointStore", {**STORE, "noncurrentVersionDays": 0},
           r"^ckpt\.noncurrentVersionDays: .*fix: use 1 to 365 days")  # fmt: skip
    _fails("ckpt", "AzureCheckpointStore", {**STORE, "resourceGroupName": "ml-prod."},
           r'^ckpt\.resourceGroupName: .*\(value: "ml-prod\."\); fix: name an existing resource group: 1-90 ')  # fmt: skip

    def with_identity() -> Any:
        import pulumi_azure_native.managedidentity as managedidentity

        identity = managedidentity.UserAssignedIdentity("team-id", resource_group_name="ml-prod")
        return _construct("ckpt", "AzureCheckpointStore", {**STORE, "writerPrincipalId": identity.principal_id})

    built = record(with_identity)
    identity = _one(built, "azure-native:managedidentity:UserAssignedIdentity")
    assignment = _one(built, "azure-native:authorization:RoleAssignment")
    assert assignment.inputs["principalId"] not in ("", PRINCIPAL)  # the identity's, as an Output
    assert identity.urn in assignment.dependencies


def _team_group() -> Any:
    """The consuming program's own ResourceGroup; the mocks echo the logical name as its name."""
    import pulumi_azure_native.resources as resources

    return resources.ResourceGroup("ml-team-rg", resource_group_name="ml-team-rg", location="eastus").name


def test_azure_checkpoint_store_takes_the_resource_group_as_an_output() -> None:
    from spotgpu_pulumi.azure import naming
    from spotgpu_pulumi.azure.plan import StoragePlan
    from spotgpu_pulumi.azure.roles import STORAGE_BLOB_DATA_CONTRIBUTOR, Grant, Scope
    from spotgpu_pulumi.azure.storage import CheckpointStorage, CheckpointStorageArgs

    built = record(lambda: _construct("ckpt", "AzureCheckpointStore", {**STORE, "resourceGroupName": _team_group()}))
    guid = naming.stable_guid("teamckpt01", naming.DEFERRED_RESOURCE_GROUP_KEY, "ckpt", "writer", "blob", "checkpoints")

    def direct_program() -> Any:
        group = _team_group()
        grant = Grant(key="writer-blob", principal="pool", role=STORAGE_BLOB_DATA_CONTRIBUTOR, custom_role=None,
                      scope=Scope("container", group, "checkpoints", "teamckpt01"), guid=guid)  # fmt: skip
        plan = StoragePlan(
            account="teamckpt01", container="checkpoints", prefix="llm/run-1",
            url="az://teamckpt01/checkpoints/llm/run-1", sku="Standard_ZRS", version_days=3, protect=True,
            tags={"managed-by": "spotgpu"},
        )  # fmt: skip
        return CheckpointStorage("ckpt-checkpoints", CheckpointStorageArgs(
            plan=plan, resource_group=group, location="eastus",
            subscription_id=pulumi.Output.from_input("00000000-0000-0000-0000-000000000000"),
            writer_principal_id=PRINCIPAL, writer_grant=grant))  # fmt: skip

    root = "spotgpu:azure:CheckpointStorage"
    assert _tree(built, root) == _tree(record(direct_program), root)
    rg = _one(built, "azure-native:resources:ResourceGroup")
    storage = [r for r in built if r.type.startswith("azure-native:storage:")]
    assert len(storage) == 4 and {r.inputs["resourceGroupName"] for r in storage} == {"ml-team-rg"}
    assignment = _one(built, "azure-native:authorization:RoleAssignment")
    assert assignment.inputs["scope"] == (
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-team-rg/providers/Microsoft.Storage"
        "/storageAccounts/teamckpt01/blobServices/default/containers/checkpoints"
    )
    assert rg.urn in assignment.property_dependencies["scope"]
    assert assignment.inputs["roleAssignmentName"] == guid  # known at plan time, whatever the group resolves to
    assert assignment.request.deleteBeforeReplace is True  # a plain group's assignment (another GUID) goes first
    plain = record(lambda: _construct("ckpt", "AzureCheckpointStore", STORE))
    assert _one(plain, "azure-native:authorization:RoleAssignment").inputs["roleAssignmentName"] == naming.stable_guid(
        "teamckpt01", "ml-prod", "ckpt", "writer", "blob", "checkpoints"
    )


# --- Fallback groups ----------------------------------------------------------------------------------------------


def _pool_ids(cloud: str, direct: list[RecordedResource]) -> dict[str, Any]:
    """The ids of the pool's other parts, as a program that built them itself would pass them.

    The mocks' ARNs and ARM ids are not real-looking (a plain one would be refused), so
    those go in as Outputs, which pass through unchecked, as from another resource.
    """
    if cloud == "aws":
        profile = _one(direct, "aws:iam/instanceProfile:InstanceProfile")
        return {
            "instanceProfileName": profile.inputs.get("name", profile.name),
            "queueArn": ACCOUNT.format("sqs", _one(direct, "aws:sqs/queue:Queue").name),
            "spotGroupArn": pulumi.Output.from_input(
                ACCOUNT.format("autoscaling", _one(direct, "aws:autoscaling/group:Group", "-spot-group").name)
            ),
            "bucketArn": pulumi.Output.from_input(ACCOUNT.format("s3", _one(direct, "aws:s3/bucket:Bucket").name)),
        }
    if cloud == "gcp":
        node = _one(direct, "gcp:serviceaccount/account:Account", "-node-sa")
        return {
            "nodeServiceAccount": f"{node.inputs['accountId']}@project.iam.gserviceaccount.com",
            "subscriptionName": _one(direct, "gcp:pubsub/subscription:Subscription").inputs["name"],
            "bucketName": _one(direct, "gcp:storage/bucket:Bucket").inputs["name"],
        }
    identity = _one(direct, "azure-native:managedidentity:UserAssignedIdentity", "train-az-identity")
    rid = f"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/{identity.type}/{identity.name}"
    return {"identityId": pulumi.Output.from_input(rid)}


_POOLS = {"aws": "train-aws", "gcp": "train-gcp", "azure": "train-az"}
_GROUPS = {"aws": "AwsFallbackGroup", "gcp": "GcpFallbackGroup", "azure": "AzureFallbackGroup"}


def _pool_and_inputs(cloud: str) -> tuple[list[RecordedResource], dict[str, Any]]:
    raw, pool = _prod_pool(cloud)
    direct = record(lambda: deploy(plan_stack(parse_stack_config(raw))), stack="prod")
    return direct, {**_construct_inputs(raw, pool), **_pool_ids(cloud, direct)}


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_fallback_group_builds_the_pools_fallback_tree(cloud: str) -> None:
    direct, inputs = _pool_and_inputs(cloud)
    seen: dict[str, Any] = {}
    built = record(lambda: _construct(_POOLS[cloud], _GROUPS[cloud], inputs, seen), stack="prod")
    root = f"spotgpu:{cloud}:OnDemandFallbackGroup"
    wrapper = _one(built, f"spotgpu:index:{_GROUPS[cloud]}")
    assert _one(built, root).parent == wrapper.urn
    assert not [r for r in built if r.type.endswith("GpuPool") or "spot" in r.name]  # the group only
    assert _tree(built, root) == _tree(direct, root)
    assert len(_tree(direct, root)) >= 2
    assert (
        seen["checkpointStore"]
        == {
            "aws": "s3://spotgpu-prod-train-aws-checkpoints/train-aws",
            "gcp": "gs://ml-prod-654321-train-gcp-prod-ckpt/train-gcp",
            "azure": "az://spotgpuprodckpt/checkpoints/train-az",
        }[cloud]
    )
    names = {"aws": "groupName", "gcp": "migName", "azure": "scaleSetName"}
    assert seen[names[cloud]] == {
        "aws": "spotgpu-prod-train-aws-fallback", "gcp": "train-gcp-prod-od", "azure": "train-az-prod-ondemand",
    }[cloud]  # fmt: skip


def test_gcp_fallback_group_of_a_gang_pool_starts_the_gang_like_the_pools_own() -> None:
    """Defect: GcpFallbackGroup rendered its startup script outside the plan, without the pool's gang launch
    (the AWS and Azure groups had it); both now take the script from the one plan."""
    from spotgpu.bootstrap import GANG_UNIT

    raw, pool = _prod_pool("gcp")
    pool.update(gang={"command": ["/opt/job/train.py"], "nodes": 2, "rendezvous": {"privateIp": "10.128.0.10"}},
                agentPackage="spotgpu[gcp,torch]==0.1.0")
    direct = record(lambda: deploy(plan_stack(parse_stack_config(raw))), stack="prod")
    inputs = {**_construct_inputs(raw, pool), **_pool_ids("gcp", direct)}
    built = record(lambda: _construct("train-gcp", "GcpFallbackGroup", inputs), stack="prod")
    root = "spotgpu:gcp:OnDemandFallbackGroup"
    assert _tree(built, root) == _tree(direct, root)
    template = _one(built, "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate")
    assert GANG_UNIT in template.inputs["metadataStartupScript"]


@pytest.mark.parametrize(
    ("cloud", "key", "value", "fix"),
    [
        ("aws", "queueArn", "train-aws-events", r"give the interruption queue's ARN"),
        ("aws", "spotGroupArn", "arn:aws:ec2:us-east-1:123456789012:fleet/fleet-0abc", r"mode asg: give the spot Auto"),
        ("aws", "instanceProfileName", "node profile", r"give the name of the nodes' IAM instance profile"),
        ("aws", "bucketArn", "arn:aws:s3:::team-ckpt", r"pass the ARN of spotgpu-prod-train-aws-checkpoints"),
        ("gcp", "nodeServiceAccount", "train-gcp-vm", r"give the VMs' service account email"),
        ("gcp", "bucketName", "team-ckpt", r"pass ml-prod-654321-train-gcp-prod-ckpt"),
        ("azure", "identityId", "train-az-identity", r"give the ARM id of a user-assigned identity"),
    ],
)
def test_fallback_group_reports_a_bad_plain_value_with_the_key(cloud: str, key: str, value: str, fix: str) -> None:
    raw, pool = _prod_pool(cloud)
    inputs = {**_construct_inputs(raw, pool), **_plain_ids(cloud), key: value}
    name = _POOLS[cloud]
    message = _fails(
        name, _GROUPS[cloud], inputs, rf"^{name}\.{key}: .*\(value: {re.escape(json.dumps(value))}\); fix: {fix}"
    )
    assert "Traceback" not in message


def _plain_ids(cloud: str) -> dict[str, str]:
    return {
        "aws": {
            "instanceProfileName": "train-aws-node",
            "queueArn": "arn:aws:sqs:us-east-1:123456789012:spotgpu-prod-train-aws-events",
            "spotGroupArn": "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:0f1e2d3c:"
            "autoScalingGroupName/spotgpu-prod-train-aws-spot",
        },
        "gcp": {
            "nodeServiceAccount": "train-gcp-prod-vm@ml-prod-654321.iam.gserviceaccount.com",
            "subscriptionName": "train-gcp-prod-preempted-ctl",
        },
        "azure": {
            "identityId": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-prod/providers"
            "/Microsoft.ManagedIdentity/userAssignedIdentities/train-az-prod-pool"
        },
    }[cloud]


def test_fallback_group_takes_plain_ids_and_outputs_of_other_resources() -> None:
    """Well-formed plain ids reach the wire as given; an Output (which a plain check would refuse) passes through."""
    raw, pool = _prod_pool("aws")
    inputs = {**_construct_inputs(raw, pool), **_plain_ids("aws")}
    built = record(lambda: _construct("train-aws", "AwsFallbackGroup", inputs), stack="prod")
    policy = json.loads(_one(built, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    resources = json.dumps(policy["Statement"])
    assert _plain_ids("aws")["spotGroupArn"] in resources and _plain_ids("aws")["queueArn"] in resources
    assert "arn:aws:s3:::spotgpu-prod-train-aws-checkpoints/train-aws/_controller/*" in resources  # planned bucket
    template = _one(built, "aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["iamInstanceProfile"]["name"] == "train-aws-node"

    def with_queue() -> Any:
        import pulumi_aws as aws

        queue = aws.sqs.Queue("team-queue")  # mock ARN arn:aws:sqs:us-east-1:123456789012:team-queue
        group = aws.autoscaling.Group("team-spot", max_size=1, min_size=0)  # mock ARN: not a real ASG ARN
        return _construct("train-aws", "AwsFallbackGroup", {**inputs, "queueArn": queue.arn, "spotGroupArn": group.arn})

    built = record(with_queue, stack="prod")
    policy_resource = _one(built, "aws:iam/rolePolicy:RolePolicy")
    resources = json.dumps(json.loads(policy_resource.inputs["policy"])["Statement"])
    assert ACCOUNT.format("autoscaling", "team-spot") in resources and ACCOUNT.format("sqs", "team-queue") in resources
    assert _one(built, "aws:sqs/queue:Queue").urn in policy_resource.dependencies


def test_azure_fallback_group_takes_the_resource_group_as_an_output() -> None:
    raw, pool = _prod_pool("azure")
    inputs = {**_construct_inputs(raw, pool), **_plain_ids("azure")}
    built = record(
        lambda: _construct("train-az", "AzureFallbackGroup", {**inputs, "resourceGroupName": _team_group()}),
        stack="prod",
    )
    plain = record(lambda: _construct("train-az", "AzureFallbackGroup", inputs), stack="prod")
    rg = _one(built, "azure-native:resources:ResourceGroup")
    scale_set = _one(built, "azure-native:compute:VirtualMachineScaleSet")
    assert scale_set.inputs["resourceGroupName"] == "ml-team-rg" and scale_set.name == "train-az-fallback-ondemand"
    assert rg.urn in scale_set.property_dependencies["resourceGroupName"]
    root = "spotgpu:azure:OnDemandFallbackGroup"
    mine = {(t, n, i.replace('"ml-team-rg"', '"ml-prod"')) for t, n, i in _tree(built, root)}
    assert mine == _tree(plain, root)  # the same group in every other respect


def test_fallback_group_reports_a_planner_rejection_as_one_line() -> None:
    raw, pool = _prod_pool("azure")
    inputs = {**_construct_inputs(raw, pool), **_plain_ids("azure")}
    inputs["settings"] = {**inputs["settings"], "platformFaultDomainCount": 2}
    _fails(
        "train-az",
        "AzureFallbackGroup",
        inputs,
        r"^train-az\.platformFaultDomainCount: is above 1 .* \(value: 2\); fix: set platformFaultDomainCount: 1$",
    )


def test_the_docs_yaml_fallback_group_constructs() -> None:
    """docs/package.md's YAML example, its ${...} references as Outputs of the program's own resources."""
    import yaml
    from package_fixtures import REPO

    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "package.md").read_text(), re.S)
    program = yaml.safe_load(next(b for b in blocks if "spotgpu:index:AwsFallbackGroup" in b))
    (name, resource), = program["resources"].items()  # fmt: skip
    refs = {"gpuNodes.name": "gpu-nodes", "interruptions.arn": "arn:q", "spotGroup.arn": "arn:g"}
    inputs = {k: pulumi.Output.from_input(refs[v[2:-1]]) if str(v).startswith("${") else v
              for k, v in resource["properties"].items()}  # fmt: skip
    seen: dict[str, Any] = {}
    built = record(lambda: _construct(name, "AwsFallbackGroup", inputs, seen))
    assert {o[len("${train-aws.") : -1] for o in program["outputs"].values()} <= set(seen)
    assert _one(built, "aws:ec2/launchTemplate:LaunchTemplate").inputs["iamInstanceProfile"]["name"] == "gpu-nodes"
    assert seen["groupName"] == "spotgpu-prod-train-aws-fallback"


def test_fleet_mode_takes_the_fleet_arn() -> None:
    raw, pool = _prod_pool("aws")
    inputs = {**_construct_inputs(raw, pool), **_plain_ids("aws"), "mode": "fleet"}
    _fails("train-aws", "AwsFallbackGroup", inputs, r"^train-aws\.spotGroupArn: .*fix: mode fleet: give the EC2 Fleet")
    fleet = "arn:aws:ec2:us-east-1:123456789012:fleet/fleet-0f1e2d3c-4b5a-6000-1111-222233334444"
    built = record(lambda: _construct("train-aws", "AwsFallbackGroup", {**inputs, "spotGroupArn": fleet}), stack="prod")
    statements = json.loads(_one(built, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])["Statement"]
    assert {"Sid": "ResizeFleet", "Effect": "Allow", "Action": "ec2:ModifyFleet", "Resource": fleet} in statements
