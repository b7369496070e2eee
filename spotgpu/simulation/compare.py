"""Run several policies over the same traces and jobs, and tabulate them side by side.

Shared by ``spotgpu simulate`` and ``bench/twin.py`` so the command and the
benchmark can never disagree about how a comparison is made: every policy sees
the same job, the same start offsets and home zones, and the same checkpoint
mechanics; cost is relative to the on-demand-only replay of those same jobs.
The baselines are the simulator's vectorised policies, named ``baseline-*`` so no
name means both a baseline and one of the controller's strategies (``fixed-wait`` and
``uniform-progress`` are strategies the controller runs); ``ladder`` is the controller's
own planner through the digital twin (:mod:`spotgpu.simulation.ladder`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spotgpu.models.ladder import FallbackLadder
from spotgpu.simulation.baselines import FixedWait, OnDemandOnly, UniformProgress
from spotgpu.simulation.ladder import ControllerLadder
from spotgpu.simulation.replay import Job, Policy, Replay, replay

POLICY_NAMES = ("baseline-on-demand", "baseline-fixed-wait", "baseline-uniform-progress", "ladder")
#: The baselines' names before they were told apart from the controller's strategies (accepted for one release).
RENAMED_POLICIES = {"on-demand": "baseline-on-demand", "fixed-wait": "baseline-fixed-wait",
                    "uniform-progress": "baseline-uniform-progress"}  # fmt: skip


def build_policies(
    names: Sequence[str], ladder: FallbackLadder, fixed_wait_seconds: float = 1800.0, strategy: str = "ladder"
) -> list[Policy | ControllerLadder]:
    """The named policies; ``ladder`` is the controller's planner with ``strategy`` (the workload's
    ``fallbackPolicy``: the strategy the controller would run for it)."""
    out: list[Policy | ControllerLadder] = []
    for name in (RENAMED_POLICIES.get(n, n) for n in names):
        if name == "baseline-on-demand":
            out.append(OnDemandOnly())
        elif name == "baseline-fixed-wait":
            out.append(FixedWait(fixed_wait_seconds))
        elif name == "baseline-uniform-progress":
            out.append(UniformProgress())
        elif name == "ladder":
            label = "spotgpu ladder" if strategy == "ladder" else f"spotgpu {strategy}"
            out.append(ControllerLadder(ladder, policy=strategy, name=label))
        else:
            raise ValueError(f"unknown policy {name!r}; use one of {', '.join(POLICY_NAMES)}")
    return out


@dataclass(frozen=True)
class PolicyRow:
    """One policy's mean over the same jobs, one unit per column whatever the policy: money in USD,
    capacity in node-hours (what is billed: each node of the gang, each hour), the job's own time in
    job-hours (an hour of the whole job: work lost, wall time standing with no capacity)."""

    policy: str
    jobs: int
    mean_cost_usd: float
    relative_cost: float  # mean cost / mean on-demand-only cost of the same jobs
    deadlines_met: float
    lost_compute_hours: float  # job-hours of work lost
    spot_hours: float  # node-hours billed on spot
    on_demand_hours: float  # node-hours billed on on-demand
    idle_hours: float  # job-hours standing with no capacity
    preemptions: float
    work_node_hours: float = 0.0  # the job's work in node-hours (workHours x nodes): goodput's numerator

    @property
    def goodput(self) -> float:
        """Work node-hours over paid node-hours: what share of the capacity paid for was the job's work."""
        paid = self.spot_hours + self.on_demand_hours
        return self.work_node_hours / paid if paid > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "jobs": self.jobs,
            "meanCostUsd": round(self.mean_cost_usd, 2),
            "relativeCost": round(self.relative_cost, 4),
            "deadlinesMet": round(self.deadlines_met, 4),
            "lostWorkJobHours": round(self.lost_compute_hours, 3),
            "spotNodeHours": round(self.spot_hours, 3),
            "onDemandNodeHours": round(self.on_demand_hours, 3),
            "idleJobHours": round(self.idle_hours, 3),
            "preemptions": round(self.preemptions, 3),
            "goodput": round(self.goodput, 4) if math.isfinite(self.goodput) else None,
        }


