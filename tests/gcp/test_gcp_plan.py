"""Pure planning rules: machine grouping, zone spread, target shapes, scheduling, names."""

from __future__ import annotations

from typing import Any

import pytest
from gcp_fixtures import pool_args

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
    groups = plan.group_machine_choices(
        (_choice("a3-highgpu-8g"), _choice("a2-ultragpu-8g"), _choice("g2-standard-48"))
    )
    assert len(groups) == 1
    assert groups[0].key == "aopt" and groups[0].accelerator is None
    assert groups[0].machine_types == ("a3-highgpu-8g", "a2-ultragpu-8g", "g2-standard-48")
    assert groups[0].top_type == "a3-highgpu-8g"


def test_n1_groups_by_accelerator_signature_and_primary_is_top_ranked() -> None:
    groups = plan.group_machine_choices(
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


def test_duplicate_machine_type_is_rejected() -> None:
    with pytest.raises(plan.GcpPlanError, match="'g2-standard-8' twice"):
        plan.group_machine_choices((_choice("g2-standard-8"), _choice("g2-standard-8")))


def test_flexibility_policy_ranks_each_type() -> None:
    group = plan.MachineGroup("aopt", None, ("a", "b"))
    assert plan.flexibility_policy(group) == {
        "instance_selections": [
            {"name": "a", "rank": 1, "machine_types": ["a"]},
            {"name": "b", "rank": 2, "machine_types": ["b"]},
        ]
    }


def test_zones_sorted_and_single_zone_needs_opt_out() -> None:
    spec = _spec(zones=("us-central1-c", "us-central1-a"))
    assert plan.distribution_zones(spec) == ("us-central1-a", "us-central1-c")
    with pytest.raises(plan.GcpPlanError, match=r"single zone; list at least 2 zones.*optOut.singleZone"):
        plan.distribution_zones(_spec(zones=("us-central1-a",)))
    waived = _spec(zones=("us-central1-a",), opt_out=_spec().opt_out.model_copy(update={"single_zone": "placement"}))
    assert plan.distribution_zones(waived) == ("us-central1-a",)
    with pytest.raises(plan.GcpPlanError, match="twice"):
        plan.distribution_zones(_spec(zones=("us-central1-a", "us-central1-a")))


@pytest.mark.parametrize("shape", ["ANY", "ANY_SINGLE_ZONE"])
def test_autoscaling_needs_even_or_balanced(shape: plan.TargetShape) -> None:
    with pytest.raises(plan.GcpPlanError, match=rf"targetShape '{shape}' cannot be autoscaled"):
        plan.check_target_shape("p", shape, GcpAutoscaling(max_replicas=3))
    plan.check_target_shape("p", shape, None)


@pytest.mark.parametrize("shape", ["EVEN", "BALANCED"])
def test_autoscaling_allowed_shapes(shape: plan.TargetShape) -> None:
    plan.check_target_shape("p", shape, GcpAutoscaling(max_replicas=3))


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


def test_bucket_name_rejects_google() -> None:
    with pytest.raises(plan.GcpPlanError, match="google"):
        plan.check_bucket_name("my-google-bucket")


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
        check_name(n, "test")
    assert fit("abc", 5) == "abc" and len(fit("x" * 80, 30)) == 30


def test_check_name_explains_bad_names() -> None:
    with pytest.raises(ValueError, match="lowercase letters"):
        check_name("Bad_Name", "MIG")


def test_autoscaling_bounds_are_ordered() -> None:
    with pytest.raises(ValueError, match="minReplicas 5 is above maxReplicas 2"):
        GcpAutoscaling(min_replicas=5, max_replicas=2)
