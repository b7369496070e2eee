"""A gang pool's rendezvous host on AWS: the plan (pure) and the components under Pulumi's mocks."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from aws_fixtures import one, pool_args, record_pool

from spotgpu.bootstrap import GANG_UNIT, STORE_UNIT
from spotgpu.config import PlanError
from spotgpu.models.pools import AwsPoolSpec
from spotgpu_pulumi.aws import plan_pool
from spotgpu_pulumi.aws.rendezvous import plan_rendezvous
from spotgpu_pulumi.offline.testing import children_of, index

GANG: dict[str, Any] = {
    "command": ["/opt/job/train.py", "--ckpt", "s3://bucket/job"],
    "nodes": 4,
    "rendezvous": {"vpcId": "vpc-0abc", "privateIp": "10.0.1.10"},
}
PACKAGE = "spotgpu[aws,torch]==0.1.0"
SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
INSTANCE = "aws:ec2/instance:Instance"


def script(user_data: str) -> str:
    return base64.b64decode(user_data).decode()


def test_no_gang_plans_no_host_and_the_same_user_data() -> None:
    args = pool_args("prod")
    assert isinstance(args.spec, AwsPoolSpec)
    assert args.spec.gang is None and plan_rendezvous(args.spec, "x", {}) is None
    plan = plan_pool(args)
    assert plan.rendezvous is None and GANG_UNIT not in script(plan.spot_user_data)


def test_gang_plan_names_the_host_opens_the_port_to_the_pool_only_and_feeds_the_bootstrap() -> None:
    plan = plan_pool(pool_args("prod", gang=GANG, agentPackage=PACKAGE))
    host = plan.rendezvous
    assert host is not None
    assert host.name == "spotgpu-prod-train-aws-rendezvous" and host.port == 29400
    assert host.sources == [("sg-0f1e2d3c4b5a60001", "sg-0f1e2d3c4b5a60001")]  # the pool's groups, nothing wider
    assert host.subnet_id == "subnet-0f1e2d3c4b5a60001" and host.private_ip == "10.0.1.10"
    assert f"spotgpu gang store --port {host.port}" in script(host.user_data)
    assert host.launch.rendezvous_host == "10.0.1.10" and host.launch.min_nodes == host.launch.max_nodes == 4
    assert host.launch.run_id == "train-aws"
    for user_data in (plan.spot_user_data, plan.fallback_user_data):  # spot and on-demand nodes join the same gang
        text = script(user_data)
        assert GANG_UNIT in text and "--rdzv-endpoint=10.0.1.10:29400" in text and "is_host=false" in text


def test_a_gang_without_security_groups_is_one_line_naming_the_key_and_the_fix() -> None:
    with pytest.raises(PlanError) as err:
        plan_pool(pool_args("prod", gang=GANG, agentPackage=PACKAGE, securityGroupIds=None))
    assert str(err.value) == (
        "spotgpu:pools[train-aws].securityGroupIds: is empty, and a gang's store port is opened to the pool's "
        "security groups only (value: []); fix: list the security groups the pool's VMs use"
    )


def test_bad_private_ip_is_refused_at_the_edge() -> None:
    with pytest.raises(Exception, match="privateIp"):
        pool_args("prod", gang={**GANG, "rendezvous": {"vpcId": "vpc-0abc", "privateIp": "10.0.1"}}, agentPackage=PACKAGE)


def test_rendezvous_host_resources_are_children_of_their_component() -> None:
    resources = record_pool(pool_args("prod", gang=GANG, agentPackage=PACKAGE))
    component = one(resources, "spotgpu:aws:RendezvousHost")
    pool = one(resources, "spotgpu:aws:GpuPool")
    assert component.parent == pool.urn and component.name == "train-aws-rendezvous"
    children = {r.type: r for r in children_of(resources, component)}
    assert set(children) == {SG, INGRESS, INSTANCE}
    group, rule, instance = children[SG], children[INGRESS], children[INSTANCE]
    assert group.inputs["vpcId"] == "vpc-0abc" and group.inputs["name"] == "spotgpu-prod-train-aws-rendezvous"
    assert rule.name == "train-aws-rendezvous-from-sg-0f1e2d3c4b5a60001"
    assert rule.inputs["referencedSecurityGroupId"] == "sg-0f1e2d3c4b5a60001"
    assert (rule.inputs["fromPort"], rule.inputs["toPort"], rule.inputs["ipProtocol"]) == (29400, 29400, "tcp")
    assert "cidrIpv4" not in rule.inputs  # from the pool's VMs only
    assert instance.inputs["privateIp"] == "10.0.1.10" and instance.inputs["instanceType"] == "t3.small"
    assert instance.inputs["metadataOptions"]["httpTokens"] == "required"
    assert STORE_UNIT in script(instance.inputs["userDataBase64"])
    assert "instanceMarketOptions" not in instance.inputs  # on demand: no spot notice can take it


def test_pool_without_gang_has_no_rendezvous_resources() -> None:
    resources = index(record_pool(pool_args("prod")))
    assert not resources.get("spotgpu:aws:RendezvousHost") and not resources.get(INSTANCE) and not resources.get(INGRESS)


def test_a_gang_pool_package_without_torch_is_one_config_line() -> None:
    """The pool model checks it for every cloud (it was a copy in the AWS and Azure planners)."""
    from spotgpu.config import ConfigError

    with pytest.raises(ConfigError) as err:
        pool_args("prod", gang=GANG, agentPackage="spotgpu==0.1.0")
    text = str(err.value)
    assert text.startswith("spotgpu:pools[train-aws].agentPackage: has no torch") and "fix:" in text
    assert '(value: "spotgpu==0.1.0")' in text
