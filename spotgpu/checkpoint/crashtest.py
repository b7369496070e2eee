"""Crash-consistency drill: SIGKILL a saving process at random points, then check the store.

Each trial starts a writer process that restores, then saves (sync or async) and
garbage-collects steps in a loop; the parent kills it with SIGKILL at a random moment.
After every kill the checker demands that:

- every committed generation verifies (never a torn commit),
- ``restore()`` returns the newest committed step, with exactly the bytes saved for it,
  and skips nothing,
- the newest committed step never goes backwards across trials (GC never removes it).

Used by the test suite (>=100 quick trials on file://) and by ``bench/checkpoint_io.py``
(more trials); point it at a real bucket URL to drill your own store.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spotgpu.checkpoint import reader
from spotgpu.checkpoint.layout import GENERATIONS, generation_of
from spotgpu.checkpoint.manager import CheckpointManager


def expected_state(step: int, size: int) -> dict[str, Any]:
    """Deterministic per step, and different per object, so a torn mix is detectable."""
    n = max(1, size // 8)
    return {
        "params": np.arange(n, dtype=np.int32) + step,
        "optim": np.full(n, step, dtype=np.int32),
        "meta": f"step={step}".encode(),
    }


def _writer(url: str, seed: int, size: int, ready: Any) -> None:
    """The victim: save forever (children only; killed by the parent)."""
    rng = random.Random(seed)
    mgr = CheckpointManager(url, keep=3, grace_seconds=0)
    restored = mgr.restore()
    step = restored.step if restored else 0
    ready.send(0.0)
    while True:
        step += 1
        started = time.monotonic()
        if rng.random() < 0.5:
            mgr.save(step, expected_state(step, size))
        else:
            mgr.save_async(step, expected_state(step, size)).wait()
        if rng.random() < 0.3:
            mgr.gc()
        ready.send(time.monotonic() - started)


@dataclass
class CrashReport:
    trials: int = 0
    violations: list[str] = field(default_factory=list)
    #: Trials whose kill left a new uncommitted (partly written) generation behind.
    killed_mid_save: int = 0
    #: Saves committed across all trials.
    commits: int = 0
    newest_step: int = 0
    seconds: float = 0.0


def check_store(url: str, size: int, newest_before: int) -> tuple[list[str], int, set[str]]:
    """(violations, newest committed step, uncommitted generations present)."""
    mgr = CheckpointManager(url, session="checker")
    problems: list[str] = []
    steps = reader.committed_steps(mgr.store)
    for step in steps:
        report = reader.verify_step(mgr.store, step)
        if not report.ok:
            problems.append(f"committed step {step} does not verify: {report.problems}")
    newest = steps[0] if steps else 0
    if newest < newest_before:
        problems.append(f"newest committed step went back from {newest_before} to {newest}")
    restored = mgr.restore()
    if steps and restored is None:
        problems.append("restore found nothing although generations are committed")
    if restored is not None:
        if restored.step != newest:
            problems.append(f"restore chose step {restored.step}, newest committed is {newest}")
        if restored.skipped:
            problems.append(f"restore skipped {restored.skipped}")
        for key, value in expected_state(restored.step, size).items():
            got: Any = restored.state.get(key)
            same = np.array_equal(got, value) if isinstance(value, np.ndarray) else got == value
            if not same:
                problems.append(f"restored step {restored.step} has wrong {key!r}")
    committed = {reader.read_commit(mgr.store, s).generation for s in steps}
    debris: set[str] = set()
    for info in mgr.store.list(GENERATIONS + "/"):
        name = generation_of(info.path)
        if name is not None and name not in committed:
            debris.add(name)
    return problems, newest, debris


def run_trials(
    url: str, trials: int, *, seed: int = 0, state_bytes: int = 32 << 10, max_saves_before_kill: int = 2
) -> CrashReport:
    """Run ``trials`` kill-and-check rounds against ``url``.

    The writer reports each finished save and its duration; the parent lets 0 to
    ``max_saves_before_kill`` saves finish, then kills at a uniformly random point of the
    next save (scaled by the measured duration), so kills land in every phase whatever
    the machine's speed.
    """
    started = time.monotonic()
    rng = random.Random(seed)
    # Plain fork: the writer inherits the imported library, so a trial costs milliseconds.
    # (forkserver/spawn would re-run the parent's __main__, e.g. all of pytest, per child.)
    ctx = mp.get_context("fork")
    report = CrashReport()
    _, _, debris_before = check_store(url, state_bytes, 0)
    for trial in range(trials):
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_writer, args=(url, seed * 100003 + trial, state_bytes, child), daemon=True)
        proc.start()
        child.close()
        if not parent.poll(30):
            proc.kill()
            report.violations.append(f"trial {trial}: writer never became ready")
            break
        parent.recv()
        duration = 0.005
        for _ in range(rng.randint(0, max_saves_before_kill)):
            if not parent.poll(30):
                break
            duration = parent.recv()
        time.sleep(rng.uniform(0, 1.2 * duration))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        parent.close()
        problems, newest, debris = check_store(url, state_bytes, report.newest_step)
        report.violations.extend(f"trial {trial}: {p}" for p in problems)
        report.commits += newest - report.newest_step
        report.newest_step = newest
        report.killed_mid_save += bool(debris - debris_before)
        debris_before = debris
        report.trials += 1
    report.seconds = time.monotonic() - started
    return report
