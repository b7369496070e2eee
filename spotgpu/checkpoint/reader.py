"""The read side: find committed generations and verify them by hash while reading.

Nothing here trusts a listing order or a timestamp: a generation is a candidate only
through its commit marker, and its bytes count only once every hash on the chain
commit marker -> manifest part -> value (format 2: each 64 MiB block of it) matches.
Both formats are read: the marker says which one its generation has.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.errors import CheckpointError, ObjectMissingError, VerificationError
from spotgpu.checkpoint.hashing import digest, new_hasher
from spotgpu.checkpoint.manifest import (
    LEGACY_FORMAT,
    CommitRecord,
    FailedVerdict,
    ItemEntry,
    ObjectEntry,
    PartRef,
    RankPart,
    decode_commit,
    decode_part,
    decode_verdict,
)
from spotgpu.checkpoint.shard import read_items, verify_shard
from spotgpu.checkpoint.snapshot import rebuild
from spotgpu.storage.store import Store

#: Format-1 objects read concurrently (file reads and xxh3 both release the GIL). On the
#: 2-vCPU benchmark VM 4 beat 1 and 2 by ~10% for a cold 1 GiB restore; 8 was no better.
READ_WORKERS = 4


def committed_steps(store: Store) -> list[int]:
    """Steps with a commit marker, newest first."""
    steps = {s for info in store.list(layout.COMMITS + "/") if (s := layout.parse_commit_path(info.path)) is not None}
    return sorted(steps, reverse=True)


def _verdicts(store: Store) -> dict[int, FailedVerdict]:
    out: dict[int, FailedVerdict] = {}
    for info in store.list(layout.FAILED + "/"):
        step = layout.parse_failed_path(info.path)
        if step is None:
            continue
        try:
            verdict = decode_verdict(store.get(info.path), info.path)
        except (ObjectMissingError, VerificationError):
            continue
        if verdict.step == step:
            out[step] = verdict
    return out


def failed_verdicts(store: Store) -> dict[int, FailedVerdict]:
    """Every readable verdict that a *committed* generation failed verification (a malformed
    one is no verdict: the step is simply verified again). Commit verdicts (a save that never
    committed) are left out: they never mark a committed generation failed."""
    return {s: v for s, v in _verdicts(store).items() if v.kind == "verification"}


def commit_verdict(store: Store, step: int) -> FailedVerdict | None:
    """The commit verdict of ``step`` (a save that gave up before its marker), if any."""
    path = layout.failed_path(step)
    try:
        verdict = decode_verdict(store.get(path), path)
    except (ObjectMissingError, VerificationError):
        return None
    return verdict if verdict.kind == "commit" and verdict.step == step else None


def read_commit(store: Store, step: int) -> CommitRecord:
    marker = layout.commit_path(step)
    record = decode_commit(store.get(marker), marker)
    if record.step != step or layout.parse_generation(record.generation) is None:
        raise VerificationError(f"{marker}: names step {record.step}, generation {record.generation!r}")
    return record


def read_part(store: Store, record: CommitRecord, ref: PartRef) -> RankPart:
    try:
        body = store.get(ref.path)
    except ObjectMissingError:
        raise VerificationError(f"{ref.path}: manifest part is missing") from None
    if len(body) != ref.size or digest(record.hash_algorithm, body) != ref.hash:
        raise VerificationError(f"{ref.path}: manifest part does not match the hash in the commit marker")
    part = decode_part(body, ref.path)
    if (part.generation, part.step, part.rank) != (record.generation, record.step, ref.rank):
        raise VerificationError(f"{ref.path}: names another generation, step or rank")
    if part.format != record.format:
        raise VerificationError(f"{ref.path}: format {part.format} in a format {record.format} generation")
    paths = [e.path for e in part.objects] + [s.path for s in part.shards]
    for path in paths:
        if not layout.belongs_to(path, record.generation):
            raise VerificationError(f"{ref.path}: object {path} is outside generation {record.generation}")
    return part


def read_hashed_into(store: Store, algorithm: str, entry: ObjectEntry, out: memoryview) -> None:
    """Read ``entry``'s object into ``out`` (exactly its size), hashing each chunk while
    it is still in the CPU's cache; raise unless size and hash match the manifest.

    Stores with ``get_into_streamed`` (both built-in ones) hand every chunk to the
    hasher right after reading it, so verification costs no second pass over the
    object; other stores are read whole and then hashed."""
    hasher = new_hasher(algorithm)
    try:
        streamed = getattr(store, "get_into_streamed", None)
        if streamed is not None:
            streamed(entry.path, out, hasher.update)
        else:
            store.get_into(entry.path, out)
            hasher.update(out)
    except ObjectMissingError:
        raise VerificationError(f"{entry.path}: object is missing") from None
    except ValueError as err:  # size mismatch, or the object shrank while being read
        raise VerificationError(f"{entry.path}: {err}") from None
    if hasher.hexdigest() != entry.hash:
        raise VerificationError(f"{entry.path}: hash mismatch (corrupt or overwritten)")


def read_object(store: Store, algorithm: str, entry: ObjectEntry) -> bytearray:
    """The object's bytes, only if size and hash match its manifest entry."""
    out = bytearray(entry.size)
    read_hashed_into(store, algorithm, entry, memoryview(out))
    return out


