"""One rank of a small DDP job wired to spotgpu.gang (run as a subprocess by the gang tests and benches).

usage: gang_job.py OUT_DIR RUN_NAME WORLD   (everything else from the environment, see ``Options``)

The process imports torch once and forks WORLD ranks (a 2-core box cannot afford WORLD
concurrent torch imports per launch); it writes ``RUN_NAME.pids`` (the ranks' PIDs, for the
tests to signal) and, once all have ended, ``RUN_NAME.codes`` (their exit codes).

A DDP MLP with dropout and Adam over a ResumableSampler, periodic torch_state saves, the gang
loop of docs/agent.md. Writes ``OUT_DIR/RUN_NAME-r{rank}.jsonl``: one ``{"step", "loss"}``
line per step (loss as float.hex, for bitwise comparison), then one ``{"result": ...}``
line; rank 0 also writes ``OUT_DIR/RUN_NAME-params.bin`` after the last step.
"""

from __future__ import annotations

import faulthandler
import json
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch._dynamo  # DDP imports it on first use: once here, before the fork
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from spotgpu.agent.client import AgentClient
from spotgpu.checkpoint import CheckpointManager, EveryNSteps
from spotgpu.checkpoint.torch import ResumableSampler, load_torch_state, torch_state
from spotgpu.gang import EXIT_GANG_STOP, Gang, collective_timeout, exit_now

DATA = 64
BATCH = 4


class Options:
    def __init__(self) -> None:
        env = os.environ
        self.rank = int(env["RANK"])
        self.world = int(env["WORLD_SIZE"])
        self.steps = int(env.get("GANG_STEPS", "80"))
        self.save_every = int(env.get("GANG_SAVE_EVERY", "10"))
        self.step_sleep = float(env.get("GANG_STEP_SLEEP", "0"))
        self.save_pause = float(env.get("GANG_SAVE_PAUSE", "0"))  # a slow store: seconds inside one periodic save
        self.pause_at = int(env.get("GANG_PAUSE_AT_STEP", "-1"))  # ... the save of this step
        self.every: int | str = env.get("GANG_EVERY", "1")
        self.every = self.every if self.every == "auto" else int(self.every)
        self.timeout_floor = float(env.get("GANG_TIMEOUT_FLOOR", "60"))
        self.ckpt_url = env["GANG_CKPT_URL"]


def model_and_data(rank: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)  # same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(32, 1))
    gen = torch.Generator().manual_seed(1234)
    inputs = torch.randn(DATA, 8, generator=gen)
    targets = inputs.sum(dim=1, keepdim=True) + 0.1 * torch.randn(DATA, 1, generator=gen)
    torch.manual_seed(100 + rank)  # each rank's own dropout stream (saved and restored with the RNG state)
    return model, inputs, targets


def ordered_mean(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks the annotations, which must be real objects
    """DDP's gradient mean, summed in rank order. gloo's ring all-reduce adds an element's parts
    in an order set by its place in the bucket, and DDP rebuilds buckets after each process's
    first step, so with 3+ ranks a resumed run would differ from an uninterrupted one in the
    last bits; the tests compare them bit for bit."""
    flat = bucket.buffer()
    parts = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, flat)
    total = parts[0].clone()
    for part in parts[1:]:
        total += part
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(total / len(parts))
    return future


