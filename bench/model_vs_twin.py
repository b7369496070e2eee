"""The cost model's expected cost beside the twin's mean, per pool of a stack, on the pool's own topology.

usage: python bench/model_vs_twin.py [--stack prod] [--trace-group 1-node/aws-02-15-2023]
                                      [--start-every-hours 72]

For each pool: ``spotgpu cost --stack S --pool P --json`` (the closed-form model: the pool's
prices, ladder, notice, and its profile's interruption rate) and ``spotgpu simulate --stack S
--pool P --json`` (the controller's planner through the digital twin on the spot traces, the
pool's zones mapped onto traced zones). Prints both totals side by side and their ratio, for
spot (the model's spot total vs the ladder's mean) and for on-demand (the model's on-demand
total vs the replayed on-demand-only mean, which also pays checkpoint stalls and one start).

The two are not expected to agree: the model takes the profile's ``interruptionsPerHour``, the
twin takes what the traces did. The ratio says how far the profile's rate is from the traces'.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "spotgpu", *args], capture_output=True, text=True, cwd=REPO, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"spotgpu {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--trace-group", default="1-node/aws-02-15-2023")
    parser.add_argument("--start-every-hours", default="72")
    args = parser.parse_args()
    import yaml

    doc = yaml.safe_load((REPO / "stacks" / f"Pulumi.{args.stack}.yaml").read_text())
    pools = [p["name"] for p in doc["config"]["spotgpu:pools"]]
    rows = []
    for pool in pools:
        started = time.perf_counter()
        model = cli("cost", "--stack", args.stack, "--pool", pool, "--json")
        sim = cli("simulate", "--stack", args.stack, "--pool", pool, "--trace-group", args.trace_group,
                  "--start-every-hours", args.start_every_hours, "--json")  # fmt: skip
        group = sim["groups"][0]
        by_policy = {r["policy"]: r for r in group["rows"]}
        ladder, od = by_policy["spotgpu ladder"], by_policy["on-demand only"]
        rows.append((pool, group["topology"]["traceZones"], ladder["jobs"], model["spotTotalUsd"], ladder["meanCostUsd"],
                     model["onDemandTotalUsd"], od["meanCostUsd"], ladder["deadlinesMet"], time.perf_counter() - started))  # fmt: skip
    print(f"stack {args.stack}, trace group {args.trace_group}, a job every {args.start_every_hours} h in each pool zone")
    print("| pool | traced zones | jobs | model spot $ | twin ladder $ | twin/model | model on-demand $ | twin on-demand $ "
          "| twin/model | ladder deadlines met | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pool, zones, jobs, m_spot, t_spot, m_od, t_od, met, secs in rows:
        print(f"| {pool} | {', '.join(zones)} | {jobs} | {m_spot:,.2f} | {t_spot:,.2f} | {t_spot / m_spot:.2f} | "
              f"{m_od:,.2f} | {t_od:,.2f} | {t_od / m_od:.3f} | {met:.0%} | {secs:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
