"""A malformed config fails with one line naming the key path, the value and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from spotgpu.config import ConfigError, parse_stack_config


def _error(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_prod_and_dev_configs_parse(prod_raw: dict[str, Any]) -> None:
    config = parse_stack_config(prod_raw)
    assert [p.cloud for p in config.pools] == ["aws", "gcp", "azure"]
    assert config.ladders["training"].steps[-1].kind.value == "queue_defer"


def test_zone_list_that_is_not_a_list(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][1]["zones"] = "us-central1-a"
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:pools[train-gcp].zones:")
    assert '"us-central1-a"' in msg
    assert "fix: list zones" in msg


def test_ladder_without_on_demand_or_queue(prod_raw: dict[str, Any]) -> None:
    prod_raw["ladders"]["training"]["steps"] = [
        {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 3},
        {"kind": "alternate_zone", "maxWaitSeconds": 600, "costCeilingPerHour": 3},
    ]
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:ladders.training:")
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
    prod_raw["ladders"]["training"]["steps"][0]["maxWaitSeconds"] = 10**9
    msg = _error(prod_raw)
    assert msg.startswith("spotgpu:ladders.training.steps[0].maxWaitSeconds:")
    assert "bounded wait" in msg


def test_steps_out_of_order(prod_raw: dict[str, Any]) -> None:
    steps = prod_raw["ladders"]["training"]["steps"]
    steps[0], steps[3] = steps[3], steps[0]
    msg = _error(prod_raw)
    assert "steps must follow the order" in msg


def test_single_zone_needs_stated_reason(prod_raw: dict[str, Any]) -> None:
    prod_raw["pools"][2]["zones"] = ["1"]
    msg = _error(prod_raw)
    assert "spans 1 zone(s)" in msg and "optOut.singleZone" in msg
    prod_raw["pools"][2]["optOut"] = {"singleZone": "capacity reservation pinned to zone 1"}
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
