"""spot-gpu-requires-fallback also fails a spot pool whose fallback group can never grow.

Either nothing in the stack runs the controller for that pool (no Lambda function,
Cloud Run job or Container Apps job tagged ``spotgpu-role=controller`` +
``spotgpu-pool=<pool>``, and no stated ``spotgpu-controller-waiver``), or the
fallback group's max size is 0.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import raw_resources as raw
from guard_helpers import by_policy, judge

from spotgpu.contract.tags import CONTROLLER_WAIVER

RULE = "spot-gpu-requires-fallback"
BUILDERS = {"aws": raw.aws_pool, "gcp": raw.gcp_pool, "azure": raw.azure_pool}


def _violations(build: Callable[[], Any]) -> list[str]:
    return [d["message"] for d in by_policy(judge(build), RULE) if d["level"] == "mandatory"]


@pytest.mark.parametrize("cloud", sorted(BUILDERS))
def test_a_pool_with_no_controller_job_fails(cloud: str) -> None:
    messages = _violations(partial(BUILDERS[cloud], controller=False))
    assert len(messages) >= 1 and all("no controller job in this stack targets pool" in m for m in messages)
    assert "controller: {enabled: false, waiver: <reason>}" in messages[0]


@pytest.mark.parametrize("cloud", sorted(BUILDERS))
def test_a_controller_job_for_another_pool_does_not_count(cloud: str) -> None:
    assert _violations(partial(BUILDERS[cloud], controller_for="someone-else"))


@pytest.mark.parametrize("cloud", sorted(BUILDERS))
def test_a_stated_waiver_satisfies_it_and_a_hollow_one_does_not(cloud: str) -> None:
    stated = {CONTROLLER_WAIVER: "the Slurm power-save plugin resizes the fallback group"}
    assert _violations(partial(BUILDERS[cloud], controller=False, tags=stated)) == []
    hollow = _violations(partial(BUILDERS[cloud], controller=False, tags={CONTROLLER_WAIVER: "ok"}))
    assert hollow and "states no reason" in hollow[0]


def test_a_fallback_group_capped_at_zero_fails_even_with_a_controller() -> None:
    messages = _violations(partial(raw.aws_pool, fallback_max=0))
    assert len(messages) == 1 and "has maxSize 0, so it can never grow" in messages[0]


@pytest.mark.parametrize("cloud", sorted(BUILDERS))
def test_the_compliant_pool_with_its_controller_job_passes(cloud: str) -> None:
    assert _violations(BUILDERS[cloud]) == []


def test_the_component_records_the_opt_out_waiver_the_rule_reads() -> None:
    from spotgpu_pulumi.aws import GpuPool, plan_pool
    from tests.aws.aws_fixtures import pool_args

    def pool(controller: dict[str, Any]) -> Callable[[], Any]:
        args = pool_args("prod", controller=controller)
        return lambda: GpuPool(args.spec.name, plan_pool(args))

    assert _violations(pool({"enabled": False, "waiver": "our Kueue admission check grows it"})) == []
    assert _violations(pool({"enabled": False})), "an opt-out without a reason must fail"
