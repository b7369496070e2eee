"""Async saves on a memory budget, final saves on a time budget, failures reported."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from spotgpu.checkpoint import CheckpointManager
from spotgpu.checkpoint.snapshot import HostBudget
from spotgpu.storage.store import open_store


class SlowStore:
    """Wraps a store; every data write sleeps, and the peak snapshot memory is observable."""

    def __init__(self, inner, delay: float, fail: bool = False) -> None:
        self.inner, self.delay, self.fail = inner, delay, fail
        self.url = inner.url

    def put(self, path, data):
        if "/r0" in path:
            if self.fail:
                raise OSError("disk on fire")

            def slow():
                for chunk in data if not isinstance(data, bytes | bytearray | memoryview) else [data]:
                    time.sleep(self.delay)
                    yield chunk

            return self.inner.put(path, slow())
        return self.inner.put(path, data)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_snapshot_streams_through_a_budget_smaller_than_the_state(tmp_path):
    store = SlowStore(open_store(tmp_path.as_uri()), delay=0.002)
    budget = 64 << 10
    mgr = CheckpointManager(tmp_path.as_uri(), store=store, memory_budget_bytes=budget)
    peak = 0
    original_acquire = HostBudget.acquire

    def spy(self, n, abort=lambda: False, on_block=lambda: None):
        nonlocal peak
        ok = original_acquire(self, n, abort, on_block)
        peak = max(peak, self.used)
        return ok

    state = {"a": np.arange(200_000, dtype=np.float32), "b": np.ones(50_000, dtype=np.int64)}  # ~1.2 MB
    HostBudget.acquire = spy  # type: ignore[method-assign]
    try:
        handle = mgr.save_async(1, state)
    finally:
        HostBudget.acquire = original_acquire  # type: ignore[method-assign]
    assert 0 < peak <= budget
    assert handle.wait(30).committed
    restored = mgr.restore()
    np.testing.assert_array_equal(restored.state["a"], state["a"])  # type: ignore[union-attr]
    assert mgr._budget.used == 0


def test_status_goes_writing_then_committed(tmp_path):
    store = SlowStore(open_store(tmp_path.as_uri()), delay=0.2)
    mgr = CheckpointManager(tmp_path.as_uri(), store=store)
    handle = mgr.save_async(3, {"x": np.zeros(10)})
    assert handle.status() == "writing"
    with pytest.raises(TimeoutError):
        handle.wait(0.01)
    assert handle.wait(10).step == 3 and handle.status() == "committed"


def test_background_failure_is_reported_and_frees_the_budget(tmp_path):
    store = SlowStore(open_store(tmp_path.as_uri()), delay=0, fail=True)
    mgr = CheckpointManager(tmp_path.as_uri(), store=store, memory_budget_bytes=1024)
    handle = mgr.save_async(1, {"x": np.zeros(10_000)})
    with pytest.raises(OSError, match="disk on fire"):
        handle.wait(10)
    assert handle.status() == "failed" and mgr._budget.used == 0
    assert mgr.list() == [] or not mgr.list()[0].committed


def test_saves_commit_in_step_order(tmp_path):
    store = SlowStore(open_store(tmp_path.as_uri()), delay=0.05)
    mgr = CheckpointManager(tmp_path.as_uri(), store=store)
    first = mgr.save_async(1, {"x": b"1"})
    second = mgr.save_async(2, {"x": b"2"})  # waits for the first to finish
    assert first.done()
    assert second.wait(10).step == 2


def test_final_save_reports_committed_within_budget(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri())
    result = mgr.save_final(9, {"x": np.ones(1000)}, budget_seconds=30)
    assert result.committed and result.generation and result.seconds < 30
    assert mgr.restore().step == 9  # type: ignore[union-attr]


def test_final_save_over_budget_is_cancelled_and_never_commits(tmp_path):
    store = SlowStore(open_store(tmp_path.as_uri()), delay=0.2)
    mgr = CheckpointManager(tmp_path.as_uri(), store=store)
    state = {"x": np.ones(10), "y": np.ones(10), "z": np.ones(10)}
    result = mgr.save_final(5, state, budget_seconds=0.25)
    assert not result.committed and "ran out" in result.reason and 0.25 <= result.seconds < 1.0
    deadline = time.monotonic() + 5.0  # the cancelled writer stops at its next chunk (0.2 s here; more under load)
    while (left := [t.name for t in threading.enumerate() if t.name.startswith("spotgpu-ckpt-final")]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert left == []
    assert mgr.restore() is None


def test_final_save_without_budget_writes_nothing(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri())
    result = mgr.save_final(1, {"x": b"1"}, budget_seconds=0)
    assert not result.committed and "no time budget" in result.reason and mgr.list() == []


def test_final_save_reports_a_failure(tmp_path):
    store = SlowStore(open_store(tmp_path.as_uri()), delay=0, fail=True)
    result = CheckpointManager(tmp_path.as_uri(), store=store).save_final(1, {"x": b"1"}, budget_seconds=5)
    assert not result.committed and "disk on fire" in result.reason


def test_a_failed_snapshot_does_not_hang_the_writer(tmp_path, monkeypatch):
    mgr = CheckpointManager(tmp_path.as_uri())
    calls = 0

    def take(n):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise MemoryError("no host memory")
        return np.empty(n, dtype=np.uint8)

    monkeypatch.setattr(mgr._pool, "take", take)
    with pytest.raises(MemoryError):
        mgr.save_async(1, {"a": np.ones(10), "b": np.ones(10)})
    deadline = time.monotonic() + 5
    while any(t.name == "spotgpu-ckpt-save-1" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "spotgpu-ckpt-save-1" for t in threading.enumerate())
    assert mgr.restore() is None and mgr._budget.used == 0
