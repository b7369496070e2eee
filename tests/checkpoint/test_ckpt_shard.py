"""Packed shards (issue 32 item 1): placement, block hashes, ranged reads, whole-shard checks,
and a shard copied to another store (a node's local directory, issue 33) verified there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spotgpu.checkpoint import CheckpointManager, layout, reader, shard
from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.hashing import digest
from spotgpu.checkpoint.manifest import block_count
from spotgpu.checkpoint.snapshot import normalize
from spotgpu.checkpoint.writer import ShardWriter
from spotgpu.storage.faults import CountingStore
from spotgpu.storage.resilient import ResilientStore
from spotgpu.storage.store import open_store


def test_values_are_aligned_and_a_new_object_starts_only_past_the_split() -> None:
    placements, sizes = shard.place([10, 100, 5], split=1000)
    assert [(p.shard, p.offset) for p in placements] == [(0, 0), (0, 64), (0, 192)]
    assert sizes == [197]
    placements, sizes = shard.place([600, 600, 2000, 1], split=1000)
    assert [(p.shard, p.offset) for p in placements] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert sizes == [600, 600, 2000, 1]  # a value larger than the split gets an object of its own


def _write(root: Path, state: dict, *, block: int = 1 << 10, split: int = shard.SHARD_SPLIT_BYTES):  # type: ignore[no-untyped-def]
    store = open_store(root.as_uri())
    sw = ShardWriter(store, layout.generation_name(1, "s"), 1, 0, 1, "xxh3_128", hash_block=block, split_bytes=split)
    return store, sw.write(normalize(state))


def test_every_block_of_a_value_has_its_hash(tmp_path: Path) -> None:
    data = np.arange(5000, dtype=np.uint8)
    _store, part = _write(tmp_path, {"big": data, "empty": b"", "tiny": b"abc"}, block=1024)
    big = next(i for i in part.items if i.key == "big")
    assert len(big.hashes) == block_count(5000, 1024) == 5
    assert big.hashes[4] == digest("xxh3_128", data.tobytes()[4096:])
    empty = next(i for i in part.items if i.key == "empty")
    assert empty.hashes == (digest("xxh3_128", b""),)


def test_ranged_reads_coalesce_and_fill_the_callers_buffers(tmp_path: Path) -> None:
    state = {f"v{i}": np.full(100 + i, i, dtype=np.int32) for i in range(50)}
    store, part = _write(tmp_path, state)
    counting = CountingStore(store.inner)
    into = {k: np.zeros_like(v) for k, v in state.items()}
    values = reader.read_values(ResilientStore(counting), "xxh3_128", part.items, into)
    assert all(values[k] is into[k] and np.array_equal(into[k], v) for k, v in state.items())
    assert counting.total(op="get_range") == 1  # 50 values, one request: adjacent values share it


def test_a_value_split_across_objects_and_blocks_reads_back(tmp_path: Path) -> None:
    state = {"a": np.arange(3000, dtype=np.uint8), "b": np.arange(3000, dtype=np.uint8)[::-1].copy()}
    store, part = _write(tmp_path, state, block=512, split=4000)
    assert len(part.shards) == 2
    values = reader.read_values(store, "xxh3_128", part.items)
    assert all(np.array_equal(values[k], v) for k, v in state.items())


def test_verify_shard_checks_every_byte(tmp_path: Path) -> None:
    store, part = _write(tmp_path, {"a": b"x" * 10, "b": b"y" * 10})
    (ref,) = part.shards
    assert shard.verify_shard(store, "xxh3_128", ref.path, ref.size, part.items) == ref.size
    path = tmp_path / ref.path
    raw = bytearray(path.read_bytes())
    raw[30] = 1  # inside the zeros between the two values: no value reads it, verify does
    path.write_bytes(raw)
    with pytest.raises(VerificationError, match="non-zero padding"):
        shard.verify_shard(store, "xxh3_128", ref.path, ref.size, part.items)


def test_a_shard_copied_to_another_store_verifies_there(tmp_path: Path) -> None:
    """The node-local tier's copy: the shard and its part, byte for byte, checked on arrival."""
    url = (tmp_path / "store").as_uri()
    mgr = CheckpointManager(url)
    state = {"w": np.random.default_rng(0).standard_normal(10_000).astype(np.float32), "meta": b"m"}
    info = mgr.save(3, state)
    record = reader.read_commit(mgr.store, 3)
    part = reader.read_part(mgr.store, record, record.parts[0])
    local = open_store((tmp_path / "node-local").as_uri())
    for ref in part.shards:
        local.put(ref.path, mgr.store.get(ref.path))
        assert shard.verify_shard(local, record.hash_algorithm, ref.path, ref.size, part.items) == ref.size
    values = reader.read_values(local, record.hash_algorithm, part.items)
    assert np.array_equal(values["w"], state["w"]) and values["meta"] == b"m" and info.committed
    flipped = bytearray(local.get(part.shards[0].path))
    flipped[100] ^= 1
    local.put(part.shards[0].path, flipped)
    with pytest.raises(VerificationError, match="hash mismatch"):
        shard.verify_shard(local, record.hash_algorithm, part.shards[0].path, part.shards[0].size, part.items)
