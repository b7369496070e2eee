"""The ladder in simulations is the controller's planner, run through the digital twin.

The economics simulator (``simulator.py``) replays the baselines (on-demand only,
fixed wait, Uniform Progress) vectorised; there is no second ladder. This module
turns the simulator's :class:`~spotgpu.simulation.replay.Job` into the pool the
controller would run (a primary group in the home zone, one ``alternate_zone``
group per other traced zone, an on-demand group) and replays each job with
:func:`spotgpu.simulation.twin.run_twin`, so the same mechanics (restart, load,
commits every interval, lost uncommitted work, billing per held VM) apply to both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.models.workload import Prices, WorkloadProfile
from spotgpu.simulation.job import TwinJob
from spotgpu.simulation.replay import Job
from spotgpu.simulation.twin import TwinCloud, TwinResult, regional_groups, run_twin, twin_plan, zone_groups

#: The controller's tick in twin replays (the config default is 30 s; a scheduled function runs every minute).
TWIN_TICK_SECONDS = 60.0


def workload_for(job: Job, policy: str = "ladder") -> WorkloadProfile:
    """The WorkloadProfile the controller would be configured with for this job."""
    boot = job.restart_seconds - job.load_seconds
    return WorkloadProfile(
        checkpoint_bytes=1,
        checkpoint_write_seconds=job.checkpoint_write_seconds,
        checkpoint_load_seconds=job.load_seconds,
        restart_seconds=boot,
        expected_reacquisition_seconds=900,
        checkpoint_interval_seconds=max(round(job.interval_seconds), int(job.checkpoint_write_seconds) + 1),
        interruptions_per_hour=0.0,
        work_hours=job.work_hours,
        deadline_hours=job.deadline_hours,
        nodes=job.nodes,
        fallback_policy=policy,
        prices=Prices(
            spot_per_hour=job.spot_per_hour,
            on_demand_per_hour=job.on_demand_per_hour,
            deadline_penalty_per_hour=job.deadline_penalty_per_hour,
        ),
    )


def twin_job(job: Job) -> TwinJob:
    return TwinJob(
        work_seconds=job.work_seconds,
        deadline_seconds=job.deadline_seconds,
        interval_seconds=job.interval_seconds,
        write_seconds=job.checkpoint_write_seconds,
        boot_seconds=job.restart_seconds - job.load_seconds,
        load_seconds=job.load_seconds,
        nodes=job.nodes,
        penalty_per_hour=job.deadline_penalty_per_hour,
    )


@dataclass
class ControllerLadder:
    """A "policy" entry for comparisons: the controller's planner (strategy ``policy``) through the twin."""

    ladder: FallbackLadder
    policy: str = "ladder"
    tick_seconds: float = TWIN_TICK_SECONDS
    name: str = "spotgpu ladder"
    #: the pool as deployed: one spot group over every zone (``regional_groups``), not a group per zone
    regional: bool = False

    def run(
        self,
        job: Job,
        counts: np.ndarray,
        gap_seconds: float,
        starts: Sequence[int] | np.ndarray,
        homes: Sequence[int] | np.ndarray,
        zones: Sequence[str] | None = None,
        horizon_hours: float | None = None,
    ) -> list[TwinResult]:
        """One twin replay per (start tick, home zone); ``counts`` is (zones, ticks) instances holdable."""
        names = list(zones) if zones is not None else [f"z{i}" for i in range(counts.shape[0])]
        workload = workload_for(job, self.policy)
        tj = twin_job(job)
        horizon = (horizon_hours if horizon_hours is not None else 2.0 * job.deadline_hours) * 3600.0
        rows = [np.ascontiguousarray(counts[i]) for i in range(counts.shape[0])]
        out: list[TwinResult] = []
        for start, home in zip(np.asarray(starts), np.asarray(homes), strict=True):
            groups, traces = self.groups(names, int(home), job.nodes, rows)
            t0 = float(start) * gap_seconds
            plan = twin_plan(
                workload, self.ladder, groups, start=t0, interval_seconds=job.interval_seconds,
                policy=self.policy, tick_seconds=self.tick_seconds,
            )  # fmt: skip
            cloud = TwinCloud(plan, tj, traces, gap_seconds, t0)
            out.append(run_twin(plan, cloud, horizon_seconds=horizon))
        return out

    def groups(self, names: Sequence[str], home: int, nodes: int, rows: Sequence[np.ndarray]) -> tuple[
            list[tuple[str, StepKind]], dict[str, np.ndarray | dict[str, np.ndarray]]]:  # fmt: skip
        """The twin's groups for a start in zone ``home`` and the traces ``TwinCloud`` takes for them."""
        if self.regional:
            groups, zones = regional_groups(names, home)
            return groups, {g: {z: rows[i] for z, i in by_zone.items()} for g, by_zone in zones.items()}
        groups, index = zone_groups(names, home, nodes)
        return groups, {name: rows[i] for name, i in index.items()}


def ladder_progress(
    ladder: ControllerLadder, job: Job, counts: np.ndarray, gap_seconds: float, start: int, home: int,
    zones: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(hours since start, committed work hours) at each controller tick of one twin replay: the
    ladder's curve for ``simulate --plot``, from the same run :meth:`ControllerLadder.run` makes."""
    names = list(zones) if zones is not None else [f"z{i}" for i in range(counts.shape[0])]
    rows = [np.ascontiguousarray(counts[i]) for i in range(counts.shape[0])]
    groups, traces = ladder.groups(names, int(home), job.nodes, rows)
    t0 = float(start) * gap_seconds
    plan = twin_plan(
        workload_for(job, ladder.policy), ladder.ladder, groups, start=t0, interval_seconds=job.interval_seconds,
        policy=ladder.policy, tick_seconds=ladder.tick_seconds,
    )  # fmt: skip
    cloud = TwinCloud(plan, twin_job(job), traces, gap_seconds, t0)
    points: list[tuple[float, float]] = [(0.0, 0.0)]
    result = run_twin(plan, cloud, horizon_seconds=2.0 * job.deadline_hours * 3600.0,
                      on_tick=lambda now, *_: points.append(((now - t0) / 3600.0, cloud.run.committed / 3600.0)))  # fmt: skip
    if math.isfinite(result.finish_seconds):
        points.append((result.finish_seconds / 3600.0, job.work_seconds / 3600.0))
    hours, work = zip(*points, strict=True)
    return np.array(hours, dtype=float), np.array(work, dtype=float)
