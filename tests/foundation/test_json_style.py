"""One JSON style on every ``--json``: camelCase keys (issue 25, item 4).

Each command's document is walked key by key (:func:`spotgpu.cliutil.non_camel_keys`).
Names that are data (pools, VM ids, groups) and other tools' schemas (a cloud provider's
resource inputs, Prometheus' own config) are not keys of ours and are skipped, by name.
Only the camelCase key is printed (issue 31, item 8: every key used to come twice,
``objectsChecked`` and ``objects_checked``; the project was never released, so nobody needs the old one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spotgpu.cliutil import camel_case, camel_keys, non_camel_keys
from spotgpu.contract.state_store import ObjectJsonStore
from spotgpu.controller.runner import RECORD_KEY
from spotgpu.controller.state import ControllerRecord, PoolState

REPO = Path(__file__).resolve().parents[2]


def json_of(*argv: str, timeout: float = 120) -> object:
    run = subprocess.run([sys.executable, "-m", "spotgpu", *argv], capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_helper_converts_keys_not_names() -> None:
    assert camel_case("work_hours") == "workHours" and camel_case("dev-aws") == "dev-aws"
    doc = {"job": {"work_hours": 1}, "pools": {"train_a": {"lost_since": None}}, "inputs": {"cpu_options": {}}}
    assert camel_keys(doc, names_under=["pools"], foreign=["inputs"]) == {
        "job": {"workHours": 1}, "pools": {"train_a": {"lostSince": None}}, "inputs": {"cpu_options": {}},
    }
    assert non_camel_keys(doc, names_under=["pools"], foreign=["inputs"]) == ["$.job.work_hours", "$.pools.train_a.lost_since"]
    assert non_camel_keys({"objectsChecked": 1, "objects_checked": 1}) == ["$.objects_checked"]  # no twin excuses it


@pytest.mark.timeout(120)
def test_agent_demo_json_is_camel_case_with_each_key_once() -> None:
    doc = json_of("agent", "demo", "aws", "--json")
    assert isinstance(doc, dict)
    assert non_camel_keys(doc) == []
    assert doc["identity"]["instanceId"] and "instance_id" not in doc["identity"]


def test_controller_validate_and_status_json_are_camel_case(tmp_path: Path) -> None:
    config = REPO / "tests" / "controller" / "controller.example.yaml"
    assert non_camel_keys(json_of("controller", "validate", "--config", str(config), "--json"), names_under=["pools"]) == []
    import yaml

    doc = yaml.safe_load(config.read_text())
    doc["stateUrl"] = f"file://{tmp_path}"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(doc))
    record = ControllerRecord({"pool-a": PoolState(lost_since=5.0, drains={"i-0abc": 3.0}, fallback_cost_usd=1.5)})
    ObjectJsonStore(f"file://{tmp_path}").put(RECORD_KEY, record.to_doc())
    status = json_of("controller", "status", "--config", str(tmp_path / "c.yaml"), "--json")
    assert status["pools"]["pool-a"]["lostSince"] == 5.0 and status["pools"]["pool-a"]["drains"] == {"i-0abc": 3.0}
    assert non_camel_keys(status, names_under=["pools", "drains", "backoff"]) == []


def test_init_and_observability_json_are_camel_case(tmp_path: Path) -> None:
    assert non_camel_keys(json_of("init", str(tmp_path / "p"), "--owner", "t", "--json")) == []
    assert non_camel_keys(json_of("observability", "dashboard", "--json")) == []
    assert non_camel_keys(json_of("observability", "alerts", "--json")) == []
    assert non_camel_keys(json_of("observability", "scrape-config", "--cloud", "aws", "--pool", "train-aws", "--json"), names_under=["files"]) == []


@pytest.mark.timeout(300)
def test_preview_json_is_camel_case() -> None:
    doc = json_of("preview", "--stack", "dev", "--json", timeout=240)
    assert non_camel_keys(doc, names_under=["pools", "outputs"], foreign=["inputs"]) == []  # resources' inputs: the provider's
    assert non_camel_keys(doc["economics"], names_under=["pools"]) == []  # terms[].inputs are ours: camelCase


def test_ckpt_json_is_camel_case_with_each_key_once(tmp_path: Path) -> None:
    import numpy as np

    from spotgpu.checkpoint import CheckpointManager

    assert non_camel_keys(json_of("ckpt", "gc", str(tmp_path), "--json")) == []
    CheckpointManager(tmp_path.as_uri()).save(1, {"w": np.zeros(4, dtype=np.float32)})
    (report,) = json_of("ckpt", "verify", str(tmp_path), "--json")  # type: ignore[misc]
    assert non_camel_keys(report) == [] and report["objectsChecked"] >= 1 and "objects_checked" not in report


@pytest.mark.timeout(240)
def test_simulate_json_is_camel_case() -> None:
    data = REPO / "tests" / "economics" / "data"
    doc = json_of("simulate", "--profile", str(data / "llm-finetune.yaml"), "--ladder", str(data / "training-ladder.yaml"),
                  "--nodes", "1", "--trace-group", "1-node/aws-02-15-2023", "--home", "us-west-2a", "--max-starts", "2",
                  "--start-every-hours", "240", "--json", timeout=200)  # fmt: skip
    assert non_camel_keys(doc) == []


@pytest.mark.timeout(120)
def test_cost_json_is_camel_case() -> None:
    data = REPO / "tests" / "economics" / "data"
    doc = json_of("cost", "--profile", str(data / "llm-finetune.yaml"), "--ladder", str(data / "training-ladder.yaml"), "--json")
    assert non_camel_keys(doc, names_under=["pools"]) == []  # terms[].inputs too: onDemandShare, ...
