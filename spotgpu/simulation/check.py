"""The cost model checked against the replay: the verdict a platform team reads, held up against the traces.

The preview's verdict for a pool comes from the closed-form cost model (``spotgpu.economics``). Here the
same pool's ladder is replayed on the shipped availability traces of its own cloud and region, as
``spotgpu simulate --stack S --pool P`` replays it (the controller's planner through the digital twin,
the pool's zones mapped onto traced zones by :mod:`spotgpu.economics.topology`), and the two are
compared:

1. The groups replayed are those of the pool's cloud (the trace set's name: ``aws-02-15-2023``) that
   hold a zone of the pool's region; a pool with none is "model only, no traces for this cloud" (or
   region).
2. Each group replays the job (one start every :data:`START_EVERY_HOURS` in each pool zone) under the
   ladder and under on-demand only, on the traces as a gang of the job's nodes sees them
   (:func:`spotgpu.economics.estimate.gang_traces`).
3. The replay's spot cost is the ladder's mean; it is *spot-eligible* when that mean is below the
   on-demand-only mean and at least 95 % of the jobs meet their deadline.
4. The two **disagree** when one calls the pool spot-eligible and the other does not, or when the
   replay's cost is more than :data:`TOLERANCE` away from the model's spot total. The verdict then says
   ``DISPUTED`` and names the figure that drives the gap: the figure (the interruption rate or the
   reacquisition wait) whose value fitted from the same traces moves the model's spot total closest to
   the replay's, with where the typed figure came from and what the traces say.

:func:`replay_pool` is cached on its inputs, so the preview and the policy pack's economics rule, which
both ask in one process, replay a pool once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from spotgpu.catalogue.names import region_of
from spotgpu.economics.cost import MAX_DEADLINE_MISS_PROBABILITY, CostBreakdown, effective_cost
from spotgpu.economics.estimate import aligned_availability, aligned_counts, gang_traces, probe_size
from spotgpu.economics.interval import AnyNotice, choose_interval
from spotgpu.economics.report import figure_sources, flat_figures, pool_bill, stack_economics
from spotgpu.economics.tiers import TierDecision
from spotgpu.economics.topology import map_pool_zones
from spotgpu.economics.trace_fit import TraceFit, fit_group
from spotgpu.models import PoolSpec, StackConfig
from spotgpu.models.ladder import FallbackLadder
from spotgpu.models.pool_types import pool_region
from spotgpu.models.workload import WorkloadProfile
from spotgpu.simulation.baselines import OnDemandOnly
from spotgpu.simulation.compare import start_grid
from spotgpu.simulation.ladder import ControllerLadder
from spotgpu.simulation.replay import Job, replay
from spotgpu.traces import Trace, all_groups, load_group, trace_cloud

#: How far the replay's spot cost may be from the model's before the two are said to disagree.
TOLERANCE = 0.15
#: Hours between replayed starts in each pool zone (``simulate``'s default).
START_EVERY_HOURS = 24.0
#: The share of replayed jobs that must meet the deadline for the replay to call a pool spot-eligible.
MIN_DEADLINES_MET = 1.0 - MAX_DEADLINE_MISS_PROBABILITY


def groups_for(cloud: str, region: str) -> list[str]:
    """The trace groups of ``cloud`` that hold a zone of ``region`` (the traces that match a pool's zones)."""
    out = []
    for group in all_groups():
        if trace_cloud(group) != cloud:
            continue
        if any(region_of(t.zone) == region for t in load_group(group)):
            out.append(group)
    return out


def clouds_with_traces() -> set[str]:
    return {trace_cloud(g) for g in all_groups()}


@dataclass(frozen=True)
class GroupReplay:
    """One trace group's replay of a pool: the ladder and on-demand only, on the same jobs."""

    group: str
    trace_zones: tuple[str, ...]
    mapping: tuple[tuple[str, str, str], ...]  # (pool zone, traced zone, how)
    jobs: int
    ladder_usd: float
    on_demand_usd: float
    deadlines_met: float
    ladder_by_home: dict[str, float]
    on_demand_by_home: dict[str, float]
    assumption: str | None
    fit: TraceFit

    @property
    def savings(self) -> float:
        return 1.0 - self.ladder_usd / self.on_demand_usd if self.on_demand_usd > 0 else -math.inf

    def savings_range(self) -> tuple[float, float]:
        by = [1.0 - self.ladder_by_home[z] / self.on_demand_by_home[z] for z in self.ladder_by_home
              if self.on_demand_by_home.get(z)]  # fmt: skip
        return (min(by), max(by)) if by else (self.savings, self.savings)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.savings_range()
        out: dict[str, Any] = {
            "group": self.group, "traceZones": list(self.trace_zones),
            "mapping": [{"poolZone": p, "traceZone": t, "how": h} for p, t, h in self.mapping],
            "jobs": self.jobs, "ladderMeanUsd": round(self.ladder_usd, 2), "onDemandMeanUsd": round(self.on_demand_usd, 2),
            "savingsFraction": round(self.savings, 4), "savingsByHomeZone": [round(lo, 4), round(hi, 4)],
            "deadlinesMet": round(self.deadlines_met, 4),
            "fitted": {"interruptionsPerHour": round(self.fit.interruptions_per_hour, 4),
                       "gangInterruptionsPerHour": None if self.fit.gang_interruptions_per_hour is None
                       else round(self.fit.gang_interruptions_per_hour, 4),
                       "expectedReacquisitionSeconds": round(self.fit.same_zone_wait_seconds, 1),
                       "anyZoneWaitSeconds": round(self.fit.any_zone_wait_seconds, 1)},
        }  # fmt: skip
        if self.assumption:
            out["assumption"] = self.assumption
        return out


@dataclass(frozen=True)
class PoolReplay:
    groups: tuple[GroupReplay, ...]
    seconds: float

    @property
    def jobs(self) -> int:
        return sum(g.jobs for g in self.groups)

    def mean(self, attr: str) -> float:
        return sum(getattr(g, attr) * g.jobs for g in self.groups) / self.jobs

    @property
    def eligible(self) -> bool:
        return self.mean("ladder_usd") < self.mean("on_demand_usd") and self.mean("deadlines_met") >= MIN_DEADLINES_MET - 1e-9


def _home_means(values: Sequence[float], homes: np.ndarray, zones: Sequence[str]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    return {zones[h]: float(arr[homes == h].mean()) for h in sorted(set(homes.tolist()))}


def _replay_group(job: Job, ladder: FallbackLadder, strategy: str, group: str, traces: list[Trace],
                  region: str, zones: tuple[str, ...]) -> GroupReplay | None:
    mapping = map_pool_zones("pool", region, zones, (), [t.zone for t in traces])
    if not any(region_of(z) == region for z in mapping.trace_zones):
        return None  # another region's zones would stand in: not the traces that match the pool
    by_zone = {t.zone: t for t in traces}
    chosen = [by_zone[z] for z in mapping.trace_zones]
    gang = gang_traces(chosen, job.nodes)
    avail, counts = aligned_availability(gang, job.nodes), aligned_counts(gang)
    gap = chosen[0].gap_seconds
    try:
        starts = start_grid(avail.shape[1], gap, 2 * job.deadline_hours, START_EVERY_HOURS)
    except ValueError:
        return None  # the traces are shorter than the horizon
    names = [t.zone for t in chosen]
    st = np.tile(starts, len(names))
    homes = np.repeat(np.arange(len(names), dtype=np.int64), len(starts))
    runs = ControllerLadder(ladder, policy=strategy).run(job, counts, gap, st, homes, names)
    od = replay(OnDemandOnly(), job, avail, gap, st, homes)
    ladder_costs = [r.cost_usd for r in runs]
    od_costs = od.total_cost.tolist()
    pool_of = {mapping.traced[z]: z for z in mapping.traced}
    probe = probe_size(chosen[0])
    assumption = None if job.nodes <= probe else (
        f"the {group} traces probed {probe} instance(s): a zone that held the probe is taken to hold the gang of "
        f"{job.nodes}")  # fmt: skip
    return GroupReplay(
        group=group, trace_zones=tuple(names),
        mapping=tuple((z, mapping.traced[z], mapping.how[z]) for z in zones if z in mapping.traced),
        jobs=len(runs), ladder_usd=float(np.mean(ladder_costs)), on_demand_usd=float(np.mean(od_costs)),
        deadlines_met=float(np.mean([r.met for r in runs])),
        ladder_by_home={pool_of.get(k, k): v for k, v in _home_means(ladder_costs, homes, names).items()},
        on_demand_by_home={pool_of.get(k, k): v for k, v in _home_means(od_costs, homes, names).items()},
        assumption=assumption, fit=fit_group(chosen, nodes=job.nodes, root=group),
    )  # fmt: skip


@lru_cache(maxsize=64)
def _replay_cached(job: Job, ladder_json: str, strategy: str, cloud: str, region: str, zones: tuple[str, ...]) -> PoolReplay:
    started = time.perf_counter()
    ladder = FallbackLadder.model_validate_json(ladder_json)
    found = []
    for group in groups_for(cloud, region):
        done = _replay_group(job, ladder, strategy, group, load_group(group), region, zones)
        if done is not None:
            found.append(done)
    return PoolReplay(tuple(found), time.perf_counter() - started)


def replay_pool(job: Job, ladder: FallbackLadder, strategy: str, cloud: str, region: str,
                zones: Sequence[str]) -> PoolReplay:
    """The pool's ladder replayed on every trace group of its cloud that holds a zone of its region (cached
    on the inputs: the preview and the policy pack ask for the same pool in one process)."""
    return _replay_cached(job, ladder.model_dump_json(), strategy, cloud, region, tuple(zones))


@dataclass(frozen=True)
class Driver:
    """The figure whose traces' value moves the model closest to the replay."""

    key: str
    value: float
    source: str
    traces_value: float
    model_usd_with_traces: float
    unit: str

    def text(self) -> str:
        return (f"{self.key} {self.value:g}{self.unit} ({self.source}) against the traces' {self.traces_value:.4g}"
                f"{self.unit} (with it the model says ${self.model_usd_with_traces:,.2f})")


@dataclass(frozen=True)
class ModelVsReplay:
    """The comparison the preview prints and the policy pack judges on."""

    status: str  # "agrees" | "disputed" | "model only"
    line: str
    model_usd: float | None
    model_eligible: bool
    model_savings: float | None
    replay: PoolReplay | None = None
    ratio: float | None = None
    driver: Driver | None = None
    drivers: tuple[Driver, ...] = field(default=())
    ladder_name: str | None = None

    @property
    def pessimistic_eligible(self) -> bool:
        """Spot-eligible only when the model and, where there are traces, the replay both say so."""
        return self.model_eligible and (self.replay is None or not self.replay.groups or self.replay.eligible)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "line": self.line, "tolerance": TOLERANCE,
                               "modelSpotUsd": None if self.model_usd is None else round(self.model_usd, 2),
                               "modelEligible": self.model_eligible,
                               "pessimisticEligible": self.pessimistic_eligible}  # fmt: skip
        if self.replay is not None and self.replay.groups:
            r = self.replay
            out |= {"replaySpotUsd": round(r.mean("ladder_usd"), 2), "replayOnDemandUsd": round(r.mean("on_demand_usd"), 2),
                    "replayEligible": r.eligible,
                    "replayToModel": None if self.ratio is None or not math.isfinite(self.ratio) else round(self.ratio, 4),
                    "jobs": r.jobs, "groups": [g.to_dict() for g in r.groups],
                    "startEveryHours": START_EVERY_HOURS}  # fmt: skip
        out["figures"] = self.figures()
        if self.drivers:
            out["drivers"] = [{"key": d.key, "value": d.value, "source": d.source, "tracesValue": round(d.traces_value, 4),
                               "modelSpotUsdWithTraces": round(d.model_usd_with_traces, 2)} for d in self.drivers]  # fmt: skip
        return out


    def figures(self) -> dict[str, dict[str, Any]]:
        """The check's dollar figures as ``cost``'s figures are shown: ``{value, kind, from}``; ``model`` is the
        cost model's spot total, ``replayed`` a mean over the replayed jobs (which traces, zones and starts)."""
        out: dict[str, dict[str, Any]] = {"modelSpotUsd": {
            "value": None if self.model_usd is None else round(self.model_usd, 2), "kind": "model",
            "from": "the cost model: effectiveCost.spotTotal"}}  # fmt: skip
        r = self.replay
        if r is None or not r.groups:
            return out
        on = "; ".join(f"{g.group} ({', '.join(g.trace_zones)})" for g in r.groups)
        how = f"mean of {r.jobs} jobs on {on}, one start every {START_EVERY_HOURS:g} h in each pool zone"
        ladder = f"ladder {self.ladder_name}" if self.ladder_name else "the pool's ladder"
        out["replaySpotUsd"] = {"value": round(r.mean("ladder_usd"), 2), "kind": "replayed",
                                "from": f"{ladder} through the twin, {how}"}  # fmt: skip
        out["replayOnDemandUsd"] = {"value": round(r.mean("on_demand_usd"), 2), "kind": "replayed",
                                    "from": f"on-demand only, {how}"}  # fmt: skip
        return out


def _pct(x: float) -> str:
    return f"{x:.0%}"


def compare(model: CostBreakdown, workload: WorkloadProfile, notice: AnyNotice, ladder: FallbackLadder,
            replayed: PoolReplay | None, sources: dict[str, str], cloud: str, keep_generations: int = 5,
            ladder_name: str | None = None) -> ModelVsReplay:
    """The model's verdict against the replay's (None: the cloud has no traces); ``ladder_name`` is the stack's
    name for ``ladder``, said where the replay's figures came from."""
    model_usd = model.spot_total if math.isfinite(model.spot_total) else None
    saves = model.savings_fraction if math.isfinite(model.savings_fraction) else None
    if replayed is None or not replayed.groups:
        why = "no traces for this cloud" if cloud not in clouds_with_traces() else "no traces for this pool's region"
        return ModelVsReplay("model only", f"model only, {why}", model_usd, model.spot_eligible, saves, replayed,
                             ladder_name=ladder_name)  # fmt: skip
    ladder_usd = replayed.mean("ladder_usd")
    ratio = ladder_usd / model.spot_total if model_usd else math.inf
    groups = replayed.groups
    lo = min(g.savings_range()[0] for g in groups)
    hi = max(g.savings_range()[1] for g in groups)
    replay_saves = 1.0 - ladder_usd / replayed.mean("on_demand_usd")
    span = f"{_pct(replay_saves)} (per home zone {_pct(lo)} to {_pct(hi)})" if hi - lo >= 0.005 else _pct(replay_saves)
    model_text = "the model saves " + (_pct(saves) if saves is not None else "nothing (unbounded)")
    agree_verdict = model.spot_eligible == replayed.eligible
    within = model_usd is not None and abs(ratio - 1.0) <= TOLERANCE
    where = ", ".join(g.group for g in groups)
    summary = (f"replay ${ladder_usd:,.2f} beside the model's " +
               (f"${model_usd:,.2f}" if model_usd is not None else "unbounded") +
               f" ({ratio:.2f}x; {replayed.jobs} jobs on {where})")  # fmt: skip
    if agree_verdict and within:
        line = f"agrees within {TOLERANCE:.0%}: {summary}; {model_text}, the replay {span}"
        return ModelVsReplay("agrees", line, model_usd, model.spot_eligible, saves, replayed, ratio, ladder_name=ladder_name)
    drivers = _drivers(model_usd, workload, notice, ladder, groups[0].fit, ladder_usd, sources, keep_generations)
    driver = drivers[0] if drivers else None
    verdicts = "" if agree_verdict else (
        f"; the model calls it {'SPOT-ELIGIBLE' if model.spot_eligible else 'NOT spot-eligible'}, the replay "
        f"{'SPOT-ELIGIBLE' if replayed.eligible else 'NOT spot-eligible'}")  # fmt: skip
    line = (f"DISPUTED: {model_text}, the replay {span}{verdicts}; {summary}, beyond the {TOLERANCE:.0%} tolerance"
            if not within else f"DISPUTED: {model_text}, the replay {span}{verdicts}; {summary}")
    if driver is not None:
        line += f"; driven by {driver.text()}" + "".join(f"; also {d.text()}" for d in drivers[1:])
    else:
        line += "; no single figure explains it: the model's simplifications (docs/economics.md, Limits)"
    return ModelVsReplay("disputed", line, model_usd, model.spot_eligible, saves, replayed, ratio, driver,
                         tuple(drivers), ladder_name)


def _drivers(model_usd: float | None, workload: WorkloadProfile, notice: AnyNotice, ladder: FallbackLadder,
             fit: TraceFit, target: float, sources: dict[str, str], keep_generations: int) -> list[Driver]:
    """The figures whose value fitted from the same traces moves the model's spot total (by more than 1 %),
    the one that alone brings it closest to the replay's first."""
    traces_gang = fit.gang_interruptions_per_hour if fit.gang_interruptions_per_hour is not None else fit.interruptions_per_hour
    own_gang = workload.gang_interruptions_per_hour is not None
    rate_key = "gangInterruptionsPerHour" if own_gang else "interruptionsPerHour"
    rate_value = workload.gang_interruptions_per_hour if own_gang else workload.interruptions_per_hour
    rate_traces = traces_gang if own_gang else fit.interruptions_per_hour
    candidates: list[tuple[str, float, float, WorkloadProfile, str]] = [
        (rate_key, float(rate_value or 0.0), rate_traces,
         workload.model_copy(update={"gang_interruptions_per_hour": traces_gang}), "/h"),
        ("expectedReacquisitionSeconds", workload.expected_reacquisition_seconds, fit.same_zone_wait_seconds,
         workload.model_copy(update={"expected_reacquisition_seconds": fit.same_zone_wait_seconds}), " s"),
    ]
    found = []
    for key, value, traced, changed, unit in candidates:
        bill = effective_cost(changed, notice, ladder, interval=choose_interval(changed, notice),
                              keep_generations=keep_generations)  # fmt: skip
        if not math.isfinite(bill.spot_total):
            continue
        if model_usd is not None and abs(bill.spot_total - model_usd) <= 0.01 * model_usd:
            continue  # the traces agree with this figure (or it does not move the bill)
        found.append(Driver(key, value, sources.get(key, f"typed: {key}"), traced, bill.spot_total, unit))
    return sorted(found, key=lambda d: abs(d.model_usd_with_traces - target))


def job_for(workload: WorkloadProfile, interval_seconds: float, tiers: TierDecision | None = None,
            **overrides: Any) -> Job:
    """The replayed job (``simulate``'s: a deadline of twice the work when the workload has none);
    ``overrides``: :meth:`Job.from_profile` keywords (``simulate``'s ``--nodes``, ``--work-hours``...).

    With checkpoint ``tiers`` (``choose_interval(...).tiers``) the replay, which knows one store, runs the
    store-only job that stalls as much per hour and loses as much per interruption: interval ``T`` and
    write ``C = f T`` with ``f`` the tier's stall per local interval and ``T/2 + C`` the tier's expected
    loss; its load is the tier's expected load. The tiers' own mechanics are the twin's (``TwinTiers``).
    """
    if tiers is None:
        return Job.from_profile(workload, interval_seconds, **overrides)
    stall = tiers.write_seconds / tiers.local_seconds
    interval = tiers.lost_seconds() / (0.5 + stall)
    load = tiers.load()
    return Job.from_profile(workload, interval, **{"checkpoint_write_seconds": stall * interval, "load_seconds": load,
                            "restart_seconds": workload.restart_seconds + load, **overrides})  # fmt: skip




def check_pool(config: StackConfig, pool: PoolSpec) -> ModelVsReplay:
    """One pool of a stack: its bill (the preview's) against its ladder replayed on its cloud's traces."""
    bill = pool_bill(config, pool)
    sources = {k: (f["from"] if f["from"].startswith(f["kind"]) else f"{f['kind']}: {f['from']}")
               for k, f in flat_figures(figure_sources(config, pool)).items()}  # fmt: skip
    replayed = None
    if pool.cloud in clouds_with_traces():
        job = job_for(bill.priced, bill.decision.seconds, bill.decision.tiers)
        replayed = replay_pool(job, bill.ladder, bill.priced.fallback_policy, pool.cloud, pool_region(pool), pool.zones)
    return compare(bill.breakdown, bill.priced, pool.notice, bill.ladder, replayed, sources, pool.cloud,
                   pool.checkpoint.keep_generations, pool.ladder)  # fmt: skip


def check_stack(config: StackConfig, only: str | None = None) -> dict[str, ModelVsReplay]:
    """Every pool's (or only ``only``'s) model-vs-replay check, in the stack's order."""
    return {p.name: check_pool(config, p) for p in config.pools if only is None or p.name == only}


#: What a pool's ``replay`` block says when ``cost --stack --no-replay`` skipped it.
NOT_RUN = {"status": "not run", "line": "not run (--no-replay): the model alone"}


def checked_economics(config: StackConfig, only: str | None = None, replay: bool = True) -> tuple[dict[str, Any], float]:
    """The stack's economics (``report.stack_economics``) with each pool's model-vs-replay check under
    ``replay``, and the seconds the checks took: the one document the preview and ``cost --stack`` print
    (``replay=False``: the check is skipped and the block says so). The time is returned beside the
    document, never in it, so the document stays byte-stable."""
    report = stack_economics(config, only=only)
    started = time.perf_counter()
    checks = check_stack(config, only) if replay else {}
    for name, pool in report["pools"].items():
        pool["replay"] = checks[name].to_dict() if replay else dict(NOT_RUN)
    return report, time.perf_counter() - started


__all__ = ["NOT_RUN", "TOLERANCE", "ModelVsReplay", "PoolReplay", "check_pool", "check_stack", "checked_economics", "compare",
           "groups_for", "job_for", "replay_pool", "trace_cloud"]
