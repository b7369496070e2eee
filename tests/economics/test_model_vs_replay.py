"""The closed-form cost model against the twin on a trace where the model's assumptions hold.

A synthetic single-zone trace with exponential spot runs and exponential gaps is the
memoryless world the renewal model assumes; there, its expected interruptions, finish
time and total must agree with replaying the controller's planner through the twin.
"""

from __future__ import annotations

import numpy as np
import pytest

from spotgpu.economics.cost import effective_cost
from spotgpu.economics.interval import IntervalDecision
from spotgpu.models import AwsNoticeContract, FallbackLadder, WorkloadProfile
from spotgpu.simulation.ladder import ControllerLadder
from spotgpu.simulation.replay import Job

GAP = 60


def memoryless_trace(mean_run_s: float, mean_gap_s: float, ticks: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out: list[int] = []
    while len(out) < ticks:
        out += [1] * max(1, round(rng.exponential(mean_run_s) / GAP))
        out += [0] * max(1, round(rng.exponential(mean_gap_s) / GAP))
    return np.array(out[:ticks], dtype=bool)[None, :]


def test_model_agrees_with_replay_when_interruptions_are_memoryless() -> None:
    avail = memoryless_trace(5 * 3600, 900, 300_000)
    losses = int((avail[0, :-1] & ~avail[0, 1:]).sum())
    rate = losses / (avail.sum() * GAP / 3600)  # measured, as estimate.py would
    ladder = FallbackLadder.model_validate(
        {
            "steps": [
                {"kind": "same_pool", "maxWaitSeconds": 3000, "costCeilingPerHour": 3},
                {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 7},
            ]
        }
    )
    profile = WorkloadProfile.model_validate(
        {"checkpointBytes": 6e10, "checkpointWriteSeconds": 75, "checkpointLoadSeconds": 90, "restartSeconds": 300,
         "expectedReacquisitionSeconds": 900, "interruptionsPerHour": rate, "workHours": 36, "deadlineHours": 500,
         "prices": {"spotPerHour": 2.2, "onDemandPerHour": 5.67, "storagePerGbMonth": 0, "requestPer1000": 0}}
    )  # fmt: skip
    decision = IntervalDecision(2548, "configured", True, ())
    model = effective_cost(profile, AwsNoticeContract(), ladder, interval=decision)
    starts = np.arange(0, 300_000 - 40_000, 2500)
    runs = ControllerLadder(ladder).run(
        Job.from_profile(profile, 2548), avail.astype(np.int64), GAP, starts, np.zeros(len(starts), dtype=np.int64)
    )
    interruptions = np.mean([r.interruptions for r in runs])
    finish = np.mean([r.finish_seconds for r in runs]) / 3600
    cost = np.mean([r.cost_usd for r in runs])
    assert model.expected_interruptions == pytest.approx(interruptions, rel=0.15)
    assert model.expected_finish_hours == pytest.approx(finish, rel=0.05)
    assert model.spot_total == pytest.approx(cost, rel=0.10)
