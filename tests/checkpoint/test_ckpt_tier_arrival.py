"""A peer copy is checked block by block as it arrives (issue 33 leftover: "a copy is not verified while it
streams in"): a corrupted block is caught when it lands, the rest of that copy is not written, and an intact
copy is accepted without reading its data back."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spotgpu.checkpoint import reader, writer
from spotgpu.checkpoint.hashing import digest
from spotgpu.checkpoint.manifest import decode_part
from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager
from spotgpu.checkpoint.tiered.arrival import ArrivalCheck
from spotgpu.checkpoint.tiered.transport import _Writer

STEP = 7


@pytest.fixture
def sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path], str]:
    """A committed local generation of a few hash blocks (the block size shrunk): its root, files and name."""
    original = writer.ShardWriter.__init__

    def small_blocks(self: writer.ShardWriter, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **{**kwargs, "hash_block": 1 << 18})  # 12 blocks of 256 KiB for "w"

    monkeypatch.setattr(writer.ShardWriter, "__init__", small_blocks)
    mgr = TieredCheckpointManager((tmp_path / "store").as_uri(), LocalTier(tmp_path / "local", peer_copies=0,
                                                                           durable_every=100), session="s1")  # fmt: skip
    state = {"w": np.arange(3 << 18, dtype=np.float32), "b": b"meta"}
    try:
        info = mgr.save(STEP, state)
    finally:
        mgr.close(10)
    root = mgr.node.shard_root(0)
    return root, mgr.node.generation_files(0, STEP, info.generation), info.generation


def stream(root: Path, files: list[Path], into: Path, check: ArrivalCheck, flip_at: int | None = None) -> list[int]:
    """Send ``files`` through the receiving end of the transport in 64 KiB chunks; byte ``flip_at`` of the
    stream flips on the way. Returns, per chunk, whether the check had failed once the chunk landed."""
    data = bytearray(b"".join((root / f).read_bytes() for f in files))
    if flip_at is not None:
        data[flip_at] ^= 0xFF
    writer = _Writer(into, [(f, (root / f).stat().st_size) for f in files], check)
    failed_after = []
    for at in range(0, len(data), 64 << 10):
        writer.write(memoryview(data)[at : at + (64 << 10)])
        failed_after.append(int(check.failed))
    writer.close()
    return failed_after


def test_the_sender_lists_documents_first_shard_data_then_the_marker(sent: tuple[Path, list[Path], str]) -> None:
    _root, files, _generation = sent
    names = [f.as_posix() for f in files]
    assert names[-1] == f"commits/{STEP:012d}.json"
    first_shard = next(i for i, n in enumerate(names) if n.endswith(".shard"))
    assert any(n.rsplit("/", 1)[-1].startswith("part-") for n in names[:first_shard])


def test_an_intact_copy_is_accepted_without_reading_its_data_back(
    sent: tuple[Path, list[Path], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, files, generation = sent
    check = ArrivalCheck(STEP, generation)
    assert not any(stream(root, files, tmp_path / "in", check))
    assert len(check.checked) == 1 and next(iter(check.checked.values())) > 3 << 20

    def no_second_pass(*_a: object, **_k: object) -> int:
        raise AssertionError("the copy's shard was read back and hashed a second time")

    monkeypatch.setattr(reader, "verify_shard", no_second_pass)
    report = check.verify(tmp_path / "in")
    assert report.ok, report.problems
    assert report.generation == generation


def test_a_block_corrupted_in_flight_is_caught_when_it_lands_and_the_rest_is_not_written(
    sent: tuple[Path, list[Path], str], tmp_path: Path
) -> None:
    root, files, generation = sent
    docs = sum((root / f).stat().st_size for f in files if not f.as_posix().endswith(".shard") and "commits/" not in f.as_posix())
    flip = docs + (1 << 20) + 5  # inside block 4 of "w" (blocks of 256 KiB, "w" first in the shard)
    check = ArrivalCheck(STEP, generation)
    failed_after = stream(root, files, tmp_path / "in", check, flip_at=flip)
    caught = failed_after.index(1)
    assert caught * (64 << 10) < docs + (5 << 18)  # caught at block 4's end, not at the end of the stream
    assert len(failed_after) - caught > 10  # ... with most of the copy still to come
    assert check.problem is not None and "hash mismatch in 'w' block 4" in check.problem
    shard_file = next((tmp_path / "in").rglob("*.shard"))
    assert shard_file.stat().st_size < (5 << 18) + 4096  # what came after was received, not written
    report = check.verify(tmp_path / "in")
    assert not report.ok and report.problems == [f"on arrival: {check.problem}"]


def test_a_forged_part_with_matching_blocks_fails_on_the_markers_hash(
    sent: tuple[Path, list[Path], str], tmp_path: Path
) -> None:
    """Every block is checked against the part that arrived before it; a copy whose shard block and part
    were both changed to agree (the part's hash of that block rewritten) passes those checks, and must
    still fail: the marker, which arrives last, vouches for the part by its hash."""
    root, files, generation = sent
    forged = tmp_path / "forged"
    shutil.copytree(root, forged)
    part_file = next(forged / f for f in files if f.name.startswith("part-"))
    part = decode_part(part_file.read_bytes())
    entry = next(i for i in part.items if i.key == "w")
    shard_file = forged / entry.path
    data = bytearray(shard_file.read_bytes())
    data[entry.offset + 10] ^= 0xFF
    shard_file.write_bytes(bytes(data))
    block = data[entry.offset : entry.offset + entry.block]
    forged_hash = digest(part.hash_algorithm, bytes(block))
    part_file.write_bytes(part_file.read_bytes().replace(entry.hashes[0].encode(), forged_hash.encode()))
    check = ArrivalCheck(STEP, generation)
    assert not any(stream(forged, files, tmp_path / "in", check))  # every block matched the forged part
    report = check.verify(tmp_path / "in")
    assert not report.ok
    assert any("which the commit marker does not vouch for" in p for p in report.problems)
