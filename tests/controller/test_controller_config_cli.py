"""``spotgpu controller config --stack``: the configs the stack rendered, for a long-lived process.

The stack outputs come from running the prod stack's pools under the mock runtime (what
``pulumi stack output --json`` would print after ``pulumi up``); every printed document
must pass ``spotgpu controller validate``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from spotgpu.cli import main
from spotgpu.config import parse_stack_config, read_stack_file
from spotgpu_pulumi.clouds import plan_stack
from spotgpu_pulumi.offline.testing import record
from spotgpu_pulumi.platform import deploy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def outputs() -> dict[str, Any]:
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    config = parse_stack_config(raw)
    seen: dict[str, Any] = {}

    def program() -> None:
        for name, pool in deploy(plan_stack(config)).items():
            keys = sorted(pool.exports)
            pulumi.Output.all(*[pool.exports[k] for k in keys]).apply(
                lambda v, name=name, keys=keys: seen.__setitem__(name, dict(zip(keys, v, strict=True)))
            )

    record(program)
    return seen


def test_every_pool_exports_a_config_and_each_validates(
    outputs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "outputs.json"
    saved.write_text(json.dumps(outputs))
    assert main(["controller", "config", "--stack", "prod", "--outputs", str(saved)]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert sorted(d["pools"][0]["name"] for d in docs) == ["train-aws", "train-az", "train-gcp"]
    for doc in docs:
        path = tmp_path / f"{doc['pools'][0]['name']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        assert main(["controller", "validate", "--config", str(path)]) == 0
        assert "strategy=ladder" in capsys.readouterr().out


def test_one_pool_as_json_and_a_missing_pool_is_one_line(
    outputs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "outputs.json"
    saved.write_text(json.dumps(outputs))
    assert main(["controller", "config", "-s", "prod", "--outputs", str(saved), "--pool", "train-gcp", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pools"][0]["cloud"] == "gcp"
    assert main(["controller", "config", "-s", "prod", "--outputs", str(saved), "--pool", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no controller config for pool 'nope'" in err and "train-aws" in err


def test_run_once_reads_the_config_from_the_environment(
    outputs: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPOTGPU_CONTROLLER_CONFIG", outputs["train-aws"]["controllerConfig"])
    assert main(["controller", "validate", "--config", "env:SPOTGPU_CONTROLLER_CONFIG"]) == 0
    assert "train-aws [aws]" in capsys.readouterr().out
    monkeypatch.setenv("SPOTGPU_CONTROLLER_CONFIG", "")
    assert main(["controller", "validate", "--config", "env:SPOTGPU_CONTROLLER_CONFIG"]) == 2
    assert "is empty" in capsys.readouterr().err
