"""The shipped example gang job: a real DDP training loop, wired to the gang helper as the docs show.

A tiny MLP with dropout, Adam, a ``ResumableSampler`` over a fixed synthetic data set,
periodic ``torch_state`` saves, and the gang loop of docs/agent.md ("Multi-node jobs") line
for line. Run one per rank under torchrun (the local drill and docs/operations.md do)::

    torchrun ... -m spotgpu.drills.gang_job --ckpt file:///tmp/ckpt --out /tmp/out --steps 60

It writes what a test needs to compare a preempted run with an uninterrupted one:
``OUT/losses-r<rank>.jsonl`` (one ``{"step", "loss"}`` line per step it trained; a resumed
incarnation appends the steps it re-trains, the last line for a step wins) and, when the
job finishes, ``OUT/final.json`` (rank 0: steps and the SHA-256 of every parameter's bytes).
``--state-mb`` adds that many MiB of padding to each save, so a save takes a while (for
drills that land a notice during a periodic save).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from spotgpu.agent.client import AgentClient
from spotgpu.checkpoint import EveryNSteps
from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager
from spotgpu.checkpoint.torch import ResumableSampler, Stateful, load_torch_state, torch_state
from spotgpu.gang import EXIT_GANG_STOP, Gang, collective_timeout, exit_now

SAMPLES = 512
FEATURES = 16
BATCH = 8


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gang_job", description=__doc__.splitlines()[0])
    p.add_argument("--ckpt", required=True, help="checkpoint store URL (every rank: the same)")
    p.add_argument("--out", required=True, type=Path, help="where losses and the final parameter hash go")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--save-every", type=int, default=10, help="periodic checkpoint every N steps")
    p.add_argument("--step-seconds", type=float, default=0.05, help="extra time per step (a bigger model)")
    p.add_argument("--state-mb", type=float, default=0.0, help="MiB of padding in each save (a bigger state)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def dataset(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=gen)
    y = (x[:, :4].sum(dim=1, keepdim=True) > 0).float()
    return x, y


def params_sha256(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse(sys.argv[1:] if argv is None else argv)
    dist.init_process_group("gloo", timeout=collective_timeout(step_seconds=args.step_seconds, save_seconds=5.0))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    # find_unused_parameters=True keeps DDP's first bucket layout for good: by default DDP
    # rebuilds its buckets after the first step of each process, which moves where each
    # gradient sits in the all-reduced buffer, and so (with more than 2 ranks) the order of
    # its sum: a resumed run would then differ from an uninterrupted one in the last bits.
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1)),
        find_unused_parameters=True,
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sampler = ResumableSampler(SAMPLES, seed=args.seed, rank=rank, world_size=world)
    objects: dict[str, Stateful] = {"model": model, "optim": opt, "sampler": sampler}
    padding = torch.zeros(int(args.state_mb * (1 << 20)), dtype=torch.uint8)
    x, y = dataset(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    losses = (args.out / f"losses-r{rank}.jsonl").open("a", encoding="utf-8")

    def state() -> dict[str, object]:
        return {**torch_state(objects), "padding": padding.numpy()}

    # the VM's local tier (SPOTGPU_LOCAL_DIR, its agent config's localTier) in front of the store; none: the store
    ckpt = TieredCheckpointManager(args.ckpt, LocalTier.from_environment(), rank=rank, world_size=world,
                                   save_policy=EveryNSteps(args.save_every))

    gang = Gang(AgentClient())                      # $SPOTGPU_AGENT or /run/spotgpu/agent.sock
    with gang:                                      # a lost peer: reported, exit EXIT_PEER_LOST (76)
        restored = gang.restore(ckpt)               # the same newest verified step on every rank
        if restored:
            load_torch_state(restored.state, objects)
        order: Iterator[int] = iter(())
        for step in range(restored.step + 1 if restored else 0, args.steps):
            batch: list[int] = []
            while len(batch) < BATCH:
                index = next(order, None)
                if index is None:
                    order = iter(sampler)  # the sampler resumes mid-epoch
                    continue
                batch.append(index)
            loss = nn.functional.binary_cross_entropy_with_logits(model(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(args.step_seconds)
            losses.write(json.dumps({"step": step, "loss": float(loss.item()).hex()}) + "\n")
            losses.flush()
            if ckpt.should_save(step):
                ckpt.save_async(step, state())                           # periodic: the primary protection
            if gang.should_stop(step):                                   # same answer on every rank, same step
                gang.final_checkpoint(ckpt, step, state())               # one final save for the gang
                raise SystemExit(EXIT_GANG_STOP)                         # 75: the launcher restarts the gang
            if gang.checkpoint_requested() == "early":                   # a rebalance/maintenance notice anywhere
                gang.early_checkpoint(ckpt, step, state())
    ckpt.wait_pending()  # the last periodic save commits before the job reports it finished
    if rank == 0:
        final = {"steps": args.steps, "worldSize": world, "paramsSha256": params_sha256(model.module)}
        (args.out / "final.json").write_text(json.dumps(final), encoding="utf-8")
    losses.close()
    ckpt.close(60)  # the background upload of the last durable generation
    exit_now(0)  # never the interpreter's teardown of a DDP model: it can deadlock (see exit_now)


if __name__ == "__main__":
    raise SystemExit(main())
