"""Ceilings per unit of work vs per node-hour: the twin on the shipped traces with a two-SKU pool.

The pool (issue 26): a slow type as its primary and on-demand fallback, and a fast type on the
``alternate_sku`` rung, both priced from the GPU catalogue (us-east-1 list prices; spot at
``--spot-share`` of list). A work-hour is one hour of the slow type's GPU (speed 1.0); the fast
type's measured speed is ``--fast-speed``. Two ladders differ only in how their ceilings are stated:

* **per node-hour**: every spot rung may pay 1.25x the slow type's spot price per node-hour, the
  on_demand rung 1.25x its on-demand price: the fast type, dearer per node, is never bought;
* **per work-hour**: the same 1.25x, stated per work-hour of the slow type: the fast type is
  bought when it costs less per unit of work.

Each job (the cells of ``bench/twin.py``) starts every ``--start-every-hours`` across each trace
set, the home zone rotating; the fast type stands in on the next traced zone (the traces hold one
type, p3.2xlarge, so the fast type's availability is another zone's: a stand-in, said here). The
controller's planner runs through the twin for both ladders on the same jobs; the table prints
mean cost per job, USD per work-hour (the job's reference GPU-hours) and deadlines met, side by side.

    .venv/bin/python bench/two_sku.py [--start-every-hours 6] [--fast-speed 3.0] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from spotgpu import catalogue
from spotgpu.controller.config import GroupSpec
from spotgpu.economics.estimate import aligned_availability, aligned_counts
from spotgpu.models.ladder import FallbackLadder, LadderStep, StepKind
from spotgpu.models.workload import GpuRequirement
from spotgpu.simulation.compare import start_grid
from spotgpu.simulation.ladder import twin_job, workload_for
from spotgpu.simulation.replay import Job
from spotgpu.simulation.twin import TwinCloud, TwinResult, run_twin, twin_plan
from spotgpu.traces import all_groups, load_group

SLOW, FAST = "g5.48xlarge", "p4d.24xlarge"  # 8 x A10G and 8 x A100: the A100 node lists at about 2x
REGION = "us-east-1"
WRITE_SECONDS, LOAD_SECONDS, BOOT_SECONDS = 75.0, 90.0, 300.0
JOBS = ((8.0, 10.0), (24.0, 36.0), (24.0, 48.0))
NODES = {"1-node": 1, "16-node": 16}
HEADROOM = 1.25  # every ceiling: 1.25x the slow type's price, per node-hour or per work-hour


@dataclass(frozen=True)
class Pool:
    """The two types' shapes and prices (catalogue list prices; spot a fixed share of them)."""

    slow_model: str
    fast_model: str
    gpus: int
    slow_spot: float
    fast_spot: float
    slow_od: float
    fast_speed: float

    @classmethod
    def from_catalogue(cls, spot_share: float, fast_speed: float) -> Pool:
        slow, fast = catalogue.aws_gpu(SLOW), catalogue.aws_gpu(FAST)
        slow_price, fast_price = catalogue.on_demand_price("aws", SLOW, REGION), catalogue.on_demand_price("aws", FAST, REGION)
        assert slow and fast and slow_price and fast_price and slow.gpu_count == fast.gpu_count
        return cls(slow.gpu_model, fast.gpu_model, int(slow.gpu_count), round(slow_price.usd_per_hour * spot_share, 4),
                   round(fast_price.usd_per_hour * spot_share, 4), slow_price.usd_per_hour, fast_speed)  # fmt: skip

    def ladder(self, per_work: bool) -> FallbackLadder:
        unit = self.gpus if per_work else 1.0  # one slow node does `gpus` work-hours an hour

        def ceiling(usd: float) -> dict[str, float]:
            key = "cost_ceiling_per_work_hour" if per_work else "cost_ceiling_per_hour"
            return {key: round(HEADROOM * usd / unit, 6)}

        return FallbackLadder(steps=(
            LadderStep(kind=StepKind.SAME_POOL, max_wait_seconds=900, **ceiling(self.slow_spot)),
            LadderStep(kind=StepKind.ALTERNATE_ZONE, max_wait_seconds=900, **ceiling(self.slow_spot)),
            LadderStep(kind=StepKind.ALTERNATE_SKU, max_wait_seconds=1200, **ceiling(self.slow_spot)),
            LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=14400, **ceiling(self.slow_od)),
        ))  # fmt: skip

    def groups(self, zones: list[str], home: int) -> tuple[list[GroupSpec], dict[str, int]]:
        """Slow primary at home, the fast type on the next zone, slow alternates elsewhere, slow on-demand."""
        fast = (home + 1) % len(zones)
        slow = {"gpus_per_node": self.gpus, "gpu_model": self.slow_model}
        specs = [GroupSpec(name=f"slow-{zones[home]}", role=StepKind.SAME_POOL, price_per_hour=self.slow_spot, **slow),
                 GroupSpec(name=f"fast-{zones[fast]}", role=StepKind.ALTERNATE_SKU, price_per_hour=self.fast_spot,
                           gpus_per_node=self.gpus, gpu_model=self.fast_model)]  # fmt: skip
        specs += [GroupSpec(name=f"slow-{z}", role=StepKind.ALTERNATE_ZONE, price_per_hour=self.slow_spot, **slow)
                  for i, z in enumerate(zones) if i not in (home, fast)]  # fmt: skip
        specs.append(GroupSpec(name="on-demand", role=StepKind.ON_DEMAND, price_per_hour=self.slow_od, **slow))
        index = {s.name: zones.index(s.name.split("-", 1)[1]) for s in specs if s.role is not StepKind.ON_DEMAND}
        return specs, index


