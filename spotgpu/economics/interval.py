"""Checkpoint interval per workload class.

Young (1974) and Daly (2006) give the interval that minimises expected waste for
a checkpoint cost C and mean time between interruptions M:

* Young: ``sqrt(2 C M)``
* Daly (higher order): ``sqrt(2 C M) * (1 + sqrt(C / 2M) / 3 + C / 18M) - C`` for C < 2M, else M.

The notice contract bounds the result: when a final checkpoint cannot fit in the
usable notice, the periodic interval alone protects the work, so it must keep the
expected loss per interruption (about half an interval plus the write) under the
workload's bound.

Interruptions are not memoryless. Given a run-length model fitted from traces
(``spotgpu.economics.hazard``: Weibull or Kaplan-Meier), the interval is instead
the one that keeps the most committed work per spot run under that distribution
(method ``hazard``), still under the same notice/loss bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spotgpu.economics.hazard import Survival, hazard_optimal_interval
from spotgpu.models.notice import AwsNoticeContract, AzureNoticeContract, GcpNoticeContract
from spotgpu.models.workload import WorkloadProfile

if TYPE_CHECKING:
    from spotgpu.economics.tiers import JointLoss, TierDecision

AnyNotice = AwsNoticeContract | GcpNoticeContract | AzureNoticeContract

#: Never checkpoint more often than this, whatever the formula says.
MIN_INTERVAL_SECONDS = 60
#: With no measured interruptions, still checkpoint at least this often.
MAX_INTERVAL_SECONDS = 6 * 3600


def young_interval(checkpoint_seconds: float, mtbi_seconds: float) -> float:
    return math.sqrt(2.0 * checkpoint_seconds * mtbi_seconds)


def daly_interval(checkpoint_seconds: float, mtbi_seconds: float) -> float:
    c, m = checkpoint_seconds, mtbi_seconds
    if c >= 2.0 * m:
        return m
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(c / (2.0 * m)) / 3.0 + c / (18.0 * m)) - c


def loss_bound_interval(write_seconds: float, max_lost_work_seconds: float) -> float:
    """Largest interval whose expected loss per interruption (T/2 + C) stays under the bound."""
    return max(0.0, 2.0 * (max_lost_work_seconds - write_seconds))


@dataclass(frozen=True)
class IntervalDecision:
    seconds: int
    method: str
    final_checkpoint_fits_notice: bool
    reasons: tuple[str, ...]
    #: with ``checkpointTiers``: ``seconds`` is the local interval, and this the durable one and the restore mix
    tiers: TierDecision | None = None


def choose_interval(
    profile: WorkloadProfile,
    notice: AnyNotice,
    *,
    hazard: Survival | None = None,
    gang_interruptions_per_hour: float | None = None,
    joint_loss: JointLoss | None = None,
) -> IntervalDecision:
    """The periodic checkpoint interval for this workload on this provider.

    ``hazard``: a run-length model fitted from traces or telemetry (for a gang: fitted
    to runs of the whole gang); when given it replaces the memoryless Daly optimum.
    Daly uses the *gang's* mean time between interruptions: measured
    (``gang_interruptions_per_hour``) or ``interruptionsPerHour * nodes``. With a
    deadline, the interval is also capped by the slack: one loss must not cost more
    than the slack can absorb.

    With ``checkpointTiers`` this is the *local* interval (the tier's write seconds as the
    cost) and :attr:`IntervalDecision.tiers` carries the durable one
    (:func:`spotgpu.economics.tiers.choose_durable`); ``joint_loss`` is what an interruption
    takes from the gang: the chance it falls back to the store and the share of nodes lost
    (default: the shipped traces, the gang in one zone).
    """
    reasons: list[str] = []
    write, _ = profile.periodic_write_seconds
    final = profile.final_commit_seconds
    fits = notice.final_checkpoint_fits(final)
    what = "to the local tier and peers" if profile.checkpoint_tiers is not None else ""
    reasons.append(
        f"final checkpoint{' ' + what if what else ''} ({final:.3g} s) "
        f"{'fits' if fits else 'does not fit'} the usable notice "
        f"({notice.final_checkpoint_budget_seconds:g} s)"
    )
    if isinstance(profile.checkpoint_interval_seconds, int):
        decision = IntervalDecision(profile.checkpoint_interval_seconds, "configured", fits, tuple(reasons))
        return _with_tiers(decision, profile, gang_interruptions_per_hour, joint_loss)

    if hazard is not None:
        restart = profile.restart_seconds + profile.checkpoint_load_seconds
        raw = hazard_optimal_interval(write, restart, hazard, lo=MIN_INTERVAL_SECONDS, hi=MAX_INTERVAL_SECONDS)
        method = "hazard"
        reasons.append(
            f"hazard optimum {raw:.0f} s under {hazard.describe()} "
            f"(C={write:.3g} s, restart+load={restart:g} s)"
        )
    elif (gang := gang_rate(profile, gang_interruptions_per_hour)) > 0:
        mtbi = 3600.0 / gang
        raw = daly_interval(write, mtbi)
        method = "daly"
        who = f"gang of {profile.nodes}" if profile.nodes > 1 else "one node"
        reasons.append(f"Daly optimum {raw:.0f} s for C={write:.3g} s, MTBI={mtbi:.0f} s ({who})")
    else:
        raw = MAX_INTERVAL_SECONDS
        method = "no-exposure-cap"
        reasons.append("no measured interruptions: capped at the maximum interval")

    # Notices are never guaranteed, so the loss bound always applies; it binds
    # hardest when the final checkpoint cannot fit the notice at all.
    if not fits:
        reasons.append("the periodic interval alone carries the protection (no final checkpoint possible)")
    bound = loss_bound_interval(final, profile.max_lost_work_seconds)
    if raw > bound:
        reasons.append(f"capped at {bound:.0f} s to keep expected loss under {profile.max_lost_work_seconds:g} s")
        raw = bound
        method += "+loss-bound"
    slack_cap = _slack_cap(profile)
    if slack_cap is not None and raw > slack_cap:
        reasons.append(f"capped at {slack_cap:.0f} s so one lost interval plus a restart fits the deadline slack")
        raw = slack_cap
        method += "+slack"
    seconds = int(min(MAX_INTERVAL_SECONDS, max(MIN_INTERVAL_SECONDS, raw, write * 2)))
    return _with_tiers(IntervalDecision(seconds, method, fits, tuple(reasons)), profile, gang_interruptions_per_hour,
                       joint_loss)  # fmt: skip


def _with_tiers(
    decision: IntervalDecision, profile: WorkloadProfile, gang_per_hour: float | None, joint_loss: JointLoss | None
) -> IntervalDecision:
    """``decision`` (the local interval) with the durable interval and restore mix of a tiered workload."""
    tiers = profile.checkpoint_tiers
    if tiers is None:
        return decision
    from spotgpu.economics.tiers import choose_durable, default_joint_loss

    rate = gang_rate(profile, gang_per_hour)
    mtbi = 3600.0 / rate if rate > 0 else math.inf
    joint = joint_loss if joint_loss is not None else default_joint_loss(profile.nodes, tiers.peers(profile.nodes), False)
    tier = choose_durable(profile, tiers, decision.seconds, mtbi, joint)
    return IntervalDecision(decision.seconds, decision.method, decision.final_checkpoint_fits_notice,
                            (*decision.reasons, *tier.reasons), tier)  # fmt: skip


def gang_rate(profile: WorkloadProfile, measured_per_hour: float | None = None) -> float:
    """Interruptions per hour of the whole gang: measured (multi-node traces, telemetry) or N independent nodes.

    A gang stops when any node is taken. Nodes of one pool are not independent (they are
    reclaimed together when a zone runs dry), so a rate measured on gangs of the same size
    (``estimate_from_traces(traces, nodes=N).interruptions_per_hour``, or the profile's
    ``gangInterruptionsPerHour``) replaces ``interruptionsPerHour * N``.
    """
    if measured_per_hour is not None:
        if not math.isfinite(measured_per_hour) or measured_per_hour < 0:
            raise ValueError(f"gang_interruptions_per_hour {measured_per_hour!r} must be a non-negative number")
        return measured_per_hour
    if profile.gang_interruptions_per_hour is not None:  # the profile's own, measured on gangs of its size
        return profile.gang_interruptions_per_hour
    return profile.interruptions_per_hour * profile.nodes


def _slack_cap(profile: WorkloadProfile) -> float | None:
    """Half the deadline slack less one restart: a loss (up to T + C) and its restart must fit twice."""
    if profile.deadline_hours is None:
        return None
    slack = (profile.deadline_hours - profile.work_hours) * 3600.0
    restart = profile.restart_seconds + profile.checkpoint_load_seconds
    return max(0.0, slack / 2.0 - restart - profile.checkpoint_write_seconds)
