"""The cost model beside the replay of each pool's ladder, before and after fitting its figures; what the replay
adds to the preview; and the GPU speed prior beside measured speeds.

usage: python bench/model_vs_twin.py [--stack prod] [--repeat 3] [--telemetry LOGS...]

1. **Model vs replay, per pool with traces** (``spotgpu.simulation.check``, the preview's own check): the
   model's expected spot cost (``spotgpu cost --stack S --pool P``) beside the controller's ladder replayed
   through the twin on the traces of the pool's zones (``simulate --stack S --pool P``, one job every 24 h
   in each pool zone), *before* (the figures the stack typed until issue 35: prod 0.08 interruptions per
   node-hour and a 900 s wait, dev 0.1 and 600 s, no gang rate) and *after* (the stack's figures, fitted
   from the traces by the command in its comment); the rest of the stack (prices, ladder) as it ships.
   Goal: within 15 % of each other, and the same verdict.
2. **What the replay adds to the preview**: the economics of every pool alone, and with the replay check,
   in this process (cold: the replay cache cleared), best of ``--repeat``; a pool on a cloud without traces
   adds nothing ("model only").
3. **Speed prior vs measured**: each GPU model's measured ``relativeThroughput`` in ``--telemetry`` (the
   agents' ``throughput`` records, ``profile fit``'s fit) beside its spec prior against the same reference.
   Without telemetry of at least two GPU models there is nothing to compare, and the bench says so.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: The figures each stack typed before issue 35 (stacks/Pulumi.<stack>.yaml at 1ddab64), guesses the traces contradict.
BEFORE = {
    "prod": {"interruptions_per_hour": 0.08, "expected_reacquisition_seconds": 900.0, "gang_interruptions_per_hour": None},
    "dev": {"interruptions_per_hour": 0.1, "expected_reacquisition_seconds": 600.0, "gang_interruptions_per_hour": None},
}


def _with_figures(config: Any, figures: dict[str, Any]) -> Any:
    workloads = {k: w.model_copy(update=figures) for k, w in config.workloads.items()}
    return config.model_copy(update={"workloads": workloads})


def model_vs_replay(stack: str) -> list[dict[str, Any]]:
    from spotgpu.economics.report import load_stack
    from spotgpu.simulation.check import check_pool, clouds_with_traces

    config = load_stack(stack, REPO)
    rows = []
    for label, cfg in (("before", _with_figures(config, BEFORE[stack])), ("after", config)):
        for pool in cfg.pools:
            if pool.cloud not in clouds_with_traces():
                continue
            started = time.perf_counter()
            check = check_pool(cfg, pool)
            replay = check.replay
            assert replay is not None and replay.groups
            workload = cfg.workloads[pool.workload]
            rows.append({
                "when": label, "pool": pool.name, "rate": workload.interruptions_per_hour,
                "gang": workload.gang_interruptions_per_hour, "wait": workload.expected_reacquisition_seconds,
                "model": check.model_usd, "replay": replay.mean("ladder_usd"), "ratio": check.ratio,
                "modelEligible": check.model_eligible, "replayEligible": replay.eligible, "jobs": replay.jobs,
                "status": check.status, "driver": check.driver.key if check.driver else "-",
                "seconds": time.perf_counter() - started,
            })  # fmt: skip
    return rows


def preview_cost(stack: str, repeat: int) -> dict[str, float]:
    """Seconds for every pool's economics alone, and with the replay check (its cache cleared each time)."""
    from spotgpu.economics.report import load_stack, stack_economics
    from spotgpu.simulation import check

    config = load_stack(stack, REPO)
    alone, replayed = math.inf, math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        stack_economics(config)
        alone = min(alone, time.perf_counter() - t0)
        check._replay_cached.cache_clear()
        t0 = time.perf_counter()
        stack_economics(config)
        check.check_stack(config)
        replayed = min(replayed, time.perf_counter() - t0)
    return {"economics": alone, "withReplay": replayed, "added": replayed - alone}


def speed_priors(telemetry: list[str]) -> list[str]:
    from spotgpu.catalogue import spec_prior
    from spotgpu.economics.measured import fit_files

    speeds = fit_files(telemetry).fit.gpu_speeds()
    if speeds.reference is None or len(speeds.speeds) < 2:
        return [f"speed prior vs measured: nothing to compare ({speeds.basis})"]
    lines = [f"| GPU model | measured vs {speeds.reference} | spec prior | prior / measured |", "|---|---:|---:|---:|"]
    for model, measured in sorted(speeds.speeds.items()):
        prior = spec_prior(model, speeds.reference)
        p = "-" if prior is None else f"{prior.speed:.3g}"
        r = "-" if prior is None else f"{prior.speed / measured:.2f}"
        lines.append(f"| {model} | {measured:.3g} | {p} | {r} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--telemetry", nargs="*", default=[], metavar="LOGS",
                        help="agent logs with throughput records of at least two GPU models of one job")  # fmt: skip
    args = parser.parse_args()

    rows = model_vs_replay(args.stack)
    print(f"1. stack {args.stack}: the model beside the replay (one job every 24 h in each pool zone)")
    print("| figures | pool | interruptionsPerHour | gang/h | wait s | model spot $ | replay spot $ | replay/model | "
          "model verdict | replay verdict | within 15 % | same verdict | check | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|---|---:|")
    for r in rows:
        within = r["ratio"] is not None and abs(r["ratio"] - 1) <= 0.15
        verdict = {True: "SPOT-ELIGIBLE", False: "not eligible"}
        print(f"| {r['when']} | {r['pool']} | {r['rate']:g} | {'-' if r['gang'] is None else format(r['gang'], 'g')} | "
              f"{r['wait']:g} | {r['model']:,.2f} | {r['replay']:,.2f} | {r['ratio']:.2f} | {verdict[r['modelEligible']]} "
              f"| {verdict[r['replayEligible']]} | {'yes' if within else 'NO'} | "
              f"{'yes' if r['modelEligible'] == r['replayEligible'] else 'NO'} | {r['status']}"
              f"{'' if r['driver'] == '-' else ' (' + r['driver'] + ')'} | {r['seconds']:.1f} |")  # fmt: skip
    cost = preview_cost(args.stack, args.repeat)
    print(f"\n2. what the replay adds to `spotgpu preview --stack {args.stack}` (best of {args.repeat}, in process, cold "
          "replay cache):")
    print("| part | seconds |\n|---|---:|")
    print(f"| every pool's economics (the model) | {cost['economics']:.3f} |")
    print(f"| the same with the replay check | {cost['withReplay']:.2f} |")
    print(f"| added by the replay | {cost['added']:.2f} |")
    print("\n3. " + "\n".join(speed_priors(args.telemetry)) if args.telemetry else
          "\n3. speed prior vs measured: no --telemetry given; this host has no GPU, so the local drill measures no GPU "
          "model to set beside a spec prior (pass the agents' logs of a job run on two GPU models)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
