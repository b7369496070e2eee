"""The digital twin: the production planner against a simulated cloud and job built from availability traces.

There is one ladder: :func:`spotgpu.controller.reconcile.reconcile`, the function the
controller calls every tick. The twin feeds it observations from a simulated cloud
(:class:`~spotgpu.simulation.cloud.TwinCloud`, a ``CloudAdapter``) running a simulated
job (:class:`~spotgpu.simulation.job.JobRun`) and applies its actions there, so what
``spotgpu simulate --policy ladder`` and ``bench/twin.py`` measure is the controller's
own decision code.

:func:`run_twin` drives ``reconcile`` on the controller's tick grid. It skips
ticks in which neither the cloud changed nor :func:`~spotgpu.controller.reconcile.next_wake`
says a decision could; a test checks that the outcome equals ticking every time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spotgpu.controller.actions import Defer, RemoveInstance, RequestDrain, Resume, SetDesired
from spotgpu.controller.config import GroupSpec, reference_gpus
from spotgpu.controller.observe import PoolObservation
from spotgpu.controller.reconcile import PoolPlan, TickResult, commits_matter, next_wake, reconcile
from spotgpu.controller.state import PoolState
from spotgpu.controller.strategies import make_strategy
from spotgpu.economics.tiers import TierDecision
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import WorkloadProfile
from spotgpu.simulation.cloud import Removal, TwinCloud
from spotgpu.simulation.job import TwinJob, TwinTiers


@dataclass
class TwinResult:
    start: float
    finish_seconds: float  # after the job's start; inf when it did not finish
    cost_usd: float  # billed capacity plus the deadline penalty
    met: bool
    spot_hours: float
    on_demand_hours: float
    lost_work_hours: float
    interruptions: int  # VMs taken by the cloud
    gang_losses: int  # times a loss stopped the job (what the baselines call preemptions)
    restarts: int
    ticks: int
    deferrals: int
    failures_by_reason: dict[str, int]
    steps_reached: set[str]
    removals: list[Removal]
    #: each gang the job formed, as its members' groups: a 4-GPU rung standing in for an 8-GPU primary shows twice the nodes
    gangs: list[tuple[str, ...]] = field(default_factory=list)
    #: with checkpoint tiers: rank restores from each source (local, peer, store)
    restores: dict[str, int] = field(default_factory=dict)
    #: of ``restores``, those of gangs formed after the controller drained and moved the job (not after an
    #: interruption, which is what the cost model's restore mix counts)
    moved_restores: dict[str, int] = field(default_factory=dict)
    #: wall hours the job stood with no gang (job-hours: the unit of the baselines' idle hours)
    idle_hours: float = 0.0


def run_twin(
    plan: PoolPlan,
    cloud: TwinCloud,
    *,
    horizon_seconds: float,
    jump: bool = True,
    on_tick: Callable[[float, PoolObservation, PoolState, TickResult], None] | None = None,
) -> TwinResult:
    """Drive the controller's planner against ``cloud`` until the job is done or the horizon passes."""
    start, tick, run = cloud.start, plan.tick_seconds, cloud.run
    end = start + horizon_seconds
    state = PoolState()
    ticks = deferrals = 0
    steps: set[str] = set()
    k = 0
    last = math.floor((end - start) / tick + 1e-9)  # the last tick within the horizon
    while True:
        now = start + k * tick
        if now > end or run.phase == "done":
            break
        obs = cloud.observe(now)
        if run.phase == "done":
            break
        result = reconcile(plan, obs, state)
        for action in result.actions:
            if isinstance(action, SetDesired | RemoveInstance):
                cloud.apply(action, now)
            elif isinstance(action, RequestDrain):
                cloud.request_drain(action.vm_id, now)
            elif isinstance(action, Defer):
                deferrals += 1
            elif isinstance(action, Resume):
                pass
        if result.step is not None:
            steps.add(result.step.kind.value)
        if on_tick is not None:
            on_tick(now, obs, state, result)
        ticks += 1
        if not jump or cloud.has_news():
            k += 1  # news (a launch failure, an interruption) is seen on the very next tick
            continue
        wake = min(next_wake(plan, state, now, result), cloud.next_change(now, commits_matter(plan, state, now, result)))
        # never past the last tick: a job that finished unseen (its end moves nothing) is found there
        at = math.ceil((wake - start) / tick - 1e-9) if math.isfinite(wake) else last
        k = max(k + 1, min(at, last))
    done_at = run.finish if run.phase == "done" else math.inf
    cloud.close(min(done_at, end) if math.isfinite(done_at) else end)
    job = cloud.job
    finish = done_at - start
    late_h = max(0.0, finish - job.deadline_seconds) / 3600.0 if math.isfinite(finish) else (end - start - job.deadline_seconds) / 3600.0
    return TwinResult(
        start=start,
        finish_seconds=finish,
        cost_usd=cloud.cost + max(0.0, late_h) * job.penalty_per_hour,
        met=finish <= job.deadline_seconds + 1e-6,
        spot_hours=cloud.spot_seconds / 3600.0,
        on_demand_hours=cloud.od_seconds / 3600.0,
        lost_work_hours=run.lost_work / 3600.0,
        interruptions=cloud.interruptions,
        gang_losses=run.gang_losses,
        restarts=run.restarts,
        ticks=ticks,
        deferrals=deferrals,
        failures_by_reason=dict(cloud.failures_by_reason),
        steps_reached=steps,
        removals=list(cloud.removals),
        gangs=list(run.gangs),
        restores=dict(run.restores) if job.tiers is not None else {},
        moved_restores=dict(run.moved_restores) if job.tiers is not None else {},
        idle_hours=run.idle_hours(min(done_at, end) if math.isfinite(done_at) else end),
    )


