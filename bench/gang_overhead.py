"""Per-step cost of the gang's stop check, side by side with the same loop without it.

usage: python bench/gang_overhead.py [--ranks 2 4] [--step-ms 1 10 100] [--seconds 3]

Every configuration runs N gloo ranks (forked, on this machine) through the same loop: a
"step" (sleep: the accelerator's time, no host CPU) plus the step's own gradient all-reduce
(64 K floats), with and without ``Gang.should_stop(step)`` (every=1, and every="auto"),
alternating so drift hits both. Prints per-step overhead and its ratio to the step time.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from spotgpu.agent.client import AgentClient
from spotgpu.gang import Gang

NO_AGENT = "127.0.0.1:9"  # nothing listens: the client's flag stays down, as on a quiet VM
MODES = ("baseline", "every=1", "every=auto")


def run_loop(mode: str, steps: int, step_s: float) -> float:
    grad = torch.ones(1 << 16)
    gang = None if mode == "baseline" else Gang(AgentClient(NO_AGENT), every="auto" if mode == "every=auto" else 1)
    dist.barrier()
    started = time.perf_counter()
    for step in range(steps):
        time.sleep(step_s)
        dist.all_reduce(grad)
        if gang is not None and gang.should_stop(step):
            raise RuntimeError("nobody was noticed")
    dist.barrier()
    return time.perf_counter() - started


def worker(rank: int, world: int, port: int, configs: list[tuple[float, int]], repeats: int, queue: object) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    for step_s, steps in configs:
        totals = {m: 0.0 for m in MODES}
        for _ in range(repeats):
            for mode in MODES:
                totals[mode] += run_loop(mode, steps, step_s)
        if rank == 0:
            queue.put((world, step_s, steps * repeats, totals))  # type: ignore[attr-defined]
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--step-ms", type=float, nargs="+", default=[1.0, 10.0, 100.0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per mode and configuration")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    configs = [(ms / 1000, max(20, int(args.seconds / args.repeats / (ms / 1000)))) for ms in args.step_ms]
    ctx = mp.get_context("fork")
    rows = []
    for world in args.ranks:
        queue = ctx.Queue()
        procs = mp.start_processes(
            worker,
            args=(world, free_port(), configs, args.repeats, queue),
            nprocs=world,
            start_method="fork",
            join=False,
        )
        for _ in configs:
            rows.append(queue.get(timeout=1800))
        procs.join()
    print(
        "| ranks | step | steps | baseline per step | every=1 per step | overhead | overhead/step | every=auto per step | overhead/step (auto) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for world, step_s, steps, totals in rows:
        base, one, auto = (totals[m] / steps for m in MODES)
        print(
            f"| {world} | {step_s * 1000:g} ms | {steps} | {base * 1000:.3f} ms | {one * 1000:.3f} ms | "
            f"{(one - base) * 1e6:.0f} µs | {(one - base) / step_s:.2%} | {auto * 1000:.3f} ms | {(auto - base) / step_s:.2%} |"
        )
    print(f"host: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
