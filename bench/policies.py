"""Policies across every shared trace: cost relative to on-demand only, and deadlines met.

For each trace group, each zone in turn is the home zone, jobs start every
``--start-every-hours`` across the trace, and each (work, deadline) pair below is
replayed under every policy with the same checkpoint interval (the project's
hazard-aware choice: the interval keeping the most work under the Kaplan-Meier
survival of that group's spot runs). A second table replays the ladder under
other interval choices; "OD could" is the share of deadlines that on-demand
itself meets with that interval (a short interval's stalls can make a tight
deadline infeasible for every policy). The on-demand-only replay of the
same jobs is the baseline (ratio 1.0), run side by side in the same process.

Also reported: the ladder restricted to its home zone ("single zone"), so the
deadline logic can be compared with Uniform Progress on equal capacity.

    .venv/bin/python bench/policies.py [--start-every-hours 24] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np

from spotgpu.economics.compare import compare, default_ladder, start_grid
from spotgpu.economics.estimate import aligned_availability, estimate_from_traces
from spotgpu.economics.hazard import hazard_optimal_interval
from spotgpu.economics.interval import daly_interval
from spotgpu.economics.policies import FixedWait, LadderPolicy, OnDemandOnly, UniformProgress
from spotgpu.economics.simulator import Job, Policy
from spotgpu.traces import all_groups, load_group

#: p3.2xlarge (1x V100, the traced type) in us-east-1: on-demand list price; spot at ~30% of it.
ON_DEMAND_PER_HOUR = 3.06
SPOT_PER_HOUR = 0.918
#: Checkpoint and restart figures of the prod llm-finetune workload.
WRITE_SECONDS, LOAD_SECONDS, BOOT_SECONDS = 75.0, 90.0, 300.0
#: (work hours, deadline hours): tight to loose slack, as in the Can't Be Late evaluation.
JOBS = ((48.0, 52.0), (48.0, 64.0), (36.0, 72.0), (24.0, 36.0), (12.0, 16.0))
#: A gang of this many nodes per group (16-node traces count how many of 16 were held).
NODES = {"1-node": 1, "16-node": 16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-every-hours", type=float, default=24.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    totals: dict[str, list[tuple[float, ...]]] = defaultdict(list)  # policy -> (cost, od cost, met) per job
    interval_totals: dict[str, list[tuple[float, ...]]] = defaultdict(list)
    detail: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for group in all_groups():
        traces = load_group(group)
        nodes = NODES[group.split("/")[0]]
        avail = aligned_availability(traces, nodes)
        gap = traces[0].gap_seconds
        fit = estimate_from_traces(traces, nodes)
        weibull_interval = hazard_optimal_interval(WRITE_SECONDS, BOOT_SECONDS + LOAD_SECONDS, fit.run_model)
        interval = hazard_optimal_interval(WRITE_SECONDS, BOOT_SECONDS + LOAD_SECONDS, fit.run_survival)
        daly = daly_interval(WRITE_SECONDS, 3600.0 / fit.interruptions_per_hour)
        ladder = default_ladder(SPOT_PER_HOUR, ON_DEMAND_PER_HOUR)
        for work, deadline in JOBS:
            job = Job(
                work_hours=work, deadline_hours=deadline, interval_seconds=interval,
                checkpoint_write_seconds=WRITE_SECONDS, restart_seconds=BOOT_SECONDS + LOAD_SECONDS,
                spot_per_hour=SPOT_PER_HOUR, on_demand_per_hour=ON_DEMAND_PER_HOUR, nodes=nodes,
            )  # fmt: skip
            starts = start_grid(avail.shape[1], gap, deadline, args.start_every_hours)
            zones = avail.shape[0]
            st, homes = np.tile(starts, zones), np.repeat(np.arange(zones), len(starts))
            policies: list[Policy] = [OnDemandOnly(), FixedWait(1800), UniformProgress(), LadderPolicy(ladder)]
            rows, replays = compare(job, avail, gap, st, homes, policies)
            od_cost = replays[0].total_cost
            for r in replays:
                totals[r.policy].extend(zip(r.total_cost, od_cost, r.met, strict=True))
            # the ladder on its home zone only: same deadline logic, same capacity as Uniform Progress
            single = LadderPolicy(ladder)
            single.name = "spotgpu ladder (home zone only)"
            for z in range(zones):
                sel = homes == z
                _, (rep,) = compare(job, avail[z : z + 1], gap, st[sel], np.zeros(sel.sum(), dtype=np.int64), [single])
                totals[single.name].extend(zip(rep.total_cost, od_cost[sel], rep.met, strict=True))
            # the same ladder under other checkpoint intervals: does the hazard-aware choice pay?
            # "as measured": the MTBI the ladder's own jobs saw (what telemetry would report)
            ours = replays[-1].state
            seen_mtbi = float(ours.spot_seconds.sum()) / max(1, int(ours.preemptions.sum()))
            choices = {"daly (trace-wide rate)": daly, "hazard (weibull)": weibull_interval,
                       "hazard (kaplan-meier, chosen)": interval,
                       "daly (MTBI the ladder saw)": daly_interval(WRITE_SECONDS, seen_mtbi),
                       "chosen x 0.5": interval * 0.5, "chosen x 2": interval * 2}  # fmt: skip
            for label, t_int in choices.items():
                alt = replace(job, interval_seconds=t_int)
                _, (od_alt, rep) = compare(alt, avail, gap, st, homes, [OnDemandOnly(), LadderPolicy(ladder)])
                interval_totals[label].extend(zip(rep.total_cost, od_cost, rep.met, od_alt.met, strict=True))
            detail.append({"group": group, "workHours": work, "deadlineHours": deadline, "nodes": nodes,
                           "intervalSeconds": round(interval), "rows": [r.to_dict() for r in rows]})  # fmt: skip
    elapsed = time.perf_counter() - t0

    table = _summarise(totals)
    intervals = _summarise(interval_totals)
    if args.json:
        print(json.dumps({"summary": table, "intervals": intervals, "detail": detail, "seconds": elapsed}, indent=2))
        return
    print(f"{'policy':<34}{'jobs':>7}{'cost vs OD':>12}{'worst job':>11}{'deadlines met':>15}")
    for row in table:
        print(
            f"{row['policy']:<34}{row['jobs']:>7}{row['costVsOnDemand']:>12.3f}"
            f"{row['worstJobVsOnDemand']:>11.3f}{row['deadlinesMet']:>15.1%}"
        )
    print(f"\n(on-demand only = 1.000 baseline, same jobs; {elapsed:.1f} s)")
    print(
        f"\n{'spotgpu ladder, interval':<34}{'jobs':>7}{'cost vs OD':>12}{'worst job':>11}{'deadlines met':>15}"
        f"{'OD could':>10}"
    )
    for row in intervals:
        print(
            f"{row['policy']:<34}{row['jobs']:>7}{row['costVsOnDemand']:>12.3f}"
            f"{row['worstJobVsOnDemand']:>11.3f}{row['deadlinesMet']:>15.1%}{row['onDemandMet']:>10.1%}"
        )
    print("\nper (group, work h, deadline h): cost vs OD / deadlines met")
    for d in detail:
        cells = "  ".join(
            f"{r['policy'].split(',')[0]}={r['relativeCost']:.3f}/{r['deadlinesMet']:.0%}" for r in d["rows"]
        )
        print(f"  {d['group']:<24}{d['workHours']:>4g}/{d['deadlineHours']:<4g} T={d['intervalSeconds']}s  {cells}")


def _summarise(totals: dict[str, list[tuple[float, ...]]]) -> list[dict[str, Any]]:
    table = []
    for policy, vals in totals.items():
        arr = np.array(vals, dtype=float)
        cost, od, met = arr[:, 0], arr[:, 1], arr[:, 2]
        table.append(
            {
                "policy": policy,
                "jobs": len(vals),
                "costVsOnDemand": float(cost.sum() / od.sum()),
                "worstJobVsOnDemand": float((cost / od).max()),
                "deadlinesMet": float(met.mean()),
            }
        )
        if arr.shape[1] > 3:  # deadlines on-demand itself meets with this interval (the feasible share)
            table[-1]["onDemandMet"] = float(arr[:, 3].mean())
    return table


if __name__ == "__main__":
    main()
