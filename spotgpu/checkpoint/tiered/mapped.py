"""A committed local generation as read-only views over its files: what the durable upload sends.

The upload used to read the rank's whole state back from the local tier into fresh host memory,
a second copy of the state next to the training loop's own, outside any memory budget. It needs
no copy: the local tier is a tree of immutable files, so the upload maps a generation's shard
files read-only (page cache, which the kernel drops under pressure; no anonymous memory), checks
every byte once (the chain commit marker -> manifest part -> each block hash, the zeros between
values and each file's exact size: :class:`~spotgpu.checkpoint.shard.ShardCheck`, as
``verify`` does) and gives the store's save views of the values in place. A generation is never
written again once committed and the upload pins it against retention (:mod:`.uploads`), so what
was checked is what is sent.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spotgpu.checkpoint import reader
from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.manifest import LEGACY_FORMAT, ItemEntry
from spotgpu.checkpoint.shard import ShardCheck
from spotgpu.checkpoint.snapshot import rebuild
from spotgpu.storage.store import Store


@contextlib.contextmanager
def mapped_generation(root: Path, store: Store, step: int, generation: str) -> Iterator[dict[str, Any] | None]:
    """The world-size-1 generation ``generation`` of the local root ``root`` (``store`` opens the same
    root), verified, as views over its files; None for a legacy-format generation (read it instead).
    Raises :class:`VerificationError` if any check fails."""
    record = reader.read_commit(store, step)
    if record.generation != generation:
        raise VerificationError(f"step {step}: the local marker names {record.generation}, not {generation}")
    refs = [r for r in record.parts if r.rank == 0]
    if len(refs) != 1:
        raise VerificationError(f"generation {generation} has no single part for rank 0")
    part = reader.read_part(store, record, refs[0])
    if part.format == LEGACY_FORMAT:
        yield None
        return
    with contextlib.ExitStack() as maps:
        views: dict[str, memoryview] = {}
        for shard in part.shards:
            views[shard.path] = maps.enter_context(_mapped(root / shard.path, shard.path, shard.size))
            check = ShardCheck(record.hash_algorithm, shard.path, shard.size, part.items)
            check.update(views[shard.path])
            check.finish()
        state = {entry.key: _value(entry, views[entry.path]) for entry in part.items}
        try:
            yield state
        finally:
            state.clear()  # the views must go before their maps close


@contextlib.contextmanager
def _mapped(path: Path, name: str, size: int) -> Iterator[memoryview]:
    """The file read-only in memory, exactly ``size`` bytes long."""
    try:
        with open(path, "rb") as handle:
            found = os.fstat(handle.fileno()).st_size
            if found != size:
                raise VerificationError(f"{name}: {found} bytes, the part says {size}")
            if size == 0:
                yield memoryview(b"")
                return
            mapping = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise VerificationError(f"{name}: shard object is missing") from None
    view = memoryview(mapping)
    try:
        yield view
    finally:
        with contextlib.suppress(BufferError):  # a view still held elsewhere: the map goes with the last one
            view.release()
            mapping.close()


def _value(entry: ItemEntry, shard: memoryview) -> Any:
    """One value as a read-only view of its bytes in the mapped shard (the kind the save took)."""
    data = shard[entry.offset : entry.offset + entry.size]
    if entry.kind != "ndarray":
        return data
    try:
        return rebuild(entry.kind, data, entry.dtype, entry.shape)
    except (TypeError, ValueError) as err:
        raise VerificationError(f"{entry.path}: cannot rebuild {entry.key!r} ({err})") from None
