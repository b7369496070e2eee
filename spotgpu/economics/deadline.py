"""Deadline risk: is it still safe to keep waiting for (or running on) spot?

The test is the one the *Can't Be Late* safety net uses (Wu et al., NSDI 2024):
a job is at risk once switching to on-demand *now* (paying one restart) would
only just finish the remaining work before the deadline. Past that point every
further second spent waiting for spot, or lost to an interruption, is a second
the deadline cannot absorb. A safety factor (> 1) on the remaining work keeps a
margin for slow restarts and stragglers, so the escalation fires a little early
rather than a little late.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_SAFETY_FACTOR = 1.1


def _check(name: str, value: float, *, positive: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        need = "a positive" if positive else "a non-negative"
        raise ValueError(f"{name} {value!r} is invalid; pass {need} finite number of hours")


@dataclass(frozen=True)
class DeadlineStatus:
    """How much room the deadline still leaves, in hours; ``slack_hours < 0`` means at risk."""

    work_left_hours: float
    hours_to_deadline: float
    restart_overhead_hours: float
    safety_factor: float

    @property
    def required_hours(self) -> float:
        """Hours needed if the job moved to on-demand now: padded work plus one restart."""
        return self.work_left_hours * self.safety_factor + self.restart_overhead_hours

    @property
    def slack_hours(self) -> float:
        return self.hours_to_deadline - self.required_hours

    @property
    def at_risk(self) -> bool:
        return self.work_left_hours > 0 and self.slack_hours <= 0

    @property
    def feasible(self) -> bool:
        """Whether even on-demand from now on (no margin) can still finish in time."""
        return self.work_left_hours <= 0 or (
            self.work_left_hours + self.restart_overhead_hours <= self.hours_to_deadline
        )

    def describe(self) -> str:
        if self.work_left_hours <= 0:
            return "work is done"
        state = "AT RISK" if self.at_risk else "safe"
        return (
            f"deadline {state}: {self.work_left_hours:.2f} h work x {self.safety_factor:g} + "
            f"{self.restart_overhead_hours:.2f} h restart = {self.required_hours:.2f} h needed, "
            f"{self.hours_to_deadline:.2f} h left (slack {self.slack_hours:+.2f} h)"
        )


def deadline_status(
    work_left_hours: float,
    hours_to_deadline: float,
    restart_overhead_hours: float,
    safety_factor: float = DEFAULT_SAFETY_FACTOR,
) -> DeadlineStatus:
    _check("work_left_hours", work_left_hours)
    _check("restart_overhead_hours", restart_overhead_hours)
    if not math.isfinite(hours_to_deadline):
        raise ValueError(f"hours_to_deadline {hours_to_deadline!r} is invalid; pass a finite number of hours")
    if not math.isfinite(safety_factor) or safety_factor < 1.0:
        raise ValueError(f"safety_factor {safety_factor!r} is invalid; pass a number >= 1 (1.1 is typical)")
    return DeadlineStatus(work_left_hours, hours_to_deadline, restart_overhead_hours, safety_factor)


def deadline_at_risk(
    work_left_hours: float,
    hours_to_deadline: float,
    restart_overhead_hours: float,
    safety_factor: float = DEFAULT_SAFETY_FACTOR,
) -> bool:
    """True once on-demand from now would only just make the deadline (so escalate).

    ``hours_to_deadline`` may be negative (already late): that is at risk while work remains.
    """
    return deadline_status(work_left_hours, hours_to_deadline, restart_overhead_hours, safety_factor).at_risk
