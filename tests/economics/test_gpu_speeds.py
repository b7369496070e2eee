"""The measured GPU speed table, piece by piece: the throughput record in the one schema, the
weighted median, the reference model, too little data said (not hidden), and JSON with no NaN."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from spotgpu.economics.fit import MIN_THROUGHPUT_SAMPLES, FitAccumulator, ProfileFit, weighted_median
from spotgpu.economics.measured import field_diff, measured_profile
from spotgpu.economics.telemetry import AGENT_UNUSED, ReadStats, TelemetryRecord, parse_lines
from spotgpu.models import WorkloadProfile

BASE = Path(__file__).resolve().parent / "data" / "llm-finetune.yaml"


def agent_vm(vm: str, instance_type: str, reports: list[tuple[float, int, str | None]], t0: float = 1_796_000_000.0,
             pool: str = "train") -> list[str]:  # fmt: skip
    """One VM's events log as the agent writes it, with ``(stepSeconds, steps, gpuModel)`` reports among its ticks."""
    lines: list[dict[str, Any]] = [
        {"ts": t0, "record": "started", "pool": pool, "provider": "aws"},
        {"ts": t0 + 1, "record": "identity", "pool": pool, "provider": "aws", "instance_id": vm,
         "instance_type": instance_type, "zone": "us-east-1a", "capacity": "spot", "name": "", "region": "us-east-1"},
    ]  # fmt: skip
    for i, (seconds, steps, model) in enumerate(reports):
        lines.append({"ts": t0 + 10 + i, "record": "commit-reported", "result": "ok", "lastCommittedAt": t0, "vmId": vm,
                      "error": None})  # fmt: skip
        lines.append({"ts": t0 + 10.5 + i, "record": "throughput", "stepSeconds": seconds, "steps": steps,
                      "gpuModel": model, "gpuModelSource": "catalogue" if model else "unknown"})  # fmt: skip
    return [json.dumps(x, sort_keys=True) for x in lines]


def fit_of(*vms: list[str]) -> ProfileFit:
    stats = ReadStats()
    fit = FitAccumulator().add_all(parse_lines([line for vm in vms for line in vm], stats=stats)).result()
    assert not any("throughput" in kind for kind in stats.skipped)
    return fit


def profile(table: dict[str, float] | None, gpu: bool = True) -> WorkloadProfile:
    doc = yaml.safe_load(BASE.read_text())
    if gpu:
        doc["gpu"] = {"gpusPerNode": 4, **({"relativeThroughput": table} if table is not None else {})}
    return WorkloadProfile.model_validate(doc)


ENOUGH = MIN_THROUGHPUT_SAMPLES


def test_throughput_is_read_not_skipped_as_unused() -> None:
    """The fast path skips unused agent records by regex: throughput is not one of them."""
    assert "throughput" not in AGENT_UNUSED
    stats = ReadStats()
    records = list(parse_lines(agent_vm("i-1", "g5.12xlarge", [(0.5, 200, "A10G")] * 3), stats=stats))
    kept = [r for r in records if r.event == "throughput"]
    assert [(r.seconds, r.steps, r.gpu_model, r.sku, r.node, r.pool) for r in kept] == [
        (0.5, 200, "A10G", "g5.12xlarge", "i-1", "train")] * 3  # fmt: skip
    assert stats.skipped == {"agent:commit-reported": 3}


@pytest.mark.parametrize("seconds", [0, -1.0, None, "fast"])
def test_a_throughput_record_without_a_step_time_names_the_line_and_field(seconds: object) -> None:
    lines = agent_vm("i-1", "g5.12xlarge", [(1.0, 1, "A10G")])
    bad = json.loads(lines[-1]) | {"stepSeconds": seconds}
    # a number that is no step time: the fit's own field; no number at all: the agent record's field
    field = "throughput.stepSeconds" if seconds == "fast" else "seconds"
    with pytest.raises(ValueError, match=rf"^telemetry:4: {field}: .*\(value: "):
        list(parse_lines([*lines[:-1], json.dumps(bad)]))


def test_a_v1_throughput_record_is_schema_and_infinity_is_refused() -> None:
    record = TelemetryRecord.model_validate({"v": 1, "ts": 1.0, "event": "throughput", "pool": "p", "seconds": 0.25,
                                             "steps": 50, "gpuModel": "H100"})  # fmt: skip
    assert json.loads(record.to_line())["gpuModel"] == "H100"
    with pytest.raises(ValueError, match="seconds"):
        list(parse_lines(['{"v": 1, "ts": 1, "event": "throughput", "pool": "p", "seconds": Infinity}']))


def test_the_median_is_weighted_by_steps() -> None:
    assert weighted_median([(1.0, 1), (3.0, 100)]) == 3.0  # one 1-step report does not outweigh 100 steps
    assert weighted_median([(1.0, 50), (2.0, 49), (9.0, 1)]) == 1.0  # half the steps reached at 1.0 s
    assert weighted_median([(1.0, 50), (2.0, 50), (9.0, 1)]) == 2.0
    assert weighted_median([(2.0, 1)]) == 2.0


def test_too_few_samples_are_listed_not_used() -> None:
    fit = fit_of(agent_vm("i-1", "g5.12xlarge", [(2.0, 100, "A10G")] * ENOUGH),
                 agent_vm("i-2", "p4d.24xlarge", [(0.8, 100, "A100")] * (ENOUGH - 1)))  # fmt: skip
    speeds = fit.gpu_speeds().to_dict()
    assert speeds["relativeThroughput"] == {"A10G": 1.0}
    a100 = next(m for m in speeds["models"] if m["gpuModel"] == "A100")
    assert a100["relativeThroughput"] is None and a100["samples"] == ENOUGH - 1
    assert f"too few samples ({ENOUGH - 1} < {ENOUGH})" in a100["note"]


