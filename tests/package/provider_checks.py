"""The component package: the SDK's analyzer infers the schema, and construct builds the Python tree.

Run in its own interpreter by ``test_package_provider.py``: ``pulumi.provider``
registers ``google.rpc.Status`` in protobuf's default pool, as the Google Cloud
client libraries the controller tests import do, and one process cannot load
both. Regenerate the schema snapshot after an intended change with
``SPOTGPU_UPDATE_SNAPSHOTS=1 pytest tests/package/provider_checks.py``.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from package_fixtures import REPO
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema

from spotgpu.config import PlanError, parse_stack_config, read_stack_file
from spotgpu.models.base import FieldProblem
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import plan_stack
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import record
from spotgpu_pulumi.outputs import COMMON_KEYS, PoolOutputs
from spotgpu_pulumi.package import COMPONENTS, PACKAGE_NAME
from spotgpu_pulumi.platform import deploy

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "schema.json"


def _schema() -> dict[str, Any]:
    result = Analyzer(PACKAGE_NAME).analyze(COMPONENTS)
    schema = generate_schema(
        PACKAGE_NAME, "0.1.0", None, result["component_definitions"], result["type_definitions"], result["dependencies"]
    )
    return schema.to_json()


def test_schema_matches_the_snapshot() -> None:
    text = json.dumps(_schema(), indent=1, sort_keys=True) + "\n"
    if os.environ.get("SPOTGPU_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), "schema changed; review it, then regenerate the snapshot (module docstring)"


def test_schema_types_required_inputs_outputs_and_descriptions() -> None:
    schema = _schema()
    assert set(schema["resources"]) == {f"spotgpu:index:{c.__name__}" for c in COMPONENTS}
    aws = schema["resources"]["spotgpu:index:AwsGpuPool"]
    assert aws["isComponent"] is True
    assert set(aws["requiredInputs"]) == {
        "environment", "owner", "workload", "ladder", "capacity", "instanceTypes", "subnets", "imageId",
    }
    inputs = aws["inputProperties"]
    assert "plain" not in inputs["imageId"] and "plain" not in inputs["kmsKeyArn"]  # Input[str]: Outputs allowed
    assert "plain" not in inputs["securityGroupIds"]["items"]
    assert inputs["instanceTypes"]["plain"] is True  # names and spread are planned from it
    subnet = schema["types"]["spotgpu:index:AwsSubnetArgs"]["properties"]
    assert "plain" not in subnet["id"] and subnet["zone"]["plain"] is True
    gcp = schema["resources"]["spotgpu:index:GcpGpuPool"]["inputProperties"]
    assert all("plain" not in gcp[k] for k in ("image", "network", "subnetwork"))
    azure = schema["resources"]["spotgpu:index:AzureGpuPool"]["inputProperties"]
    assert "plain" not in azure["subnetId"] and "plain" not in azure["resourceGroupName"]
    for name, resource in schema["resources"].items():
        assert resource.get("description"), name
        if name.endswith("GpuPool"):
            assert list(resource["properties"]) == list(COMMON_KEYS), name
            assert resource["properties"]["spotGroups"]["type"] == "array"
        for key, prop in [*resource["inputProperties"].items(), *resource["properties"].items()]:
            assert prop.get("description"), f"{name}.{key} has no description"


def test_packaged_outputs_are_the_python_outputs() -> None:
    """The annotations repeated on each packaged class equal PoolOutputs (same names, types, docs)."""
    expected = inspect.get_annotations(PoolOutputs)
    for component in (c for c in COMPONENTS if c.__name__.endswith("GpuPool")):
        own = {k: v for k, v in inspect.get_annotations(component).items() if not k.startswith("_")}
        assert own.keys() == expected.keys(), component.__name__


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def _prod_pool(cloud: str) -> tuple[dict[str, Any], dict[str, Any]]:
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    raw = copy.deepcopy(raw)
    raw["pools"] = [p for p in raw["pools"] if p["cloud"] == cloud]
    return raw, raw["pools"][0]


def _construct_inputs(raw: dict[str, Any], pool: dict[str, Any]) -> dict[str, Any]:
    """The prod pool as a TypeScript or YAML program would write it against the schema."""
    typed = {"cloud", "name", "workload", "ladder", "capacity"}
    per_cloud = {
        "aws": {"instanceTypes", "subnets", "imageId", "securityGroupIds", "region", "mode", "kmsKeyArn"},
        "gcp": {"project", "region", "zones", "machineTypes", "image", "network", "subnetwork"},
        "azure": {"resourceGroupName", "location", "vmSizes", "zones", "subnetId", "sshPublicKey", "storageAccountName"},
    }[pool["cloud"]]
    inputs: dict[str, Any] = {k: v for k, v in pool.items() if k in per_cloud}
    if pool["cloud"] == "gcp":
        inputs["machineTypes"] = [{"machineType": m["machineType"]} for m in pool["machineTypes"]]
    workload = {k: v for k, v in raw["workloads"][pool["workload"]].items() if k != "sources"}  # annotations only
    workload["checkpointIntervalSeconds"] = str(workload.get("checkpointIntervalSeconds", "auto"))
    if "checkpointTiers" in workload:  # the schema types the durable interval as a string too ("auto" or seconds)
        tiers = workload["checkpointTiers"]
        workload["checkpointTiers"] = {**tiers, "durableIntervalSeconds": str(tiers.get("durableIntervalSeconds", "auto"))}
    # a program against the schema types the prices the stack takes from the pool and the catalogue
    priced = parse_stack_config(raw).workload_for(next(p for p in parse_stack_config(raw).pools if p.name == pool["name"]))
    workload["prices"] = {**workload["prices"], "onDemandPerHour": priced.prices.on_demand}
    inputs.update(
        environment=raw["environment"],
        owner=raw["owner"],
        workload=workload,
        ladder=raw["ladders"][pool["ladder"]],
        capacity=pool["capacity"],
        poolName=pool["name"],
        workloadName=pool["workload"],
        ladderName=pool["ladder"],
        settings={k: v for k, v in pool.items() if k not in typed | per_cloud},
    )
    return inputs


def _tree(resources: list[RecordedResource], root_type: str) -> set[tuple[str, str, str]]:
    """(type, name, inputs) of everything under the spotgpu:<cloud>:GpuPool, parents as types."""
    by_urn = {r.urn: r for r in resources}
    root = next(r for r in resources if r.type == root_type)
    out = set()
    for r in resources:
        chain, node = [], r
        while node.parent in by_urn and node.urn != root.urn:
            node = by_urn[node.parent]
            chain.append(node.type)
        if root.urn == r.urn or root.type in chain:
            out.add((r.type, r.name, json.dumps(r.inputs, sort_keys=True)))
    return out


def _per_work(raw: dict[str, Any]) -> None:
    """A gpu block with speeds per GPU model (names with spaces, kept as written) and a per work-hour rung."""
    raw["workloads"]["llm-finetune"]["gpu"] = {
        "gpusPerNode": 1, "worldSizes": [8], "relativeThroughput": {"A10G": 1.0, "L4": 0.6, "L40S": 1.6, "A100 40GB": 2.0,
                                                          "H100": 3.0}}
    raw["ladders"]["training-az"]["steps"][2] = {"kind": "alternate_sku", "maxWaitSeconds": 1200,
                                                 "costCeilingPerWorkHour": 1.5}


@pytest.mark.parametrize("variant", ["prod", "per-work"])
@pytest.mark.parametrize(("cloud", "component"), [("aws", "AwsGpuPool"), ("gcp", "GcpGpuPool"), ("azure", "AzureGpuPool")])
def test_construct_builds_the_same_tree_as_the_python_class(cloud: str, component: str, variant: str) -> None:
    raw, pool = _prod_pool(cloud)
    if variant == "per-work":
        _per_work(raw)
    direct = record(lambda: deploy(plan_stack(parse_stack_config(raw))), stack="prod")
    provider = ComponentProvider(COMPONENTS, PACKAGE_NAME, version="0.1.0")
    inputs = _construct_inputs(raw, pool)

    def construct() -> Any:
        result = provider.construct(pool["name"], f"spotgpu:index:{component}", inputs, pulumi.ResourceOptions())
        return result.state

    built = record(construct, stack="prod")
    wrapper = [r for r in built if r.type == f"spotgpu:index:{component}"]
    assert len(wrapper) == 1
    root = f"spotgpu:{cloud}:GpuPool"
    assert next(r for r in built if r.type == root).parent == wrapper[0].urn
    assert _tree(built, root) == _tree(direct, root)
    assert len(_tree(direct, root)) > 10
    if variant == "per-work":  # the speeds and the ceiling's unit reach the links
        text = json.dumps([r.inputs for r in built])
        assert "u=A10G:1+L4:0.6+L40S:1.6+A100 40GB:2+H100:3" in text
        assert ("as:1200:1.5w" in text) == (cloud == "azure")  # only the Azure pool's ladder has alternate_sku


def test_construct_takes_the_resource_group_as_an_output_of_the_program() -> None:
    """A TypeScript or YAML program's own ResourceGroup: its name reaches every child, as with the Python class."""
    import pulumi_azure_native.resources as resources

    raw, pool = _prod_pool("azure")

    def group() -> Any:  # the mocks echo the logical name as the group's name
        return resources.ResourceGroup("ml-team-rg", resource_group_name="ml-team-rg", location="eastus").name

    def direct_program() -> Any:
        local = copy.deepcopy(raw)
        local["pools"][0]["resourceGroupName"] = group()
        return deploy(plan_stack(parse_stack_config(local)))

    def construct() -> Any:
        provider = ComponentProvider(COMPONENTS, PACKAGE_NAME, version="0.1.0")
        inputs = {**_construct_inputs(raw, pool), "resourceGroupName": group()}
        return provider.construct(pool["name"], "spotgpu:index:AzureGpuPool", inputs, pulumi.ResourceOptions()).state

    built = record(construct, stack="prod")
    direct = record(direct_program, stack="prod")
    root = "spotgpu:azure:GpuPool"
    assert _tree(built, root) == _tree(direct, root)
    rg = next(r for r in built if r.type == "azure-native:resources:ResourceGroup")
    placed = [r for r in built if "resourceGroupName" in r.inputs and r.type != rg.type]
    # + the Scheduled Events queue, system topic and subscription (publishEventsToEventGrid, issue 36)
    assert len(placed) == 15 and {r.inputs["resourceGroupName"] for r in placed} == {"ml-team-rg"}
    assert all(rg.urn in r.property_dependencies["resourceGroupName"] for r in placed)
    scopes = [r.inputs["scope"] for r in built if r.type == "azure-native:authorization:RoleAssignment"]
    assert len(scopes) == 9 and all("/resourceGroups/ml-team-rg" in s for s in scopes)
    job = next(r for r in built if r.type == "azure-native:app:Job")
    config = json.loads(job.inputs["template"]["containers"][0]["env"][0]["value"])
    assert config["pools"][0]["resourceGroupName"] == "ml-team-rg"


