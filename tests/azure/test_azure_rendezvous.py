"""A gang pool's rendezvous host on Azure: the plan (pure) and the components under Pulumi's mocks."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pulumi
import pytest
from azure_fixtures import REPO, pool_args, spec

from spotgpu.bootstrap import GANG_UNIT, STORE_UNIT
from spotgpu.config import ConfigError, PlanError
from spotgpu_pulumi.azure import AzurePoolPlan, GpuPool, plan_pool
from spotgpu_pulumi.azure.rendezvous import plan_azure_rendezvous
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.policy_harness import analyze
from spotgpu_pulumi.offline.testing import children_of, index, record

GANG: dict[str, Any] = {"command": ["/opt/job/train.py"], "nodes": 2, "rendezvous": {"privateIp": "10.0.0.10"}}
PACKAGE = "spotgpu[azure,torch]==0.1.0"
VMSS = "azure-native:compute:VirtualMachineScaleSet"
VM = "azure-native:compute:VirtualMachine"
NIC = "azure-native:network:NetworkInterface"
NSG = "azure-native:network:NetworkSecurityGroup"
ASG = "azure-native:network:ApplicationSecurityGroup"
HOST = "spotgpu:azure:RendezvousHost"
#: Digests of every resource a pool without ``gang`` registered before the rendezvous host existed.
SNAPSHOT = Path(__file__).parent / "snapshots" / "pool_without_gang.json"


def run(**changes: Any) -> tuple[list[RecordedResource], dict[str, Any]]:
    args = pool_args("prod", **changes)
    exports: dict[str, Any] = {}

    def program() -> None:
        pool = GpuPool(args.spec.name, plan_pool(args))
        for key in ("rendezvousAddress", "rendezvousVm"):
            if key in pool.exports:
                pulumi.Output.from_input(pool.exports[key]).apply(lambda v, k=key: exports.__setitem__(k, v))

    return record(program), exports


def build(**changes: Any) -> list[RecordedResource]:
    return run(**changes)[0]


def custom_data(inputs: dict[str, Any]) -> str:
    profile = inputs.get("virtualMachineProfile", inputs)
    return base64.b64decode(profile["osProfile"]["customData"]).decode()


def ip_configuration(scale_set: RecordedResource) -> dict[str, Any]:
    (nic,) = scale_set.inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"]
    (ip,) = nic["ipConfigurations"]
    return dict(ip)


def digests(resources: list[RecordedResource]) -> dict[str, dict[str, str]]:
    return {
        r.urn: {
            "type": r.type,
            # the stack resource's URN is whichever test's settings recorded it first: not the pool's
            "parent": "<stack>" if r.parent and "pulumi:pulumi:Stack::" in r.parent else r.parent,
            "inputs": hashlib.sha256(json.dumps(r.inputs, sort_keys=True, default=str).encode()).hexdigest(),
        }
        for r in resources
        if r.type != "pulumi:pulumi:Stack"  # registered once per process, by whichever test records first
    }


def plan_pool_of(**changes: Any) -> AzurePoolPlan:
    return plan_pool(pool_args("prod", **changes))


def group_id(group: RecordedResource) -> str:
    return f"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/{group.type}/{group.name}"


@pytest.fixture(scope="module")
def gang_pool() -> tuple[list[RecordedResource], dict[str, Any]]:
    return run(gang=GANG, agentPackage=PACKAGE)


def test_no_gang_no_host_and_no_gang_unit() -> None:
    plain = spec("prod")
    assert plain.gang is None and plan_azure_rendezvous(plain, "prod", {}) is None
    assert plan_pool(pool_args("prod")).rendezvous is None
    resources = index(build())
    assert not resources.get(HOST) and not resources.get(VM) and not resources.get(NIC) and not resources.get(NSG)
    assert not resources.get(ASG)
    assert len(resources[VMSS]) == 4  # three spot sizes and the fallback
    for scale_set in resources[VMSS]:
        assert GANG_UNIT not in custom_data(scale_set.inputs)
        assert "applicationSecurityGroups" not in ip_configuration(scale_set)


def test_no_gang_renders_exactly_what_it_rendered_before() -> None:
    """Same resources, same inputs (custom data included) as before the rendezvous host existed."""
    text = json.dumps(digests(build()), indent=1, sort_keys=True) + "\n"
    if os.environ.get("SPOTGPU_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(text)
    assert json.loads(text) == json.loads(SNAPSHOT.read_text()), f"a pool without gang changed; review {SNAPSHOT}"


def test_gang_plan_is_a_regular_vm_at_the_fixed_address_in_the_pools_first_zone() -> None:
    args = pool_args("prod", gang=GANG, agentPackage=PACKAGE)
    plan = plan_pool(args)
    host = plan.rendezvous
    assert host is not None
    assert host.name == "train-az-prod-rendezvous" and host.private_ip == "10.0.0.10" and host.port == 29400
    assert host.zone == "1" and host.vm_size == "Standard_B2s"
    plain = spec("prod")
    assert host.image == plain.image and host.subnet_id == plain.subnet_id  # the pool's image and subnet
    assert (host.resource_group, host.location) == ("ml-prod", "eastus")
    assert host.launch.rendezvous_host == "10.0.0.10" and host.launch.run_id == "train-az"
    assert host.launch.min_nodes == host.launch.max_nodes == 2
    assert "spotgpu gang store --port 29400" in base64.b64decode(host.custom_data).decode()
    assert host.tags["spotgpu-pool"] == "train-az" and "spotgpu-role" not in host.tags  # not a spot pool or group


def test_gang_plan_takes_the_hosts_own_zone_size_and_image() -> None:
    image = {"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"}
    gang = {**GANG, "port": 29500, "rendezvous": {"privateIp": "10.0.0.11", "zone": "3", "vmSize": "Standard_D2s_v5",
                                                  "image": image}}
    host = plan_pool_of(gang=gang, agentPackage=PACKAGE).rendezvous
    assert host is not None and (host.zone, host.vm_size, host.port) == ("3", "Standard_D2s_v5", 29500)
    assert (host.image.publisher, host.image.offer) == ("Canonical", "ubuntu-24_04-lts")
    assert host.launch.rendezvous_port == 29500


def test_zone_the_pool_does_not_use_is_one_line_with_the_fix() -> None:
    gang = {**GANG, "rendezvous": {"privateIp": "10.0.0.10", "zone": "2"}}
    with pytest.raises(PlanError) as err:
        plan_pool_of(gang=gang, agentPackage=PACKAGE, zones=["1", "3"])
    assert str(err.value) == (
        "spotgpu:pools[train-az].gang.rendezvous.zone: is not one of the pool's zones ['1', '3'] (value: \"2\"); "
        "fix: use one of ['1', '3'] (where the pool's VMs run), or leave zone out for '1'"
    )  # the plan the pool is built from: nothing is registered


def test_a_package_without_torch_is_one_line_with_the_fix() -> None:
    from spotgpu.config import ConfigError

    with pytest.raises(ConfigError) as err:
        plan_pool_of(gang=GANG, agentPackage="spotgpu==0.1.0")
    text = str(err.value)
    assert text.startswith("spotgpu:pools[train-az].agentPackage: has no torch") and "fix:" in text
    assert '(value: "spotgpu==0.1.0")' in text


@pytest.mark.parametrize(
    ("rendezvous", "field", "value"),
    [
        ({"privateIp": "10.0.0"}, "gang.rendezvous.privateIp", "10.0.0"),
        ({"privateIp": "10.0.0.300"}, "gang.rendezvous.privateIp", "10.0.0.300"),
        ({"privateIp": "10.0.0.10", "zone": "4"}, "gang.rendezvous.zone", "4"),
        ({"privateIp": "10.0.0.10", "vmSize": "b2s"}, "gang.rendezvous.vmSize", "b2s"),
    ],
)
def test_bad_host_fields_are_refused_at_the_edge_in_one_line(rendezvous: dict[str, str], field: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        pool_args("prod", gang={**GANG, "rendezvous": rendezvous}, agentPackage=PACKAGE)
    text = str(err.value)
    assert "\n" not in text and field in text and value in text and "fix:" in text


def test_host_resources_are_children_of_their_component_with_the_right_inputs(
    gang_pool: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    resources, _ = gang_pool
    (component,) = index(resources)[HOST]
    (pool,) = index(resources)["spotgpu:azure:GpuPool"]
    assert component.parent == pool.urn and component.name == "train-az-rendezvous"
    children = {r.type: r for r in children_of(resources, component)}
    assert set(children) == {ASG, NSG, NIC, VM}
    group, nsg, nic, vm = children[ASG], children[NSG], children[NIC], children[VM]
    assert group.inputs["applicationSecurityGroupName"] == "train-az-prod-rendezvous-pool"

    allow, deny = sorted(nsg.inputs["securityRules"], key=lambda r: r["priority"])
    assert (allow["access"], allow["direction"], allow["protocol"]) == ("Allow", "Inbound", "Tcp")
    assert allow["destinationPortRange"] == "29400" and allow["destinationAddressPrefix"] == "10.0.0.10"
    assert allow["sourceApplicationSecurityGroups"] == [{"id": group_id(group)}]  # the pool's VMs only
    assert "sourceAddressPrefix" not in allow and "sourceAddressPrefixes" not in allow
    assert (deny["access"], deny["direction"], deny["priority"]) == ("Deny", "Inbound", 4096)
    assert (deny["protocol"], deny["sourceAddressPrefix"], deny["destinationPortRange"]) == ("*", "*", "*")

    (ip,) = nic.inputs["ipConfigurations"]
    assert ip["privateIPAllocationMethod"] == "Static" and ip["privateIPAddress"] == "10.0.0.10"
    assert ip["subnet"]["id"] == spec("prod").subnet_id  # the pool's subnet
    assert nic.inputs["networkSecurityGroup"]["id"].endswith("/train-az-rendezvous-nsg")

    assert vm.inputs["priority"] == "Regular"  # never Spot: no notice takes the store down
    assert "evictionPolicy" not in vm.inputs and "billingProfile" not in vm.inputs
    assert vm.inputs["vmName"] == "train-az-prod-rendezvous" and vm.inputs["zones"] == ["1"]
    assert vm.inputs["hardwareProfile"]["vmSize"] == "Standard_B2s"
    assert vm.inputs["storageProfile"]["imageReference"]["offer"] == "ubuntu-hpc"  # the pool's image
    assert vm.inputs["networkProfile"]["networkInterfaces"][0]["id"].endswith("/train-az-rendezvous-nic")
    script = custom_data(vm.inputs)
    assert STORE_UNIT in script and "gang store --port 29400" in script and GANG_UNIT not in script


def test_every_spot_and_fallback_vm_joins_the_pool_group_and_starts_the_gang_launch(
    gang_pool: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    resources, _ = gang_pool
    scale_sets = index(resources)[VMSS]
    (group,) = index(resources)[ASG]
    roles = sorted(s.inputs["tags"]["spotgpu-role"] for s in scale_sets)
    assert roles == ["fallback", "spot-pool", "spot-pool", "spot-pool"]
    for scale_set in scale_sets:
        script = custom_data(scale_set.inputs)
        assert GANG_UNIT in script and "--rdzv-endpoint=10.0.0.10:29400" in script, scale_set.name
        assert ip_configuration(scale_set)["applicationSecurityGroups"] == [{"id": group_id(group)}]
    spot = [s for s in scale_sets if s.inputs["tags"]["spotgpu-role"] == "spot-pool"]
    assert all(s.inputs["virtualMachineProfile"]["priority"] == "Spot" for s in spot)  # unchanged by the gang


def test_the_pool_exports_the_rendezvous_address_and_vm(gang_pool: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    _, exports = gang_pool
    assert exports == {"rendezvousAddress": "10.0.0.10", "rendezvousVm": "train-az-prod-rendezvous"}
    assert not run()[1]  # a pool without gang exports neither


def test_the_gang_pool_passes_the_policy_pack(gang_pool: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    resources, _ = gang_pool
    verdicts = analyze(resources, REPO / "policies", REPO / "policy-config.json")
    assert [v for v in verdicts if v["level"] == "mandatory"] == []
