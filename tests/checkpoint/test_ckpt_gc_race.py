"""Issue 22 item 1: GC never deletes a save in progress, whatever its grace period.

The defect: another process sits between writing its objects and writing its commit
marker; ``spotgpu ckpt gc --grace-seconds 0`` deleted that generation's objects, the
writer committed anyway, and the committed generation failed ``verify``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from spotgpu.checkpoint import CheckpointManager, GracePeriod, KeepLast, layout
from spotgpu.checkpoint import writer as writer_mod
from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.layout import LEASE_TTL_SECONDS
from spotgpu.checkpoint.retention import StoreSnapshot, plan_gc
from spotgpu.storage.store import ObjectInfo

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
GEN = "000000000002-writer"


class _PauseBeforeMarker:
    """The writer's store: the commit marker's create-only PUT waits for the parent."""

    def __init__(self, inner: object, paused: object, go: object) -> None:
        self.inner, self.paused, self.go = inner, paused, go
        self.url = inner.url  # type: ignore[attr-defined]

    def put_if_absent(self, path: str, data: bytes) -> None:
        self.paused.set()  # type: ignore[attr-defined]
        self.go.wait(60)  # type: ignore[attr-defined]
        self.inner.put_if_absent(path, data)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def _paused_writer(url: str, paused: object, go: object, result: object) -> None:
    """A writer that stops between its objects (and part) and its commit marker."""
    from spotgpu.storage.store import open_store

    store = _PauseBeforeMarker(open_store(url), paused, go)
    mgr = CheckpointManager(url, session="writer", store=store)  # type: ignore[arg-type]
    try:
        mgr.save(2, {"w": np.arange(1000, dtype=np.float32), "b": b"bytes" * 100})
        result.put("committed")  # type: ignore[attr-defined]
    except Exception as err:  # reported to the parent
        result.put(f"{type(err).__name__}: {err}")  # type: ignore[attr-defined]


def _gc_cli(url: str) -> dict[str, object]:
    env = {**os.environ}
    proc = subprocess.run(
        [sys.executable, "-m", "spotgpu", "ckpt", "gc", url, "--grace-seconds", "0", "--json"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_gc_at_grace_zero_spares_another_process_between_objects_and_marker(tmp_path: Path) -> None:
    url = tmp_path.as_uri()
    CheckpointManager(url).save(1, {"w": np.zeros(10, dtype=np.float32)})
    ctx = mp.get_context("fork")
    paused, go, result = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_paused_writer, args=(url, paused, go, result), daemon=True)
    proc.start()
    try:
        assert paused.wait(30), "writer never reached its commit"
        report = _gc_cli(url)
        assert report["deletedDebris"] == []
        assert report["liveWriters"] == [GEN]
        assert CheckpointManager(url, keep=1, grace_seconds=0, session="other").gc().live_writers == [GEN]
        go.set()
        assert result.get(timeout=30) == "committed"
    finally:
        go.set()
        proc.join(10)
        if proc.is_alive():
            assert proc.pid is not None
            os.kill(proc.pid, 9)
    checker = CheckpointManager(url, session="checker")
    assert checker.verify(2).ok, checker.verify(2).problems
    assert checker.restore().step == 2  # type: ignore[union-attr]
    # The lease is left to age out (one request per rank saved), not deleted.
    assert len(list(tmp_path.glob("shards/*/*/_writing-r00000.json"))) == 2


def test_the_commit_fails_if_its_objects_are_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backstop: whatever deleted them, a marker never names objects that are gone."""
    url = tmp_path.as_uri()
    original = writer_mod.ShardWriter.commit

    def delete_then_commit(self, **kwargs):  # type: ignore[no-untyped-def]
        (tmp_path / layout.shard_path(self.generation, 0)).unlink()
        return original(self, **kwargs)

    monkeypatch.setattr(writer_mod.ShardWriter, "commit", delete_then_commit)
    mgr = CheckpointManager(url)
    with pytest.raises(VerificationError, match=r"not committing: .*shard is gone"):
        mgr.save(1, {"a": b"x" * 10, "b": b"y" * 10})
    assert not (tmp_path / "commits" / "000000000001.json").exists()