def read_object_new(store: Store, algorithm: str, entry: ObjectEntry) -> np.ndarray:
    """Like :func:`read_object`, into a fresh uninitialised buffer: ``bytearray(n)``
    zero-fills (touching every page once more) before the read writes it again."""
    out = np.empty(entry.size, dtype=np.uint8)
    read_hashed_into(store, algorithm, entry, out.data)
    return out


def read_object_into(store: Store, algorithm: str, entry: ObjectEntry, out: np.ndarray) -> np.ndarray:
    """Read the object into the caller's array; raise unless size and hash match."""
    read_hashed_into(store, algorithm, entry, out.reshape(-1).view(np.uint8).data)
    return out


def _target(entry: ObjectEntry | ItemEntry, into: Mapping[str, Any]) -> np.ndarray | None:
    """The caller's array for ``entry`` if it can take the bytes in place."""
    arr = into.get(entry.key)
    if entry.kind != "ndarray" or not isinstance(arr, np.ndarray):
        return None
    # A caller error, not a bad generation: raise instead of skipping to an older one.
    if arr.dtype.str != entry.dtype or arr.shape != entry.shape:
        raise TypeError(
            f"into[{entry.key!r}] is {arr.dtype.str}{arr.shape}, the checkpoint has {entry.dtype}{entry.shape}; "
            "fix: pass arrays matching the saved state, or leave the key out of into"
        )
    if not (arr.flags.c_contiguous and arr.flags.writeable):
        raise TypeError(f"into[{entry.key!r}] must be a writable C-contiguous array; fix: np.ascontiguousarray")
    return arr


def _value(entry: ObjectEntry | ItemEntry, data: np.ndarray) -> Any:
    try:
        return rebuild(entry.kind, data, entry.dtype, entry.shape)
    except (TypeError, ValueError) as err:  # the manifest passed its model but cannot rebuild
        raise VerificationError(f"{entry.path}: cannot rebuild {entry.key!r} ({err})") from None


