"""The write side of the commit protocol.

1. Each rank streams its objects under ``generations/<gen>/r<rank>/``, hashing every
   chunk as it passes, then checks each object's size with ``head``.
2. Each rank writes its manifest part and reads it back byte for byte.
3. The coordinator (rank 0) waits until every rank's part is present, reads each one
   back, checks it names this generation/step/rank, and hashes it.
4. The coordinator writes ``commits/<step>.json`` *create-only*. Losing that race means
   another attempt owns the step: this attempt's objects are debris for GC.
5. The coordinator reads the marker back. Other ranks poll for it. Only then is the
   generation committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.errors import (
    CheckpointError,
    CommitConflictError,
    CommitTimeoutError,
    ObjectExistsError,
    ObjectMissingError,
    VerificationError,
)
from spotgpu.checkpoint.hashing import digest, new_hasher
from spotgpu.checkpoint.manifest import (
    CommitRecord,
    ObjectEntry,
    PartRef,
    RankPart,
    decode_commit,
    decode_part,
    encode,
)
from spotgpu.checkpoint.snapshot import Item, chunk_views
from spotgpu.checkpoint.store import Store

#: Yields the chunks of item ``i``; the chunk is consumed once the generator resumes.
ChunkSource = Callable[[int, Item], Iterator[memoryview]]


#: Objects one rank writes concurrently.
WRITE_WORKERS = 2


class SaveCancelled(CheckpointError):
    """The save was abandoned (its time budget ran out) before the commit."""


def direct_chunks(_index: int, item: Item) -> Iterator[memoryview]:
    """Chunks straight from the caller's buffers (synchronous saves: no copy)."""
    return chunk_views(item.view)


def write_part(
    store: Store,
    generation: str,
    step: int,
    rank: int,
    world_size: int,
    items: Sequence[Item],
    hash_algorithm: str,
    chunks_for: ChunkSource = direct_chunks,
    cancelled: Callable[[], bool] = lambda: False,
    workers: int = WRITE_WORKERS,
) -> RankPart:
    """Steps 1-2: write this rank's objects and its manifest part."""

    def write_one(index: int) -> ObjectEntry:
        item = items[index]
        path = layout.object_path(generation, rank, index, item.key)
        hasher = new_hasher(hash_algorithm)
        written = 0

        def hashed() -> Iterator[memoryview]:
            nonlocal written
            for chunk in chunks_for(index, item):
                if cancelled():
                    raise SaveCancelled(f"save of step {step} cancelled while writing {item.key!r}")
                hasher.update(chunk)
                written += chunk.nbytes
                yield chunk

        store.put(path, hashed())
        if written != item.size:
            raise CheckpointError(f"{path}: wrote {written} bytes of {item.size}")
        stored = store.head(path).size
        if stored != written:
            raise VerificationError(f"{path}: store reports {stored} bytes after writing {written}")
        return ObjectEntry(item.key, path, written, hasher.hexdigest(), item.kind, item.dtype, item.shape)

    # Items are started in order; while one object waits on its fsync/upload, the next
    # one streams (measured in bench/checkpoint_io.py: one object at a time left the
    # disk idle during every fsync).
    with ThreadPoolExecutor(max(1, workers)) as pool:
        entries = list(pool.map(write_one, range(len(items))))
    if cancelled():
        raise SaveCancelled(f"save of step {step} cancelled before its manifest part")
    part = RankPart(generation, step, rank, world_size, hash_algorithm, tuple(entries))
    body = encode(part)
    path = layout.part_path(generation, rank)
    store.put(path, body)
    if bytes(store.get(path)) != body:
        raise VerificationError(f"{path}: read back differs from what was written")
    return part


def _wait_for(store: Store, path: str, deadline: float, poll: float, what: str) -> bytearray:
    while True:
        try:
            return store.get(path)
        except ObjectMissingError:
            if time.monotonic() >= deadline:
                raise CommitTimeoutError(f"{what} ({path}) still missing at the deadline") from None
            time.sleep(poll)


def commit(
    store: Store,
    generation: str,
    step: int,
    world_size: int,
    hash_algorithm: str,
    *,
    timeout: float = 600.0,
    poll: float = 0.05,
    extra_objects: Sequence[ObjectEntry] = (),
) -> CommitRecord:
    """Steps 3-5 on the coordinator: check every part, then write the commit marker create-only."""
    deadline = time.monotonic() + timeout
    refs: list[PartRef] = []
    total = 0
    for rank in range(world_size):
        path = layout.part_path(generation, rank)
        body = _wait_for(store, path, deadline, poll, f"rank {rank}'s manifest part")
        part = decode_part(body, path)
        expected = (generation, step, rank, world_size, hash_algorithm)
        found = (part.generation, part.step, part.rank, part.world_size, part.hash_algorithm)
        if found != expected:
            raise VerificationError(f"{path}: names {found}, expected {expected}")
        refs.append(PartRef(rank, path, len(body), digest(hash_algorithm, body)))
        total += part.total_bytes
    total += sum(e.size for e in extra_objects)
    record = CommitRecord(generation, step, world_size, hash_algorithm, tuple(refs), total, tuple(extra_objects))
    marker_body = encode(record)
    marker = layout.commit_path(step)
    try:
        store.put_if_absent(marker, marker_body)
    except ObjectExistsError:
        existing = decode_commit(store.get(marker), marker)
        if existing.generation == generation:
            return existing  # our own earlier try whose reply was lost
        raise CommitConflictError(
            f"step {step} was already committed by generation {existing.generation}; "
            f"{generation} is left as debris for gc"
        ) from None
    if bytes(store.get(marker)) != marker_body:
        raise VerificationError(f"{marker}: read back differs from what was written")
    return record


def wait_for_commit(
    store: Store, generation: str, step: int, *, timeout: float = 600.0, poll: float = 0.05
) -> CommitRecord:
    """Step 5 on a non-coordinator rank: the save returns only once the step is committed."""
    marker = layout.commit_path(step)
    record = decode_commit(_wait_for(store, marker, time.monotonic() + timeout, poll, "the commit marker"), marker)
    if record.generation != generation:
        raise CommitConflictError(f"step {step} was committed by generation {record.generation}, not {generation}")
    return record
