"""Crash consistency: SIGKILL a saving process at random points, >=100 times."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from spotgpu.checkpoint.crashtest import run_trials
from tests.checkpoint.ckpt_files import flip_byte


@pytest.fixture
def crash_dir(tmp_path):
    """tmpfs when there is one: a SIGKILL (unlike a power cut) keeps the page cache, so
    the protocol's ordering is what is under test, and tmpfs makes its fsyncs free."""
    shm = Path("/dev/shm")
    if shm.is_dir():
        path = Path(tempfile.mkdtemp(prefix="spotgpu-crash-", dir=shm))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path


def test_sigkill_during_saves_never_leaves_a_torn_or_stale_restore(crash_dir):
    report = run_trials(crash_dir.as_uri(), 100, seed=7, max_saves_before_kill=1)
    assert report.trials == 100
    assert report.violations == []
    # The drill must actually exercise the protocol: kills inside saves, and progress.
    assert report.killed_mid_save >= 20, report
    assert report.commits >= 20, report


def test_the_checker_catches_a_torn_generation(crash_dir):
    """Guard against a drill that cannot fail: a hand-made torn commit is reported."""
    from spotgpu.checkpoint import CheckpointManager
    from spotgpu.checkpoint.crashtest import check_store, expected_state

    mgr = CheckpointManager(crash_dir.as_uri())
    mgr.save(1, expected_state(1, 1024))
    mgr.save(2, expected_state(2, 1024))
    flip_byte(crash_dir, mgr.list()[0].generation, "optim", at=0.99)
    problems, newest, _ = check_store(crash_dir.as_uri(), 1024, 0)
    assert newest == 2
    assert any("does not verify" in p for p in problems) and any("restore chose step 1" in p for p in problems)


def test_sigkill_with_a_concurrent_gc_at_grace_zero_never_breaks_a_commit(crash_dir):
    """Issue 22: the same drill while another process runs gc at grace 0 throughout
    (bench/ckpt_gc_drill.py runs 1,000 trials and the unprotected baseline side by side)."""
    report = run_trials(crash_dir.as_uri(), 100, seed=11, max_saves_before_kill=1, concurrent_gc=True)
    assert report.trials == 100
    assert report.violations == [] and report.save_errors == []
    assert (report.torn_restores, report.unverified_restores, report.committed_failing_verify) == (0, 0, 0)
    assert report.killed_mid_save >= 20 and report.commits >= 20, report
