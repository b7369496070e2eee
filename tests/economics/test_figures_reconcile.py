"""Figures that reconcile: strict JSON, unit guards, one on-demand baseline, preview and cost agreeing."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "tests/economics/data/llm-finetune.yaml"
LADDER = REPO / "tests/economics/data/training-ladder.yaml"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", *args], capture_output=True, text=True, timeout=180,
                          cwd=REPO)  # fmt: skip


def _strict(text: str) -> Any:
    """JSON as a strict parser reads it: Infinity and NaN are errors."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _project(tmp: Path, stack: str, replace: dict[str, str]) -> Path:
    """A copy of the project whose ``stack`` is the prod stack with ``replace`` applied."""
    (tmp / "stacks").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Pulumi.yaml", tmp / "Pulumi.yaml")
    shutil.copy(REPO / "stacks/__main__.py", tmp / "stacks/__main__.py")
    text = (REPO / "stacks/Pulumi.prod.yaml").read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    (tmp / "stacks" / f"Pulumi.{stack}.yaml").write_text(text)
    return tmp


def _mutated(tmp: Path, source: Path, old: str, new: str) -> Path:
    out = tmp / source.name
    text = source.read_text()
    assert old in text
    out.write_text(text.replace(old, new))
    return out


@pytest.mark.parametrize(
    ("source", "old", "new", "needles"),
    [
        (PROFILE, "interruptionsPerHour: 0.7535", "interruptionsPerHour: 15", ["interruptionsPerHour", "15", "0.15"]),
        (PROFILE, "checkpointBytes: 60000000000", "checkpointBytes: 60GB", ["checkpointBytes", "60GB", "60000000000"]),
        (PROFILE, "checkpointWriteSeconds: 75", "checkpointWriteSeconds: 75s", ["checkpointWriteSeconds", "75s", ": 75"]),
        (PROFILE, "expectedReacquisitionSeconds: 8125.7", "expectedReacquisitionSeconds: 15min",
         ["expectedReacquisitionSeconds", "15min", "900"]),
        (LADDER, "costCeilingPerHour: 12", "costCeilingPerHour: 700", ["steps[2].costCeilingPerHour", "700", "fix"]),
    ],
)  # fmt: skip
def test_mutated_economics_inputs_are_one_line_and_exit_2(
    tmp_path: Path, source: Path, old: str, new: str, needles: list[str]
) -> None:
    """Defect: a percent typed as a rate was a traceback (exit 1); a huge ceiling passed; units gave no number."""
    bad = _mutated(tmp_path, source, old, new)
    profile, ladder = (bad, LADDER) if source == PROFILE else (PROFILE, bad)
    done = _cli("cost", "--profile", str(profile), "--ladder", str(ladder))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    for needle in needles:
        assert needle in done.stderr


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("interruptionsPerHour: 0.7535", "interruptionsPerHour: 15", "a percent typed as a rate"),
        ("{kind: on_demand, maxWaitSeconds: 14400, costCeilingPerHour: 12}",
         "{kind: on_demand, maxWaitSeconds: 14400, costCeilingPerHour: 700}", "costCeilingPerHour"),
    ],
)  # fmt: skip
def test_preview_refuses_the_same_mutations_in_one_line(tmp_path: Path, old: str, new: str, needle: str) -> None:
    project = _project(tmp_path, "bad", {old: new})
    done = _cli("preview", "--program", str(project), "--stack", "bad", "--no-policy", "--json")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and needle in done.stderr and "Traceback" not in done.stderr


def test_no_infinity_in_any_json_null_and_a_reason_instead(tmp_path: Path) -> None:
    """Defect: a job that cannot progress wrote Infinity into preview --json."""
    change = {"interruptionsPerHour: 0.7535": "interruptionsPerHour: 4.9", "gangInterruptionsPerHour: 0.7535": "",
              "checkpointWriteSeconds: 75": "checkpointWriteSeconds: 700"}  # fmt: skip
    project = _project(tmp_path / "p", "slow", change)
    done = _cli("preview", "--program", str(project), "--stack", "slow", "--no-policy", "--json")
    assert done.returncode == 0, done.stderr
    pool = _strict(done.stdout)["economics"]["pools"]["train-aws"]
    assert pool["spotTotalUsd"] is None and "loses work as fast as it makes it" in pool["nulls"]["spotTotalUsd"]
    assert pool["effectiveCost"]["nulls"]["spotTotal"] == pool["nulls"]["spotTotalUsd"]
    profile = _mutated(tmp_path, PROFILE, "interruptionsPerHour: 0.7535", "interruptionsPerHour: 4.9")
    profile.write_text(profile.read_text().replace("checkpointWriteSeconds: 75", "checkpointWriteSeconds: 700")
                       .replace("gangInterruptionsPerHour: 0.7535", ""))
    cost = _cli("cost", "--profile", str(profile), "--json")
    assert cost.returncode == 0 and _strict(cost.stdout)["spotTotal"] is None
    text = _cli("cost", "--profile", str(profile))
    assert "unbounded" in text.stdout and "inf" not in text.stdout.replace(str(tmp_path), "").replace("interruptions", "")