def main(out_dir: Path, run: str) -> NoReturn:
    opt = Options()
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
        rank=opt.rank,
        world_size=opt.world,
        timeout=collective_timeout(
            step_seconds=max(opt.step_sleep, 0.01), save_seconds=opt.save_pause + 1.0, floor=opt.timeout_floor
        ),
    )
    net, inputs, targets = model_and_data(opt.rank)
    model = DistributedDataParallel(net)
    model.register_comm_hook(None, ordered_mean)
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = ResumableSampler(DATA, seed=7, rank=opt.rank, world_size=opt.world)
    objects: dict[str, Any] = {"model": model, "optim": optim, "sampler": sampler}
    ckpt = CheckpointManager(
        opt.ckpt_url,
        rank=opt.rank,
        world_size=opt.world,
        save_policy=EveryNSteps(opt.save_every),
        commit_timeout_seconds=20,
    )
    log = (out_dir / f"{run}-r{opt.rank}.jsonl").open("w")
    gang = Gang(AgentClient(), every=opt.every)
    result: dict[str, Any] = {"rank": opt.rank}
    with gang:
        restored = gang.restore(ckpt)
        if restored:
            load_torch_state(restored.state, objects)
        start = restored.step + 1 if restored else 0
        result["restored"] = restored.step if restored else None
        batches = iter(sampler)
        for step in range(start, opt.steps):
            indices: list[int] = []
            while len(indices) < BATCH:
                try:
                    indices.append(next(batches))
                except StopIteration:
                    batches = iter(sampler)
            loss = torch.nn.functional.mse_loss(model(inputs[indices]), targets[indices])
            optim.zero_grad()
            loss.backward()
            optim.step()
            log.write(json.dumps({"step": step, "loss": float(loss.item()).hex()}) + "\n")
            log.flush()
            if opt.step_sleep:
                time.sleep(opt.step_sleep)
            if ckpt.should_save(step):
                if opt.save_pause and step == opt.pause_at:
                    (out_dir / f"{run}-r{opt.rank}.saving").write_text(str(step))
                    time.sleep(opt.save_pause)
                ckpt.save(step, torch_state(objects))
            if gang.should_stop(step):
                final = gang.final_checkpoint(ckpt, step, torch_state(objects))
                stop = gang.stop
                assert stop is not None
                result.update(
                    stop_step=step,
                    stopped_at=time.time(),
                    budget_deadline=stop.budget_deadline,
                    noticed=list(stop.noticed_ranks),
                    kind=stop.kind,
                    reason=stop.reason,
                    committed=final.committed,
                    final_reason=final.reason,
                    checks=gang.checks,
                )
                log.write(json.dumps({"result": result}) + "\n")
                log.close()
                raise SystemExit(EXIT_GANG_STOP)
            if gang.checkpoint_requested() == "early":
                info = gang.early_checkpoint(ckpt, step, torch_state(objects))
                result.setdefault("early", []).append(info.step)
    if opt.rank == 0:
        params = torch.cat([p.detach().flatten() for p in net.parameters()])
        (out_dir / f"{run}-params.bin").write_bytes(params.numpy().tobytes())
    result.update(finished=True, checks=gang.checks)
    log.write(json.dumps({"result": result}) + "\n")
    log.close()
    exit_now(0)  # never the interpreter's teardown of a DDP model: it can deadlock (see exit_now)


def fork_ranks(out_dir: Path, run: str, world: int) -> int:
    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:  # the rank
            err = os.open(out_dir / f"{run}.err", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(err, 2)
            os.environ["RANK"] = str(rank)
            os.environ["WORLD_SIZE"] = str(world)
            os.environ["SPOTGPU_AGENT"] = os.environ.get("GANG_AGENTS", "").split(",")[rank]  # this rank's node
            os.environ["MASTER_ADDR"] = "127.0.0.1"  # for scripts that init_process_group from the environment
            code = 1
            try:
                script = os.environ.get("GANG_SCRIPT")  # run this file as __main__ instead (docs' example)
                if script:
                    runpy.run_path(script, run_name="__main__")
                    code = 0
                else:
                    code = main(out_dir, run)
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                faulthandler.dump_traceback_later(15, exit=True)  # a hang at exit shows where, then ends
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    (out_dir / f"{run}.pids.tmp").write_text(json.dumps(pids))
    (out_dir / f"{run}.pids.tmp").rename(out_dir / f"{run}.pids")  # the tests read it as soon as it exists
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    (out_dir / f"{run}.codes.tmp").write_text(json.dumps(codes))
    (out_dir / f"{run}.codes.tmp").rename(out_dir / f"{run}.codes")
    return 0


def zygote() -> int:
    """Serve launches from one process that imported torch once (``--zygote``).

    Each stdin line ``{"out": DIR, "run": NAME, "world": N, "env": {...}}`` forks a launcher
    (its PID is printed on stdout) that forks the ranks: a launch then costs a fork, not a
    torch import (10-20 s on a loaded 2-core box).
    """
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # launchers are reaped by the kernel
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the launcher waits for its ranks
            os.environ.update(request["env"])
            code = 1
            try:
                code = fork_ranks(Path(request["out"]), request["run"], int(request["world"]))
            finally:
                os._exit(code)
        print(pid, flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        sys.exit(zygote())
    if len(sys.argv) > 3:
        sys.exit(fork_ranks(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
