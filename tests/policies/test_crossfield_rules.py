"""The cross-field rules judge raw resources as config validation judges a stack."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import raw_resources as raw
from guard_helpers import by_policy, judge

from spotgpu.contract.tags import LADDER, WORKLOAD

CROSS_FIELD = (
    "ladder-ceilings-cover-prices",
    "deadline-escalation-reachable",
    "azure-max-price-covers-spot",
    "azure-max-price-below-on-demand",
    "fallback-can-replace-pool",
    "gpu-types-known",
)


def _messages(program: Callable[[], Any], policy: str) -> list[str]:
    return [d["message"] for d in by_policy(judge(program), policy)]


@pytest.mark.parametrize("build", [raw.aws_pool, raw.gcp_pool, raw.azure_pool])
def test_compliant_raw_pools_pass_every_cross_field_rule(build: Callable[[], None]) -> None:
    diagnostics = judge(build)
    assert [d for d in diagnostics if d["policy"] in CROSS_FIELD] == []


def test_spot_ceiling_below_the_spot_price() -> None:
    # The raw workload's spot price is 0.45 USD/h; a 0.3 ceiling can never buy it.
    found = _messages(lambda: raw.aws_pool(tags={LADDER: "sp:600:0.3;od:3600:1.5"}), "ladder-ceilings-cover-prices")
    assert len(found) == 1
    assert "step 1 (same_pool) has ceiling 0.3 USD/h, below the workload's spot price 0.45" in found[0]
    assert "fix: raise the ceiling to at least 0.45" in found[0]


def test_on_demand_ceiling_below_the_on_demand_price() -> None:
    found = _messages(lambda: raw.gcp_pool(tags={LADDER: "sp:600:0.8;od:3600:0.9"}), "ladder-ceilings-cover-prices")
    assert len(found) == 1 and "on-demand price 1.01" in found[0]


def test_deadline_without_an_on_demand_rung() -> None:
    found = _messages(lambda: raw.aws_pool(tags={LADDER: "sp:600:0.8;qd:86400:0"}), "deadline-escalation-reachable")
    assert len(found) == 1 and "12 h deadline" in found[0] and "no on_demand step" in found[0]


def test_azure_max_price_below_spot_and_above_on_demand() -> None:
    low = _messages(lambda: raw.azure_pool(max_price=0.1), "azure-max-price-covers-spot")
    assert len(low) == 2 and "maxPrice 0.1 is below at least the spot price 0.45" in low[0]
    high = _messages(lambda: raw.azure_pool(max_price=50), "azure-max-price-below-on-demand")
    assert len(high) == 2 and "above the on-demand price 1.01" in high[0]
    assert _messages(lambda: raw.azure_pool(max_price=0.9), "azure-max-price-covers-spot") == []


def test_fallback_smaller_than_the_pool() -> None:
    found = _messages(lambda: raw.aws_pool(desired=3, fallback_max=2), "fallback-can-replace-pool")
    assert len(found) == 1 and "may grow to 2 node(s), fewer than the pool's 3" in found[0]
    assert _messages(lambda: raw.aws_pool(desired=2, fallback_max=2), "fallback-can-replace-pool") == []


def test_unknown_types_and_locations_name_the_closest_matches() -> None:
    aws = _messages(lambda: raw.aws_pool(types=["g5.xlarge", "g9.superlarge"]), "gpu-types-known")
    assert len(aws) == 1 and "'g9.superlarge' is not an EC2 type (closest:" in aws[0]
    azure = _messages(lambda: raw.azure_pool(sizes=["Standard_NC24ads_A100_v4", "Standard_NC24ads_Z900_v4"]),
                      "gpu-types-known")
    assert any("'Standard_NC24ads_Z900_v4' is not a GPU size" in m and "Standard_NC24ads_A100_v4" in m
               for m in azure)


def _with_gpu(speeds: str) -> str:
    """The raw workload link with a gpu block: one GPU per node at the given speeds per model."""
    from spotgpu.contract.tags import encode_workload

    return f"{encode_workload(raw.WORKLOAD)};c=1;u={speeds}"


def test_a_per_work_hour_ceiling_is_judged_per_unit_of_work() -> None:
    # on-demand 1.01 USD/h; the raw AWS pool's types hold one A10G or one L4 each
    ladder = {LADDER: "sp:600:0.8;od:3600:0.5w"}
    slow = _messages(lambda: raw.aws_pool(tags={**ladder, WORKLOAD: _with_gpu("A10G:1+L4:1")}),
                     "ladder-ceilings-cover-prices")  # fmt: skip
    assert len(slow) == 1
    assert "step 2 (on_demand) has ceiling 0.5 USD/work-hour, below the workload's on-demand price 1.01 USD/h, " \
           "1.01 USD/work-hour on the pool's most productive type (1 work-hours per node-hour)" in slow[0]
    assert "fix: raise the ceiling to at least 1.01" in slow[0]
    # the same ceiling admits the price once a node does 2.5 work-hours an hour (0.404 USD per work-hour)
    fast = _messages(lambda: raw.aws_pool(tags={**ladder, WORKLOAD: _with_gpu("A10G:2.5+L4:2.5")}),
                     "ladder-ceilings-cover-prices")  # fmt: skip
    assert fast == []
