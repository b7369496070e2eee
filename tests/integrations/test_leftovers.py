"""The framework callbacks leave nothing behind (issue 31, item 5).

Defects: the Lightning callback left an empty ``./spotgpu/`` directory (its staging parent) in
the working directory, and run from there ``python -m spotgpu`` imported that directory instead
of the package (the next ``spotgpu drill local`` failed with the ImportError buried in a node's
agent.log). The HF callback never deleted ``out/checkpoint-N``: one directory per save, 30 after
one 3000-step run, while the store keeps ``keep=`` generations.

Each job here runs in a fresh working directory with the real library on CPU, one process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from integ_testkit import REPO

HF_JOB = """
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed
from spotgpu.integrations.hf import SpotgpuCallback

set_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (64, 12))]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
spot = SpotgpuCallback(sys.argv[1], every_steps=3, keep=2)
args = TrainingArguments(output_dir="out", max_steps=30, save_strategy="no", report_to="none", use_cpu=True,
                         save_total_limit=limit)
Trainer(model=model, args=args, train_dataset=data, callbacks=[spot]).train()
"""

LIGHTNING_JOB = """
import sys, lightning as L, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from spotgpu.integrations.lightning import SpotgpuCallback

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
    def training_step(self, batch, batch_idx):
        return nn.functional.mse_loss(self.net(batch[0]), batch[1])
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

x = torch.randn(32, 4)
spot = SpotgpuCallback(sys.argv[1], every_steps=2)
trainer = L.Trainer(max_steps=8, callbacks=[spot], enable_checkpointing=False, logger=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
trainer.fit(Model(), DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4),
            ckpt_path=spot.resume_from("restore"))
"""


def run_job(code: str, cwd: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPOTGPU_AGENT": str(cwd / "no-agent.sock"), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    (cwd / "job.py").write_text(code)
    run = subprocess.run([sys.executable, "job.py", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


@pytest.mark.timeout(300)
def test_the_lightning_callback_leaves_no_staging_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run_job(LIGHTNING_JOB, work, f"file://{tmp_path / 'store'}")
    assert sorted(p.name for p in work.iterdir()) == ["job.py"]  # no ./spotgpu/, no hidden staging dir
    assert len(list((tmp_path / "store" / "commits").glob("*.json"))) == 4  # steps 2, 4, 6, 8 committed
    probe = subprocess.run([sys.executable, "-c", "import spotgpu, sys; print(spotgpu.__file__)"], cwd=work,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert probe.stdout.strip().endswith("__init__.py"), probe.stdout  # the package, not a stray directory


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("limit", "kept"), [(None, ["checkpoint-27", "checkpoint-30"]),
                                              (3, ["checkpoint-24", "checkpoint-27", "checkpoint-30"])])  # fmt: skip
def test_the_hf_callback_keeps_local_checkpoints_within_keep_or_save_total_limit(
    tmp_path: Path, limit: int | None, kept: list[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run_job(HF_JOB, work, f"file://{tmp_path / 'store'}", *([] if limit is None else [str(limit)]))
    assert sorted(p.name for p in (work / "out").iterdir() if p.name.startswith("checkpoint-")) == kept
    assert not [p for p in work.iterdir() if p.name not in ("job.py", "out")]
