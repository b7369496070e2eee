"""Benchmark the fallback controller: one tick over 100 pools, and a 45-day trace replay.

    .venv/bin/python bench/controller.py [--pools 100] [--ticks 20] [--days 45]

Each measurement runs side by side with a baseline in the same process:
* tick: ``Controller.tick`` over N simulated pools vs an observe-only tick (same
  simulated clouds, same record load/save, no planning, no actions);
* replay: the planner + simulated cloud over the full 1-node trace (195 s ticks)
  vs iterating the raw trace arrays tick by tick.
It also prints what each recovery strategy achieved on the 45-day replay.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from spotgpu.controller.sim import SimCloud, replay

from spotgpu.controller.config import ControllerConfig, GroupSpec
from spotgpu.controller.observe import PoolObservation
from spotgpu.controller.plan import PoolPlan, TickResult
from spotgpu.controller.runner import RECORD_KEY, Controller
from spotgpu.controller.state import PoolState
from spotgpu.controller.store import MemoryJsonStore
from spotgpu.controller.strategies import make_strategy
from spotgpu.models.ladder import FallbackLadder
from spotgpu.models.pools import Capacity
from spotgpu.models.workload import FALLBACK_POLICIES, WorkloadProfile
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


def _sim(name: str, traces: list[Trace], i: int, target: int) -> SimCloud:
    pick = [traces[(i + k) % len(traces)] for k in range(3)]
    return SimCloud(
        name,
        {
            "spot": pick[0].data * target,
            "spot-zone": pick[1].data * target,
            "spot-sku": pick[2].data * target,
            "fallback": None,
        },
        traces[0].gap_seconds,
        initial={"spot": target},
    )


def _timed(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def bench_tick(pools: int, ticks: int, traces: list[Trace]) -> tuple[float, float]:
    config = _config(pools)
    sims = {p.name: _sim(p.name, traces, i, 4) for i, p in enumerate(config.pools)}
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


#: The replayed job: 900 h of work due in 1000 h (it starts at trace time 0).
REPLAY_JOB = {"workHours": 900, "deadlineHours": 1000}


def _plan(policy: str) -> PoolPlan:
    return PoolPlan(
        name="replay",
        groups=tuple(GroupSpec.model_validate(g) for g in GROUPS),
        capacity=Capacity(target=1, max=2),
        workload=WorkloadProfile.model_validate({**WORKLOAD, **REPLAY_JOB, "fallbackPolicy": policy}),
        strategy=make_strategy(policy, FallbackLadder.model_validate(LADDER)),
        job_started_at=0.0,
    )


def bench_replay(traces: list[Trace], days: float) -> tuple[float, float, dict[str, dict[str, float]]]:
    gap = traces[0].gap_seconds
    end = min(days * 86400.0, len(traces[0].data) * gap)
    outcomes: dict[str, dict[str, float]] = {}
    t_replay = 0.0
    for policy in FALLBACK_POLICIES:
        plan = _plan(policy)
        sim = _sim("replay", traces, 0, 1)  # primary: us-east-1a, the scarcest zone
        spot_hours, finished = [0.0], [float("nan")]

        def count(
            now: float,
            obs: PoolObservation,
            state: PoolState,
            result: TickResult,
            spot_hours: list[float] = spot_hours,
            finished: list[float] = finished,
        ) -> None:
            spot_hours[0] += (
                sum(len(g.ready) * (1.4 if n == "spot-sku" else SPOT) for n, g in obs.groups.items() if n != "fallback")
                * gap
                / 3600
            )
            if finished[0] != finished[0] and state.work_done_hours >= REPLAY_JOB["workHours"]:
                finished[0] = now / 3600

        t0 = time.perf_counter()
        report = replay(plan, sim, 0.0, end, gap, count)
        elapsed = time.perf_counter() - t0
        if policy == "ladder":
            t_replay = elapsed
        lat = sorted(report.reacquisition_seconds)
        hours = end / 3600
        outcomes[policy] = {
            "ticks": report.ticks,
            "reacquisitions": len(lat),
            "p50_reacq_s": lat[len(lat) // 2] if lat else 0.0,
            "p90_reacq_s": lat[int(len(lat) * 0.9)] if lat else 0.0,
            "fallback_h": report.fallback_node_seconds / 3600,
            "cost_usd": spot_hours[0] + report.fallback_cost_usd,
            "od_only_usd": hours * OD,
            "capacity_failures": report.failures_by_reason.get("capacity", 0),
            "job_done_at_h": finished[0],
            "seconds": elapsed,
        }

    def raw() -> None:
        arrays = [traces[k].data for k in range(3)]
        total = 0
        for i in range(int(end // gap)):
            total += int(arrays[0][i]) + int(arrays[1][i]) + int(arrays[2][i])

    t_raw = _timed(raw, 3)
    return t_replay, t_raw, outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--days", type=float, default=45.0)
    args = parser.parse_args()
    traces = load_group("1-node/aws-02-15-2023")

    t_tick, t_obs = bench_tick(args.pools, args.ticks, traces)
    t_replay, t_raw, outcomes = bench_replay(traces, args.days)
    ticks = outcomes["ladder"]["ticks"]
    print(f"\n{'measurement':<44}{'time':>12}{'baseline':>12}{'ratio':>8}")
    print(
        f"{f'one tick, {args.pools} pools (median of {args.ticks})':<44}{t_tick * 1e3:>10.1f}ms{t_obs * 1e3:>10.1f}ms{t_tick / t_obs:>8.2f}"
    )
    print(f"{'  baseline: observe-only tick, same record I/O':<44}")
    print(
        f"{f'{args.days:g}-day replay, ladder ({ticks:.0f} ticks)':<44}{t_replay:>11.2f}s{t_raw:>11.3f}s{t_replay / t_raw:>8.1f}"
    )
    print(f"{'  baseline: raw iteration of the 3 traces':<44}")
    print(f"{'  per replayed tick':<44}{t_replay / ticks * 1e6:>10.1f}us")
    print(f"\n{args.days:g}-day replay, 1 node, primary us-east-1a (17% available), spot ${SPOT}/h, on-demand ${OD}/h")
    print(
        f"job: {REPLAY_JOB['workHours']} h of work due {REPLAY_JOB['deadlineHours']} h after the trace starts; "
        "job_done_at_h is when the 900th hour of work completed"
    )
    cols = (
        "reacquisitions",
        "p50_reacq_s",
        "p90_reacq_s",
        "fallback_h",
        "cost_usd",
        "od_only_usd",
        "capacity_failures",
        "job_done_at_h",
    )
    print(f"{'strategy':<18}" + "".join(f"{c:>18}" for c in cols) + f"{'saving':>10}")
    for policy, o in outcomes.items():
        saving = 1 - o["cost_usd"] / o["od_only_usd"]
        print(f"{policy:<18}" + "".join(f"{o[c]:>18.1f}" for c in cols) + f"{saving:>9.0%}")


if __name__ == "__main__":
    main()
