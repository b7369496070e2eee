"""deadline_at_risk: hand cases, bad input, and monotonicity."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spotgpu.economics.deadline import deadline_at_risk, deadline_status


def test_hand_cases() -> None:
    # 10 h left of work, 1.1x margin = 11 h, + 0.5 h restart = 11.5 h needed
    assert not deadline_at_risk(10, 12, 0.5)
    assert deadline_at_risk(10, 11.5, 0.5)  # exactly at the edge: escalate
    assert deadline_at_risk(10, 11.4, 0.5)
    assert not deadline_at_risk(10, 11.4, 0.5, safety_factor=1.0)
    assert not deadline_at_risk(0, -5, 0.5)  # done: nothing is at risk
    assert deadline_at_risk(1, -1, 0.0)  # already late with work left


def test_status_explains_itself() -> None:
    s = deadline_status(10, 12, 0.5)
    assert s.required_hours == pytest.approx(11.5)
    assert s.slack_hours == pytest.approx(0.5)
    assert s.feasible
    assert "safe" in s.describe() and "slack +0.50 h" in s.describe()
    assert not deadline_status(10, 10.2, 0.5).feasible


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((-1, 10, 0), "work_left_hours"),
        ((1, math.nan, 0), "hours_to_deadline"),
        ((1, 10, -0.1), "restart_overhead_hours"),
        ((1, 10, 0, 0.9), "safety_factor"),
    ],
)
def test_bad_input_names_the_field(args: tuple[float, ...], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        deadline_at_risk(*args)


@given(
    work=st.floats(min_value=0.01, max_value=1000),
    more=st.floats(min_value=0, max_value=100),
    left=st.floats(min_value=-10, max_value=2000),
    restart=st.floats(min_value=0, max_value=10),
)
def test_more_work_or_less_time_never_lowers_risk(work: float, more: float, left: float, restart: float) -> None:
    if deadline_at_risk(work, left, restart):
        assert deadline_at_risk(work + more, left, restart)
        assert deadline_at_risk(work, left - more, restart)