def test_one_on_demand_baseline_across_cost_and_simulate() -> None:
    """Defect: cost and simulate printed different on-demand figures and nothing explained the gap."""
    cost = _strict(_cli("cost", "--profile", str(PROFILE), "--ladder", str(LADDER), "--json").stdout)
    base = cost["details"]["onDemandBaseline"]
    assert cost["onDemandTotal"] == base["computeUsd"]
    sim = _cli("simulate", "--profile", str(PROFILE), "--ladder", str(LADDER), "--trace-group", "1-node/aws-02-15-2023",
               "--home", "us-east-1a", "--max-starts", "1", "--policy", "baseline-on-demand", "--json")  # fmt: skip
    assert sim.returncode == 0, sim.stderr
    group = _strict(sim.stdout)["groups"][0]
    replayed = group["rows"][0]["meanCostUsd"]
    assert group["onDemandBaseline"] == base
    assert replayed == pytest.approx(base["replayedUsd"], rel=0.005)  # the same job, to the replay's tick
    table = _cli("simulate", "--profile", str(PROFILE), "--ladder", str(LADDER), "--trace-group",
                 "1-node/aws-02-15-2023", "--home", "us-east-1a", "--max-starts", "1", "--policy", "on-demand")  # fmt: skip
    assert "note: --policy on-demand is now baseline-on-demand" in table.stderr  # the old name, for one release
    assert f"on-demand total ${base['computeUsd']:,.2f} (the work alone)" in table.stdout
    assert "nan" not in table.stdout


def test_simulate_replays_a_tiered_pool_as_the_preview_check_does() -> None:
    """Defect (audit of issue 35): ``simulate --stack prod --pool train-aws`` ignored checkpointTiers and
    replayed the store-only job (a 75 s write every 368 s: ladder $379 where the preview's check said $331),
    and its baseline line paired the tier's write with the replayed interval ($426 against $493 replayed)."""
    from spotgpu.config import parse_stack_config, read_stack_file
    from spotgpu.economics.interval import choose_interval
    from spotgpu.models import default_notice
    from spotgpu.simulation.check import job_for

    sim = _cli("simulate", "--stack", "prod", "--pool", "train-aws", "--program", str(REPO), "--trace-group",
               "1-node/aws-02-15-2023", "--policy", "baseline-on-demand", "--json")  # fmt: skip
    assert sim.returncode == 0, sim.stderr
    doc = _strict(sim.stdout)
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    config = parse_stack_config(raw, project_dir=str(REPO))
    pool = next(p for p in config.pools if p.name == "train-aws")
    workload = config.workload_for(pool)
    decision = choose_interval(workload, default_notice("aws"))
    assert decision.tiers is not None
    expected = job_for(workload, decision.seconds, decision.tiers)
    job = doc["job"]
    assert job["intervalSeconds"] == pytest.approx(expected.interval_seconds)
    assert job["checkpointWriteSeconds"] == pytest.approx(expected.checkpoint_write_seconds)
    assert job["loadSeconds"] == pytest.approx(expected.load_seconds)
    group = doc["groups"][0]
    assert group["rows"][0]["meanCostUsd"] == pytest.approx(group["onDemandBaseline"]["replayedUsd"], rel=0.005)


@functools.cache
def _prod_preview() -> dict[str, Any]:
    done = _cli("preview", "--stack", "prod", "--no-policy", "--json")
    assert done.returncode == 0, done.stderr
    return dict(_strict(done.stdout)["economics"])


def test_preview_and_cost_print_the_same_total(tmp_path: Path) -> None:
    """Defect: the same workload's spot total differed between the preview and `spotgpu cost` by rounding twice."""
    pool = _prod_preview()["pools"]["train-aws"]
    # the standalone profile is the prod workload without its checkpoint tiers: add the stack's block
    stack = yaml.safe_load((REPO / "stacks/Pulumi.prod.yaml").read_text())["config"]
    profile = tmp_path / "llm-finetune.yaml"
    profile.write_text(yaml.safe_dump({**yaml.safe_load(PROFILE.read_text()),
                                       "checkpointTiers": stack["spotgpu:workloads"]["llm-finetune"]["checkpointTiers"]}))
    zones = str(len(stack["spotgpu:pools"][0]["subnets"]))  # train-aws's zones: peer copies across them
    cost = _cli("cost", "--profile", str(profile), "--ladder", str(LADDER), "--zones", zones)
    line = next(x for x in cost.stdout.splitlines() if x.strip().startswith("spot total"))
    assert f"{pool['spotTotalUsd']:,.2f}" in line
    assert _strict(_cli("cost", "--profile", str(profile), "--ladder", str(LADDER), "--zones", zones, "--json").stdout)[
        "spotTotal"] == pool["spotTotalUsd"]  # fmt: skip
