"""Benchmark one controller tick over 100 pools (the twin as their clouds).

    .venv/bin/python bench/controller.py [--pools 100] [--ticks 20]

Side by side with a baseline in the same process: ``Controller.tick`` over N
pools, each a digital twin (``spotgpu.simulation.twin``) on the 1-node traces, vs
an observe-only tick (same clouds, same record load/save, no planning, no
actions). Trace replays of the planner (cost, deadlines, speed) are in
``bench/twin.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from spotgpu.contract.state_store import MemoryJsonStore
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.reconcile import PoolPlan
from spotgpu.controller.runner import RECORD_KEY, Controller, build_plans
from spotgpu.simulation.twin import TwinCloud, twin_job_for
from spotgpu.traces import Trace, load_group

SPOT, OD = 0.92, 3.06  # p3.2xlarge-like USD/h
WORKLOAD = {
    "checkpointBytes": 16_000_000_000,
    "checkpointWriteSeconds": 60,
    "checkpointLoadSeconds": 45,
    "restartSeconds": 240,
    "expectedReacquisitionSeconds": 900,
    "interruptionsPerHour": 0.2,
    "workHours": 24,
    "fallbackPolicy": "ladder",
    "prices": {"spotPerHour": SPOT, "onDemandPerHour": OD},
}
LADDER = {
    "steps": [
        {"kind": "same_pool", "maxWaitSeconds": 900, "costCeilingPerHour": 1.5},
        {"kind": "alternate_zone", "maxWaitSeconds": 900, "costCeilingPerHour": 1.5},
        {"kind": "alternate_sku", "maxWaitSeconds": 900, "costCeilingPerHour": 2.0},
        {"kind": "on_demand", "maxWaitSeconds": 7200, "costCeilingPerHour": 3.5},
        {"kind": "queue_defer", "maxWaitSeconds": 86400, "costCeilingPerHour": 0},
    ]
}
GROUPS = [
    {"name": "spot", "role": "same_pool"},
    {"name": "spot-zone", "role": "alternate_zone"},
    {"name": "spot-sku", "role": "alternate_sku", "pricePerHour": 1.4},
    {"name": "fallback", "role": "on_demand"},
]


def _config(pools: int) -> ControllerConfig:
    return ControllerConfig.model_validate(
        {
            "stateUrl": "file:///tmp/bench-unused",
            "workloads": {"w": WORKLOAD},
            "ladders": {"l": LADDER},
            "pools": [
                {
                    "cloud": "aws",
                    "name": f"pool-{i:03d}",
                    "region": "us-east-1",
                    "workload": "w",
                    "ladder": "l",
                    "capacity": {"target": 4, "max": 8},
                    "groups": GROUPS,
                }
                for i in range(pools)
            ],
        }
    )


def _sim(plan: PoolPlan, traces: list[Trace], i: int, target: int) -> TwinCloud:
    pick = [traces[(i + k) % len(traces)] for k in range(3)]
    data = {"spot": pick[0].data * target, "spot-zone": pick[1].data * target, "spot-sku": pick[2].data * target}
    return TwinCloud(plan, twin_job_for(plan.workload, plan.checkpoint_interval_seconds), data, traces[0].gap_seconds, 0.0)


def _timed(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def bench_tick(pools: int, ticks: int, traces: list[Trace]) -> tuple[float, float]:
    config = _config(pools)
    plans = build_plans(config)
    sims = {p.name: _sim(plans[p.name], traces, i, 4) for i, p in enumerate(config.pools)}
    store = MemoryJsonStore()
    controller = Controller(config, sims, store)
    clock = [86400.0 * 3]

    def tick() -> None:
        clock[0] += 30.0
        controller.tick(clock[0])

    def observe_only() -> None:
        clock[0] += 30.0
        store.get(RECORD_KEY)
        for sim in sims.values():
            sim.observe(clock[0])
        store.put(RECORD_KEY, store.get(RECORD_KEY) or {})

    for _ in range(3):  # warm up: the first ticks open episodes and size groups
        tick()
    t_tick, t_base = [], []
    for _ in range(ticks):  # interleave so both see the same machine load
        t_tick.append(_timed(tick, 1))
        t_base.append(_timed(observe_only, 1))
    return statistics.median(t_tick), statistics.median(t_base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args()
    traces = load_group("1-node/aws-02-15-2023")

    t_tick, t_obs = bench_tick(args.pools, args.ticks, traces)
    print(f"\n{'measurement':<44}{'time':>12}{'baseline':>12}{'ratio':>8}")
    print(
        f"{f'one tick, {args.pools} pools (median of {args.ticks})':<44}{t_tick * 1e3:>10.1f}ms{t_obs * 1e3:>10.1f}ms{t_tick / t_obs:>8.2f}"
    )
    print(f"{'  baseline: observe-only tick, same record I/O':<44}")


if __name__ == "__main__":
    main()
