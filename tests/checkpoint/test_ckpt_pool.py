"""The snapshot buffer pool: warm buffers are reused across async saves, within the budget,
and a reused buffer never leaks one save's bytes into another's snapshot."""

from __future__ import annotations

import numpy as np

from spotgpu.checkpoint import CheckpointManager

CHUNK = 1 << 16


def base_of(buf: np.ndarray) -> int:
    return id(buf.base if isinstance(buf.base, np.ndarray) else buf)


def test_second_save_copies_into_the_first_saves_buffers(tmp_path, monkeypatch):
    mgr = CheckpointManager(tmp_path.as_uri(), chunk_bytes=CHUNK)
    state = {"w": np.arange(CHUNK, dtype=np.float32)}  # 4 chunks
    mgr.save_async(1, state).wait(30)
    pooled = {id(b) for b in mgr._pool._free}
    assert len(pooled) == 4

    taken: list[int] = []
    take = mgr._pool.take

    def recording_take(n: int) -> np.ndarray:
        buf = take(n)
        taken.append(base_of(buf))
        return buf

    monkeypatch.setattr(mgr._pool, "take", recording_take)
    handle = mgr.save_async(2, state)
    state["w"][:] = -1  # training resumes: the snapshot must not see this
    handle.wait(30)
    assert len(taken) == 4 and set(taken) == pooled
    restored = CheckpointManager(tmp_path.as_uri()).restore()
    assert restored is not None and restored.step == 2
    np.testing.assert_array_equal(restored.state["w"], np.arange(CHUNK, dtype=np.float32))


def test_pool_keeps_no_more_than_the_budget(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri(), chunk_bytes=CHUNK, memory_budget_bytes=2 * CHUNK)
    state = {"w": np.arange(2 * CHUNK, dtype=np.float32)}  # 8 chunks through a 2-chunk budget
    for step in (1, 2):
        mgr.save_async(step, state).wait(30)
        assert 1 <= len(mgr._pool._free) <= 2
    restored = CheckpointManager(tmp_path.as_uri()).restore()
    assert restored is not None and restored.step == 2
    np.testing.assert_array_equal(restored.state["w"], state["w"])
