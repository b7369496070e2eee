"""One hash over every decision the digital twin makes on the shipped traces: proof that a refactor moved nothing.

Runs the controller's planner through the twin on the runs ``bench/twin.py`` makes (the speed
run: 45 days x 9 zones, one job per zone; and the ladder cells of its policy table, on a coarser
start grid by default) and feeds every tick's actions, events and rung, and every run's outcome,
into SHA-256. Two checkouts that print the same hash made the same decisions, tick for tick.

    .venv/bin/python bench/twin_fingerprint.py [--start-every-hours 6]

Prints the hash, the runs and ticks it covers, and the seconds it took (the twin's speed, best of
``--repeat``, beside a fixed pure-Python loop so two hosts' figures compare).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from enum import Enum
from typing import Any

import numpy as np
from twin import (
    BOOT_SECONDS,
    JOBS,
    LOAD_SECONDS,
    NODES,
    ON_DEMAND_PER_HOUR,
    SPEED_GROUP,
    SPOT_PER_HOUR,
    WRITE_SECONDS,
    host_reference,
)

from spotgpu.economics.estimate import aligned_availability, aligned_counts
from spotgpu.models.ladder import default_ladder
from spotgpu.simulation.compare import start_grid
from spotgpu.simulation.ladder import twin_job, workload_for
from spotgpu.simulation.replay import Job
from spotgpu.simulation.twin import TwinCloud, run_twin, twin_job_for, twin_plan, zone_groups
from spotgpu.traces import all_groups, load_group

#: The outcome fields hashed (a field added later must not change the hash of the same decisions).
OUTCOME = ("start", "finish_seconds", "cost_usd", "met", "spot_hours", "on_demand_hours", "lost_work_hours",
           "interruptions", "gang_losses", "restarts", "ticks", "deferrals", "failures_by_reason", "steps_reached",
           "removals")


def _plain(value: Any) -> Any:
    """A JSON-able form that names no class (a renamed class must not change the hash; its fields must)."""
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"_": type(value).__name__, **{f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, set | frozenset) else items
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, np.generic):
        return _plain(value.item())
    return value


def _runs(every: float) -> list[Callable[[Callable[..., None]], Any]]:
    """Each run as a function of the per-tick callback, returning the run's result."""
    runs: list[Callable[[Callable[..., None]], Any]] = []
    speed_traces = load_group(SPEED_GROUP)
    zones = [t.zone for t in speed_traces]
    data = [t.data for t in speed_traces]
    speed_gap = speed_traces[0].gap_seconds
    hours = min(len(d) for d in data) * speed_gap / 3600
    job = Job(work_hours=0.6 * hours, deadline_hours=hours - 1, interval_seconds=1336,
              checkpoint_write_seconds=WRITE_SECONDS, restart_seconds=BOOT_SECONDS + LOAD_SECONDS,
              load_seconds=LOAD_SECONDS, spot_per_hour=SPOT_PER_HOUR, on_demand_per_hour=ON_DEMAND_PER_HOUR)  # fmt: skip
    workload = workload_for(job)
    ladder = default_ladder(SPOT_PER_HOUR, ON_DEMAND_PER_HOUR)
    for home in range(len(zones)):
        def speed_run(on_tick: Callable[..., None], home: int = home) -> Any:
            groups, index = zone_groups(zones, home, 1)
            plan = twin_plan(workload, ladder, groups, start=0.0, interval_seconds=1336)
            cloud = TwinCloud(plan, twin_job_for(workload, 1336), {n: data[i] for n, i in index.items()}, speed_gap, 0.0)
            return run_twin(plan, cloud, horizon_seconds=hours * 3600, on_tick=on_tick)
        runs.append(speed_run)
    for group in all_groups():
        traces = load_group(group)
        nodes = NODES[group.split("/")[0]]
        avail, counts = aligned_availability(traces, nodes), aligned_counts(traces)
        names, gap = [t.zone for t in traces], traces[0].gap_seconds
        rows = [np.ascontiguousarray(counts[i]) for i in range(counts.shape[0])]
        for work, deadline in JOBS:
            cell = Job(work_hours=work, deadline_hours=deadline, interval_seconds=1800,
                       checkpoint_write_seconds=WRITE_SECONDS, restart_seconds=BOOT_SECONDS + LOAD_SECONDS,
                       load_seconds=LOAD_SECONDS, spot_per_hour=SPOT_PER_HOUR, on_demand_per_hour=ON_DEMAND_PER_HOUR,
                       nodes=nodes)  # fmt: skip
            starts = start_grid(avail.shape[1], gap, 2 * deadline, every)
            for i, start in enumerate(starts):
                def cell_run(on_tick: Callable[..., None], start: int = int(start), home: int = i % len(names),
                             cell: Job = cell, names: list[str] = names, rows: list[Any] = rows, gap: float = gap) -> Any:
                    groups, index = zone_groups(names, home, cell.nodes)
                    t0 = float(start) * gap
                    plan = twin_plan(workload_for(cell), ladder, groups, start=t0, interval_seconds=cell.interval_seconds)
                    cloud = TwinCloud(plan, twin_job(cell), {n: rows[j] for n, j in index.items()}, gap, t0)
                    return run_twin(plan, cloud, horizon_seconds=2.0 * cell.deadline_hours * 3600.0, on_tick=on_tick)
                runs.append(cell_run)
    return runs


def fingerprint(every: float) -> tuple[str, int, int]:
    """(SHA-256 hex, runs, ticks) over every tick's decisions and every run's outcome."""
    digest, ticks = hashlib.sha256(), 0
    runs = _runs(every)
    for run in runs:
        def on_tick(now: float, _obs: Any, _state: Any, result: Any) -> None:
            nonlocal ticks
            ticks += 1
            tick = {"now": now, "actions": list(result.actions), "events": [(e.kind, e.data) for e in result.events],
                    "step": result.step.kind if result.step is not None else None}  # fmt: skip
            digest.update(json.dumps(_plain(tick), sort_keys=True, default=str).encode())

        outcome = run(on_tick)
        kept = {name: getattr(outcome, name) for name in OUTCOME}
        digest.update(json.dumps(_plain(kept), sort_keys=True, default=str).encode())
    return digest.hexdigest(), len(runs), ticks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-every-hours", type=float, default=6.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    best, found = float("inf"), ("", 0, 0)
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        found = fingerprint(args.start_every_hours)
        best = min(best, time.perf_counter() - t0)
    digest, runs, ticks = found
    ref = host_reference(args.repeat)
    print(f"twin fingerprint {digest}")
    print(f"{runs} runs, {ticks} controller ticks; {best:.2f} s best of {args.repeat} "
          f"({best / ref:.1f} host references of {ref:.3f} s)")


if __name__ == "__main__":
    main()