def read_values(store: Store, algorithm: str, items: Sequence[ItemEntry], into: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Format-2 values by key, every block hash-checked: arrays named in ``into`` are filled
    in place (and returned), the rest read into fresh buffers. Adjacent values of one shard
    share a ranged request."""
    buffers: dict[str, np.ndarray] = {}
    in_place: set[str] = set()
    wanted: list[tuple[ItemEntry, memoryview]] = []
    for entry in items:
        target = _target(entry, into or {})
        if target is not None:
            in_place.add(entry.key)
            buffers[entry.key] = target
            wanted.append((entry, target.reshape(-1).view(np.uint8).data))
        else:
            buffers[entry.key] = np.empty(entry.size, dtype=np.uint8)
            wanted.append((entry, buffers[entry.key].data))
    read_items(store, algorithm, wanted)
    return {e.key: buffers[e.key] if e.key in in_place else _value(e, buffers[e.key]) for e in items}


def load_rank(store: Store, record: CommitRecord, rank: int, into: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One rank's state from a committed generation, every object hash-checked.

    Arrays named in ``into`` are filled in place (and returned); the rest are allocated."""
    refs = [r for r in record.parts if r.rank == rank]
    if len(refs) != 1:
        raise VerificationError(f"generation {record.generation} has no single part for rank {rank}")
    part = read_part(store, record, refs[0])
    if part.format != LEGACY_FORMAT:
        return read_values(store, record.hash_algorithm, part.items, into)

    def load(entry: ObjectEntry) -> Any:
        target = _target(entry, into or {})
        if target is not None:
            return read_object_into(store, record.hash_algorithm, entry, target)
        return _value(entry, read_object_new(store, record.hash_algorithm, entry))

    with ThreadPoolExecutor(READ_WORKERS) as pool:
        values = list(pool.map(load, part.objects))
    return {e.key: v for e, v in zip(part.objects, values, strict=True)}


@dataclass
class VerifyReport:
    """What ``verify`` found: ``ok`` only if every part and object matched its hash."""

    generation: str
    step: int | None
    ok: bool
    problems: list[str] = field(default_factory=list)
    objects_checked: int = 0
    bytes_checked: int = 0
    seconds: float = 0.0
    #: The generation the marker names (None if the marker could not be decoded).
    committed_generation: str | None = None
    #: True when there is no commit marker at all (nothing committed, so nothing failed).
    missing: bool = False


def verify_step(store: Store, step: int, checked: Mapping[str, int] | None = None) -> VerifyReport:
    """Read and hash every part and object of the generation committed at ``step``.

    ``checked``: shard objects (path -> size) whose every byte was already checked against the
    part read here, as they arrived (a peer copy: :class:`~spotgpu.checkpoint.shard.ShardCheck`);
    the marker and parts are still read and checked, those shards only for their size."""
    checked = checked or {}
    started = time.monotonic()
    try:
        record = read_commit(store, step)
    except (CheckpointError, ValueError) as err:
        missing = isinstance(err, ObjectMissingError)
        return VerifyReport(f"step {step}", step, False, [str(err)], seconds=time.monotonic() - started, missing=missing)
    report = VerifyReport(record.generation, step, True, committed_generation=record.generation)
    if sorted(r.rank for r in record.parts) != list(range(record.world_size)):
        report.problems.append(f"commit marker lists ranks {[r.rank for r in record.parts]} of {record.world_size}")
    entries: list[ObjectEntry] = [e for e in record.extra_objects if layout.belongs_to(e.path, record.generation)]
    if len(entries) != len(record.extra_objects):
        report.problems.append(f"commit marker lists objects outside generation {record.generation}")
    parts: list[RankPart] = []
    for ref in record.parts:
        try:
            part = read_part(store, record, ref)
        except CheckpointError as err:
            report.problems.append(str(err))
            continue
        parts.append(part)
        entries.extend(part.objects)
    for entry in entries:
        try:
            read_object_new(store, record.hash_algorithm, entry)
        except CheckpointError as err:
            report.problems.append(str(err))
            continue
        report.objects_checked += 1
        report.bytes_checked += entry.size
    for part in parts:
        for shard in part.shards:
            try:
                if shard.path in checked:
                    _same_size(store, shard.path, shard.size, checked[shard.path])
                    report.bytes_checked += shard.size
                else:
                    report.bytes_checked += verify_shard(store, record.hash_algorithm, shard.path, shard.size, part.items)
            except CheckpointError as err:
                report.problems.append(str(err))
                continue
            report.objects_checked += 1
    report.ok = not report.problems
    report.seconds = time.monotonic() - started
    return report


def _same_size(store: Store, path: str, size: int, streamed: int) -> None:
    """A shard checked as it arrived: the part's size, the bytes checked, and the file's size agree."""
    try:
        stored = store.head(path).size
    except ObjectMissingError:
        raise VerificationError(f"{path}: shard object is missing") from None
    if not stored == streamed == size:
        raise VerificationError(f"{path}: {stored} bytes stored, {streamed} checked on arrival, the part says {size}")
