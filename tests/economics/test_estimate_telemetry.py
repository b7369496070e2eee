"""Estimation from traces and from telemetry JSON lines."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spotgpu.contract.controller_events import Event, Interruption, Reacquired, StepChanged
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.economics.estimate import any_zone_gaps, estimate_from_traces, zone_estimate
from spotgpu.economics.fit import FitAccumulator
from spotgpu.economics.telemetry import TelemetryRecord, parse_lines
from spotgpu.economics.telemetry_files import read_jsonl
from spotgpu.traces import Trace, load_group


def _trace(data: list[int], zone: str = "z1", gap: int = 60) -> Trace:
    return Trace(name=f"{zone}_x_1", zone=zone, group="t/t", gap_seconds=gap, data=np.array(data, dtype=np.int16))


def test_zone_estimate_by_hand() -> None:
    # up 3 ticks, down 2, up 2, down 1, up 2 (censored): 2 losses over 7 held ticks of 60 s
    rate, runs, gaps = zone_estimate(_trace([1, 1, 1, 0, 0, 1, 1, 0, 1, 1]))
    assert rate == pytest.approx(2 / (7 * 60 / 3600))
    assert runs.lengths.tolist() == [180, 120, 120]
    assert gaps.lengths.tolist() == [120, 60]


def test_any_zone_gap_uses_the_first_zone_back() -> None:
    avail = np.array([[1, 1, 0, 0, 0, 1], [0, 0, 0, 1, 1, 0]], dtype=bool)
    g = any_zone_gaps(avail, home=0, gap_seconds=10)
    assert g.lengths.tolist() == [10] and g.censored.tolist() == [False]


def test_multi_node_gang_needs_enough_instances() -> None:
    t = _trace([16, 12, 16, 16, 3, 16])
    rate1, _, _ = zone_estimate(t, nodes=1)
    rate16, _, _ = zone_estimate(t, nodes=16)
    assert rate1 == 0 and rate16 > 0


def test_estimate_from_real_traces() -> None:
    est = estimate_from_traces(load_group("1-node/aws-02-15-2023"))
    assert len(est.zones) == 9
    assert 0.05 < est.interruptions_per_hour < 2.0
    assert est.run_model.shape < 1.0  # spot runs have a decreasing hazard, not memoryless
    assert est.expected_reacquisition_seconds < est.same_zone_reacquisition_seconds  # diversification helps
    assert est.mean_availability["us-east-1a"] < est.mean_availability["us-west-2b"]
    json.dumps(est.to_dict())


LINES = [
    {"v": 1, "ts": 0, "event": "node_started", "pool": "p", "node": "a", "capacity": "spot"},
    {"v": 1, "ts": 0, "event": "node_started", "pool": "p", "node": "b", "capacity": "spot"},
    {"v": 1, "ts": 3600, "event": "notice", "pool": "p", "node": "a", "noticeKind": "instance-action"},
    {"v": 1, "ts": 3720, "event": "interrupted", "pool": "p", "node": "a", "capacity": "spot"},
    {"v": 1, "ts": 3800, "event": "launch_failed", "pool": "p", "reason": "capacity"},
    {"v": 1, "ts": 3900, "event": "launch_failed", "pool": "p", "reason": "quota"},
    {"v": 1, "ts": "1970-01-01T01:22:00Z", "event": "replacement_ready", "pool": "p", "node": "c"},
    {"v": 1, "ts": 5000, "event": "checkpoint_committed", "pool": "p", "node": "b", "seconds": 70, "bytes": 5},
    {"v": 1, "ts": 7200, "event": "node_stopped", "pool": "p", "node": "b"},
    # the controller's own event lines are read too, as the controller writes them
    Event.of("q", 100, Interruption(type=InterruptionKind.INTERRUPTION)).to_json(),
    Event.of("q", 400, Reacquired(latency_seconds=250, step="same_pool", seconds_on_step=250)).to_json(),
    Event.of("q", 401, StepChanged(from_="alternate_sku", to="on_demand", waited_seconds=1, deadline_at_risk=False,
                                   seconds_on_previous=1)).to_json(),
]


def test_telemetry_fit_by_hand(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in LINES) + "\n\n")
    fit = FitAccumulator().add_all(read_jsonl(path)).result()
    p = next(c for c in fit.rates if c.key == "p")
    # spot node-hours: a ran 3720 s, b ran 7200 s; one loss of a VM whose lifetime is known
    assert p.node_hours == pytest.approx((3720 + 7200) / 3600)
    assert p.interruptions == 1
    assert fit.lost_without_lifetime == {"q": 1}  # the controller's loss: counted beside the rate, not in it
    assert sorted(fit.reacquisition_seconds) == [250, 4920 - 3720]
    assert fit.notice_lead_seconds == {"derived": [120]}
    assert fit.launch_failures == {"capacity": 1, "quota": 1}
    updates, _ = fit.profile_updates()
    assert updates["interruptionsPerHour"] == pytest.approx(1 / ((3720 + 7200) / 3600), rel=1e-5)
    assert updates["checkpointWriteSeconds"] == 70
    line = TelemetryRecord.model_validate(LINES[0]).to_line()
    assert json.loads(line)["event"] == "node_started"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"v": 1, "ts": 0, "event": "exploded", "pool": "p"}), "event"),
        (json.dumps({"v": 1, "ts": "2026-11-30T13:00:00", "event": "notice", "pool": "p"}), "timezone"),
        (json.dumps({"v": 1, "ts": 0, "event": "notice", "pool": "p", "colour": "red"}), "colour"),
    ],
)
def test_bad_lines_name_line_and_field(line: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as err:
        list(parse_lines(["", line], "x.jsonl"))
    assert "x.jsonl:2" in str(err.value)


def test_a_folder_mixing_instance_types_in_one_zone_is_rejected_not_extra_zones(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json as _json

    import pytest as _pytest

    from spotgpu.economics.estimate import aligned_availability, aligned_counts
    from spotgpu.traces import load_group

    folder = tmp_path / "1-node" / "mixed"
    folder.mkdir(parents=True)
    for name in ("us-east-1a_v100_1", "us-east-1a_k80_1", "us-east-1b_v100_1"):
        (folder / f"{name}.json").write_text(_json.dumps({"metadata": {"gap_seconds": 60}, "data": [1, 0, 1]}))
    traces = load_group("1-node/mixed", root=tmp_path)
    for fn in (aligned_availability, aligned_counts):
        with _pytest.raises(ValueError, match=r"zone us-east-1a has 2 traces .*several instance types in one zone"):
            fn(traces)