def test_the_reference_is_the_base_tables_one_not_the_most_sampled() -> None:
    fit = fit_of(agent_vm("i-1", "g5.12xlarge", [(2.0, 100, "A10G")] * (ENOUGH + 3)),
                 agent_vm("i-2", "p4d.24xlarge", [(0.8, 100, "A100")] * ENOUGH))  # fmt: skip
    speeds = fit.gpu_speeds(profile({"A100": 1.0, "A10G": 0.3}))
    assert (speeds.reference, speeds.applies) == ("A100", True)
    assert speeds.speeds == {"A100": 1.0, "A10G": 0.4}
    merged = measured_profile(profile({"A100": 1.0, "A10G": 0.3, "H100": 2.5}), fit)
    assert merged.gpu is not None and merged.gpu.relative_throughput == {"A100": 1.0, "A10G": 0.4, "H100": 2.5}


def test_a_base_reference_with_no_samples_measures_nothing_and_says_why() -> None:
    fit = fit_of(agent_vm("i-1", "g5.12xlarge", [(2.0, 100, "A10G")] * ENOUGH),
                 agent_vm("i-2", "p4d.24xlarge", [(0.8, 100, "A100")] * ENOUGH))  # fmt: skip
    base = profile({"H100": 1.0, "A100": 0.5})
    speeds = fit.gpu_speeds(base).to_dict()
    assert speeds["reference"] is None and speeds["relativeThroughput"] == {} and not speeds["appliesToProfile"]
    assert "too little data" in speeds["referenceBasis"] and "H100" in speeds["referenceBasis"]
    assert all(m["relativeThroughput"] is None and "no reference" in m["note"] for m in speeds["models"])
    assert measured_profile(base, fit).gpu == base.gpu  # the typed table stays
    a100 = next(r for r in field_diff(base, fit) if r["field"] == "gpu.relativeThroughput.A100")
    assert (a100["base"], a100["measured"], a100["change"]) == (0.5, None, None) and "no reference" in a100["note"]


@pytest.mark.parametrize("base", [None, "no-gpu", "no-table"])
def test_without_a_named_reference_the_most_sampled_model_is_used_and_not_laid_over(base: str | None) -> None:
    fit = fit_of(agent_vm("i-1", "g5.12xlarge", [(2.0, 100, "A10G")] * ENOUGH),
                 agent_vm("i-2", "p4d.24xlarge", [(0.8, 100, "A100")] * (ENOUGH + 1)))  # fmt: skip
    given = None if base is None else profile(None, gpu=base != "no-gpu")
    speeds = fit.gpu_speeds(given)
    assert speeds.reference == "A100" and f"most samples ({ENOUGH + 1})" in speeds.basis and not speeds.applies
    assert speeds.speeds == {"A100": 1.0, "A10G": 0.4}
    if given is not None:
        assert measured_profile(given, fit).gpu == given.gpu


def test_the_json_has_no_nan_only_null_and_a_reason() -> None:
    """Every thin case: no reports, only an unnamed model, too few, a reference without samples."""
    cases = [
        fit_of(),
        fit_of(agent_vm("i-1", "n1-standard-8", [(1.0, 10, None)] * ENOUGH)),
        fit_of(agent_vm("i-1", "g5.12xlarge", [(1.0, 10, "A10G")])),
        fit_of(agent_vm("i-1", "g5.12xlarge", [(1e-300, 1, "A10G")] * ENOUGH),
               agent_vm("i-2", "p4d.24xlarge", [(1e300, 1, "A100")] * ENOUGH)),
    ]  # fmt: skip
    for fit in cases:
        for base in (None, profile({"H100": 1.0}), profile({"A10G": 1.0})):
            doc = fit.to_dict(base)
            text = json.dumps(doc, allow_nan=False)  # raises on NaN or Infinity
            speeds = json.loads(text)["gpuSpeeds"]
            for m in speeds["models"]:
                assert m["relativeThroughput"] is not None or m["note"]
            if speeds["reference"] is None:
                assert "too little data" in speeds["referenceBasis"]
    unnamed = cases[1].gpu_speeds().to_dict()["models"][0]
    assert unnamed["gpuModel"] is None and "gpu_model=" in unnamed["note"]
    extreme = cases[3].gpu_speeds(profile({"A10G": 1.0})).to_dict()
    assert extreme["relativeThroughput"] == {"A10G": 1.0}  # 1e-600 is no speed: said, not written
    assert "outside" in next(m for m in extreme["models"] if m["gpuModel"] == "A100")["note"]


def test_step_times_of_several_pools_are_said_to_be_taken_together() -> None:
    one = fit_of(agent_vm("i-1", "g5.12xlarge", [(2.0, 100, "A10G")] * ENOUGH))
    assert "note" not in one.gpu_speeds().to_dict() and one.gpu_speeds().to_dict()["pools"] == ["train"]
    two = fit_of(agent_vm("i-1", "g5.12xlarge", [(2.0, 100, "A10G")] * ENOUGH),
                 agent_vm("i-2", "g5.12xlarge", [(9.0, 100, "A10G")] * ENOUGH, pool="other"))  # fmt: skip
    assert "--pool NAME" in two.gpu_speeds().to_dict()["note"]
