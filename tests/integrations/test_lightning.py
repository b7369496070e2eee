"""The Lightning callback on a small LightningModule on CPU, 1 and 2 ranks (gloo DDP): the
same scenario as test_hf.py (a notice to the last rank's VM only; every rank stops at one
step; the restart resumes through ``trainer.fit(ckpt_path=...)``; losses and parameters
equal the uninterrupted run's, bit for bit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from integ_testkit import check_gang_stop_and_resume

JOB = Path(__file__).with_name("lightning_job.py")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("world", [1, 2])
def test_gang_stop_and_resume_match_the_uninterrupted_run(tmp_path: Path, world: int) -> None:
    check_gang_stop_and_resume(JOB, tmp_path, world, steps=20, stop_at=7)  # 16 (8) batches/epoch: crosses
