"""The write side of the commit protocol.

0. Each rank holds a *lease* (``generations/<gen>/_writing-r<rank>.json``), refreshed
   every few seconds until its save ends, so every other process (GC above all) sees
   the save in progress; see :class:`WriteLease`.
1. Each rank streams its objects under ``generations/<gen>/r<rank>/``, hashing every
   chunk as it passes, then checks each object's size with ``head``.
2. Each rank writes its manifest part and reads it back byte for byte.
3. The coordinator (rank 0) waits until every rank's part is present, reads each one
   back, checks it names this generation/step/rank, and hashes it.
4. The coordinator checks (``head``) that every object of every part is still there,
   that its lease never lapsed, then writes ``commits/<step>.json`` *create-only*. Losing that race means
   another attempt owns the step: this attempt's objects are debris for GC.
5. The coordinator reads the marker back. Other ranks poll for it. Only then is the
   generation committed.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.errors import (
    CheckpointError,
    CommitConflictError,
    CommitTimeoutError,
    LeaseLostError,
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
from spotgpu.storage.store import Store

#: Yields the chunks of item ``i``; the chunk is consumed once the generator resumes.
ChunkSource = Callable[[int, Item], Iterator[memoryview]]


#: Objects one rank writes concurrently.
WRITE_WORKERS = 2

#: Told which phase a save is in (the final save names it when its budget runs out).
PhaseHook = Callable[[str], None]
WRITING_OBJECTS = "writing this rank's objects"
WAITING_FOR_MARKER = "waiting for the commit marker"
CHECKING_OBJECTS = "checking every object before the commit marker"


def waiting_for_part(rank: int) -> str:
    return f"waiting for rank {rank}'s part"


def _no_phase(_phase: str) -> None:
    return None


class SaveCancelled(CheckpointError):
    """The save was abandoned (its time budget ran out) before the commit."""


class WriteLease:
    """A save in progress, visible to every process that can list the store.

    While the save runs, a thread rewrites ``generations/<gen>/_writing-r<rank>.json``
    every :data:`~spotgpu.checkpoint.layout.LEASE_REFRESH_SECONDS`. GC treats a
    generation whose lease was modified less than
    :data:`~spotgpu.checkpoint.layout.LEASE_TTL_SECONDS` ago as live and never deletes
    it, whatever its grace period. The writer, in turn, refuses to commit (see
    :meth:`check`) unless its last successful refresh is younger than half the TTL, so
    a writer that stalled long enough for GC to call it dead never commits objects GC
    may be deleting. The lease is deleted when the save ends (committed or not), so a
    failed save's debris ages out under the normal grace period.
    """

    def __init__(self, store: Store, generation: str, rank: int, refresh_seconds: float | None = None) -> None:
        self.store = store
        self.path = layout.lease_path(generation, rank)
        self.generation = generation
        self.rank = rank
        self.refresh_seconds = layout.LEASE_REFRESH_SECONDS if refresh_seconds is None else refresh_seconds
        self._last_ok = 0.0
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        doc = {
            "generation": self.generation,
            "rank": self.rank,
            "ttl_seconds": layout.LEASE_TTL_SECONDS,
            "refreshed_at": time.time(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        return json.dumps(doc, sort_keys=True).encode()

    def refresh(self) -> None:
        started = time.monotonic()
        self.store.put(self.path, self._body())
        self._last_ok = started  # counted from before the PUT: the store's mtime is no older

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_seconds):
            try:
                self.refresh()
            except Exception as err:  # a store hiccup; check() decides whether it mattered
                self._error = err

    def check(self) -> None:
        """Raise :class:`LeaseLostError` unless the lease was refreshed within half its TTL."""
        age = time.monotonic() - self._last_ok
        if age > layout.LEASE_TTL_SECONDS / 2:
            cause = f" (last refresh error: {self._error})" if self._error else ""
            raise LeaseLostError(
                f"{self.path}: lease last refreshed {age:.1f}s ago, past half its {layout.LEASE_TTL_SECONDS:.0f}s "
                f"TTL{cause}; GC may have deleted this generation, so it is not committed"
            )

    def __enter__(self) -> WriteLease:
        self.refresh()
        self._thread = threading.Thread(target=self._run, name=f"spotgpu-ckpt-lease-{self.generation}", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with contextlib.suppress(Exception):
            self.store.delete(self.path)


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
    *,
    phase: PhaseHook = _no_phase,
) -> RankPart:
    """Steps 1-2: write this rank's objects and its manifest part."""
    phase(WRITING_OBJECTS)

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
    before_marker: Callable[[], None] = lambda: None,
    phase: PhaseHook = _no_phase,
    check_objects: bool = True,
) -> CommitRecord:
    """Steps 3-5 on the coordinator: check every part and every object, then write the
    commit marker create-only. ``before_marker`` runs last before the marker (the
    manager passes its lease's :meth:`WriteLease.check`)."""
    deadline = time.monotonic() + timeout
    refs: list[PartRef] = []
    entries: list[ObjectEntry] = list(extra_objects)
    total = 0
    for rank in range(world_size):
        phase(waiting_for_part(rank))
        path = layout.part_path(generation, rank)
        body = _wait_for(store, path, deadline, poll, f"rank {rank}'s manifest part")
        part = decode_part(body, path)
        expected = (generation, step, rank, world_size, hash_algorithm)
        found = (part.generation, part.step, part.rank, part.world_size, part.hash_algorithm)
        if found != expected:
            raise VerificationError(f"{path}: names {found}, expected {expected}")
        refs.append(PartRef(rank, path, len(body), digest(hash_algorithm, body)))
        entries.extend(part.objects)
        total += part.total_bytes
    total += sum(e.size for e in extra_objects)
    phase(CHECKING_OBJECTS)
    if check_objects:
        check_objects_present(store, entries)
    before_marker()
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


def check_objects_present(store: Store, entries: Sequence[ObjectEntry]) -> None:
    """Raise unless every object is in the store with its recorded size: a commit marker
    must never name objects that are gone (e.g. deleted by a GC that raced the save)."""

    def check(entry: ObjectEntry) -> str | None:
        try:
            size = store.head(entry.path).size
        except ObjectMissingError:
            return f"{entry.path} is missing"
        return None if size == entry.size else f"{entry.path} has {size} bytes, the part says {entry.size}"

    with ThreadPoolExecutor(8) as pool:
        problems = [p for p in pool.map(check, entries) if p]
    if problems:
        raise VerificationError(
            f"not committing: {len(problems)} object(s) gone or changed before the commit marker "
            f"({'; '.join(problems[:3])})"
        )


def wait_for_commit(
    store: Store,
    generation: str,
    step: int,
    *,
    timeout: float = 600.0,
    poll: float = 0.05,
    phase: PhaseHook = _no_phase,
) -> CommitRecord:
    """Step 5 on a non-coordinator rank: the save returns only once the step is committed."""
    phase(WAITING_FOR_MARKER)
    marker = layout.commit_path(step)
    record = decode_commit(_wait_for(store, marker, time.monotonic() + timeout, poll, "the commit marker"), marker)
    if record.generation != generation:
        raise CommitConflictError(f"step {step} was committed by generation {record.generation}, not {generation}")
    return record
