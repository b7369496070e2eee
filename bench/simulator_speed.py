"""How fast the simulator replays 45 days of the 1-node traces at trace resolution across 9 zones.

Two workloads over the whole 45.5-day, 9-zone group (195 s ticks):

* ``one long job per zone``: a job that runs across the whole trace, once with
  each zone as home (9 jobs; the ladder may use every zone): 20 000 ticks in sequence;
* ``a job every hour``: 36 h jobs with a 72 h deadline starting every hour of the
  trace from every zone (about 9 800 jobs, the whole trace covered many times).

Each is timed vectorised (the whole batch at once) and, side by side in the same
run, as the baseline: the same jobs replayed one at a time (for the hourly case,
a 1-in-100 sample scaled up). The long job is also timed stepping every tick
(no quiet-stretch jumps). The target is 2 s or less for the vectorised runs.

    .venv/bin/python bench/simulator_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from spotgpu.economics.compare import default_ladder, start_grid
from spotgpu.economics.estimate import aligned_availability
from spotgpu.economics.policies import LadderPolicy, UniformProgress
from spotgpu.economics.simulator import Job, Policy, replay
from spotgpu.traces import load_group

GROUP = "1-node/aws-02-15-2023"


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    traces = load_group(GROUP)
    avail = aligned_availability(traces)
    gap = traces[0].gap_seconds
    zones, ticks = avail.shape
    days = ticks * gap / 86400
    ladder = default_ladder(0.918, 3.06)
    policies: list[Callable[[], Policy]] = [lambda: LadderPolicy(ladder), UniformProgress]

    trace_hours = ticks * gap / 3600
    long_job = Job(work_hours=0.6 * trace_hours, deadline_hours=trace_hours - 1, interval_seconds=1336,
                   checkpoint_write_seconds=75, restart_seconds=390, spot_per_hour=0.918, on_demand_per_hour=3.06)  # fmt: skip
    hourly_job = Job(work_hours=36, deadline_hours=72, interval_seconds=1336, checkpoint_write_seconds=75,
                     restart_seconds=390, spot_per_hour=0.918, on_demand_per_hour=3.06)  # fmt: skip
    hourly = start_grid(ticks, gap, 72, every_hours=1)
    h_starts, h_homes = np.tile(hourly, zones), np.repeat(np.arange(zones), len(hourly))
    sample = slice(None, None, 100)

    print(f"{GROUP}: {zones} zones x {ticks} ticks of {gap} s = {days:.1f} days; cpus={os.cpu_count()}, "
          f"load={os.getloadavg()[0]:.1f}")  # fmt: skip
    head = f"{'workload':<24}{'policy':<18}{'jobs':>7}{'vectorised s':>14}{'one-by-one s':>14}{'speed-up':>10}"
    print(head)
    print("-" * len(head))
    for make in policies:
        name = make().name

        def long_vec(make: Callable[[], Policy] = make) -> object:
            return replay(make(), long_job, avail, gap, np.zeros(zones, dtype=np.int64), np.arange(zones),
                          max_hours=trace_hours)  # fmt: skip

        def long_seq(make: Callable[[], Policy] = make) -> object:
            return [replay(make(), long_job, avail, gap, np.array([0]), np.array([z]), max_hours=trace_hours)
                    for z in range(zones)]  # fmt: skip

        def long_ticks(make: Callable[[], Policy] = make) -> object:
            return replay(make(), long_job, avail, gap, np.zeros(zones, dtype=np.int64), np.arange(zones),
                          max_hours=trace_hours, jump=False)  # fmt: skip

        def hour_vec(make: Callable[[], Policy] = make) -> object:
            return replay(make(), hourly_job, avail, gap, h_starts, h_homes)

        def hour_seq(make: Callable[[], Policy] = make) -> object:
            s, h = h_starts[sample], h_homes[sample]
            return [replay(make(), hourly_job, avail, gap, s[i : i + 1], h[i : i + 1]) for i in range(len(s))]

        lv, ls, lt = best_of(args.repeat, long_vec), best_of(1, long_seq), best_of(1, long_ticks)
        hv = best_of(args.repeat, hour_vec)
        hs = best_of(1, hour_seq) * len(h_starts) / len(h_starts[sample])
        print(f"{'one long job per zone':<24}{name:<18}{zones:>7}{lv:>14.2f}{ls:>14.2f}{ls / lv:>9.1f}x")
        print(f"{'  same, tick by tick':<24}{name:<18}{zones:>7}{lt:>14.2f}{'':>14}{lt / lv:>9.1f}x slower")
        print(f"{'a job every hour':<24}{name:<18}{len(h_starts):>7}{hv:>14.2f}{hs:>14.1f}{hs / hv:>9.0f}x")


if __name__ == "__main__":
    main()
