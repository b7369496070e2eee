"""A malformed config fails with one line naming the key path, the value and the fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from spotgpu.config import ConfigError, parse_stack_config, read_stack_file

REPO = Path(__file__).resolve().parents[2]


def _error(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_prod_and_dev_configs_parse(prod_raw: dict[str, Any]) -> None:
    config = parse_stack_config(prod_raw)
    assert [p.cloud for p in config.pools] == ["aws", "gcp", "azure"]
    assert all(ladder.steps[-1].kind.value == "queue_defer" for ladder in config.ladders.values())


def test_zone_list_that_is_not_a_list(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][1]["zones"] = "us-central1-a"
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:pools[train-gcp].zones:")
    assert '"us-central1-a"' in msg
    assert "fix: list zones" in msg


def test_ladder_without_on_demand_or_queue(prod_raw: dict[str, Any]) -> None:
    prod_raw["ladders"]["training-aws"]["steps"] = [
        {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 3},
        {"kind": "alternate_zone", "maxWaitSeconds": 600, "costCeilingPerHour": 3},
    ]
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:ladders.training-aws:")
    assert "no on_demand and no queue_defer" in msg
    assert "add {kind: on_demand" in msg


def test_negative_price(prod_raw: dict[str, Any]) -> None:
    prod_raw["workloads"]["llm-finetune"]["prices"]["spotPerHour"] = -1.5
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:workloads.llm-finetune.prices.spotPerHour:")
    assert "-1.5" in msg
    assert "fix: set the spot USD/hour" in msg


def test_unknown_key(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][0]["instanceTypez"] = ["g5.xlarge"]
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:pools[train-aws].instanceTypez:")
    assert "did you mean instanceTypes?" in msg


def test_unbounded_wait(prod_raw: dict[str, Any]) -> None:
    prod_raw["ladders"]["training-aws"]["steps"][0]["maxWaitSeconds"] = 10**9
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:ladders.training-aws.steps[0].maxWaitSeconds:")
    assert "bounded wait" in msg


def test_steps_out_of_order(prod_raw: dict[str, Any]) -> None:
    steps = prod_raw["ladders"]["training-aws"]["steps"]
    steps[0], steps[3] = steps[3], steps[0]
    msg = _error(prod_raw)
    assert "steps must follow the order" in msg


def test_single_zone_needs_stated_reason(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][2]["zones"] = ["1"]
    msg = _error(prod_raw)
    assert "spans 1 zone(s)" in msg and "optOut.singleZone" in msg
    prod_raw["pools"][2]["optOut"] = {"singleZone": "capacity reservation pinned to zone 1"}
    # the zone is explained; the ladder's alternate_zone rung (nothing behind it now) is not
    msg = _error(prod_raw)
    assert "steps[1].kind: alternate_zone needs a second zone" in msg and "optOut.idleRungs" in msg
    prod_raw["pools"][2]["optOut"]["idleRungs"] = "the ladder is shared with the two-zone pools"
    assert parse_stack_config(prod_raw).pools[2].zones == ("1",)


def test_undefined_workload_reference(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][0]["workload"] = "nope"
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:pools[train-aws].workload: names no workload profile (value: \"nope\")")
    assert "fix: use one of ['llm-finetune']" in msg


def test_wrong_cloud_tag(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][0]["cloud"] = "oracle"
    msg = _error(prod_raw)
    assert msg.startswith('spotgpu:pools[train-aws].cloud: names no cloud spotgpu builds (value: "oracle")')
    assert "aws, gcp or azure" in msg


def test_gcp_zero_second_notice_is_only_allowed_value_besides_120(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][1]["notice"] = {"preemptionNoticeSeconds": 60}
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:pools[train-gcp].notice.preemptionNoticeSeconds:")
    assert "use 120 (recommended) or 0" in msg


def test_json_encoded_values_as_the_engine_passes_them(prod_raw: dict[str, Any]) -> None:
    import json

    engine_form = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in prod_raw.items()}
    assert parse_stack_config(engine_form) == parse_stack_config(prod_raw)


def test_two_pools_cannot_share_a_storage_account(prod_raw: dict[str, Any]) -> None:
    import copy

    second = copy.deepcopy(prod_raw["pools"][2])
    second["name"] = "train-az2"
    prod_raw["pools"].append(second)
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:pools[train-az2].storageAccountName: storage account is already used by pool train-az")
    assert '(value: "spotgpuprodckpt")' in msg


def _set(raw: dict[str, Any], path: str, value: Any) -> None:
    """``pools.0.capacity.fallbackMax`` -> raw["pools"][0]["capacity"]["fallbackMax"] = value."""
    node: Any = raw
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


# The broken configs a new user wrote (issue 16) that used to pass, or end in a traceback.
CASES = [
    ("ladders.training-aws.steps.0.costCeilingPerHour", 1.0,
     "spotgpu:ladders.training-aws.steps[0].costCeilingPerHour: is below pool train-aws's spot price 2.2", "at least 2.2"),
    ("ladders.training-aws.steps.2.costCeilingPerHour", 1.0,
     "spotgpu:ladders.training-aws.steps[2].costCeilingPerHour: is below pool train-aws's on-demand price 10.49",
     "at least 10.49"),
    ("pools.0.capacity.fallbackMax", 500, "spotgpu:pools[train-aws].capacity.fallbackMax: is above capacity.max 8",
     "at most 8"),
    ("pools.0.capacity.fallbackMax", 0, "spotgpu:pools[train-aws].capacity.fallbackMax: is 0", "optOut.smallFallback"),
    ("pools.0.capacity.fallbackMax", 1, "spotgpu:pools[train-aws].capacity.fallbackMax: is below capacity.target 2",
     "at least 2"),
    ("pools.2.maxPrice", 0.01, "spotgpu:pools[train-az].maxPrice: is below the spot price 1.47 (pools[train-az].spotPerHour)",
     "use -1"),
    ("pools.2.maxPrice", 50, "spotgpu:pools[train-az].maxPrice: is above Standard_NC24ads_A100_v4's on-demand price",
     "optOut.maxPriceAboveOnDemand"),
    ("pools.0.instanceTypes", ["g9.superlarge", "g5.12xlarge"],
     'spotgpu:pools[train-aws].instanceTypes[0]: is not an EC2 instance type (value: "g9.superlarge")', "closest:"),
    ("pools.0.instanceTypes", ["g5.12xlarge", "m5.large"],
     'spotgpu:pools[train-aws].instanceTypes[1]: is not a GPU instance type', "use a GPU type such as"),
    ("pools.0.instanceTypes", ["t3.micro", "g5.12xlarge"], "spotgpu:pools[train-aws].instanceTypes[0]: is not a GPU",
     "use a GPU type"),
    ("pools.1.machineTypes.1", {"machineType": "n1-standard-8", "accelerator": {"type": "nvidia-tesla-z900", "count": 1}},
     "spotgpu:pools[train-gcp].machineTypes[1].accelerator.type: is not a Google Cloud accelerator type",
     "closest: nvidia-tesla-"),
    ("pools.1.region", "us-central9", None, None),  # the zones no longer match: covered below
    ("pools.2.location", "mooneast", "spotgpu:pools[train-az].location: is not an Azure location", "closest:"),
    ("pools.2.vmSizes", ["Standard_D4s_v5", "Standard_NC24ads_A100_v4"],
     "spotgpu:pools[train-az].vmSizes[0]: is a D-series size without GPUs", "N-series"),
]


@pytest.mark.parametrize(("path", "value", "starts", "fix"), [c for c in CASES if c[2]])
def test_cross_field_and_catalogue_errors(prod_raw: dict[str, Any], path: str, value: Any, starts: str,
                                          fix: str) -> None:
    _set(prod_raw, path, value)
    msg = _error(prod_raw)
    assert msg.startswith(starts), msg
    assert f"(value: {json.dumps(value)})" in msg or "(value: " in msg
    assert "; fix: " in msg and fix in msg.split("; fix: ", 1)[1], msg


def test_unknown_gcp_region_names_the_closest(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][1].update(region="us-central9", zones=["us-central9-a", "us-central9-b"],
                                machineTypes=[{"machineType": "a2-highgpu-4g"}, {"machineType": "g2-standard-48"}])
    msg = _error(prod_raw)
    assert msg.startswith('spotgpu:pools[train-gcp].region: is not a Google Cloud region (value: "us-central9")')
    assert "closest: us-central1" in msg


def test_subnets_outside_the_configured_region() -> None:
    raw, engine = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, provider={**engine, "aws:region": "us-west-2"})
    assert str(info.value).startswith(
        "spotgpu:pools[train-aws].subnets: subnets are in us-east-1, but the pool deploys to us-west-2 (aws:region)")
    eu = copy.deepcopy(raw)
    eu["pools"][0]["subnets"][0]["zone"] = "eu-west-1a"
    with pytest.raises(ConfigError, match=r"subnets: subnets are in 2 regions \['eu-west-1', 'us-east-1'\]"):
        parse_stack_config(eu)


def test_catalogue_states_an_opt_out_for_a_type_it_does_not_know_yet(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][0]["instanceTypes"] = ["g7x.12xlarge", "g5.12xlarge"]
    assert "not an EC2 instance type" in _error(prod_raw)
    prod_raw["pools"][0]["optOut"] = {"catalogue": "g7x launched after the catalogue was generated"}
    prod_raw["workloads"]["llm-finetune"]["prices"]["onDemandPerHour"] = 5.67  # the catalogue has no list price for it
    prod_raw["pools"] = prod_raw["pools"][:1]  # a typed on-demand price holds for every pool of the workload
    assert parse_stack_config(prod_raw).pools[0].instance_types[0] == "g7x.12xlarge"


def test_on_demand_price_defaults_from_the_catalogue_and_says_so(prod_raw: dict[str, Any]) -> None:
    prod_raw["workloads"]["llm-finetune"]["prices"].pop("onDemandPerHour", None)
    prod_raw["pools"][1]["machineTypes"] = [{"machineType": "a2-highgpu-4g"}, {"machineType": "g2-standard-48"}]
    # The GCP pool's a2-highgpu-4g lists at ~14.69 USD/h in us-central1; the fallback grows its group's types.
    config = parse_stack_config(prod_raw)
    aws, gcp, azure = config.pools
    quote = config.on_demand_quote(aws)
    assert quote is not None and "prices.json" in quote.source
    assert quote.usd_per_hour == pytest.approx(10.49)  # the dearest type the fallback may grow: g6e.12xlarge
    # the bill prices on-demand at the fallback group's first type (what its prioritized allocation launches first)
    assert config.workload_for(aws).prices.on_demand_per_hour == pytest.approx(5.67)
    assert config.workload_for(azure).prices.on_demand_per_hour == pytest.approx(3.67)
    assert config.workload_for(gcp).prices.on_demand_per_hour == pytest.approx(14.69)
    prod_raw["ladders"]["training-aws"]["steps"][2]["costCeilingPerHour"] = 7
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:ladders.training-aws.steps[2].costCeilingPerHour: is below pool train-aws's "
                          "on-demand price 10.49 (catalogue list price for us-east-1")


def test_no_catalogue_price_asks_for_one(prod_raw: dict[str, Any]) -> None:
    prod_raw["workloads"]["llm-finetune"]["prices"].pop("onDemandPerHour", None)
    prod_raw["pools"] = [prod_raw["pools"][0]]
    for i, subnet in enumerate(prod_raw["pools"][0]["subnets"]):
        subnet["zone"] = "us-west-2" + "abc"[i]
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:workloads.llm-finetune.prices.onDemandPerHour: is not set, and the GPU catalogue "
                          "has no on-demand price for pool train-aws's fallback")
    assert "fix: set the on-demand USD/hour" in msg


def test_a_standalone_profile_still_needs_its_on_demand_price() -> None:
    from pydantic import ValidationError

    from spotgpu.models import Prices

    with pytest.raises(ValidationError, match="is not set, and a profile outside a stack has no pool"):
        Prices.model_validate({"spotPerHour": 1.0})
