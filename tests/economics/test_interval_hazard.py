"""Checkpoint interval: Daly unchanged, hazard-aware variant, fits, and the notice/loss bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotgpu.economics.hazard import (
    Exponential,
    Runs,
    Weibull,
    expected_kept_work,
    fit_weibull,
    hazard_optimal_interval,
    kaplan_meier,
    runs_of,
    waste_fraction,
)
from spotgpu.economics.interval import (
    MAX_INTERVAL_SECONDS,
    MIN_INTERVAL_SECONDS,
    choose_interval,
    daly_interval,
    loss_bound_interval,
    young_interval,
)
from spotgpu.models import AwsNoticeContract, AzureNoticeContract, WorkloadProfile
from spotgpu.models.workload import MAX_PLAUSIBLE_INTERRUPTIONS_PER_HOUR


def profile(**over: object) -> WorkloadProfile:
    base: dict[str, object] = {
        "checkpointBytes": 1_000_000_000,
        "checkpointWriteSeconds": 60,
        "checkpointLoadSeconds": 30,
        "restartSeconds": 120,
        "expectedReacquisitionSeconds": 300,
        "interruptionsPerHour": 0.5,
        "workHours": 10,
        "maxLostWorkSeconds": 7200,
        "prices": {"spotPerHour": 1.0, "onDemandPerHour": 3.0},
    }
    base.update(over)
    return WorkloadProfile.model_validate(base)


def test_young_and_daly_hand_values() -> None:
    assert young_interval(50, 10_000) == pytest.approx(1000.0)
    c, m = 50.0, 10_000.0
    assert daly_interval(c, m) == pytest.approx(1000 * (1 + (c / (2 * m)) ** 0.5 / 3 + c / (18 * m)) - c)
    assert daly_interval(300, 100) == 100  # C >= 2M: checkpoint once per MTBI


def test_default_choice_is_still_daly() -> None:
    d = choose_interval(profile(), AwsNoticeContract())
    assert d.method == "daly"
    assert d.seconds == int(daly_interval(60, 7200))


def test_exponential_hazard_agrees_with_daly() -> None:
    # Memoryless runs: the numeric optimum must land near the closed forms.
    model = Exponential(mean=7200.0)
    t = hazard_optimal_interval(60, 0, model, points=600)
    assert t == pytest.approx(daly_interval(60, 7200), rel=0.08)


def test_kept_work_hand_case() -> None:
    # Exponential(mean 1000): E[floor(X/s)] = sum_k exp(-k s / 1000) = 1 / (e^{s/1000} - 1)
    kept = expected_kept_work(np.array([400.0]), 100.0, 0.0, Exponential(1000.0))[0]
    assert kept == pytest.approx(400.0 / (np.exp(0.5) - 1.0), rel=1e-6)
    assert 0 < waste_fraction(400.0, 100.0, 0.0, Exponential(1000.0)) < 1


def test_hazard_interval_is_used_and_bounded() -> None:
    weib = Weibull(shape=0.6, scale=8000.0)
    d = choose_interval(profile(), AwsNoticeContract(), hazard=weib)
    assert d.method.startswith("hazard")
    assert MIN_INTERVAL_SECONDS <= d.seconds <= MAX_INTERVAL_SECONDS
    tight = choose_interval(profile(maxLostWorkSeconds=600), AzureNoticeContract(), hazard=weib)
    assert tight.seconds <= loss_bound_interval(60, 600)
    assert tight.method.endswith("+loss-bound")
    assert any("periodic interval alone" in r for r in tight.reasons)


def test_runs_of_by_hand() -> None:
    a = np.array([0, 1, 1, 0, 0, 1, 1, 1], dtype=bool)
    up = runs_of(a, True, 10)
    assert up.lengths.tolist() == [20, 30] and up.censored.tolist() == [False, True]
    gaps = runs_of(a, False, 10, skip_leading=True)
    assert gaps.lengths.tolist() == [20] and gaps.censored.tolist() == [False]


def test_weibull_fit_recovers_parameters_with_censoring() -> None:
    rng = np.random.default_rng(7)
    true = Weibull(shape=0.7, scale=5000.0)
    x = true.scale * rng.weibull(true.shape, 4000)
    cap = np.quantile(x, 0.9)  # censor the top 10%, as a trace end would
    runs = Runs(np.minimum(x, cap), x > cap)
    fit = fit_weibull(runs)
    assert fit.shape == pytest.approx(0.7, rel=0.06)
    assert fit.scale == pytest.approx(5000.0, rel=0.08)
    with pytest.raises(ValueError, match="at least 2"):
        fit_weibull(Runs(np.array([5.0]), np.array([False])))


def test_kaplan_meier_without_censoring_is_the_empirical_survival() -> None:
    runs = Runs(np.array([10.0, 20, 20, 40]), np.zeros(4, dtype=bool))
    km = kaplan_meier(runs)
    assert km.survival(np.array([5.0, 10, 15, 20, 30, 40, 50])).tolist() == pytest.approx(
        [1, 1, 0.75, 0.75, 0.25, 0.25, 0]
    )
    assert km.mean_seconds == pytest.approx(22.5)


@settings(max_examples=60, deadline=None)
@given(
    write=st.floats(min_value=1, max_value=900),
    rate=st.floats(min_value=0, max_value=MAX_PLAUSIBLE_INTERRUPTIONS_PER_HOUR),
    bound=st.floats(min_value=60, max_value=20_000),
    provider=st.sampled_from(["aws", "azure"]),
)
def test_interval_stays_within_the_notice_and_loss_bound(
    write: float, rate: float, bound: float, provider: str
) -> None:
    p = profile(checkpointWriteSeconds=write, interruptionsPerHour=rate, maxLostWorkSeconds=bound)
    notice = AwsNoticeContract() if provider == "aws" else AzureNoticeContract()
    d = choose_interval(p, notice)
    assert d.seconds <= MAX_INTERVAL_SECONDS
    # the bound binds unless the floor (minimum interval, two writes) is above it
    assert d.seconds <= max(loss_bound_interval(write, bound), MIN_INTERVAL_SECONDS, 2 * write) + 1
    assert d.final_checkpoint_fits_notice == (write <= notice.final_checkpoint_budget_seconds)
