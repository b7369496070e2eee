"""Ids of existing infrastructure compose: Outputs and StackReference values reach the wire."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest
from package_fixtures import REPO

from spotgpu.config import ConfigError, parse_stack_config, read_stack_file
from spotgpu.models.refs import is_deferred
from spotgpu_pulumi.clouds import plan_stack
from spotgpu_pulumi.offline.mocks import RecordingMocks, RecordingMonitor
from spotgpu_pulumi.outputs import COMMON_KEYS
from spotgpu_pulumi.platform import deploy

NETWORK = {
    "subnetA": "subnet-0aaaaaaaaaaaaaaa1",
    "subnetB": "subnet-0aaaaaaaaaaaaaaa2",
    "vpcNetwork": "projects/net-host/global/networks/shared",
    "gcpSubnet": "projects/net-host/regions/us-central1/subnetworks/gpu",
    "azureSubnet": "/subscriptions/0/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/gpu",
}


class NetworkStackMocks(RecordingMocks):
    """The team's network stack, as a StackReference sees it."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            self.resources.append(args)
            return f"{args.name}-id", {"name": args.name, "outputs": NETWORK, "secretOutputNames": []}
        return super().new_resource(args)


def _prod_raw() -> dict[str, Any]:
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    return copy.deepcopy(raw)


def _run(build: Any) -> tuple[RecordingMonitor, dict[str, Any]]:
    mocks = NetworkStackMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="ml-gpu", stack="prod", preview=False, monitor=monitor)
    seen: dict[str, Any] = {}

    def program() -> Any:
        pools = build()
        return pulumi.Output.from_input({name: pool.exports for name, pool in pools.items()}).apply(seen.update)

    pulumi.runtime.test(program)()
    return monitor, seen


def _composed_pools() -> dict[str, Any]:
    network = pulumi.StackReference("org/network/prod")
    team_sg = aws.ec2.SecurityGroup("team-gpu-sg", description="the team's own group")
    raw = _prod_raw()
    aws_pool, gcp_pool, azure_pool = raw["pools"]
    aws_pool["subnets"] = [
        {"id": network.get_output("subnetA"), "zone": "us-east-1a"},
        {"id": network.get_output("subnetB"), "zone": "us-east-1b"},
    ]
    aws_pool["securityGroupIds"] = [team_sg.id]
    gcp_pool["network"] = network.get_output("vpcNetwork")
    gcp_pool["subnetwork"] = network.get_output("gcpSubnet")
    azure_pool["subnetId"] = network.get_output("azureSubnet")
    return deploy(plan_stack(parse_stack_config(raw)))


def test_outputs_from_a_stack_reference_and_a_resource_reach_the_wire() -> None:
    monitor, _ = _run(_composed_pools)
    by_type: dict[str, list[Any]] = {}
    for r in monitor.recorded:
        by_type.setdefault(r.type, []).append(r)
    spot_asg = next(r for r in by_type["aws:autoscaling/group:Group"] if r.name.endswith("-spot-group"))
    assert spot_asg.inputs["vpcZoneIdentifiers"] == [NETWORK["subnetA"], NETWORK["subnetB"]]
    template = next(r for r in by_type["aws:ec2/launchTemplate:LaunchTemplate"] if "spot" in r.name)
    assert template.inputs["vpcSecurityGroupIds"] == ["team-gpu-sg-id"]
    # The dependency on the team's security group is tracked, as the engine orders it.
    sg_urn = by_type["aws:ec2/securityGroup:SecurityGroup"][0].urn
    assert sg_urn in template.dependencies
    gcp_templates = by_type["gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"]
    assert {t.inputs["networkInterfaces"][0]["subnetwork"] for t in gcp_templates} == {NETWORK["gcpSubnet"]}
    scale_sets = by_type["azure-native:compute:VirtualMachineScaleSet"]
    nic = scale_sets[0].inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
    assert nic["ipConfigurations"][0]["subnet"]["id"] == NETWORK["azureSubnet"]


def test_every_cloud_exports_the_same_keys_with_lists_as_lists() -> None:
    _, exports = _run(_composed_pools)
    for name, values in exports.items():
        assert set(COMMON_KEYS) <= set(values), name
        assert isinstance(values["spotGroups"], list) and values["spotGroups"], name
        assert values["controllerStateUrl"].endswith("/_controller"), name
    assert exports["train-gcp"]["spotGroups"][0] == exports["train-gcp"]["mig"]
    assert exports["train-aws"]["region"] == "us-east-1"
    assert [exports[n]["cloud"] for n in ("train-aws", "train-gcp", "train-az")] == ["aws", "gcp", "azure"]


class _Later:
    """A deferred value that is not a pulumi Output: anything non-plain passes through."""

    def apply(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        return self


def test_plain_values_are_still_validated_and_deferred_ones_pass() -> None:
    raw = _prod_raw()
    raw["pools"][0]["subnets"][0]["id"] = "sub-123"
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw)
    assert "spotgpu:pools[train-aws].subnets[0].id" in str(err.value) and "fix: use a subnet id like subnet-0abc12345" in str(err.value)
    raw["pools"][0]["subnets"][0]["id"] = "subnet-0abc12345\n"  # a pattern's "$" alone would let this through
    with pytest.raises(ConfigError, match=r"subnets\[0\]\.id"):
        parse_stack_config(raw)
    raw["pools"][0]["subnets"][0]["id"] = 12345
    with pytest.raises(ConfigError, match="Input should be a valid string"):
        parse_stack_config(raw)
    later = _Later()
    raw["pools"][0]["subnets"][0]["id"] = later
    assert is_deferred(later) and parse_stack_config(raw).pools[0].subnets[0].id is later  # type: ignore[union-attr]


def test_per_pool_region_gets_its_own_provider() -> None:
    def build() -> dict[str, Any]:
        raw = _prod_raw()
        pool = raw["pools"][0]
        pool["region"] = "us-west-2"
        pool["subnets"] = [
            {"id": "subnet-0f1e2d3c4b5a60001", "zone": "us-west-2a"},
            {"id": "subnet-0f1e2d3c4b5a60002", "zone": "us-west-2b"},
        ]
        raw["pools"] = [pool]
        raw["workloads"]["llm-finetune"]["prices"]["onDemandPerHour"] = 5.67  # the catalogue prices us-east-1 only
        return deploy(plan_stack(parse_stack_config(raw)))

    monitor, exports = _run(build)
    providers = [r for r in monitor.recorded if r.type == "pulumi:providers:aws"]
    assert [p.inputs.get("region") for p in providers] == ["us-west-2"]
    provider_ref = f"{providers[0].urn}::{providers[0].name}-id"
    bucket = next(r for r in monitor.recorded if r.type == "aws:s3/bucket:Bucket")
    assert bucket.provider == provider_ref
    assert exports["train-aws"]["region"] == "us-west-2"


def test_region_and_zones_must_agree() -> None:
    raw = _prod_raw()
    raw["pools"][0]["region"] = "us-west-2"
    with pytest.raises(ConfigError, match=r"subnets are in us-east-1, but the pool deploys to us-west-2 \(pools\[train-aws\]\.region\)"):
        parse_stack_config(raw)
