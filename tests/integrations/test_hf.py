"""The Hugging Face Trainer callback on a tiny GPT-2 (from a config) on CPU, 1 and 2 ranks.

A notice from a loopback fake GCP metadata server reaches the LAST rank's agent only; every
rank must stop at that step, commit one final generation and exit 75; the restarted job
resumes through the Trainer's own ``resume_from_checkpoint`` from that generation, and the
per-step losses and final parameters equal an uninterrupted run's, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from integ_testkit import check_gang_stop_and_resume

JOB = Path(__file__).with_name("hf_job.py")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("world", [1, 2])
def test_gang_stop_and_resume_match_the_uninterrupted_run(tmp_path: Path, world: int) -> None:
    check_gang_stop_and_resume(JOB, tmp_path, world, steps=20, stop_at=7)  # 16 batches/epoch: crosses one
