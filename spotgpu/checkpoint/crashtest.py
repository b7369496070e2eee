"""Crash-consistency drill: SIGKILL a saving process at random points, then check the store.

Each trial starts a writer process that restores, then saves (sync or async) and
garbage-collects steps in a loop; the parent kills it with SIGKILL at a random moment.
After every kill the checker demands that:

- every committed generation verifies (never a torn commit),
- ``restore()`` returns the newest committed step, with exactly the bytes saved for it,
  and skips nothing,
- the newest committed step never goes backwards across trials (GC never removes it).

With ``concurrent_gc=True`` a second process garbage-collects at grace 0 the whole time
(paused only while the checker looks), the race of issue 22. ``unprotected=True`` saves
the way the library did before that fix (no writer lease, no object check before the
marker) so ``bench/ckpt_gc_drill.py`` can show what the protection prevents.

Used by the test suite (>=100 quick trials on file://), by ``bench/checkpoint_io.py`` and
``bench/ckpt_gc_drill.py`` (more trials); point it at a real bucket URL to drill your own store.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import random
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spotgpu.checkpoint import reader
from spotgpu.checkpoint.errors import CheckpointError
from spotgpu.checkpoint.layout import OBJECT_AREAS, generation_of
from spotgpu.checkpoint.manager import CheckpointManager

#: A writer's coordinator gives up waiting for a part (deleted by an unprotected race) this fast.
DRILL_COMMIT_TIMEOUT = 2.0


def expected_state(step: int, size: int) -> dict[str, Any]:
    """Deterministic per step, and different per object, so a torn mix is detectable."""
    n = max(1, size // 8)
    return {
        "params": np.arange(n, dtype=np.int32) + step,
        "optim": np.full(n, step, dtype=np.int32),
        "meta": f"step={step}".encode(),
    }


def _writer(url: str, seed: int, size: int, ready: Any, unprotected: bool = False) -> None:
    """The victim: save forever (children only; killed by the parent).

    A save that fails (only possible when a GC raced it) is counted and the loop goes on."""
    rng = random.Random(seed)
    mgr = CheckpointManager(
        url, keep=3, grace_seconds=0, commit_timeout_seconds=DRILL_COMMIT_TIMEOUT, _unprotected_baseline=unprotected
    )
    restored = mgr.restore()
    step = restored.step if restored else 0
    ready.send((0.0, ""))
    while True:
        step += 1
        started = time.monotonic()
        failed = ""
        try:
            if rng.random() < 0.5:
                mgr.save(step, expected_state(step, size))
            else:
                mgr.save_async(step, expected_state(step, size)).wait()
            if rng.random() < 0.3:
                mgr.gc()
        except Exception as err:  # CheckpointError, or OSError from a file deleted under the writer
            failed = f"{type(err).__name__}: {err}"[:300]
        ready.send((time.monotonic() - started, failed))


def _gc_loop(url: str, lock: Any, unprotected: bool) -> None:
    """The concurrent collector: gc at grace 0 forever, holding ``lock`` while it works."""
    mgr = CheckpointManager(url, keep=3, grace_seconds=0, session="drillgc", _unprotected_baseline=unprotected)
    while True:
        with lock, contextlib.suppress(Exception):  # a listing racing a delete: try again
            mgr.gc()
        time.sleep(0.001)


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
    #: Restores whose bytes differ from what was saved for their step.
    torn_restores: int = 0
    #: Checks where restore did not return the newest committed step, verified.
    unverified_restores: int = 0
    #: Distinct committed generations that failed verification.
    committed_failing_verify: int = 0
    #: Saves that raised in the writer (a race the protection turned into an error).
    failed_saves: int = 0
    #: The first few of those errors.
    save_errors: list[str] = field(default_factory=list)


def check_store(url: str, size: int, newest_before: int) -> tuple[list[str], int, set[str]]:
    """(violations, newest committed step, uncommitted generations present)."""
    problems, newest, debris, _ = _check(url, size, newest_before)
    return problems, newest, debris


def _check(url: str, size: int, newest_before: int) -> tuple[list[str], int, set[str], set[str]]:
    """check_store, plus the committed generations that fail verification."""
    mgr = CheckpointManager(url, session="checker")
    problems: list[str] = []
    failing: set[str] = set()
    steps = reader.committed_steps(mgr.store)
    for step in steps:
        report = reader.verify_step(mgr.store, step)
        if not report.ok:
            failing.add(report.generation)
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
    committed = {g for s in steps if (g := _generation(mgr, s))}
    debris: set[str] = set()
    for info in (i for area in OBJECT_AREAS for i in mgr.store.list(area + "/")):
        name = generation_of(info.path)
        if name is not None and name not in committed:
            debris.add(name)
    return problems, newest, debris, failing


def _generation(mgr: CheckpointManager, step: int) -> str | None:
    try:
        return reader.read_commit(mgr.store, step).generation
    except CheckpointError:
        return None


def _count(report: CrashReport, problems: list[str]) -> None:
    report.torn_restores += any(" has wrong " in p for p in problems)
    report.unverified_restores += any(p.startswith(("restore chose", "restore skipped", "restore found")) for p in problems)


def run_trials(
    url: str,
    trials: int,
    *,
    seed: int = 0,
    state_bytes: int = 32 << 10,
    max_saves_before_kill: int = 2,
    concurrent_gc: bool = False,
    unprotected: bool = False,
) -> CrashReport:
    """Run ``trials`` kill-and-check rounds against ``url``.

    The writer reports each finished save and its duration; the parent lets 0 to
    ``max_saves_before_kill`` saves finish, then kills at a uniformly random point of the
    next save (scaled by the measured duration), so kills land in every phase whatever
    the machine's speed. ``concurrent_gc``: a collector process runs gc at grace 0
    throughout (it is killed by PID at the end).
    """
    started = time.monotonic()
    rng = random.Random(seed)
    # Plain fork: the writer inherits the imported library, so a trial costs milliseconds.
    # (forkserver/spawn would re-run the parent's __main__, e.g. all of pytest, per child.)
    ctx = mp.get_context("fork")
    report = CrashReport()
    gc_lock = ctx.Lock()
    collector = ctx.Process(target=_gc_loop, args=(url, gc_lock, unprotected), daemon=True) if concurrent_gc else None
    if collector is not None:
        collector.start()
    try:
        _drill(ctx, rng, report, url, trials, seed, state_bytes, max_saves_before_kill, unprotected, gc_lock)
    finally:
        if collector is not None and collector.pid is not None:
            os.kill(collector.pid, signal.SIGKILL)
            collector.join()
    report.seconds = time.monotonic() - started
    return report


def _drill(
    ctx: Any,
    rng: random.Random,
    report: CrashReport,
    url: str,
    trials: int,
    seed: int,
    state_bytes: int,
    max_saves_before_kill: int,
    unprotected: bool,
    gc_lock: Any,
) -> None:
    with gc_lock:
        _, _, debris_before, _ = _check(url, state_bytes, 0)
    failing_seen: set[str] = set()
    for trial in range(trials):
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_writer, args=(url, seed * 100003 + trial, state_bytes, child, unprotected), daemon=True
        )
        proc.start()
        child.close()
        if not parent.poll(30):
            proc.kill()
            report.violations.append(f"trial {trial}: writer never became ready")
            break
        try:
            parent.recv()
        except EOFError:
            proc.join()
            report.violations.append(f"trial {trial}: writer died before it was ready (exit {proc.exitcode})")
            parent.close()
            continue
        duration = 0.005
        for _ in range(rng.randint(0, max_saves_before_kill)):
            if not parent.poll(30):
                break
            try:
                duration, failed = parent.recv()
            except EOFError:  # the writer died on its own
                break
            if failed:
                report.failed_saves += 1
                report.save_errors = [*report.save_errors, failed][:5]
        time.sleep(rng.uniform(0, 1.2 * duration))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        parent.close()
        with gc_lock:  # the collector pauses while the checker looks
            problems, newest, debris, failing = _check(url, state_bytes, report.newest_step)
        report.violations.extend(f"trial {trial}: {p}" for p in problems)
        _count(report, problems)
        failing_seen |= failing
        report.committed_failing_verify = len(failing_seen)
        report.commits += max(0, newest - report.newest_step)
        report.newest_step = max(newest, report.newest_step)
        report.killed_mid_save += bool(debris - debris_before)
        debris_before = debris
        report.trials += 1