def zone_groups(zones: Sequence[str], home: int, nodes: int) -> tuple[list[tuple[str, StepKind]], dict[str, int]]:
    """Group names and roles for a pool whose primary is zone ``home`` and whose alternates are the rest."""
    names = [(f"spot-{zones[home]}", StepKind.SAME_POOL)]
    names += [(f"spot-{z}", StepKind.ALTERNATE_ZONE) for i, z in enumerate(zones) if i != home]
    names.append(("on-demand", StepKind.ON_DEMAND))
    return names, {f"spot-{z}": i for i, z in enumerate(zones)}


def regional_groups(zones: Sequence[str], home: int) -> tuple[list[tuple[str, StepKind]], dict[str, dict[str, int]]]:
    """Group names and roles for a pool as it is deployed: one spot group over all its zones (a GCP regional
    MIG, an AWS Auto Scaling group over the zones' subnets, an Azure zonal scale set; the zone ``home`` first:
    ties in placement go to it) and the on-demand fallback group. The ``alternate_zone`` rung then has no
    group of its own, as on the real pool, where ``same_pool`` and ``alternate_zone`` grow the same group.
    Returns the groups and, for the regional group, each zone's trace index (``TwinCloud`` takes
    ``{"spot": {zone: trace}}``)."""
    order = [home, *(i for i in range(len(zones)) if i != home)]
    return [("spot", StepKind.SAME_POOL), ("on-demand", StepKind.ON_DEMAND)], {"spot": {zones[i]: i for i in order}}


def twin_plan(
    workload: WorkloadProfile,
    ladder: FallbackLadder,
    groups: Sequence[tuple[str, StepKind] | GroupSpec],
    *,
    start: float,
    interval_seconds: float,
    policy: str = "ladder",
    tick_seconds: float = 60.0,
    stable_spot_seconds: float = 300.0,
) -> PoolPlan:
    """The PoolPlan the controller would build for this pool (as ``build_plans`` does from a config)."""
    specs = tuple(g if isinstance(g, GroupSpec) else GroupSpec(name=g[0], role=g[1]) for g in groups)
    nodes = workload.nodes
    # room for the widest gang shape: a 4-GPU group standing in for 8-GPU primaries needs twice the nodes
    reference = reference_gpus(specs, workload)
    widest = max((reference / (g.gpus_per_node or reference) for g in specs), default=1.0)
    return PoolPlan(
        name="twin",
        groups=specs,
        capacity=Capacity(target=nodes, max=max(nodes, math.ceil(nodes * widest - 1e-9))),
        workload=workload,
        strategy=make_strategy(policy, ladder),
        stable_spot_seconds=stable_spot_seconds,
        job_started_at=start if workload.deadline_hours is not None else None,
        total_steps=max(1, math.ceil(workload.work_hours * 3600.0)),
        checkpoint_interval_seconds=float(interval_seconds),
        tick_seconds=tick_seconds,
    )


def twin_job_for(workload: WorkloadProfile, interval_seconds: float, tiers: TierDecision | None = None) -> TwinJob:
    """The job mechanics of a workload at a checkpoint interval (with ``tiers``: the local interval, and the
    durable interval and tier figures of ``choose_interval(...).tiers``)."""
    deadline = workload.deadline_hours if workload.deadline_hours is not None else 2.0 * workload.work_hours
    twin_tiers = None
    write = workload.checkpoint_write_seconds
    if tiers is not None:
        write = tiers.write_seconds
        twin_tiers = TwinTiers(durable_every=tiers.durable_every, upload_seconds=tiers.commit_seconds - tiers.write_seconds
                               + tiers.store_write_seconds, tier_load_seconds=tiers.load_seconds,
                               peer_copies=tiers.peer_copies)  # fmt: skip
    return TwinJob(
        work_seconds=workload.work_hours * 3600.0,
        deadline_seconds=deadline * 3600.0,
        interval_seconds=float(interval_seconds),
        write_seconds=write,
        boot_seconds=workload.restart_seconds,
        load_seconds=workload.checkpoint_load_seconds,
        nodes=workload.nodes,
        penalty_per_hour=workload.prices.deadline_penalty_per_hour,
        tiers=twin_tiers,
    )
