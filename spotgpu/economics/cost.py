"""Effective cost of running one job on spot, term by term, against on-demand.

The spot price is not the spot cost. Each interruption costs the work since the
last committed checkpoint, a restart and a reload, an idle wait for replacement
capacity (while the surviving nodes of a gang are still billed), and sometimes a
fallback to on-demand; checkpoints themselves stall the job and cost storage; a
late finish can cost an SLO penalty. Every term comes back with the inputs and
the formula that produced it, so a reviewer (or the policy pack's message) can
see *why* a pool is or is not worth running on spot.

The exposure model (interruptions, overheads, fallback share, finish time) is in
``spotgpu.economics.exposure``; this module turns it into dollars and a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spotgpu.economics.exposure import (
    Exposure,
    checkpoint_stalls,
    expected_lost_seconds,
    job_exposure,
    lateness,
    on_demand_reachable,
    reacquisition_outcome,
    spot_wait_seconds,
)
from spotgpu.economics.interval import AnyNotice, IntervalDecision, choose_interval
from spotgpu.models.ladder import FallbackLadder
from spotgpu.models.workload import WorkloadProfile

__all__ = [
    "CostBreakdown",
    "CostTerm",
    "OnDemandBaseline",
    "effective_cost",
    "expected_lost_seconds",
    "json_safe",
    "lateness",
    "on_demand_baseline",
    "reacquisition_outcome",
    "spot_wait_seconds",
]

HOURS_PER_MONTH = 730.0
#: Multipart part size of the checkpoint library (``spotgpu.storage.object_store.PART_SIZE``,
#: kept equal by a test); it sets the write-request count per checkpoint.
UPLOAD_PART_BYTES = 16 << 20
#: Manifest and commit marker: two extra writes per committed generation.
COMMIT_WRITES_PER_CHECKPOINT = 2
#: Above this chance of missing the deadline (with no escalation), spot is not eligible.
MAX_DEADLINE_MISS_PROBABILITY = 0.05
#: Generations retained when the caller does not say (CheckpointStoreSpec's default).
DEFAULT_KEEP_GENERATIONS = 5


@dataclass(frozen=True)
class CostTerm:
    """One line of the bill: what it costs, from which inputs, by which formula."""

    name: str
    usd: float
    inputs: dict[str, Any]
    formula: str


@dataclass(frozen=True)
class CostBreakdown:
    terms: list[CostTerm]
    spot_total: float
    on_demand_total: float
    spot_eligible: bool
    reasons: list[str]
    savings_fraction: float
    #: Derived quantities a reviewer wants next to the bill.
    interval_seconds: int = 0
    expected_interruptions: float = 0.0
    expected_finish_hours: float = 0.0
    on_demand_share: float = 0.0
    deadline_miss_probability: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    #: expected capacity and time, in the units ``simulate`` prints: node-hours billed, job-hours, goodput
    hours: dict[str, float] = field(default_factory=dict)

    def term(self, name: str) -> CostTerm:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(f"no cost term {name!r}; terms are {[t.name for t in self.terms]}")

    @property
    def unbounded_reason(self) -> str:
        """Why a figure is not finite (the reason printed next to its null in JSON)."""
        return next((r for r in self.reasons if ">= 1" in r), "the job cannot finish on spot: the figure is unbounded")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (camelCase keys): every non-finite figure is null, and ``nulls`` says why for each."""
        nulls: dict[str, str] = {}
        doc = json_safe(
            {
                "terms": [
                    {"name": t.name, "usd": round(t.usd, 4), "inputs": t.inputs, "formula": t.formula}
                    for t in self.terms
                ],
                "spotTotal": round(self.spot_total, 2),
                "onDemandTotal": round(self.on_demand_total, 2),
                "savingsFraction": round(self.savings_fraction, 4),
                "spotEligible": self.spot_eligible,
                "reasons": list(self.reasons),
                "intervalSeconds": self.interval_seconds,
                "expectedInterruptions": round(self.expected_interruptions, 4),
                "expectedFinishHours": round(self.expected_finish_hours, 4),
                "onDemandShare": round(self.on_demand_share, 4),
                "deadlineMissProbability": round(self.deadline_miss_probability, 4),
                "details": self.details,
                "hours": {k: round(v, 4) for k, v in self.hours.items()},
            },
            nulls, self.unbounded_reason,
        )  # fmt: skip
        if nulls:
            doc["nulls"] = nulls
        return doc


