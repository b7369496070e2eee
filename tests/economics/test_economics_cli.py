"""`spotgpu cost`, `spotgpu simulate` and the preview's per-pool economics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotgpu.cli import main
from spotgpu.config import parse_stack_config, read_stack_file
from spotgpu.economics.report import render_economics, stack_economics

DATA = Path(__file__).parent / "data"
PROFILE = str(DATA / "llm-finetune.yaml")
LADDER = str(DATA / "training-ladder.yaml")
REPO = Path(__file__).resolve().parents[2]


def test_cost_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--profile", PROFILE, "--ladder", LADDER]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SPOT-ELIGIBLE on aws")
    for term in ("spot_compute", "lost_compute", "reacquisition_idle", "fallback", "deadline_penalty"):
        assert term in out


def test_cost_json_carries_inputs_and_formulas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--profile", PROFILE, "--ladder", LADDER, "--provider", "azure", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["provider"] == "azure" and doc["spotEligible"] is True
    assert doc["interval"]["method"] == "daly"
    lost = next(t for t in doc["terms"] if t["name"] == "lost_compute")
    assert lost["inputs"]["finalCheckpointFitsNotice"] is False  # Azure's 30 s notice
    assert "T/2 + C" in lost["formula"]
    assert doc["spotTotal"] < doc["onDemandTotal"]


def test_cost_bad_profile_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text(Path(PROFILE).read_text().replace("interruptionsPerHour: 0.7535", "interruptionsPerHour: -1"))
    assert main(["cost", "--profile", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "interruptionsPerHour" in err and "-1" in err
    assert main(["cost", "--profile", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_simulate_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "progress.png"
    argv = ["simulate", "--profile", PROFILE, "--ladder", LADDER, "--nodes", "1", "--trace-group", "1-node/aws-02-15-2023",
            "--home", "us-west-2a", "--max-starts", "2", "--start-every-hours", "240", "--json", "--plot", str(plot)]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["policy"]: r for r in doc["groups"][0]["rows"]}
    assert set(rows) == {"on-demand only", "spot, on-demand after 30 min", "uniform progress", "spotgpu ladder"}
    assert rows["on-demand only"]["relativeCost"] == 1.0
    assert rows["spotgpu ladder"]["deadlinesMet"] == 1.0
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_simulate_rejects_bad_home_and_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--profile", PROFILE, "--nodes", "1", "--group", "1-node/aws-02-15-2023", "--home", "mars-1a"]
    assert main(argv) == 2  # the old --group spelling still works, with a note
    err = capsys.readouterr().err
    assert "mars-1a" in err and "--group is deprecated; use --trace-group" in err
    argv = ["simulate", "--profile", PROFILE, "--nodes", "1", "--work-hours", "48", "--deadline-hours", "40"]
    assert main(argv) == 2
    assert "deadline_hours 40.0 is below work_hours 48.0" in capsys.readouterr().err


def test_preview_economics_for_prod() -> None:
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    report = stack_economics(parse_stack_config(raw))
    pools = report["pools"]
    assert set(pools) == {"train-aws", "train-gcp", "train-az"}
    for p in pools.values():
        assert p["spotEligible"] is True
        assert 0 < p["spotTotalUsd"] < p["onDemandTotalUsd"]
        assert len(p["effectiveCost"]["terms"]) == 7
    text = render_economics(report)
    assert "SPOT-ELIGIBLE" in text and "reacquisition_idle" in text
    json.dumps(report)


def test_old_trace_group_spellings_are_hidden_aliases(capsys: pytest.CaptureFixture[str]) -> None:
    from spotgpu.cli import build_parser

    parser = build_parser()
    sim = parser.parse_args(["simulate", "--profile", PROFILE, "--group", "a", "--trace-group", "b", "--group", "c"])
    assert sim.trace_group == ["a", "b", "c"]  # repeats append, whichever spelling
    cost = parser.parse_args(["cost", "--profile", PROFILE, "--hazard-traces", "1-node/aws-02-15-2023"])
    assert cost.trace_group == "1-node/aws-02-15-2023"
    assert "--hazard-traces is deprecated; use --trace-group" in capsys.readouterr().err
