"""Pure planning rules: machine grouping, zone spread, target shapes, scheduling, names."""

from __future__ import annotations

from typing import Any

import pytest
from gcp_fixtures import pool_args

from spotgpu.config import ConfigError, PlanError
from spotgpu.models.gcp_groups import MachineGroup, group_machine_choices
from spotgpu.models.pools import GcpAutoscaling, GcpMachineChoice, GcpPoolSpec
from spotgpu_pulumi.gcp import plan
from spotgpu_pulumi.gcp.naming import PoolNames, check_name, fit


def _choice(t: str, acc: str | None = None, count: int = 1) -> GcpMachineChoice:
    return GcpMachineChoice.model_validate(
        {"machineType": t, **({"accelerator": {"type": acc, "count": count}} if acc else {})}
    )


def _spec(**changes: object) -> GcpPoolSpec:
    spec = pool_args("prod").spec
    assert isinstance(spec, GcpPoolSpec)
    return spec.model_copy(update=changes)


def test_accelerator_optimized_types_share_one_group_in_rank_order() -> None:
    groups = group_machine_choices(
        (_choice("a3-highgpu-8g"), _choice("a2-ultragpu-8g"), _choice("g2-standard-48"))
    )
    assert len(groups) == 1
    assert groups[0].key == "aopt" and groups[0].accelerator is None
    assert groups[0].machine_types == ("a3-highgpu-8g", "a2-ultragpu-8g", "g2-standard-48")
    assert groups[0].top_type == "a3-highgpu-8g"


def test_n1_groups_by_accelerator_signature_and_primary_is_top_ranked() -> None:
    groups = group_machine_choices(
        (
            _choice("n1-standard-8", "nvidia-tesla-t4"),
            _choice("g2-standard-8"),
            _choice("n1-standard-16", "nvidia-tesla-t4"),
            _choice("n1-standard-16", "nvidia-tesla-v100", 2),
        )
    )
    assert [(g.key, g.machine_types) for g in groups] == [
        ("t4x1", ("n1-standard-8", "n1-standard-16")),
        ("aopt", ("g2-standard-8",)),
        ("v100x2", ("n1-standard-16",)),
    ]
    assert groups[0].accelerator is not None and groups[0].accelerator.type == "nvidia-tesla-t4"


def test_duplicate_machine_type_is_refused_by_the_spec() -> None:
    twice = [{"machineType": "g2-standard-8"}, {"machineType": "g2-standard-8"}]
    with pytest.raises(ConfigError, match=r"machineTypes: lists a machine type twice.*g2-standard-8.*fix: list each choice once"):
        pool_args("prod", machineTypes=twice)


def test_flexibility_policy_ranks_each_type() -> None:
    group = MachineGroup("aopt", None, ("a", "b"))
    assert plan.flexibility_policy(group) == {
        "instance_selections": [
            {"name": "a", "rank": 1, "machine_types": ["a"]},
            {"name": "b", "rank": 2, "machine_types": ["b"]},
        ]
    }


def test_zones_are_sorted_and_the_spec_refuses_one_zone_without_a_reason_and_a_zone_twice() -> None:
    spec = _spec(zones=("us-central1-c", "us-central1-a"))
    assert plan.distribution_zones(spec) == ("us-central1-a", "us-central1-c")
    with pytest.raises(ConfigError, match=r"zones: pool train-gcp spans 1 zone.*fix: list at least 2 zones.*optOut.singleZone"):
        pool_args("prod", zones=["us-central1-a"])
    with pytest.raises(ConfigError, match=r"zones: lists a zone twice"):
        pool_args("prod", zones=["us-central1-a", "us-central1-a"])


@pytest.mark.parametrize("shape", ["ANY", "ANY_SINGLE_ZONE"])
def test_the_spec_refuses_autoscaling_without_even_or_balanced(shape: plan.TargetShape) -> None:
    with pytest.raises(ConfigError, match=rf'targetShape: cannot be autoscaled .*\(value: "{shape}"\)'):
        pool_args("prod", targetShape=shape, autoscaling={"maxReplicas": 3})


@pytest.mark.parametrize("shape", ["EVEN", "BALANCED"])
def test_autoscaling_allowed_shapes(shape: plan.TargetShape) -> None:
    assert plan.plan_pool(pool_args("prod", targetShape=shape, autoscaling={"maxReplicas": 3})).spec.autoscaling


