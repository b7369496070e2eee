"""The agent's and the controller's own logs, and the clouds' exports of them, through one reader and the fit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_logs import agent_log, controller_log

from spotgpu.economics.fit import FitAccumulator, poisson_interval
from spotgpu.economics.telemetry_files import read_files, read_jsonl

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def agent_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_log(tmp_path_factory.mktemp("agent") / "events.jsonl", lead=120.0)


@pytest.fixture(scope="module")
def controller_events(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return controller_log(tmp_path_factory.mktemp("controller") / "controller.jsonl")


def test_the_agents_events_log_is_read_not_dropped(agent_events: Path) -> None:
    """Defect: its notices were silently dropped and its other records failed with 'event: Field required'."""
    records = read_jsonl(agent_events)
    kinds = [r.event for r in records]
    assert kinds.count("notice") == 1 and kinds.count("interrupted") == 1 and kinds.count("node_started") == 1
    started = next(r for r in records if r.event == "node_started")
    assert (started.pool, started.node, started.sku, started.zone, started.capacity) == (
        "aws-pool", "i-0123456789abcdef0", "g5.xlarge", "us-east-1b", "spot")  # fmt: skip


def test_the_agents_log_gives_the_injected_lead_and_one_loss(agent_events: Path) -> None:
    lines = [json.loads(x) for x in agent_events.read_text().splitlines()]
    started = next(x["ts"] for x in lines if x["record"] == "started")
    notice = next(x for x in lines if x["record"] == "notice")
    fit = FitAccumulator().add_all(read_files([agent_events])).result()
    pool = next(c for c in fit.rates if c.key == "aws-pool")
    assert pool.interruptions == 1
    assert pool.node_hours * 3600 == pytest.approx(notice["deadline"] - started, abs=1e-3)  # until the loss
    assert fit.notice_lead_seconds["preempt"][0] == pytest.approx(120.0, abs=2.0)  # the fake IMDS's 120 s
    assert {c.key for c in fit.rates} == {"aws-pool", "aws-pool / sku g5.xlarge", "aws-pool / zone us-east-1b"}
    out = pool.to_dict()
    assert "few interruptions" in out["note"] and out["interval"][0] < out["perNodeHour"] < out["interval"][1]


def test_the_controllers_log_gives_the_injected_losses_and_latencies(controller_events) -> None:  # type: ignore[no-untyped-def]
    run = controller_events
    fit = FitAccumulator().add_all(read_files([run.path])).result()
    assert fit.lost_without_lifetime == {"pool-a": run.losses}  # 3 zone losses x 2 VMs; no lifetimes in its log
    assert fit.launch_failures == {"capacity": 3}
    # each loss: the zone is empty for 3 ticks, then a fresh VM boots
    assert fit.reacquisition_seconds == [run.gap_seconds + run.boot_seconds] * 3
    assert fit.fills_without_loss == 1  # the first fill is not a reacquisition
    updates, why = fit.profile_updates()
    assert updates["expectedReacquisitionSeconds"] == run.gap_seconds + run.boot_seconds
    assert "interruptionsPerHour" in why and "too little data" in why["interruptionsPerHour"]


def test_both_logs_together_count_a_vm_once(agent_events: Path, controller_events, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [json.loads(x) for x in agent_events.read_text().splitlines()]
    notice = next(x for x in lines if x["record"] == "notice")
    ctl = tmp_path / "c.jsonl"  # the controller saw the same VM go
    ctl.write_text(json.dumps({"kind": "interruption", "pool": "aws-pool", "at": notice["deadline"] + 5,
                               "type": "interruption", "vm": "i-0123456789abcdef0", "stale": False}) + "\n")  # fmt: skip
    fit = FitAccumulator().add_all(read_files([agent_events, ctl])).result()
    assert next(c for c in fit.rates if c.key == "aws-pool").interruptions == 1


def _cloudwatch(path: Path, stream: str, out: Path) -> Path:
    events = [{"logStreamName": stream, "timestamp": int(json.loads(x).get("ts", json.loads(x).get("at", 0)) * 1000),
               "message": x, "ingestionTime": 0, "eventId": str(i)}
              for i, x in enumerate(path.read_text().splitlines())]  # fmt: skip
    out.write_text(json.dumps({"events": events, "searchedLogStreams": [{"logStreamName": stream}]}))
    return out


def _cloud_logging(path: Path, out: Path) -> Path:
    entries = [{"insertId": str(i), "jsonPayload": json.loads(x), "logName": "projects/p/logs/spotgpu-agent",
                "resource": {"type": "gce_instance", "labels": {"instance_id": "42", "zone": "us-central1-a"}},
                "timestamp": "2026-12-02T18:00:00.000000Z"}
               for i, x in enumerate(path.read_text().splitlines())]  # fmt: skip
    entries.append({"insertId": "x", "textPayload": "kernel: hello", "logName": "projects/p/logs/syslog",
                    "timestamp": "2026-12-02T18:00:00Z", "resource": {"labels": {}}})  # fmt: skip
    out.write_text(json.dumps(entries))
    return out


def _log_analytics(path: Path, out: Path, rest: bool) -> Path:
    rows = [{"TimeGenerated": "2026-12-02T18:00:00Z", "Computer": "vm-1", "RawData": x}
            for x in path.read_text().splitlines()]  # fmt: skip
    if rest:
        cols = ["TimeGenerated", "Computer", "RawData"]
        doc: object = {"tables": [{"name": "PrimaryResult", "columns": [{"name": c, "type": "string"} for c in cols],
                                   "rows": [[r[c] for c in cols] for r in rows]}]}  # fmt: skip
    else:
        doc = rows
    out.write_text(json.dumps(doc))
    return out


def _same_fit(a: list[Path], b: list[Path]) -> None:
    fa = FitAccumulator().add_all(read_files(a)).result().to_dict()
    fb = FitAccumulator().add_all(read_files(b)).result().to_dict()
    assert fa == fb


def test_cloud_exports_give_the_same_fit_as_the_raw_logs(agent_events: Path, controller_events, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    raw = [agent_events, controller_events.path]
    _same_fit(raw, [_cloudwatch(agent_events, "i-0123", tmp_path / "a.cw.json"),
                    _cloudwatch(controller_events.path, "controller", tmp_path / "c.cw.json")])  # fmt: skip
    _same_fit([agent_events], [_cloud_logging(agent_events, tmp_path / "a.gcl.json")])
    _same_fit([agent_events], [_log_analytics(agent_events, tmp_path / "a.la.json", rest=False)])
    _same_fit([agent_events], [_log_analytics(agent_events, tmp_path / "a.rest.json", rest=True)])


def test_the_reader_speaks_the_contracts_one_vocabulary_of_interruption_kinds() -> None:
    """Defect (issue 24): the reader kept its own copies of the loss and notice kinds, held equal by a test; it
    reads the contract's now: each observed kind counts as a loss exactly when the contract says so, and a
    notice record may carry only a notice kind."""
    from pydantic import ValidationError

    from spotgpu.contract.interruptions import LOSS_KINDS, OBSERVED_KINDS
    from spotgpu.economics.telemetry import TelemetryRecord, from_controller_event

    for kind in OBSERVED_KINDS:
        doc = from_controller_event({"kind": "interruption", "pool": "p", "at": 1.0, "vm": "i-1", "type": kind.value})
        assert (doc is not None) == (kind in LOSS_KINDS), kind
    TelemetryRecord.model_validate({"ts": 1, "event": "notice", "pool": "p", "noticeKind": "instance-action"})
    with pytest.raises(ValidationError, match="'evicted' is not a notice kind; use one of drain, instance-action"):
        TelemetryRecord.model_validate({"ts": 1, "event": "notice", "pool": "p", "noticeKind": "evicted"})


def test_poisson_interval_matches_known_values() -> None:
    lo, hi = poisson_interval(0, 1.0)
    assert lo == 0 and hi == pytest.approx(2.9957, abs=1e-3)  # -ln(0.05)
    lo, hi = poisson_interval(10, 1.0)
    assert lo == pytest.approx(5.425, abs=2e-3) and hi == pytest.approx(16.962, abs=2e-3)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO)  # fmt: skip


def test_profile_fit_cli_diffs_against_the_base_profile(agent_events: Path, controller_events, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "measured.yaml"
    done = _cli("profile", "fit", "--telemetry", str(agent_events), str(controller_events.path),
                "--profile", "tests/economics/data/llm-finetune.yaml", "--out", str(out), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert {"aws-pool", "pool-a"} == set(doc["pools"])
    diff = {row["field"]: row for row in doc["diff"]}
    assert diff["expectedReacquisitionSeconds"]["measured"] == controller_events.gap_seconds + controller_events.boot_seconds
    assert "too little data" in diff["checkpointBytes"]["note"]
    # minutes of exposure: the rate is shown with its interval, not applied (it would read as ~30/h)
    assert "spot node-hours, under the 1 needed" in diff["interruptionsPerHour"]["note"]
    assert doc["verdict"]["base"]["intervalSeconds"] > 0 and "changed" in doc["verdict"]
    assert out.read_text().startswith("# measured by `spotgpu profile fit`")
    text = _cli("profile", "fit", "--telemetry", str(controller_events.path), "--pool", "pool-a")
    assert text.returncode == 0 and "too little data: no spot node-hours" in text.stdout
    bad = _cli("profile", "fit", "--telemetry", str(controller_events.path), "--pool", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "pools seen: pool-a" in bad.stderr


def test_the_large_count_interval_joins_the_exact_one() -> None:
    from spotgpu.economics import fit

    approx = poisson_interval(fit.LARGE_COUNT, 1.0)
    exact_below = poisson_interval(fit.LARGE_COUNT - 1, 1.0)
    assert exact_below[0] < approx[0] < exact_below[0] + 1.5 and exact_below[1] < approx[1] < exact_below[1] + 1.5
    lo, hi = poisson_interval(20_000, 1000.0)  # the exact sum underflows here; the approximation does not
    assert lo < 20.0 < hi and hi - lo < 1.0


def test_unused_agent_records_are_counted_without_parsing_and_keep_their_time(tmp_path: Path) -> None:
    from spotgpu.economics.telemetry import ReadStats, StreamContext, parse_lines

    lines = [
        json.dumps({"ts": 10.0, "record": "started", "pool": "p", "provider": "aws"}, sort_keys=True),
        json.dumps({"ts": 11.0, "record": "identity", "pool": "p", "instance_id": "i-1", "capacity": "spot",
                    "instance_type": "g5.xlarge", "zone": "z", "provider": "aws"}, sort_keys=True),
        json.dumps({"ts": 500.0, "record": "commit-reported", "result": "ok", "vmId": "i-1"}, sort_keys=True),
        json.dumps({"ts": 900.0, "record": "started", "pool": "p", "provider": "aws"}, sort_keys=True),
    ]
    stats = ReadStats()
    recs = list(parse_lines(lines, "x", stats, StreamContext("x")))
    assert stats.skipped == {"agent:commit-reported": 1}
    stopped = [r for r in recs if r.event == "node_stopped"]
    assert len(stopped) == 1 and stopped[0].ts == 500.0 and stopped[0].node == "i-1"  # restarted: ended at its last line


def test_cost_prices_the_measured_profile(controller_events) -> None:  # type: ignore[no-untyped-def]
    base = _cli("cost", "--profile", "tests/economics/data/llm-finetune.yaml", "--json")
    measured = _cli("cost", "--profile", "tests/economics/data/llm-finetune.yaml", "--json",
                    "--telemetry", str(controller_events.path))  # fmt: skip
    assert base.returncode == 0 and measured.returncode == 0, measured.stderr
    b, m = json.loads(base.stdout), json.loads(measured.stdout)
    assert m["telemetry"]["measured"]["expectedReacquisitionSeconds"] == 300.0
    idle = {d["name"]: d["usd"] for d in m["terms"]}["reacquisition_idle"]
    assert idle < {d["name"]: d["usd"] for d in b["terms"]}["reacquisition_idle"]  # 300 s measured vs 900 s typed


def test_an_error_after_a_line_with_two_unused_marks_names_its_own_line() -> None:
    """Defect: a line holding two unused-record marks renumbered every later line of its block."""
    from spotgpu.economics.telemetry import ReadStats, StreamContext, parse_lines

    twice = json.dumps({"ts": 5.0, "record": "commit-reported", "note": '"record": "commit-reported"'})
    lines = [
        json.dumps({"ts": 1.0, "record": "commit-reported", "vmId": "i-1"}),
        twice.replace('\\"', '"'),  # the mark twice on one line, as a copy of a record in a free-text field would put it
        "not json",
    ]
    with pytest.raises(ValueError, match=r"^x:3: not JSON"):
        list(parse_lines(lines, "x", ReadStats(), StreamContext("x")))
