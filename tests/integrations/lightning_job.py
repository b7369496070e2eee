"""A small LightningModule (MLP with dropout, Adam) trained by lightning.Trainer with the
spotgpu callback; run as one process per rank by test_lightning.py. Same arguments,
files and exit codes as hf_job.py (see its docstring).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import TensorDataset

from spotgpu.agent.client import AgentClient
from spotgpu.integrations.lightning import ResumableDataLoader, SpotgpuCallback

torch.set_num_threads(1)


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
        self.losses: dict[int, float] = {}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.losses[self.trainer.global_step + 1] = float(loss.detach().item())
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)

    def train_dataloader(self) -> Any:
        gen = torch.Generator().manual_seed(1234)
        x = torch.randn(64, 8, generator=gen)
        return ResumableDataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4, seed=0)


class HoldForNotice(L.Callback):
    """At step K: say so, then hold until this rank's own agent has a notice (max 60 s)."""

    def __init__(self, stop_at: int, ready: Path, agent: AgentClient) -> None:
        # The callback's own client: once it has the notice, the gang's next check sees it at
        # this very step (a second client's watcher could lag a step behind).
        self.stop_at, self.ready, self.agent = stop_at, ready, agent

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.stop_at:
            self.ready.write_text("ready")
            end = time.monotonic() + 60
            while not self.agent.should_stop() and time.monotonic() < end:
                time.sleep(0.01)


def train(opts: argparse.Namespace, name: str, spot: SpotgpuCallback | None) -> dict[str, Any]:
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    L.seed_everything(0, verbose=False)
    model = Regressor()
    callbacks: list[Any] = [] if spot is None else [spot]
    if spot is not None and opts.stop_at is not None and rank == opts.noticed_rank:
        callbacks.insert(0, HoldForNotice(opts.stop_at, opts.out / f"ready-r{rank}", opts.agent))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=world,
        strategy="ddp" if world > 1 else "auto",
        max_steps=opts.steps,
        callbacks=callbacks,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        default_root_dir=str(opts.out / f"{name}-r{rank}"),  # one directory per rank: as on separate VMs
    )
    ckpt_path = spot.resume_from(str(opts.out / f"restore-r{rank}")) if spot else None
    trainer.fit(model, ckpt_path=ckpt_path)
    attempt = spot.restored.step if spot and spot.restored else 0  # the step this attempt resumed from
    (opts.out / f"{name}-losses-r{rank}-from{attempt}.json").write_text(json.dumps(model.losses))
    params = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
    return {
        "restored": spot.restored.step if spot and spot.restored else None,
        "stop": spot.gang.stop.step if spot and spot.gang and spot.gang.stop else None,
        "final": None if not (spot and spot.final_result) else spot.final_result.committed,
        "params": hashlib.sha256(params).hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("url")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--stop-at", type=int)
    parser.add_argument("--noticed-rank", type=int, default=0)
    parser.add_argument("--then-reference", action="store_true")
    parser.add_argument("--hold-commit", type=int)  # commit_hold.py: this step's save still in flight at the notice
    opts = parser.parse_args()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    if opts.hold_commit is not None:
        import commit_hold

        commit_hold.install(opts.hold_commit, opts.out, dist.get_rank() if dist.is_initialized() else 0)
    opts.agent = AgentClient()
    spot = SpotgpuCallback(opts.url, every_steps=4, agent=opts.agent)
    results = {"run": train(opts, "run", spot)}
    if opts.then_reference and spot.exit_code == 0:
        results["reference"] = train(opts, "reference", None)
    attempt = spot.restored.step if spot.restored else 0
    rank = dist.get_rank() if dist.is_initialized() else 0
    (opts.out / f"result-r{rank}-from{attempt}.json").write_text(json.dumps(results))
    spot.exit()  # as docs/integrations.md ends a job: exit_code at once, no interpreter teardown


if __name__ == "__main__":
    main()
