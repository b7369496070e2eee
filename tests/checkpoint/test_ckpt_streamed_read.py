"""Streamed restore: every chunk is hashed as it is read, and damage anywhere is still caught."""

from __future__ import annotations

import numpy as np
import pytest

from spotgpu.checkpoint import CheckpointManager
from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.reader import read_object_into
from spotgpu.storage import local_store
from spotgpu.storage.store import open_store
from tests.checkpoint.ckpt_files import value_span

SMALL_CHUNK = 4096


@pytest.fixture(autouse=True)
def small_read_chunks(monkeypatch):
    """Many chunks per object, so "the middle chunk" exists without a large file."""
    monkeypatch.setattr(local_store, "READ_CHUNK", SMALL_CHUNK)


def big_state(step: int) -> dict[str, np.ndarray]:
    return {"w": np.arange(25 * SMALL_CHUNK // 4, dtype=np.float32) + step, "b": np.full(7, step, dtype=np.int64)}


class WholeReadStore:
    """A third-party store with only the Store protocol (no streamed reads)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.url = inner.url

    def __getattr__(self, name):
        if name == "get_into_streamed":
            raise AttributeError(name)
        return getattr(self.inner, name)


def flip_middle_byte(root, generation: str) -> None:
    victim, offset, size = value_span(root, generation, "w")
    raw = bytearray(victim.read_bytes())
    assert size > 20 * SMALL_CHUNK
    raw[offset + size // 2 + 5] ^= 0x40  # inside chunk 12 of 25
    victim.write_bytes(raw)


def test_streamed_read_hands_over_every_chunk_in_order(tmp_path):
    store = open_store(tmp_path.as_uri())
    payload = np.random.default_rng(1).integers(0, 255, 3 * SMALL_CHUNK + 17, dtype=np.uint8).tobytes()
    store.put("obj", payload)
    out = np.zeros(len(payload), dtype=np.uint8)
    seen: list[bytes] = []
    store.get_into_streamed("obj", out.data, lambda chunk: seen.append(bytes(chunk)))  # type: ignore[attr-defined]
    assert len(seen) == 4 and b"".join(seen) == payload and out.tobytes() == payload


@pytest.mark.parametrize("into", [False, True], ids=["new-arrays", "into-existing"])
@pytest.mark.parametrize("wrap", [False, True], ids=["streamed", "whole-read-store"])
def test_a_flipped_byte_in_a_middle_chunk_is_caught(tmp_path, into, wrap):
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, big_state(1))
    mgr.save(2, big_state(2))
    newest = mgr.list()[0].generation
    flip_middle_byte(tmp_path, newest)

    store = open_store(tmp_path.as_uri())
    fresh = CheckpointManager(tmp_path.as_uri(), store=WholeReadStore(store) if wrap else store)
    target = {k: np.zeros_like(v) for k, v in big_state(0).items()}
    restored = fresh.restore(into=target if into else None)
    assert restored is not None and restored.step == 1
    assert restored.skipped[0][0] == newest and "hash mismatch" in restored.skipped[0][1]
    np.testing.assert_array_equal(restored.state["w"], big_state(1)["w"])
    if into:
        assert restored.state["w"] is target["w"]
    report = fresh.verify(newest)
    assert not report.ok and "hash mismatch" in report.problems[0]


def test_a_grown_shard_fails_verify_but_never_changes_a_restored_value(tmp_path):
    """Bytes appended to a shard are never read by a restore (every value is a hashed range
    the index names); ``verify`` reads the whole object and reports the size."""
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, big_state(1))
    gen = mgr.list()[0].generation
    victim, _offset, _size = value_span(tmp_path, gen, "w")
    with victim.open("ab") as f:
        f.write(b"extra")
    report = CheckpointManager(tmp_path.as_uri()).verify(gen)
    assert not report.ok and "bytes, the part says" in report.problems[0]
    restored = CheckpointManager(tmp_path.as_uri()).restore()
    assert restored is not None and restored.step == 1
    np.testing.assert_array_equal(restored.state["w"], big_state(1)["w"])


def test_a_format_1_object_that_grew_is_a_size_mismatch_not_a_partial_read(tmp_path):
    from spotgpu.checkpoint.manifest import ObjectEntry

    store = open_store(tmp_path.as_uri())
    data = np.arange(25 * SMALL_CHUNK // 4, dtype=np.float32)
    store.put("generations/000000000001-a/r00000/00000-w", data.tobytes() + b"extra")
    from spotgpu.checkpoint.hashing import digest

    entry = ObjectEntry("w", "generations/000000000001-a/r00000/00000-w", data.nbytes, digest("xxh3_128", data))
    with pytest.raises(VerificationError, match="bytes"):
        read_object_into(store, "xxh3_128", entry, np.zeros_like(data))