def test_a_writer_whose_lease_lapsed_does_not_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that stalled past half the TTL (GC may already call it dead) refuses to commit."""
    mgr = CheckpointManager(tmp_path.as_uri())
    original = writer_mod.WriteLease.refresh

    def refresh_then_age(self):  # type: ignore[no-untyped-def]
        original(self)
        self._last_ok -= LEASE_TTL_SECONDS

    monkeypatch.setattr(writer_mod.WriteLease, "refresh", refresh_then_age)
    with pytest.raises(writer_mod.LeaseLostError, match="lease last refreshed"):
        mgr.save(1, {"a": b"x"})
    assert mgr.list()[0].committed is False


def _lease(gen: str, age: float) -> ObjectInfo:
    return ObjectInfo(f"generations/{gen}/_writing-r00000.json", 100, NOW - dt.timedelta(seconds=age))


def test_plan_keeps_generations_with_a_live_lease_whatever_the_grace() -> None:
    objects = (
        ObjectInfo(f"generations/{GEN}/r00000/00000-w", 10, NOW - dt.timedelta(hours=5)),
        _lease(GEN, LEASE_TTL_SECONDS - 1),
        ObjectInfo("generations/000000000003-dead/r00000/00000-w", 10, NOW - dt.timedelta(hours=5)),
        _lease("000000000003-dead", LEASE_TTL_SECONDS + 1),
    )
    plan = plan_gc(
        StoreSnapshot({}, objects), retention=KeepLast(1), debris=GracePeriod(0), newest_verified_step=None, now=NOW
    )
    assert plan.live_generations == [GEN]
    assert plan.debris_generations == ["000000000003-dead"]
    assert all(GEN not in p for p in plan.delete_paths)


def test_the_lease_is_refreshed_while_a_save_runs(tmp_path: Path) -> None:
    from spotgpu.storage.store import open_store

    store = open_store(tmp_path.as_uri())
    with writer_mod.WriteLease(store, GEN, 0, refresh_seconds=0.05) as lease:
        first = store.head(lease.path).last_modified
        time.sleep(0.3)
        assert store.head(lease.path).last_modified > first
        lease.check()
    # Then it is left to age out (one request per rank saved): kept, and no longer refreshed.
    ended = (tmp_path / lease.path).read_bytes()
    time.sleep(0.3)
    assert (tmp_path / lease.path).read_bytes() == ended, "refreshed after the save ended"


def test_a_slow_store_does_not_stretch_the_lease_period(tmp_path: Path) -> None:
    """Found by bench/recovery.py after issue 32 (two ranks saving 1 GiB each to moto on 2 cores):
    each lease PUT took seconds behind the uploads, the loop waited its period *after* each PUT, and
    the gap between refreshes grew to the PUT's time plus the period, so the commit's check found
    the lease 16.6 s old and the save failed. Refreshes now start every period from the last start."""
    from spotgpu.storage.store import open_store

    inner = open_store(tmp_path.as_uri())
    starts: list[float] = []

    class SlowLeaseStore:
        def __getattr__(self, name: str) -> object:
            return getattr(inner, name)

        def put(self, path: str, data: bytes, **kwargs: object) -> object:
            starts.append(time.monotonic())
            time.sleep(0.3)  # as long as the period: back to back now, 0.6 s apart before
            return inner.put(path, data, **kwargs)

    with writer_mod.WriteLease(SlowLeaseStore(), GEN, 0, refresh_seconds=0.3):  # type: ignore[arg-type]
        time.sleep(3.0)
    # before: a refresh every 0.6 s (the PUT, then the period), 5 or 6 in 3 s; now about 10
    assert len(starts) >= 8, [round(b - a, 2) for a, b in itertools.pairwise(starts)]


def test_a_commit_marker_being_written_is_not_debris_at_grace_zero() -> None:
    """Found by bench/ckpt_gc_drill.py: gc at grace 0 deleted the marker's temporary
    (commits/.tmp-*) while the coordinator was linking it into place."""
    objects = (
        ObjectInfo("commits/.tmp-abc-000000000584.json", 10, NOW - dt.timedelta(seconds=1)),
        ObjectInfo("commits/.tmp-old-000000000001.json", 10, NOW - dt.timedelta(seconds=LEASE_TTL_SECONDS + 1)),
    )
    plan = plan_gc(
        StoreSnapshot({}, objects), retention=KeepLast(1), debris=GracePeriod(0), newest_verified_step=None, now=NOW
    )
    assert plan.delete_paths == ["commits/.tmp-old-000000000001.json"]


def test_a_local_temporary_counts_as_a_writer_at_work() -> None:
    """On a local store the lease's own temporary is visible before the lease is."""
    objects = (ObjectInfo(f"generations/{GEN}/.tmp-x-_writing-r00000.json", 0, NOW),)
    plan = plan_gc(
        StoreSnapshot({}, objects), retention=KeepLast(1), debris=GracePeriod(0), newest_verified_step=None, now=NOW
    )
    assert plan.live_generations == [GEN] and plan.delete_paths == []
