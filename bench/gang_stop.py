"""Notice -> every rank stopped, over many drills, and the gang's final checkpoint vs a periodic save.

usage: python bench/gang_stop.py [--ranks 2] [--drills 50] [--step-ms 20] [--state-mb 4]

One gang of N gloo ranks (forked, on this machine) lives through every drill. Per drill each
simulated node gets a fresh loopback fake GCP metadata server and a real agent; the ranks
take a periodic save, then train (a sleep per step) with ``Gang.should_stop`` until the
bench raises a preemption on one node (rotating), at a random phase of the step. Measured:
the raise -> the last rank's ``should_stop`` returning True (target: one step + 0.1 s), and
the gang's ``final_checkpoint`` seconds next to the periodic ``save`` of the same state.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agent"))

import numpy as np
import torch.distributed as dist
import torch.multiprocessing as mp

from spotgpu.agent.client import AgentClient
from spotgpu.checkpoint import CheckpointManager
from spotgpu.gang import Gang


def put(path: Path, text: str) -> None:
    """Whole or not at all: the other side polls for the name."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.rename(path)


def wait_file(path: Path, timeout: float = 120.0) -> str:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.002)
    return path.read_text()


def worker(rank: int, world: int, port: int, work: str, drills: int, step_s: float, state_mb: float) -> None:
    try:
        drill_ranks(rank, world, port, work, drills, step_s, state_mb)
    except BaseException:
        traceback.print_exc()  # torch.multiprocessing keeps it for join(), which the bench never reaches then
        raise


def drill_ranks(rank: int, world: int, port: int, work: str, drills: int, step_s: float, state_mb: float) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    base = Path(work)
    state = {"w": np.random.default_rng(rank).random(int(state_mb * (1 << 20) / 8))}
    ckpt = CheckpointManager(f"file://{base / 'ckpt'}", rank=rank, world_size=world, session="bench")
    for drill in range(drills):
        addresses = json.loads(wait_file(base / f"drill-{drill}.json"))
        gang = Gang(AgentClient(addresses[rank]))
        step = drill * 1000
        started = time.perf_counter()
        ckpt.save(step, state)
        periodic = time.perf_counter() - started
        gang.should_stop(step)  # the client is watching, the gang is in step
        put(base / f"ready-{drill}-{rank}", "ready")
        while True:
            step += 1
            time.sleep(step_s)
            if gang.should_stop(step):
                stopped = time.time()
                break
        final = gang.final_checkpoint(ckpt, step, state)
        result = {
            "stopped": stopped,
            "step": step,
            "final": final.seconds,
            "committed": final.committed,
            "periodic": periodic,
        }
        put(base / f"result-{drill}-{rank}.json", json.dumps(result))
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--drills", type=int, default=50)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--state-mb", type=float, default=4.0, help="per rank")
    args = parser.parse_args()
    step_s = args.step_ms / 1000
    work = Path(tempfile.mkdtemp(prefix="gang-stop-"))
    # Fork the ranks before any agent thread exists.
    procs = mp.start_processes(
        worker,
        args=(args.ranks, free_port(), str(work), args.drills, step_s, args.state_mb),
        nprocs=args.ranks,
        start_method="fork",
        join=False,
    )
    from agent_testkit import fast_config

    from spotgpu.agent.daemon import Agent
    from spotgpu.agent.fakes import FakeGcpMetadata
    from spotgpu.agent.telemetry import AgentTelemetry

    latencies, finals, periodics, committed = [], [], [], 0
    for drill in range(args.drills):
        fakes = [FakeGcpMetadata(timeout_delay=1.0).start() for _ in range(args.ranks)]
        agents = [Agent(fast_config("gcp", f.url), telemetry=AgentTelemetry(None)).start() for f in fakes]
        put(work / f"drill-{drill}.json", json.dumps([a.control.url for a in agents]))
        for rank in range(args.ranks):
            wait_file(work / f"ready-{drill}-{rank}")
        time.sleep(0.2 + random.uniform(0, step_s))  # the watcher is long-polling; a random phase of the step
        raised = time.time()
        fakes[drill % args.ranks].raise_preempted()
        results = [json.loads(wait_file(work / f"result-{drill}-{r}.json")) for r in range(args.ranks)]
        latencies.append(max(r["stopped"] for r in results) - raised)
        finals.append(max(r["final"] for r in results))
        periodics.append(max(r["periodic"] for r in results))
        committed += all(r["committed"] for r in results)
        for a in agents:
            a.stop()
        for f in fakes:
            f.stop()
    procs.join()
    target = step_s + 0.1
    p50, p99 = pct(latencies, 0.5), pct(latencies, 0.99)
    print(
        f"notice -> every rank stopped ({args.ranks} ranks, {args.step_ms:g} ms steps, {args.drills} drills, GCP fake)"
    )
    print("| p50 | p99 | max | target (one step + 0.1 s) | p99/target |")
    print("|---|---|---|---|---|")
    print(
        f"| {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms | {max(latencies) * 1000:.0f} ms | {target * 1000:.0f} ms | {p99 / target:.2f} |"
    )
    print()
    print(
        f"final checkpoint vs periodic save of the same state ({args.state_mb:g} MB per rank, file:// store; slowest rank)"
    )
    print("| gang final p50 | gang final p99 | periodic p50 | periodic p99 | final/periodic (p50) | committed |")
    print("|---|---|---|---|---|---|")
    f50, p50s = statistics.median(finals), statistics.median(periodics)
    print(
        f"| {f50 * 1000:.0f} ms | {pct(finals, 0.99) * 1000:.0f} ms | {p50s * 1000:.0f} ms | "
        f"{pct(periodics, 0.99) * 1000:.0f} ms | {f50 / p50s:.2f} | {committed}/{args.drills} |"
    )
    print(f"host: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