def test_construct_reports_bad_input_with_the_key() -> None:
    raw, pool = _prod_pool("aws")
    inputs = _construct_inputs(raw, pool)
    inputs["subnets"] = [{"id": "sub-1", "zone": "us-east-1a"}, {"id": "subnet-0f1e2d3c4b5a60002", "zone": "us-east-1b"}]
    provider = ComponentProvider(COMPONENTS, PACKAGE_NAME, version="0.1.0")
    with pytest.raises(Exception, match=r"train-aws\.subnets\[0\]\.id: .*fix: use a subnet id"):
        record(lambda: provider.construct("train-aws", "spotgpu:index:AwsGpuPool", inputs, pulumi.ResourceOptions()))


@pytest.mark.parametrize(("cloud", "component"), [("gcp", "GcpGpuPool"), ("azure", "AzureGpuPool")])
def test_construct_plans_and_builds_through_the_cloud_registry(
    cloud: str, component: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packaged pools reach a cloud through spotgpu_pulumi.clouds.CLOUDS, and plan before they register."""
    from spotgpu_pulumi.clouds import CLOUDS, Cloud
    from spotgpu_pulumi.offline.mocks import RecordingMocks, RecordingMonitor

    real, calls = CLOUDS[cloud], []

    def plan(args: PoolArgs) -> Any:
        calls.append("plan")
        if args.spec.name == "refused":
            raise PlanError(FieldProblem("is refused", at="capacity.max", value=2, fix="use 1"), pool="refused")
        return real.plan(args)

    def build(name: str, plan: Any, opts: pulumi.ResourceOptions | None) -> Any:
        calls.append("component")
        return real.component(name, plan, opts)

    monkeypatch.setitem(CLOUDS, cloud, Cloud(name=cloud, plan=plan, component=build))
    raw, pool = _prod_pool(cloud)
    provider = ComponentProvider(COMPONENTS, PACKAGE_NAME, version="0.1.0")
    inputs = _construct_inputs(raw, pool)
    built = record(lambda: provider.construct(pool["name"], f"spotgpu:index:{component}", inputs,
                                              pulumi.ResourceOptions()).state, stack="prod")
    assert calls == ["plan", "component"]  # planned once: the component builds from that plan
    assert any(r.type == f"spotgpu:{cloud}:GpuPool" for r in built)

    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="spotgpu", stack="prod", preview=False, monitor=monitor)
    refused = {**inputs, "poolName": "refused"}
    with pytest.raises(Exception, match=r"refused\.capacity\.max: is refused \(value: 2\); fix: use 1"):
        pulumi.runtime.test(lambda: provider.construct("refused", f"spotgpu:index:{component}", refused,
                                                       pulumi.ResourceOptions()))()
    assert [r.type for r in monitor.recorded if r.type != "pulumi:pulumi:Stack"] == []  # not even the wrapper


def test_standalone_checkpoint_store_is_the_pool_bucket_component() -> None:
    from spotgpu_pulumi.aws.bucket import CheckpointBucket, CheckpointBucketArgs

    provider = ComponentProvider(COMPONENTS, PACKAGE_NAME, version="0.1.0")
    inputs = {"bucketName": "team-ckpt-bucket", "prefix": "llm/run-1", "keepGenerations": 3}
    built = record(lambda: provider.construct("ckpt", "spotgpu:index:AwsCheckpointStore", inputs, pulumi.ResourceOptions()).state)
    direct = record(lambda: CheckpointBucket("ckpt-checkpoints", CheckpointBucketArgs(
        bucket_name="team-ckpt-bucket", prefix="llm/run-1", keep_generations=3, noncurrent_version_days=7,
        tags={"managed-by": "spotgpu"})))
    root = "spotgpu:aws:CheckpointBucket"
    assert _tree(built, root) == _tree(direct, root)
    bucket = next(r for r in built if r.type == "aws:s3/bucket:Bucket")
    assert bucket.request.protect is True  # protected unless forceDestroy, as in a pool
    with pytest.raises(Exception, match=r"ckpt\.keepGenerations: .*fix: keep between 1 and 1000 generations"):
        record(lambda: provider.construct("ckpt", "spotgpu:index:AwsCheckpointStore", {**inputs, "keepGenerations": 0},
                                          pulumi.ResourceOptions()))


def test_plugin_files() -> None:
    plugin = yaml.safe_load((REPO / "provider" / "PulumiPlugin.yaml").read_text())
    assert plugin["runtime"]["name"] == "python"
    main = (REPO / "provider" / "__main__.py").read_text()
    assert "component_provider_host(COMPONENTS, name=PACKAGE_NAME" in main
    assert PoolArgs  # the packaged classes build the Python components from the same PoolArgs
