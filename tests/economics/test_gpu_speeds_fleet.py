"""Speed per GPU model, measured (issue 26, item 2): a workload reports its step time through the
real client to the real agent on two VMs of different types, and ``profile fit`` over those
agents' own events logs gives the injected relative throughput."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fleet_logs import throughput_log

from spotgpu.economics.telemetry import ReadStats
from spotgpu.economics.telemetry_files import read_files

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "tests" / "economics" / "data" / "llm-finetune.yaml"

#: g5.12xlarge carries A10G, p4d.24xlarge A100 (the catalogue): 2.0 s against 0.8 s a step is 2.5x.
A10G_STEP, A100_STEP = 2.0, 0.8


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("fleet")
    return [throughput_log(folder / "a10g.jsonl", "g5.12xlarge", "i-0a10a10a10a10a10a", A10G_STEP, reports=6),
            throughput_log(folder / "a100.jsonl", "p4d.24xlarge", "i-0a100a100a100a100", A100_STEP, reports=5)]  # fmt: skip


def _fit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", "profile", "fit", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip


@pytest.mark.timeout(120)
def test_the_agent_logs_each_report_with_its_vms_gpu_model(fleet: list[Path]) -> None:
    lines = [json.loads(x) for x in fleet[1].read_text().splitlines()]
    reports = [x for x in lines if x["record"] == "throughput"]
    assert len(reports) == 5
    assert {(x["stepSeconds"], x["steps"], x["gpuModel"], x["gpuModelSource"]) for x in reports} == {
        (A100_STEP, 100, "A100", "catalogue")}  # fmt: skip


@pytest.mark.timeout(120)
def test_the_reader_keeps_the_reports_as_throughput_records(fleet: list[Path]) -> None:
    stats = ReadStats()
    records = [r for r in read_files(fleet, stats=stats) if r.event == "throughput"]
    assert not any("throughput" in kind for kind in stats.skipped)
    assert {(r.gpu_model, r.sku, r.seconds, r.steps) for r in records} == {
        ("A10G", "g5.12xlarge", A10G_STEP, 100), ("A100", "p4d.24xlarge", A100_STEP, 100)}  # fmt: skip
    assert len(records) == 11 and {r.node for r in records} == {"i-0a10a10a10a10a10a", "i-0a100a100a100a100"}


@pytest.mark.timeout(120)
def test_profile_fit_gives_the_injected_speed_against_the_most_sampled_model(fleet: list[Path]) -> None:
    done = _fit("--telemetry", *map(str, fleet), "--json")
    assert done.returncode == 0, done.stderr
    speeds = json.loads(done.stdout)["gpuSpeeds"]
    assert speeds["reference"] == "A10G" and "most samples (6)" in speeds["referenceBasis"]
    assert speeds["relativeThroughput"] == {"A10G": 1.0, "A100": A10G_STEP / A100_STEP}
    assert speeds["appliesToProfile"] is False  # no profile says which type workHours was measured on
    rows = {m["gpuModel"]: m for m in speeds["models"]}
    assert (rows["A100"]["samples"], rows["A100"]["steps"], rows["A100"]["nodes"], rows["A100"]["medianStepSeconds"]) == (
        5, 500, 1, A100_STEP)  # fmt: skip
    text = _fit("--telemetry", *map(str, fleet))
    assert "reference A10G: the model with the most samples (6)" in text.stdout
    assert any(line.split()[:1] == ["A100"] and "speed 2.5" in line for line in text.stdout.splitlines())


@pytest.mark.timeout(120)
def test_the_measured_profile_carries_the_measured_table(fleet: list[Path], tmp_path: Path) -> None:
    """With the base table's reference (A10G 1.0), the measured A100 speed replaces the typed 2.0."""
    base = yaml.safe_load(BASE.read_text())
    base["gpu"] = {"gpusPerNode": 4, "relativeThroughput": {"A10G": 1.0, "A100": 2.0, "H100": 5.0}}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    out = tmp_path / "measured.yaml"
    done = _fit("--telemetry", *map(str, fleet), "--profile", str(tmp_path / "base.yaml"), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["gpuSpeeds"]["appliesToProfile"] is True and doc["gpuSpeeds"]["reference"] == "A10G"
    diff = {row["field"]: row for row in doc["diff"]}
    assert (diff["gpu.relativeThroughput.A100"]["base"], diff["gpu.relativeThroughput.A100"]["measured"]) == (2.0, 2.5)
    assert diff["gpu.relativeThroughput.A100"]["change"] == 0.25
    assert diff["gpu.relativeThroughput.H100"]["measured"] is None and "not in the telemetry" in diff[
        "gpu.relativeThroughput.H100"]["note"]  # fmt: skip
    measured = yaml.safe_load(out.read_text())
    assert measured["gpu"]["relativeThroughput"] == {"A10G": 1.0, "A100": 2.5, "H100": 5.0}  # measured wins per model
    assert measured["gpu"]["gpusPerNode"] == 4
