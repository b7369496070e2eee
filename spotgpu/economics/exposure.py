"""How exposed one job is on spot: interruptions, overheads, fallback, finish time.

A renewal model, first order in the interruption rate (the simulator checks it
against traces; ``tests/economics/test_model_vs_replay.py``):

* ``W`` work hours on ``N`` nodes; a gang fails when any node does, so the job
  sees ``lam = interruptions_per_hour * N`` interruptions per spot hour.
* Every interruption costs ``o = lost + restart + load`` hours of billed
  progress, where ``lost`` is the expected work since the last committed
  checkpoint (``T/2 + C`` with interval ``T`` and write ``C``, minus what a final
  checkpoint saves when a notice arrives and the write fits it).
* Replacement latency ``L`` (exponential with the profile's mean, or measured
  samples) is waited out on the spot rungs of the ladder up to ``S`` seconds
  (their summed max waits); with probability ``p = P(L > S)`` the pool falls
  back to on-demand and holds it for one mean spot run (``1/lam``) before trying
  spot again.
* The renewal balance gives ``n = lam * P / (1 - lam*o + p)`` interruptions over
  productive time ``P = W (1 + C/T)``, and an on-demand share ``phi = k / (1 + k)``
  of the work with ``k = p / (1 - lam*o)``. When ``lam * o >= 1`` the job loses
  work as fast as it makes it: ``n`` is infinite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from spotgpu.economics.interval import AnyNotice, IntervalDecision, gang_rate
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.models.workload import WorkloadProfile

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_Work = TypeVar("_Work", float, "NDArray[np.float64]")


def checkpoint_stalls(work: _Work, write_seconds: float, interval_seconds: float) -> _Work:
    """The time the periodic checkpoints stall ``work`` of compute: a write of ``C`` seconds every ``T``
    seconds of work, ``work C/T``, in ``work``'s unit (a number or an array of them)."""
    return work * write_seconds / interval_seconds


def with_checkpoint_stalls(work: _Work, write_seconds: float, interval_seconds: float) -> _Work:
    """The time ``work`` of compute takes with its checkpoint stalls: ``work (1 + C/T)``.

    The one stall factor: the productive time ``P`` here, the controller's deadline test and the trace
    baselines' safety nets all count a checkpointing job's time so.
    """
    return work + checkpoint_stalls(work, write_seconds, interval_seconds)


@dataclass(frozen=True)
class ReacquisitionOutcome:
    """What one interruption costs in waiting, given the ladder and the latency distribution."""

    spot_wait_seconds: float  # how long the spot rungs may wait in total (inf: no on-demand rung)
    fallback_probability: float  # P(latency > spot wait): the pool moves to on-demand
    expected_idle_seconds: float  # E[min(latency, spot wait)]
    source: str


def on_demand_reachable(ladder: FallbackLadder, on_demand_per_hour: float, work_per_node_hour: float = 1.0) -> bool:
    """Whether the on_demand rung's ceiling admits the on-demand price (per node-hour, or per work-hour of a
    node doing ``work_per_node_hour``: ``WorkloadProfile.work_per_node_hour``)."""
    step = ladder.step(StepKind.ON_DEMAND)
    return step is not None and step.allows(on_demand_per_hour, work_per_node_hour)


def spot_wait_seconds(ladder: FallbackLadder | None, on_demand_per_hour: float, work_per_node_hour: float = 1.0) -> float:
    """Seconds the ladder waits on spot rungs before on-demand; inf when on-demand is unreachable."""
    if ladder is None or not on_demand_reachable(ladder, on_demand_per_hour, work_per_node_hour):
        return math.inf
    total = 0.0
    for step in ladder.steps:
        if step.kind is StepKind.ON_DEMAND:
            return total
        total += step.max_wait_seconds
    return math.inf  # pragma: no cover - on_demand_reachable guarantees the rung


def reacquisition_outcome(
    mean_latency_seconds: float,
    ladder: FallbackLadder | None,
    on_demand_per_hour: float,
    samples: Sequence[float] | None = None,
    work_per_node_hour: float = 1.0,
) -> ReacquisitionOutcome:
    """Fallback chance and expected idle per interruption.

    With measured ``samples`` the empirical distribution is used; otherwise the
    latency is taken as exponential with the profile's mean (the maximum-entropy
    choice when only a mean is known).
    """
    s = spot_wait_seconds(ladder, on_demand_per_hour, work_per_node_hour)
    if samples is not None and len(samples) > 0:
        lat = [float(x) for x in samples]
        if any(x < 0 or not math.isfinite(x) for x in lat):
            raise ValueError("reacquisition samples must be finite, non-negative seconds")
        p = sum(1 for x in lat if x > s) / len(lat)
        idle = sum(min(x, s) for x in lat) / len(lat)
        return ReacquisitionOutcome(s, p, idle, f"empirical ({len(lat)} samples)")
    m = mean_latency_seconds
    if m <= 0:
        return ReacquisitionOutcome(s, 0.0, 0.0, "exponential (mean 0)")
    if math.isinf(s):
        return ReacquisitionOutcome(s, 0.0, m, f"exponential (mean {m:g} s)")
    p = math.exp(-s / m)
    return ReacquisitionOutcome(s, p, m * (1.0 - p), f"exponential (mean {m:g} s)")