@pytest.mark.parametrize(
    ("shape", "expected"), [("ANY", "NONE"), ("BALANCED", "NONE"), ("ANY_SINGLE_ZONE", "NONE"), ("EVEN", "PROACTIVE")]
)
def test_redistribution_off_except_even(shape: plan.TargetShape, expected: str) -> None:
    assert plan.update_policy(shape)["instance_redistribution_type"] == expected
    assert plan.update_policy(shape)["type"] == "OPPORTUNISTIC"


def test_spot_scheduling_notice_and_action() -> None:
    s = plan.spot_scheduling(_spec())
    assert s.get("preemption_notice_duration") == {"seconds": 120}
    assert s.get("instance_termination_action") == "DELETE"
    zero = _spec(notice=_spec().notice.model_copy(update={"preemption_notice_seconds": 0}))
    assert "preemption_notice_duration" not in plan.spot_scheduling(zero)
    assert plan.notice_link(zero) == "gcp-0"
    assert plan.spot_scheduling(_spec(termination_action="STOP")).get("instance_termination_action") == "STOP"
    assert plan.on_demand_scheduling().get("provisioning_model") == "STANDARD"


def test_lifecycle_rules_keep_explicit_zeroes() -> None:
    rules: list[Any] = plan.bucket_lifecycle_rules(3, 2)
    conditions = [r["condition"] for r in rules]
    assert conditions[1].get("days_since_noncurrent_time") == 2 and conditions[1].get("with_state") == "ARCHIVED"
    assert conditions[2].get("num_newer_versions") == 3 and conditions[2].get("send_num_newer_versions_if_zero")


def test_log_filter_selects_pool_preemptions() -> None:
    f = plan.preemption_log_filter("proj-1", "pool-dev-spot")
    assert 'logName="projects/proj-1/logs/cloudaudit.googleapis.com%2Fsystem_event"' in f
    assert 'protoPayload.resourceName:"/instances/pool-dev-spot"' in f


def test_controller_condition_lists_exact_migs() -> None:
    expr = plan.controller_mig_condition("p-1", "us-east1", ("a-spot-aopt", "a-od"))
    assert expr == (
        'resource.name == "projects/p-1/regions/us-east1/instanceGroupManagers/a-spot-aopt" || '
        'resource.name == "projects/p-1/regions/us-east1/instanceGroupManagers/a-od"'
    )


def test_a_bucket_name_with_google_is_refused_at_the_key_that_put_it_there() -> None:
    problem = plan.bucket_name_problem("my-google-bucket", "bucketName", "rename it")
    assert problem is not None and problem.at == "bucketName" and problem.value == "my-google-bucket"
    assert plan.bucket_name_problem("my-bucket", "bucketName", "rename it") is None
    with pytest.raises(PlanError) as err:
        plan.plan_pool(pool_args("prod", project="google-ml-123"))
    assert str(err.value) == (
        "spotgpu:pools[train-gcp].project: makes a bucket name that contains 'google' or starts with 'goog', which GCS "
        'refuses (value: "google-ml-123-train-gcp-prod-ckpt"); fix: rename the pool, or use a project whose id has no '
        "'google'"
    )


def test_names_are_deterministic_and_fit_limits() -> None:
    names = PoolNames("ml-prod-654321", "train-gcp", "prod")
    assert names.spot_mig("aopt") == "train-gcp-prod-spot-aopt"
    assert names.fallback_mig == "train-gcp-prod-od"
    assert names.bucket == "ml-prod-654321-train-gcp-prod-ckpt"
    assert names.controller_role_id == "spotgpu.train_gcp_prod.controller"
    long = PoolNames("a-very-long-project-id-12345", "abcdefghijklmnopqrst", "environment12345")
    assert len(long.bucket) <= 63 and len(long.service_account_id("ctl")) <= 30
    assert long.service_account_id("ctl") != long.service_account_id("vm")
    assert long.spot_mig("aopt").startswith(long.spot_base_instance_prefix)
    for n in (long.spot_mig("v100x8"), long.fallback_mig, long.service_account_id("vm")):
        assert check_name(n, "test") is None
    assert fit("abc", 5) == "abc" and len(fit("x" * 80, 30)) == 30


def test_check_name_explains_bad_names() -> None:
    problem = check_name("Bad_Name", "MIG")
    assert problem is not None and problem.at == "name" and "lowercase letters" in problem.fix


def test_autoscaling_bounds_are_ordered() -> None:
    with pytest.raises(ValueError, match="minReplicas 5 is above maxReplicas 2"):
        GcpAutoscaling(min_replicas=5, max_replicas=2)
