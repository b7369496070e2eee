"""A stack's workload may point at a measured profile file (issue 23, item 2): the file that
``spotgpu profile fit --out`` writes. Its measured figures replace the typed ones, every other
key stays as typed, and the preview and ``cost --stack`` say where the figures came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from test_pool_economics import _cli, _project

from spotgpu.economics.fit import FitAccumulator
from spotgpu.models.workload import MEASURED_FIELDS

FIGURES = {"interruptionsPerHour": 0.02, "expectedReacquisitionSeconds": 420.0, "checkpointWriteSeconds": 95.0,
           "checkpointLoadSeconds": 80.0, "restartSeconds": 210.0, "checkpointBytes": 50_000_000_000}  # fmt: skip


def _measured(path: str, pool_prices: bool = True) -> Any:
    def edit(config: dict[str, Any]) -> None:
        config["spotgpu:workloads"]["llm-finetune"]["measuredProfile"] = path
        if not pool_prices:  # the workload's (measured) spot price prices every pool
            for pool in config["spotgpu:pools"]:
                pool.pop("spotPerHour", None)
    return edit


def _write_measured(project: Path) -> dict[str, Any]:
    """What `profile fit --profile BASE --out` writes: the whole base profile, measured figures laid over it."""
    base = yaml.safe_load((project / "stacks" / "Pulumi.m.yaml").read_text())["config"]["spotgpu:workloads"]["llm-finetune"]
    doc = {**{k: v for k, v in base.items() if k not in ("measuredProfile", "sources")}, **FIGURES, "workHours": 999}
    (project / "measured").mkdir(exist_ok=True)
    (project / "measured" / "llm-finetune.yaml").write_text("# measured by `spotgpu profile fit` from: a.jsonl\n"
                                                            + yaml.safe_dump(doc))  # fmt: skip
    return doc


def test_the_measured_figures_replace_the_typed_ones_and_are_shown(tmp_path: Path) -> None:
    project = _project(tmp_path, "m", _measured("measured/llm-finetune.yaml"))
    _write_measured(project)
    done = _cli("cost", "--stack", "m", "--program", str(project), "--pool", "train-aws", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    # the file's prices.spotPerHour and gang rate are its base's (no --sku applied one): the stack's own
    figures = {**FIGURES, "gangInterruptionsPerHour": 0.7535, "prices": {"spotPerHour": 2.2}}
    assert doc["measuredProfile"]["file"] == "measured/llm-finetune.yaml" and doc["measuredProfile"]["figures"] == figures
    # where each came from: the file names no sources, so each is said to be its base's, copied, not measured
    assert doc["figures"]["interruptionsPerHour"] == {
        "value": 0.02, "kind": "copied", "from": "copied from the base profile in measured/llm-finetune.yaml, not measured"}
    typed = _cli("cost", "--stack", "prod", "--pool", "train-aws", "--json")
    assert json.loads(typed.stdout)["effectiveCost"] != doc["effectiveCost"]  # the figures are used
    # the file's workHours 999 is not a measured figure: the typed one stays (same on-demand total)
    assert doc["onDemandTotalUsd"] == json.loads(typed.stdout)["onDemandTotalUsd"]
    preview = _cli("preview", "--program", str(project), "--stack", "m", "--no-policy")
    assert preview.returncode == 0, preview.stderr
    assert "measured figures from measured/llm-finetune.yaml: interruptionsPerHour 0.02" in preview.stdout


def test_a_missing_measured_file_is_one_line_exit_2(tmp_path: Path) -> None:
    project = _project(tmp_path, "gone", _measured("measured/nope.yaml"))
    for args in (("cost", "--stack", "gone", "--program", str(project), "--pool", "train-aws"),
                 ("preview", "--program", str(project), "--stack", "gone", "--no-policy")):  # fmt: skip
        done = _cli(*args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1
        assert "spotgpu:workloads.llm-finetune.measuredProfile: no such file" in done.stderr
        assert "spotgpu profile fit" in done.stderr and '"measured/nope.yaml"' in done.stderr


def test_profile_fit_measures_only_the_fields_a_stack_takes_from_the_file() -> None:
    fit = FitAccumulator().result()
    updates, why = fit.profile_updates()
    assert set(updates) | set(why) == set(MEASURED_FIELDS)


def test_the_controller_config_carries_the_figures_not_the_path(tmp_path: Path) -> None:
    """The deployed controller validates its config where the project directory does not exist."""
    from spotgpu.controller.render import render_controller_config
    from spotgpu.economics.report import load_stack
    from spotgpu.models.ladder import StepKind

    project = _project(tmp_path, "m", _measured("measured/llm-finetune.yaml"))
    _write_measured(project)
    config = load_stack("m", project)
    pool = config.pools[0]
    rendered = render_controller_config(
        pool, config.workload_for(pool), config.ladder_for(pool), state_url="s3://b/p/_controller",
        primary_group="spot", fallback_group="od", alternate_role=StepKind.ALTERNATE_SKU,
        cloud={"region": "us-east-1", "queueUrl": "https://sqs.us-east-1.amazonaws.com/1/q"},
    )  # fmt: skip
    workload = rendered.workloads["llm-finetune"]
    assert workload.measured_profile is None and workload.interruptions_per_hour == FIGURES["interruptionsPerHour"]


def test_measured_gpu_speeds_replace_the_typed_ones_model_by_model(tmp_path: Path) -> None:
    """The measured ``gpu.relativeThroughput`` that ``profile fit --out`` writes reaches the stack's workload:
    each measured model's speed wins, the others stay as typed, the rest of the gpu block is the stack's."""
    typed = {"gpusPerNode": 1, "worldSizes": [8], "relativeThroughput": {"A10G": 1.0, "L4": 0.6, "L40S": 1.6}}

    def edit(config: dict[str, Any]) -> None:
        config["spotgpu:workloads"]["llm-finetune"].update(measuredProfile="measured/llm-finetune.yaml", gpu=typed)

    project = _project(tmp_path, "g", edit)
    (project / "measured").mkdir()
    (project / "measured" / "llm-finetune.yaml").write_text(yaml.safe_dump(
        {**FIGURES, "gpu": {"gpusPerNode": 8, "relativeThroughput": {"A10G": 1.0, "L4": 0.45}}}))
    done = _cli("cost", "--stack", "g", "--program", str(project), "--pool", "train-aws", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["measuredProfile"]["relativeThroughputInUse"] == {"A10G": 1.0, "L4": 0.45, "L40S": 1.6}
    g6 = next(t for r in doc["rungs"] for t in r["types"] if t["type"] == "g6.12xlarge")  # 4 x L4
    assert (g6["gpus"], g6["speed"]) == (4, 0.45)  # the stack's gpusPerNode-independent catalogue count, measured speed


def test_a_measured_spot_price_replaces_the_typed_one_and_a_pool_price_still_wins(tmp_path: Path) -> None:
    """Issue 23, item 3: the file's prices.spotPerHour (what `profile fit --sku` measured) prices the workload;
    the stack's other prices stay as typed, and a pool's own spotPerHour wins over both."""

    def edit(config: dict[str, Any]) -> None:
        _measured("measured/llm-finetune.yaml", pool_prices=False)(config)
        config["spotgpu:pools"][1]["spotPerHour"] = 2.5  # train-gcp

    project = _project(tmp_path, "sp", edit)
    (project / "measured").mkdir()
    (project / "measured" / "llm-finetune.yaml").write_text(yaml.safe_dump(
        {**FIGURES, "prices": {"spotPerHour": 1.93, "onDemandPerHour": 9.99, "deadlinePenaltyPerHour": 1}}))
    docs = {}
    for pool in ("train-aws", "train-gcp"):
        done = _cli("cost", "--stack", "sp", "--program", str(project), "--pool", pool, "--json")
        assert done.returncode == 0, done.stderr
        docs[pool] = json.loads(done.stdout)
    aws, gcp = docs["train-aws"], docs["train-gcp"]
    assert (aws["prices"]["spotPerHour"], aws["prices"]["spotSource"]) == (1.93, "workloads.llm-finetune.prices.spotPerHour")
    assert aws["prices"]["onDemandPerHour"] == 5.67  # the stack's, not the file's 9.99
    assert aws["measuredProfile"]["figures"]["prices"] == {"spotPerHour": 1.93} and "note" not in aws["measuredProfile"]
    assert (gcp["prices"]["spotPerHour"], gcp["prices"]["spotSource"]) == (2.5, "pools[train-gcp].spotPerHour")
    assert gcp["measuredProfile"]["note"] == "pools[train-gcp].spotPerHour 2.5 wins over the workload's prices.spotPerHour for this pool"
    preview = _cli("preview", "--program", str(project), "--stack", "sp", "--no-policy")
    assert preview.returncode == 0, preview.stderr
    assert "checkpointBytes 5e+10, prices.spotPerHour 1.93" in preview.stdout
    assert "      - pools[train-gcp].spotPerHour 2.5 wins over the workload's prices.spotPerHour" in preview.stdout


def test_profile_fit_sku_out_reaches_the_stack(tmp_path: Path) -> None:
    """The whole loop: a price export, `profile fit --sku --out` into the project, the stack's pool priced at it."""
    from test_spot_price_telemetry import BASE, G5_MEDIAN, aws_history

    project = _project(tmp_path, "loop", _measured("measured/llm-finetune.yaml", pool_prices=False))
    (project / "measured").mkdir()
    prices = tmp_path / "aws-spot-prices.json"
    prices.write_text(json.dumps(aws_history()))
    fit = _cli("profile", "fit", "--telemetry", str(prices), "--profile", str(BASE), "--sku", "g5.12xlarge",
               "--out", str(project / "measured" / "llm-finetune.yaml"))  # fmt: skip
    assert fit.returncode == 0, fit.stderr
    done = _cli("cost", "--stack", "loop", "--program", str(project), "--pool", "train-aws", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prices"]["spotPerHour"] == G5_MEDIAN


def test_a_measured_spot_price_that_is_no_price_is_one_line_exit_2(tmp_path: Path) -> None:
    project = _project(tmp_path, "bad", _measured("measured/llm-finetune.yaml"))
    (project / "measured").mkdir()
    (project / "measured" / "llm-finetune.yaml").write_text(yaml.safe_dump({**FIGURES, "prices": {"spotPerHour": "1.9/h"}}))
    done = _cli("cost", "--stack", "bad", "--program", str(project), "--pool", "train-aws")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "spotgpu:workloads.llm-finetune.measuredProfile: holds prices.spotPerHour '1.9/h', not a USD price" in done.stderr
