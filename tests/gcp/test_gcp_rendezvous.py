"""A gang pool's rendezvous host on GCP: the plan (pure) and the components under Pulumi's mocks."""

from __future__ import annotations

from typing import Any

import pytest
from gcp_fixtures import pool_args

from spotgpu.bootstrap import GANG_UNIT, STORE_UNIT
from spotgpu.config import PlanError
from spotgpu.models.pools import GcpPoolSpec
from spotgpu_pulumi.gcp import GpuPool, plan_pool
from spotgpu_pulumi.gcp.rendezvous import plan_gcp_rendezvous
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import children_of, index, record

GANG: dict[str, Any] = {"command": ["/opt/job/train.py"], "nodes": 2, "rendezvous": {"privateIp": "10.128.0.10"}}
PACKAGE = "spotgpu[gcp,torch]==0.1.0"
FIREWALL = "gcp:compute/firewall:Firewall"
INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"


def build(**changes: Any) -> list[RecordedResource]:
    args = pool_args("prod", **changes)
    return record(lambda: GpuPool(args.spec.name, plan_pool(args)))


def test_no_gang_no_host() -> None:
    spec = pool_args("prod").spec
    assert isinstance(spec, GcpPoolSpec) and plan_gcp_rendezvous(spec, "p", {}) is None
    resources = index(build())
    assert not resources.get(INSTANCE) and not resources.get(FIREWALL)
    assert all(GANG_UNIT not in t.inputs["metadataStartupScript"] for t in resources[TEMPLATE])


def test_gang_plan_is_a_standard_vm_at_the_fixed_address_in_the_pools_first_zone() -> None:
    spec = pool_args("prod", gang=GANG, agentPackage=PACKAGE).spec
    assert isinstance(spec, GcpPoolSpec)
    plan = plan_gcp_rendezvous(spec, "spotgpu-prod-train-gcp", {})
    assert plan is not None and plan.zone == spec.zones[0] and plan.private_ip == "10.128.0.10"
    assert plan.launch.rendezvous_host == "10.128.0.10" and plan.launch.run_id == "train-gcp"
    assert f"spotgpu gang store --port {plan.port}" in plan.startup_script


def test_zone_outside_the_region_is_one_line_with_the_fix() -> None:
    gang = {**GANG, "rendezvous": {"privateIp": "10.128.0.10", "zone": "europe-west4-a"}}
    with pytest.raises(PlanError) as err:
        build(gang=gang, agentPackage=PACKAGE)
    assert str(err.value) == (
        'spotgpu:pools[train-gcp].gang.rendezvous.zone: is outside region us-central1 (value: "europe-west4-a"); '
        "fix: use a zone of us-central1 (the subnetwork's region)"
    )


def test_host_and_rule_are_children_of_their_component_and_every_template_gets_the_launch() -> None:
    resources = build(gang=GANG, agentPackage=PACKAGE)
    component = next(r for r in resources if r.type == "spotgpu:gcp:RendezvousHost")
    children = {r.type: r for r in children_of(resources, component)}
    assert set(children) == {FIREWALL, INSTANCE}
    rule, vm = children[FIREWALL], children[INSTANCE]
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["29400"]}]
    assert "sourceRanges" not in rule.inputs and len(rule.inputs["sourceServiceAccounts"]) == 1  # the pool's VMs only
    assert rule.inputs["targetTags"] == vm.inputs["tags"]
    assert vm.inputs["networkInterfaces"][0]["networkIp"] == "10.128.0.10"
    assert vm.inputs["scheduling"]["provisioningModel"] == "STANDARD"  # never Spot
    assert STORE_UNIT in vm.inputs["metadataStartupScript"]
    for template in index(resources)[TEMPLATE]:
        assert "--rdzv-endpoint=10.128.0.10:29400" in template.inputs["metadataStartupScript"]


def test_a_gang_pool_package_without_torch_is_one_config_line() -> None:
    """GCP had no such check; the pool model now has it for every cloud."""
    from spotgpu.config import ConfigError

    with pytest.raises(ConfigError) as err:
        pool_args("prod", gang=GANG, agentPackage="spotgpu[gcp]==0.1.0")
    assert str(err.value).startswith("spotgpu:pools[train-gcp].agentPackage: has no torch")
    plan = pool_args("prod", gang=GANG, agentPackage="https://pkgs.example/spotgpu-0.1.0-py3-none-any.whl")
    assert plan.spec.agent_package.endswith(".whl")  # a wheel URL is the platform team's own choice
