"""A tiny GPT-2 (built from a config, no download) trained by transformers.Trainer with the
spotgpu callback; run as one process per rank by test_hf.py.

usage: hf_job.py OUT_DIR STORE_URL [--steps N] [--stop-at K --noticed-rank R] [--then-reference]
  --stop-at K: rank R, at step K, touches OUT_DIR/ready-rR and holds the step until its own
               agent has a notice (the test raises it then); the gang must stop every rank at K.
  --then-reference: after a run that ended normally, train once more in this process from
               scratch without spotgpu (the uninterrupted run to compare with; it runs after
               the resumed run, so nothing of it can leak into the run under test).
  --step-seconds S: every step takes at least S (a drill's notice then lands mid-run).
  --hold-commit S: the tier's background commit of step S waits for the final checkpoint to begin
               (commit_hold.py: a notice while a periodic save is in flight; OUT_DIR/events-rR.jsonl).
Writes OUT_DIR/{run,reference}-losses-rR-fromA.json ({step: loss}) and OUT_DIR/result-rR-fromA.json
(A: the step this attempt resumed from, 0 for a fresh start and for the reference);
exits with the callback's exit code (75 after a gang stop).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments, set_seed

from spotgpu.agent.client import AgentClient
from spotgpu.integrations.hf import SpotgpuCallback

torch.set_num_threads(1)


class RecordingTrainer(Trainer):
    """Keeps each optimizer step's loss (one micro-batch per step here)."""

    losses: dict[int, float]

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.losses[self.state.global_step + 1] = float(loss.detach().item())
        return loss


class OneThread(TrainerCallback):
    """One intra-op thread once training begins. The Trainer's setup puts torch back at one
    thread per core, and MKL then picks its thread count by the machine's load (MKL_DYNAMIC), so
    a loaded box gave 1-ulp different losses for the same step in two runs (seen in the drill,
    before any stop). Bitwise comparison needs the same reduction order every run."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        torch.set_num_threads(1)


class SlowSteps(TrainerCallback):
    """Each step takes at least this long, so a drill's notice lands mid-run."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        time.sleep(self.seconds)


class HoldForNotice(TrainerCallback):
    """At step K: say so, then hold until this rank's own agent has a notice (max 60 s)."""

    def __init__(self, stop_at: int, ready: Path, agent: AgentClient) -> None:
        # The callback's own client: once it has the notice, the gang's next check sees it at
        # this very step (a second client's watcher could lag a step behind).
        self.stop_at, self.ready, self.agent = stop_at, ready, agent

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.stop_at:
            self.ready.write_text("ready")
            end = time.monotonic() + 60
            while not self.agent.should_stop() and time.monotonic() < end:
                time.sleep(0.01)


def dataset(n: int = 64, length: int = 12) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, 64, (n, length), generator=gen)
    return [{"input_ids": row, "labels": row} for row in ids]


def attempt(spot: SpotgpuCallback | None) -> int:
    """Which attempt this is: the step it resumed from (0: a fresh start)."""
    return spot.restored.step if spot and spot.restored else 0


def train(opts: argparse.Namespace, name: str, spot: SpotgpuCallback | None) -> dict[str, Any]:
    """One training run; writes OUT_DIR/{name}-losses-rR.json, returns its result."""
    rank = int(os.environ.get("RANK", "0"))
    args = TrainingArguments(
        output_dir=str(opts.out / f"{name}-r{rank}"),  # one directory per rank: as on separate VMs
        per_device_train_batch_size=4,
        max_steps=opts.steps,
        learning_rate=1e-2,
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
        ddp_backend="gloo" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        ddp_timeout=60,
    )
    set_seed(0)  # torch seeds itself at random per process: the weights must not differ
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    callbacks: list[Any] = [OneThread()] if spot is None else [OneThread(), spot]
    if spot is not None and opts.stop_at is not None and rank == opts.noticed_rank:
        callbacks.insert(0, HoldForNotice(opts.stop_at, opts.out / f"ready-r{rank}", opts.agent))
    if spot is not None and opts.step_seconds:
        callbacks.insert(0, SlowSteps(opts.step_seconds))
    trainer = RecordingTrainer(model=model, args=args, train_dataset=dataset(), callbacks=callbacks)
    trainer.losses = {}
    trainer.train(resume_from_checkpoint=spot.resume_from(args.output_dir) if spot else None)
    (opts.out / f"{name}-losses-r{rank}-from{attempt(spot)}.json").write_text(json.dumps(trainer.losses))
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
    parser.add_argument("--step-seconds", type=float, default=0.0)
    opts = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    if opts.hold_commit is not None:
        import commit_hold

        commit_hold.install(opts.hold_commit, opts.out, rank)
    opts.agent = AgentClient()
    spot = SpotgpuCallback(opts.url, every_steps=4, agent=opts.agent)
    results = {"run": train(opts, "run", spot)}
    if opts.then_reference and spot.exit_code == 0:
        results["reference"] = train(opts, "reference", None)
    (opts.out / f"result-r{rank}-from{attempt(spot)}.json").write_text(json.dumps(results))
    spot.exit()  # as docs/integrations.md ends a job: exit_code at once, no interpreter teardown


if __name__ == "__main__":
    main()