def json_safe(value: Any, nulls: dict[str, str], reason: str, path: str = "") -> Any:
    """``value`` with every infinity or NaN replaced by null, each null's path recorded in ``nulls`` with ``reason``.

    JSON has no Infinity: ``json.dumps`` writes it anyway and strict parsers then reject the document.
    """
    if isinstance(value, float) and not math.isfinite(value):
        nulls[path or "."] = reason
        return None
    if isinstance(value, dict):
        return {k: json_safe(v, nulls, reason, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, nulls, reason, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


@dataclass(frozen=True)
class OnDemandBaseline:
    """The one on-demand baseline, and what the replayed on-demand-only job adds to it.

    ``compute_usd`` (``W N on_demand``) is the cost model's ``on_demand_total``: the work alone. The
    simulator's *on-demand only* policy replays the same job on on-demand capacity, so it also pays the
    checkpoints it writes (``W C/T N on_demand``) and its one start (``(restart + load) N on_demand``);
    ``replayed_usd`` is that sum. Every command prints the figure it uses under one of these two names.
    """

    compute_usd: float
    checkpoint_stall_usd: float
    first_start_usd: float

    @property
    def replayed_usd(self) -> float:
        return self.compute_usd + self.checkpoint_stall_usd + self.first_start_usd

    def to_dict(self) -> dict[str, Any]:
        return {
            "computeUsd": round(self.compute_usd, 2),
            "checkpointStallUsd": round(self.checkpoint_stall_usd, 2),
            "firstStartUsd": round(self.first_start_usd, 2),
            "replayedUsd": round(self.replayed_usd, 2),
            "definition": "onDemandTotal = computeUsd (W N on_demand, the work alone); the simulator's on-demand "
                          "only replay = replayedUsd (adds its checkpoint stalls W C/T N on_demand and one start "
                          "(restart + load) N on_demand)",
        }  # fmt: skip


def on_demand_baseline(profile: WorkloadProfile, interval_seconds: float, work_hours: float | None = None,
                       nodes: int | None = None, write_seconds: float | None = None) -> OnDemandBaseline:  # fmt: skip
    """``write_seconds``: training blocked per save every ``interval_seconds`` (default the profile's
    periodic write); a replayed tiered job passes its own (the store-only equivalent's)."""
    w = profile.work_hours if work_hours is None else work_hours
    n = profile.nodes if nodes is None else nodes
    rate = n * profile.prices.on_demand
    write = profile.periodic_write_seconds[0] if write_seconds is None else write_seconds
    return OnDemandBaseline(
        compute_usd=w * rate,
        checkpoint_stall_usd=checkpoint_stalls(w, write, interval_seconds) * rate,
        first_start_usd=(profile.restart_seconds + profile.checkpoint_load_seconds) / 3600.0 * rate,
    )


def effective_cost(
    profile: WorkloadProfile,
    notice: AnyNotice,
    ladder: FallbackLadder | None = None,
    *,
    interval: IntervalDecision | None = None,
    notice_delivery_probability: float = 0.0,
    keep_generations: int = DEFAULT_KEEP_GENERATIONS,
    reacquisition_samples: Sequence[float] | None = None,
    gang_interruptions_per_hour: float | None = None,
) -> CostBreakdown:
    """The expected USD cost of one job of ``profile`` on spot, term by term.

    ``notice_delivery_probability`` is the credit given to final checkpoints: 0
    by default, because no provider guarantees a notice and periodic checkpoints
    must carry the protection on their own. ``reacquisition_samples`` (seconds,
    e.g. from telemetry) replace the exponential latency assumption.
    ``gang_interruptions_per_hour`` (measured on gangs of ``nodes``, e.g. from the
    16-node traces) replaces ``interruptionsPerHour * nodes``; the interval then
    uses it too unless ``interval`` is given.
    """
    if not 0.0 <= notice_delivery_probability <= 1.0:
        raise ValueError(f"notice_delivery_probability {notice_delivery_probability!r} must be between 0 and 1")
    if keep_generations < 1:
        raise ValueError(f"keep_generations {keep_generations!r} must be at least 1")
    decision = interval or choose_interval(profile, notice, gang_interruptions_per_hour=gang_interruptions_per_hour)
    e = job_exposure(
        profile, notice, ladder, decision, notice_delivery_probability, reacquisition_samples, gang_interruptions_per_hour
    )
    miss_p, late_h = 0.0, 0.0
    if profile.deadline_hours is not None:
        if e.progresses:
            miss_p, late_h = lateness(
                e.productive_hours, e.overhead_hours + e.idle_hours, e.interruptions, profile.deadline_hours
            )
        else:
            miss_p, late_h = 1.0, math.inf
    terms = [
        _spot_compute(profile, e),
        _checkpoint_storage_io(profile, e, decision, keep_generations),
        _restart_reload(profile, e),
        _lost_compute(profile, e, decision, notice_delivery_probability),
        _reacquisition_idle(profile, e),
        _fallback(profile, e),
        _deadline_penalty(profile, e, miss_p, late_h, _escalates(profile, ladder)),
    ]
    spot_total = sum(t.usd for t in terms)
    baseline = on_demand_baseline(profile, decision.seconds)
    on_demand_total = baseline.compute_usd
    savings = 1.0 - spot_total / on_demand_total if math.isfinite(spot_total) else -math.inf
    eligible, reasons = _verdict(profile, ladder, e, spot_total, on_demand_total, miss_p)
    return CostBreakdown(
        terms=terms,
        spot_total=spot_total,
        on_demand_total=on_demand_total,
        spot_eligible=eligible,
        reasons=reasons,
        savings_fraction=savings,
        interval_seconds=decision.seconds,
        expected_interruptions=e.interruptions,
        expected_finish_hours=e.finish_hours,
        on_demand_share=e.on_demand_share,
        deadline_miss_probability=miss_p,
        hours=expected_hours(profile, e),
        details={
            "gangInterruptionsPerHour": e.gang_rate_per_hour,
            "overheadHoursPerInterruption": e.overhead_hours,
            "idleHoursPerInterruption": e.idle_hours,
            "fallbackProbability": e.reacquisition.fallback_probability,
            "intervalMethod": decision.method,
            "finalCheckpointFitsNotice": e.final_fits,
            "onDemandBaseline": baseline.to_dict(),
            **({"checkpointTiers": decision.tiers.as_dict()} if decision.tiers is not None else {}),
        },
    )


def expected_hours(p: WorkloadProfile, e: Exposure) -> dict[str, float]:
    """The bill's capacity and time in ``simulate``'s units: node-hours billed on spot and on-demand (each node
    of the gang), job-hours of lost work and of waiting with no capacity, and goodput (the job's work
    node-hours over paid node-hours). Infinite (null in JSON) when the job cannot progress."""
    n, phi, p_fb, nodes = e.interruptions, e.on_demand_share, e.reacquisition.fallback_probability, p.nodes
    reload_h, lost_h = e.reload_seconds / 3600.0, e.lost_seconds / 3600.0
    per = (lambda x: 0.0 if x == 0 else n * x)  # noqa: E731 - 0 stays 0 when n is infinite
    spot = nodes * ((p.work_hours + e.stall_hours) * (1.0 - phi) + per((1.0 - p_fb) * reload_h) + per(lost_h)) + per(
        e.idle_hours * (nodes - 1))
    od = nodes * ((p.work_hours + e.stall_hours) * phi + per(p_fb * reload_h))
    paid = spot + od
    return {"spotNodeHours": spot, "onDemandNodeHours": od, "idleJobHours": per(e.idle_hours),
            "lostWorkJobHours": per(lost_h),
            "goodput": p.work_hours * nodes / paid if math.isfinite(paid) and paid > 0 else math.inf}  # fmt: skip


def _spot_compute(p: WorkloadProfile, e: Exposure) -> CostTerm:
    pr, phi = p.prices, e.on_demand_share
    return CostTerm(
        "spot_compute",
        p.work_hours * (1.0 - phi) * p.nodes * pr.spot_per_hour,
        {"work_hours": p.work_hours, "nodes": p.nodes, "spot_per_hour": pr.spot_per_hour, "on_demand_share": phi},
        "work_hours * (1 - on_demand_share) * nodes * spot_per_hour",
    )


def _checkpoint_storage_io(p: WorkloadProfile, e: Exposure, d: IntervalDecision, keep_generations: int) -> CostTerm:
    pr, phi = p.prices, e.on_demand_share
    blended_price = (1.0 - phi) * pr.spot_per_hour + phi * pr.on_demand
    gb = p.checkpoint_bytes / 1e9
    # the object store gets every durable generation: every save, or every k-th with checkpointTiers
    checkpoints = p.work_hours * 3600.0 / (d.tiers.durable_seconds if d.tiers is not None else d.seconds)
    writes_per_ckpt = math.ceil(p.checkpoint_bytes / UPLOAD_PART_BYTES) + COMMIT_WRITES_PER_CHECKPOINT
    storage_months = (e.finish_hours if e.progresses else e.productive_hours) / HOURS_PER_MONTH
    stall_usd = e.stall_hours * p.nodes * blended_price
    storage_usd = gb * keep_generations * storage_months * pr.storage_per_gb_month
    request_usd = checkpoints * writes_per_ckpt * pr.request_per_1000 / 1000.0
    return CostTerm(
        "checkpoint_storage_io",
        stall_usd + storage_usd + request_usd,
        {
            "interval_seconds": float(d.seconds),
            "checkpoint_write_seconds": p.periodic_write_seconds[0],
            "checkpoints": checkpoints,
            "stall_hours": e.stall_hours,
            "checkpoint_gb": gb,
            "keep_generations": keep_generations,
            "storage_months": storage_months,
            "storage_per_gb_month": pr.storage_per_gb_month,
            "writes_per_checkpoint": writes_per_ckpt,
            "request_per_1000": pr.request_per_1000,
            "stall_usd": stall_usd,
            "storage_usd": storage_usd,
            "request_usd": request_usd,
        },
        "work_hours*C/T * nodes * blended_price + gb*generations*months*storage_price "
        "+ checkpoints*writes_per_checkpoint*request_per_1000/1000",
    )


def _restart_reload(p: WorkloadProfile, e: Exposure) -> CostTerm:
    p_fb = e.reacquisition.fallback_probability
    price = (1.0 - p_fb) * p.prices.spot_per_hour + p_fb * p.prices.on_demand
    return CostTerm(
        "restart_reload",
        e.times(e.reload_seconds / 3600.0 * p.nodes * price),
        {
            "expected_interruptions": e.interruptions,
            "restart_seconds": p.restart_seconds,
            "checkpoint_load_seconds": p.checkpoint_load_seconds,
            "nodes": p.nodes,
            "restart_price_per_hour": price,
        },
        "interruptions * (restart + load)/3600 * nodes * ((1-p_fallback)*spot + p_fallback*on_demand)",
    )


def _lost_compute(p: WorkloadProfile, e: Exposure, d: IntervalDecision, notice_credit: float) -> CostTerm:
    inputs: dict[str, Any] = {
        "expected_interruptions": e.interruptions,
        "lost_seconds_per_interruption": e.lost_seconds,
        "interval_seconds": float(d.seconds),
        "final_checkpoint_fits_notice": e.final_fits,
        "notice_delivery_probability": notice_credit,
        "nodes": p.nodes,
        "spot_per_hour": p.prices.spot_per_hour,
    }
    lost = "lost = T/2 + C (less a delivered notice)"
    if d.tiers is not None:
        inputs.update(durable_interval_seconds=float(d.tiers.durable_seconds), joint_loss_probability=d.tiers.q)
        lost = "lost = (1-q)(T_l/2 + K_l) + q(T_d/2 + K_l + C_s) (less a delivered notice), q = P(a shard loses every copy)"
    return CostTerm(
        "lost_compute",
        e.times(e.lost_seconds / 3600.0 * p.nodes * p.prices.spot_per_hour),
        inputs,
        f"interruptions * lost_seconds/3600 * nodes * spot_per_hour; {lost}",
    )


def _reacquisition_idle(p: WorkloadProfile, e: Exposure) -> CostTerm:
    r = e.reacquisition
    return CostTerm(
        "reacquisition_idle",
        e.times(e.idle_hours * (p.nodes - 1) * p.prices.spot_per_hour),
        {
            "expected_interruptions": e.interruptions,
            "expected_idle_seconds": r.expected_idle_seconds,
            "latency_model": r.source,
            "spot_wait_seconds": r.spot_wait_seconds,
            "surviving_nodes_billed": p.nodes - 1,
            "spot_per_hour": p.prices.spot_per_hour,
        },
        "interruptions * E[min(latency, spot_wait)]/3600 * (nodes - 1) * spot_per_hour",
    )


def _fallback(p: WorkloadProfile, e: Exposure) -> CostTerm:
    return CostTerm(
        "fallback",
        p.work_hours * e.on_demand_share * p.nodes * p.prices.on_demand,
        {
            "fallback_probability": e.reacquisition.fallback_probability,
            "on_demand_share": e.on_demand_share,
            "work_hours": p.work_hours,
            "nodes": p.nodes,
            "on_demand_per_hour": p.prices.on_demand,
        },
        "work_hours * on_demand_share * nodes * on_demand_per_hour; share = k/(1+k), k = p_fallback/(1 - lam*o)",
    )


def _escalates(p: WorkloadProfile, ladder: FallbackLadder | None) -> bool:
    return (
        p.deadline_hours is not None
        and ladder is not None
        and ladder.deadline_escalation
        and on_demand_reachable(ladder, p.prices.on_demand, p.work_per_node_hour())
    )


def _deadline_penalty(p: WorkloadProfile, e: Exposure, miss_p: float, late_h: float, escalates: bool) -> CostTerm:
    """Lateness priced at the penalty; with escalation, the on-demand hours that replace it instead.

    A ladder that escalates moves the job to on-demand once the slack would not survive
    another loss, so the hours it would have finished late are (about) the hours of
    on-demand that it buys to finish in time: ``E[hours late] * nodes * on_demand``.
    """
    rate = p.prices.deadline_penalty_per_hour
    inputs = {
        "deadline_hours": p.deadline_hours,
        "expected_finish_hours": e.finish_hours,
        "miss_probability": miss_p,
        "expected_hours_late": late_h,
        "deadline_penalty_per_hour": rate,
        "escalates_to_on_demand": escalates,
    }
    if escalates and math.isfinite(late_h):
        usd = late_h * p.nodes * p.prices.on_demand if late_h > 0 else 0.0
        return CostTerm(
            "deadline_penalty", usd, inputs,
            "escalation: E[max(0, P + K*(o + idle) - deadline)] * nodes * on_demand_per_hour, K ~ Poisson(interruptions)",
        )  # fmt: skip
    return CostTerm(
        "deadline_penalty",
        late_h * rate if late_h > 0 and rate > 0 else 0.0,
        inputs,
        "E[max(0, P + K*(o + idle) - deadline)] * penalty_per_hour, K ~ Poisson(interruptions)",
    )


def _verdict(
    p: WorkloadProfile,
    ladder: FallbackLadder | None,
    e: Exposure,
    spot_total: float,
    on_demand_total: float,
    miss_p: float,
) -> tuple[bool, list[str]]:
    """Spot-eligible or not, and why: cheaper, within the loss bound, able to progress, deadline safe."""
    reasons: list[str] = []
    eligible = e.progresses
    if not e.progresses:
        reasons.append(
            f"interruptions ({e.gang_rate_per_hour:.3g}/h for the gang) x overhead ({e.overhead_hours:.3g} h each) "
            ">= 1: the job loses work as fast as it makes it"
        )
    if not math.isfinite(spot_total):
        eligible = False
        reasons.append(f"spot cost is unbounded (the job does not finish), against on-demand ${on_demand_total:,.2f}")
    elif spot_total >= on_demand_total:
        eligible = False
        reasons.append(f"spot costs ${spot_total:,.2f}, not less than on-demand ${on_demand_total:,.2f}")
    else:
        saves = 1.0 - spot_total / on_demand_total
        reasons.append(f"spot ${spot_total:,.2f} vs on-demand ${on_demand_total:,.2f}: saves {saves:.0%}")
    if e.lost_seconds > p.max_lost_work_seconds:
        eligible = False
        reasons.append(
            f"expected loss per interruption {e.lost_seconds:.0f} s exceeds maxLostWorkSeconds "
            f"{p.max_lost_work_seconds:g}; shorten the interval or speed up checkpoint writes"
        )
    if p.deadline_hours is not None and e.progresses:
        reasons.append(
            f"deadline {p.deadline_hours:g} h: expected finish {e.finish_hours:.1f} h, "
            f"miss probability {miss_p:.1%} without escalation"
        )
        escalates = (
            ladder is not None
            and ladder.deadline_escalation
            and on_demand_reachable(ladder, p.prices.on_demand, p.work_per_node_hour())
        )
        if miss_p > MAX_DEADLINE_MISS_PROBABILITY:
            if escalates:
                reasons.append("the ladder escalates to on-demand when the deadline is at risk, which caps the risk")
            else:
                eligible = False
                reasons.append(
                    f"miss probability above {MAX_DEADLINE_MISS_PROBABILITY:.0%} and no on-demand escalation; "
                    "add an on_demand rung with deadlineEscalation or relax the deadline"
                )
    return eligible, reasons
