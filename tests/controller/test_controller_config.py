"""Controller config: the example parses; bad input gives one line naming field, value and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spotgpu.cli import main
from spotgpu.config import ConfigError
from spotgpu.controller.classify import classify
from spotgpu.controller.config import load_controller_config, parse_controller_config
from spotgpu.controller.observe import FailureReason
from spotgpu.controller.strategies import make_strategy, registered
from spotgpu.models.workload import FALLBACK_POLICIES

EXAMPLE = Path(__file__).with_name("controller.example.yaml")


def _example() -> dict[str, object]:
    data = yaml.safe_load(EXAMPLE.read_text())
    assert isinstance(data, dict)
    return data


def test_example_parses() -> None:
    config = load_controller_config(EXAMPLE)
    assert [p.cloud for p in config.pools] == ["aws", "gcp", "azure"]
    assert config.pools[0].group("dev-aws-fallback").role.value == "on_demand"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["pools"][0].update(groupz=[]), "controller:pools[0].groupz"),
        (lambda d: d["pools"][0]["groups"].pop(0), "same_pool groups"),
        (lambda d: d["pools"][0]["groups"].pop(), "no on_demand group"),
        (lambda d: d["pools"][1].update(subscription="pool-a"), "controller:pools[1].subscription"),
        (lambda d: d["pools"][0].update(ladder="nope"), "ladder 'nope' is not defined"),
        (lambda d: d["pools"][0]["groups"].append({"name": "q", "role": "queue_defer"}), "role queue_defer"),
        (lambda d: d.update(stateUrl="/tmp/x"), "controller:stateUrl"),
        (lambda d: d["workloads"]["smoke-train"].update(fallbackPolicy="yolo"), "fallbackPolicy 'yolo'"),
    ],
)
def test_bad_config_is_one_clear_line(mutate: object, expected: str) -> None:
    data = _example()
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ConfigError) as err:
        parse_controller_config(data)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_strategy_registry_matches_the_workload_policies() -> None:
    assert set(registered()) == set(FALLBACK_POLICIES)
    config = load_controller_config(EXAMPLE)
    with pytest.raises(ValueError, match="no registered strategy"):
        make_strategy("yolo", config.ladders["dev"])


@pytest.mark.parametrize(
    ("code", "message", "reason"),
    [
        ("InsufficientInstanceCapacity", "", FailureReason.CAPACITY),
        ("UnfulfillableCapacity", "", FailureReason.CAPACITY),
        ("MaxSpotInstanceCountExceeded", "", FailureReason.QUOTA),
        ("SpotMaxPriceTooLow", "", FailureReason.PRICE),
        ("ZONE_RESOURCE_POOL_EXHAUSTED", "", FailureReason.CAPACITY),
        ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "", FailureReason.CAPACITY),
        ("QUOTA_EXCEEDED", "", FailureReason.QUOTA),
        ("ProvisioningState/failed/AllocationFailed", "", FailureReason.CAPACITY),
        ("ZonalAllocationFailed", "", FailureReason.CAPACITY),
        ("OverconstrainedAllocationRequest", "", FailureReason.CAPACITY),
        ("SkuNotAvailable", "", FailureReason.CAPACITY),
        ("SpotPriceGreaterThanProvidedMaxPrice", "", FailureReason.PRICE),
        ("OperationNotAllowed", "exceeding approved Total Regional Cores quota", FailureReason.QUOTA),
        (None, "There is no Spot capacity available that matches your request.", FailureReason.CAPACITY),
        (None, "You have requested more vCPU capacity than your current vCPU limit of 32 allows", FailureReason.QUOTA),
        ("InvalidParameterValue", "Invalid IAM Instance Profile name", FailureReason.OTHER),
    ],
)
def test_classify(code: str | None, message: str, reason: FailureReason) -> None:
    assert classify(code, message)[0] is reason


def test_cli_validate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller", "validate", "--config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "dev-aws [aws] strategy=ladder: same_pool(600s, $0.8/h) -> alternate_zone" in out


def test_cli_validate_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("stateUrl: file:///x\npools: []\n")
    assert main(["controller", "validate", "--config", str(bad)]) == 2
    assert "controller:" in capsys.readouterr().err


def _fails(data: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_controller_config(data)
    return str(err.value)


def test_a_rung_whose_ceiling_is_below_its_groups_price_is_rejected() -> None:
    data = _example()
    data["ladders"]["dev"]["steps"][2]["costCeilingPerHour"] = 0.9  # type: ignore[index]  # on-demand costs 1.01
    msg = _fails(data)
    assert "rung on_demand has costCeilingPerHour 0.9, below $1.01/h of its cheapest group dev-aws-fallback" in msg
    assert "\n" not in msg


def test_deadline_escalation_without_an_on_demand_rung_is_rejected() -> None:
    data = _example()
    ladder = data["ladders"]["dev"]  # type: ignore[index]
    ladder["steps"] = [s for s in ladder["steps"] if s["kind"] != "on_demand"]
    ladder["deadlineEscalation"] = True
    for pool in data["pools"]:  # type: ignore[attr-defined]
        pool["groups"] = [g for g in pool["groups"] if g["role"] != "on_demand"]
    assert "deadlineEscalation is true but the ladder has no on_demand step" in _fails(data)
    del ladder["deadlineEscalation"]
    assert parse_controller_config(data).ladders["dev"].deadline_escalation is False


def test_a_misspelt_key_in_the_only_pool_reports_that_key_only() -> None:
    data = _example()
    data["pools"] = data["pools"][:1]  # type: ignore[index]
    data["pools"][0]["queueURL"] = data["pools"][0].pop("queueUrl")  # type: ignore[index]
    msg = _fails(data)
    assert msg.startswith("controller:pools[0].queueURL: unknown key")
    assert "did you mean queueUrl?" in msg  # the controller pool's own keys, not the stack's pool spec
    assert "at least 1 item" not in msg and "more:" not in msg


def test_deadline_tracking_needs_total_steps() -> None:
    data = _example()
    data["pools"][0]["jobStartedAt"] = 1_764_000_000  # type: ignore[index]
    assert "has no totalSteps" in _fails(data)
    data["pools"][0]["totalSteps"] = 40_000  # type: ignore[index]
    assert parse_controller_config(data).pools[0].total_steps == 40_000