def expected_lost_seconds(
    interval_seconds: float, write_seconds: float, final_fits: bool, notice_delivery_probability: float
) -> float:
    """Expected work lost per interruption.

    Without a usable notice the loss is half an interval plus the write in flight
    (``T/2 + C``, as in interval.py's loss bound). A delivered notice whose final
    checkpoint fits saves all of it except the final write itself.
    """
    periodic = interval_seconds / 2.0 + write_seconds
    if not final_fits:
        return periodic
    q = notice_delivery_probability
    return q * write_seconds + (1.0 - q) * periodic


def _poisson_pmf(mean: float, k_max: int) -> list[float]:
    if mean <= 0:
        return [1.0] + [0.0] * k_max
    out = []
    log_m = math.log(mean)
    for k in range(k_max + 1):
        out.append(math.exp(k * log_m - mean - math.lgamma(k + 1)))
    return out


def lateness(
    base_hours: float, per_interruption_hours: float, mean_interruptions: float, deadline_hours: float
) -> tuple[float, float]:
    """(P(miss), E[hours late]) when the interruption count is Poisson around its mean."""
    k_max = int(mean_interruptions + 12.0 * math.sqrt(mean_interruptions + 1.0) + 20)
    pmf = _poisson_pmf(mean_interruptions, k_max)
    miss = late = 0.0
    for k, pk in enumerate(pmf):
        over = base_hours + k * per_interruption_hours - deadline_hours
        if over > 0:
            miss += pk
            late += pk * over
    return min(1.0, miss), late


@dataclass(frozen=True)
class Exposure:
    """Everything the cost terms and the verdict need, derived once from the inputs."""

    gang_rate_per_hour: float  # lam
    final_fits: bool
    lost_seconds: float  # per interruption
    reload_seconds: float  # restart + load, per interruption
    overhead_hours: float  # o = (lost + reload) / 3600
    reacquisition: ReacquisitionOutcome
    stall_hours: float  # W C / T
    productive_hours: float  # P = W + stall
    interruptions: float  # n (inf when the job cannot progress)
    on_demand_share: float  # phi

    @property
    def progresses(self) -> bool:
        return math.isfinite(self.interruptions)

    @property
    def idle_hours(self) -> float:
        return self.reacquisition.expected_idle_seconds / 3600.0

    @property
    def finish_hours(self) -> float:
        """Expected wall-clock hours: productive time plus overhead and idle per interruption."""
        if not self.progresses:
            return math.inf
        return self.productive_hours + self.interruptions * (self.overhead_hours + self.idle_hours)

    def times(self, per_interruption: float) -> float:
        """Expected total of a per-interruption amount (0 stays 0 even when ``n`` is infinite)."""
        return 0.0 if per_interruption == 0 else self.interruptions * per_interruption


def _tiered(
    profile: WorkloadProfile, notice: AnyNotice, decision: IntervalDecision, notice_delivery_probability: float
) -> tuple[float, bool, float, float]:
    """(stall per save, final fits, lost seconds, restart + load) of a tiered workload.

    Training stalls only for the local write; an interruption loses work back to the newest
    local commit unless the lost node's copies went with it (``q``), then to the newest durable
    one; a final checkpoint that fits the notice commits to the local tier and the peers.
    """
    tier = decision.tiers
    assert tier is not None
    q = tier.q
    final_fits = notice.final_checkpoint_fits(tier.commit_seconds)
    near = expected_lost_seconds(tier.local_seconds, tier.commit_seconds, final_fits, notice_delivery_probability)
    far = tier.durable_seconds / 2.0 + tier.commit_seconds + tier.store_write_seconds  # its copies are gone too
    return tier.write_seconds, final_fits, (1.0 - q) * near + q * far, profile.restart_seconds + tier.load()


def job_exposure(
    profile: WorkloadProfile,
    notice: AnyNotice,
    ladder: FallbackLadder | None,
    decision: IntervalDecision,
    notice_delivery_probability: float = 0.0,
    reacquisition_samples: Sequence[float] | None = None,
    gang_interruptions_per_hour: float | None = None,
) -> Exposure:
    t_s, c_s = float(decision.seconds), profile.checkpoint_write_seconds
    lam = gang_rate(profile, gang_interruptions_per_hour)
    final_fits = notice.final_checkpoint_fits(c_s)
    lost_s = expected_lost_seconds(t_s, c_s, final_fits, notice_delivery_probability)
    reload_s = profile.restart_seconds + profile.checkpoint_load_seconds
    if decision.tiers is not None:  # spotgpu.economics.tiers: local saves block, uploads do not
        c_s, final_fits, lost_s, reload_s = _tiered(profile, notice, decision, notice_delivery_probability)
    o_h = (lost_s + reload_s) / 3600.0
    reacq = reacquisition_outcome(
        profile.expected_reacquisition_seconds, ladder, profile.prices.on_demand, reacquisition_samples,
        profile.work_per_node_hour(),
    )
    p_fb = reacq.fallback_probability
    productive_h = with_checkpoint_stalls(profile.work_hours, c_s, t_s)
    stall_h = checkpoint_stalls(profile.work_hours, c_s, t_s)
    progress = 1.0 - lam * o_h
    if progress <= 0:
        n, phi = math.inf, 0.0
    else:
        n = lam * productive_h / (progress + p_fb)
        k = p_fb / progress
        phi = k / (1.0 + k)
    return Exposure(lam, final_fits, lost_s, reload_s, o_h, reacq, stall_h, productive_h, n, phi)