def run_cell(pool: Pool, per_work: bool, job: Job, rows: list[np.ndarray], zones: list[str], gap: float,
             starts: np.ndarray) -> list[TwinResult]:  # fmt: skip
    workload = workload_for(job).model_copy(update={"gpu": GpuRequirement(
        gpus_per_node=pool.gpus, relative_throughput={pool.slow_model: 1.0, pool.fast_model: pool.fast_speed})})
    ladder = pool.ladder(per_work)
    out = []
    for i, start in enumerate(starts):
        specs, index = pool.groups(zones, i % len(zones))
        t0 = float(start) * gap
        plan = twin_plan(workload, ladder, specs, start=t0, interval_seconds=job.interval_seconds)
        cloud = TwinCloud(plan, twin_job(job), {n: rows[j] for n, j in index.items()}, gap, t0)
        out.append(run_twin(plan, cloud, horizon_seconds=2.0 * job.deadline_hours * 3600.0))
    return out


def cells(pool: Pool, every: float, groups: list[str] | None = None, jobs: tuple[tuple[float, float], ...] = JOBS,
          max_starts: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One row per (trace set, job): both ladders on the same jobs."""
    out = []
    for group in groups or all_groups():
        traces = load_group(group)
        nodes = NODES[group.split("/")[0]]
        avail, counts = aligned_availability(traces, nodes), aligned_counts(traces)
        rows = [np.ascontiguousarray(counts[i]) for i in range(counts.shape[0])]
        zones, gap = [t.zone for t in traces], traces[0].gap_seconds
        for work, deadline in jobs:
            job = Job(work_hours=work, deadline_hours=deadline, interval_seconds=1800,
                      checkpoint_write_seconds=WRITE_SECONDS, restart_seconds=BOOT_SECONDS + LOAD_SECONDS,
                      load_seconds=LOAD_SECONDS, spot_per_hour=pool.slow_spot, on_demand_per_hour=pool.slow_od,
                      nodes=nodes, deadline_penalty_per_hour=10 * pool.slow_od * nodes)  # fmt: skip
            starts = start_grid(avail.shape[1], gap, 2 * deadline, every)[:max_starts]
            work_units = work * nodes * pool.gpus  # reference GPU-hours
            row: dict[str, Any] = {"group": group, "nodes": nodes, "work": work, "deadline": deadline, "jobs": len(starts)}
            for name, per_work in (("perNodeHour", False), ("perWorkHour", True)):
                results = run_cell(pool, per_work, job, rows, zones, gap, starts)
                cost = float(np.mean([r.cost_usd for r in results]))
                fast_used = float(np.mean([any(g.startswith("fast-") for gang in r.gangs for g in gang) for r in results]))
                row[name] = {"meanCostUsd": cost, "usdPerWorkHour": cost / work_units,
                             "deadlinesMet": float(np.mean([r.met for r in results])), "fastShare": fast_used}  # fmt: skip
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-every-hours", type=float, default=6.0)
    parser.add_argument("--fast-speed", type=float, default=3.0, help="the fast type's speed against the slow one")
    parser.add_argument("--spot-share", type=float, default=0.4, help="spot price as a share of the list price")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pool = Pool.from_catalogue(args.spot_share, args.fast_speed)
    rows = cells(pool, args.start_every_hours)
    never_more = all(r["perWorkHour"]["meanCostUsd"] <= r["perNodeHour"]["meanCostUsd"] + 1e-6 for r in rows)
    if args.json:
        json.dump({"pool": pool.__dict__, "rows": rows, "perWorkNeverCostsMore": never_more}, sys.stdout, indent=2)
        return
    slow_work, fast_work = pool.slow_spot / pool.gpus, pool.fast_spot / (pool.gpus * pool.fast_speed)
    print(f"slow {SLOW} ({pool.gpus} x {pool.slow_model}, speed 1): spot ${pool.slow_spot:g}/h = ${slow_work:.3f}/work-h; "
          f"fast {FAST} ({pool.gpus} x {pool.fast_model}, speed {pool.fast_speed:g}): spot ${pool.fast_spot:g}/h = "
          f"${fast_work:.3f}/work-h (list prices, {REGION}; spot {args.spot_share:.0%} of list)")
    print(f"ceilings {HEADROOM:g}x the slow type's price; the fast type stands in on the next traced zone")
    head = f"{'trace set':<24}{'N':>3}{'work/deadline':>15}{'jobs':>6}"
    print(head + f"{'per node-hour: $/job':>22}{'$/work-h':>10}{'met':>8}{'fast':>6}"
          f"{'per work-hour: $/job':>22}{'$/work-h':>10}{'met':>8}{'fast':>6}{'ratio':>8}")  # fmt: skip
    for r in rows:
        a, b = r["perNodeHour"], r["perWorkHour"]
        print(f"{r['group']:<24}{r['nodes']:>3}{r['work']:>8g}/{r['deadline']:<6g}{r['jobs']:>6}"
              f"{a['meanCostUsd']:>22,.2f}{a['usdPerWorkHour']:>10.3f}{a['deadlinesMet']:>8.1%}{a['fastShare']:>6.0%}"
              f"{b['meanCostUsd']:>22,.2f}{b['usdPerWorkHour']:>10.3f}{b['deadlinesMet']:>8.1%}{b['fastShare']:>6.0%}"
              f"{b['meanCostUsd'] / a['meanCostUsd']:>8.3f}")  # fmt: skip
    print(f"per work-hour never costs more: {never_more}")


if __name__ == "__main__":
    main()