def compare(
    job: Job,
    avail: np.ndarray,
    gap_seconds: float,
    starts: np.ndarray,
    homes: np.ndarray,
    policies: Sequence[Policy | ControllerLadder],
    *,
    record_progress: bool = False,
    counts: np.ndarray | None = None,
    zones: Sequence[str] | None = None,
) -> tuple[list[PolicyRow], list[Replay]]:
    """Replay each policy on the same jobs; the baseline is an on-demand-only replay of them.

    ``counts`` (zones x ticks instances holdable; default: ``avail`` times the gang size)
    feeds the twin, whose groups hold VMs one by one; ``avail`` says where a whole gang fits.
    """
    baseline = replay(OnDemandOnly(), job, avail, gap_seconds, starts, homes)
    base_cost = float(baseline.total_cost.mean())
    rows, replays = [], []
    for policy in policies:
        if isinstance(policy, ControllerLadder):
            held = counts if counts is not None else avail.astype(np.int64) * job.nodes
            rows.append(twin_row(policy, job, held, gap_seconds, starts, homes, zones, base_cost))
            continue
        r = replay(policy, job, avail, gap_seconds, starts, homes, record_progress=record_progress)
        replays.append(r)
        s = r.state
        rows.append(
            PolicyRow(
                policy=policy.name,
                jobs=len(starts),
                mean_cost_usd=float(r.total_cost.mean()),
                relative_cost=float(r.total_cost.mean()) / base_cost if base_cost > 0 else math.nan,
                deadlines_met=float(r.met.mean()),
                lost_compute_hours=float(s.lost_work_seconds.mean()) / 3600.0,
                # the replay bills a whole gang per job-second: its node-hours are job-hours x nodes
                spot_hours=float(s.spot_seconds.mean()) / 3600.0 * job.nodes,
                on_demand_hours=float(s.on_demand_seconds.mean()) / 3600.0 * job.nodes,
                idle_hours=float(s.idle_seconds.mean()) / 3600.0,
                preemptions=float(s.preemptions.mean()),
                work_node_hours=job.work_hours * job.nodes,
            )
        )
    return rows, replays


def twin_row(
    policy: ControllerLadder,
    job: Job,
    counts: np.ndarray,
    gap_seconds: float,
    starts: np.ndarray,
    homes: np.ndarray,
    zones: Sequence[str] | None,
    base_cost: float,
) -> PolicyRow:
    results = policy.run(job, counts, gap_seconds, starts, homes, zones)
    cost = float(np.mean([r.cost_usd for r in results]))
    return PolicyRow(
        policy=policy.name,
        jobs=len(results),
        mean_cost_usd=cost,
        relative_cost=cost / base_cost if base_cost > 0 else math.nan,
        deadlines_met=float(np.mean([r.met for r in results])),
        lost_compute_hours=float(np.mean([r.lost_work_hours for r in results])),
        spot_hours=float(np.mean([r.spot_hours for r in results])),  # the twin bills VMs: node-hours already
        on_demand_hours=float(np.mean([r.on_demand_hours for r in results])),
        idle_hours=float(np.mean([r.idle_hours for r in results])),
        preemptions=float(np.mean([r.gang_losses for r in results])),
        work_node_hours=job.work_hours * job.nodes,
    )


def start_grid(ticks: int, gap_seconds: float, horizon_hours: float, every_hours: float) -> np.ndarray:
    """Start ticks every ``every_hours`` such that ``horizon_hours`` still fits in the trace."""
    span = math.ceil(horizon_hours * 3600.0 / gap_seconds)
    last = ticks - span - 1
    if last < 0:
        raise ValueError(
            f"the trace covers {ticks * gap_seconds / 3600:.1f} h, shorter than the {horizon_hours:g} h "
            "deadline; use a shorter deadline or a longer trace"
        )
    step = max(1, round(every_hours * 3600.0 / gap_seconds))
    return np.arange(0, last + 1, step, dtype=np.int64)


#: The table's columns: header, and the unit every policy's figure is in.
COLUMNS = ("cost $", "vs OD", "met", "lost job-h", "spot node-h", "OD node-h", "idle job-h", "preempt", "goodput")


def render_table(rows: Sequence[PolicyRow]) -> str:
    """One row per policy; every column has one unit for every policy (the header says which)."""
    head = (
        f"{'policy':<34}{'jobs':>6}{'cost $':>11}{'vs OD':>8}{'met':>8}"
        f"{'lost job-h':>12}{'spot node-h':>13}{'OD node-h':>11}{'idle job-h':>12}{'preempt':>9}{'goodput':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        goodput = f"{r.goodput:>9.1%}" if math.isfinite(r.goodput) else f"{'-':>9}"
        lines.append(
            f"{r.policy:<34}{r.jobs:>6}{r.mean_cost_usd:>11,.2f}{r.relative_cost:>8.3f}{r.deadlines_met:>8.1%}"
            f"{r.lost_compute_hours:>12.2f}{r.spot_hours:>13.1f}{r.on_demand_hours:>11.1f}{r.idle_hours:>12.1f}"
            f"{r.preemptions:>9.1f}{goodput}"
        )
    lines.append("node-h: hours of each billed node (the whole gang); job-h: hours of the job itself; goodput: the "
                 "job's work node-hours over paid node-hours")  # fmt: skip
    return "\n".join(lines)
