"""``profile fit`` on a million telemetry lines: seconds and peak memory against a naive reader.

The lines are what a fleet writes: per VM an agent events log (``started``, ``identity``, the
agent's ``ready``, periodic ``commit-reported``, a preempt ``notice``, ``workload-notified``,
``final-checkpoint``, ``drained``), and the controller's events for the pool (interruptions,
reacquisitions, launch failures), each built through the contract's record types
(``spotgpu.contract.agent_records``, ``spotgpu.contract.controller_events``) and written as their
producers write them. Both go through the same fit:

* **streaming** (``spotgpu.economics.fit``): ``read_files`` streams each line through the
  normalizer into :class:`FitAccumulator`, whose state grows with VMs, not lines;
* **naive** (the baseline): ``json.loads`` of every line into a list, every normalized record
  into a list, sorted by time, then the same accumulator: what the reader did before (hold
  everything, sort everything).

Each variant runs in its own process (peak RSS is ``ru_maxrss`` of that process, the
interpreter and imports included); the two must give the same fit. Targets: <= 10 s, <= 500 MB.

    .venv/bin/python bench/profile_fit.py [--lines 1000000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spotgpu.contract.agent_records import (
    AgentRecord,
    CommitReported,
    Drained,
    FinalCheckpoint,
    Identity,
    Notice,
    Ready,
    Started,
    WorkloadNotified,
    agent_line,
)
from spotgpu.contract.controller_events import Event, Interruption, LaunchFailure, Reacquired
from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.telemetry import FailureReason

COMMITS_PER_VM = 40


def write_fleet(path_agents: Path, path_controller: Path, lines: int, seed: int = 7) -> tuple[int, int]:
    """About ``lines`` lines: agents' logs in one file (one VM after another), the controller's in another.

    Every line is built through :mod:`spotgpu.contract` as its producer builds it (the agent's
    records through ``agent_line``, the controller's events through ``Event.to_json``) and dumped as
    the producer dumps it: a renamed or retyped field breaks this bench at once.
    """
    rng = random.Random(seed)
    per_vm = COMMITS_PER_VM + 8
    vms = max(1, int(lines * 0.97) // per_vm)
    t0 = 1_796_000_000.0
    n_agent = n_ctl = 0
    pool = "train-aws"
    with path_agents.open("w", encoding="utf-8") as a, path_controller.open("w", encoding="utf-8") as c:
        for i in range(vms):
            start = t0 + i * 90.0
            life = rng.expovariate(1 / (6 * 3600.0))
            vm = f"i-{i:012x}"
            zone = f"us-east-1{'abc'[i % 3]}"
            sku = ("g5.12xlarge", "g6.12xlarge", "g6e.12xlarge")[i % 3]
            recs: list[tuple[float, AgentRecord]] = [
                (start, Started(provider="aws", pool=pool, control="127.0.0.1:1", notice={"provider": "aws"})),
                (start + 0.1, Ready(stage="agent", boot_to_ready_seconds=40.0)),
                (start + 0.2, Identity(provider="aws", instance_id=vm, instance_type=sku, zone=zone, region="us-east-1",
                                       capacity="spot", name="", pool=pool)),
            ]  # fmt: skip
            for k in range(COMMITS_PER_VM):
                at = start + (k + 1) * life / (COMMITS_PER_VM + 1)
                recs.append((at, CommitReported(result="ok", last_committed_at=at, vm_id=vm)))
            end = start + life
            event_id = f"terminate@{i}"
            preempt = InterruptionKind.PREEMPT
            recs += [
                (end - 120, Notice(kind=preempt, source="aws/spot-instance-action", event_id=event_id,
                                   detected_at=end - 120, deadline=end, deadline_basis="cloud", lead_seconds=119.5,
                                   detection_latency_seconds=0.2, raw={"action": "terminate"})),
                (end - 119.9, WorkloadNotified(phase="final-checkpoint", kind=preempt, event_id=event_id,
                                               source="aws/spot-instance-action", detected_at=end - 120,
                                               deadline=end)),
                (end - 40, FinalCheckpoint(outcome="committed", seconds=70 + rng.random() * 20, event_id=event_id)),
                (end - 39, Drained(hook_exit=0)),
            ]  # fmt: skip
            for ts, record in recs:
                a.write(json.dumps(agent_line(record, ts), default=str, sort_keys=True) + "\n")
            n_agent += len(recs)
            events = [
                Event.of(pool, end, Interruption(type=InterruptionKind.INTERRUPTION, vm=vm)),
                Event.of(pool, end + 600, Reacquired(latency_seconds=600 + rng.random() * 300, step="same_pool",
                                                     seconds_on_step=600.0)),
            ]  # fmt: skip
            if i % 4 == 0:
                reason = (FailureReason.CAPACITY, FailureReason.QUOTA)[i % 8 == 0]
                events.append(Event.of(pool, end + 60, LaunchFailure(group="spot-a", reason=reason, code="x", zone=zone)))
            for e in events:
                c.write(json.dumps(e.to_json(), sort_keys=True, default=str) + "\n")
            n_ctl += len(events)
    return n_agent, n_ctl


def run_variant(variant: str, paths: list[str]) -> dict[str, object]:
    from spotgpu.economics.fit import FitAccumulator
    from spotgpu.economics.telemetry import ReadStats, StreamContext, normalize
    from spotgpu.economics.telemetry_files import read_files

    t = time.perf_counter()
    if variant == "streaming":
        fit = FitAccumulator().add_all(read_files(paths)).result()
    else:
        stats = ReadStats()
        objs = []
        for p in paths:
            with open(p, encoding="utf-8") as fh:
                objs.append((p, [json.loads(line) for line in fh]))
        records = []
        for p, lines in objs:
            ctx = StreamContext(p)
            for o in lines:
                records.extend(normalize(o, ctx, stats))
        records.sort(key=lambda r: r.ts)
        fit = FitAccumulator().add_all(records).result()
    seconds = time.perf_counter() - t
    doc = fit.to_dict()
    return {"seconds": seconds, "peakMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "rate": doc["interruptions"][0], "reacquisition": doc["reacquisitionSeconds"]}  # fmt: skip


def _host_reference() -> float:
    """Seconds of a fixed loop (best of 3): reads the table in host units on a slower or busier machine."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        x = 0
        for i in range(2_000_000):
            x += i
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="runs per variant (best is reported)")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.paths)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        agents, ctl = Path(tmp) / "agents.jsonl", Path(tmp) / "controller.jsonl"
        n_agent, n_ctl = write_fleet(agents, ctl, args.lines)
        size = (agents.stat().st_size + ctl.stat().st_size) / 2**20
        print(f"{n_agent + n_ctl} lines ({n_agent} agent, {n_ctl} controller), {size:.0f} MiB")
        results: dict[str, dict[str, object]] = {}
        for variant in ("naive", "streaming"):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, __file__, "--variant", variant, "--paths", str(agents), str(ctl)],
                                     check=True, capture_output=True, text=True, timeout=900)  # fmt: skip
                runs.append(json.loads(out.stdout))
            results[variant] = min(runs, key=lambda r: float(r["seconds"]))  # type: ignore[arg-type]
    host = _host_reference()
    naive, streaming = results["naive"], results["streaming"]
    same = naive["rate"] == streaming["rate"] and naive["reacquisition"] == streaming["reacquisition"]
    print(f"{'reader':<12}{'seconds':>10}{'peak MiB':>11}{'s / naive':>11}{'MiB / naive':>13}")
    for name, r in results.items():
        print(f"{name:<12}{float(r['seconds']):>10.2f}{float(r['peakMiB']):>11.0f}"  # type: ignore[arg-type]
              f"{float(r['seconds']) / float(naive['seconds']):>11.2f}"  # type: ignore[arg-type]
              f"{float(r['peakMiB']) / float(naive['peakMiB']):>13.2f}")  # type: ignore[arg-type]  # fmt: skip
    print(f"{'host ref':<12}{host:>10.2f}{'':>11}  (a fixed pure-Python loop: streaming = "
          f"{float(streaming['seconds']) / host:.1f} host references)")  # type: ignore[arg-type]  # fmt: skip
    print(f"same fit: {same}; targets <= 10 s and <= 500 MB: "
          f"{'met' if float(streaming['seconds']) <= 10 and float(streaming['peakMiB']) <= 500 else 'NOT met'}")  # type: ignore[arg-type]  # fmt: skip


if __name__ == "__main__":
    main()
