"""Packed shards: a rank's values in one data object, and reading them back by range.

Writing (:func:`place`, :class:`ShardStream`): the values go into one object in the order
given, each starting at a multiple of :data:`ALIGN` (zero bytes in between), hashed in
blocks of :data:`HASH_BLOCK` as they stream past. A new object starts only when the next
value would carry the current one past :data:`SHARD_SPLIT_BYTES`.

Reading (:func:`read_items`): the wanted values of one shard are read in as few ranged
requests as the store likes in parallel (``read_streams``: a few long sequential streams
on a local disk, more on an object store), each scattered straight into the values'
buffers and hashed block by block while the bytes are still in the CPU's cache. Adjacent
values share one request; blocks let the ranges of one big value be read in parallel.

:class:`ShardCheck` checks a whole shard object fed in order (every block hash, zero padding,
exactly its recorded size): :func:`verify_shard` feeds it from a store (what ``verify`` runs),
and a peer copy of a node-local shard (issue 33) feeds it each chunk as it arrives, so the
copy is verified in the pass that receives it, never read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from spotgpu.checkpoint.errors import CheckpointError, ObjectMissingError, VerificationError
from spotgpu.checkpoint.hashing import Hasher, new_hasher
from spotgpu.checkpoint.manifest import ItemEntry, block_count
from spotgpu.checkpoint.snapshot import Item
from spotgpu.storage.store import Store

#: Every value starts at a multiple of this: any dtype can be viewed in place, and a value
#: never shares a cache line with the one before it.
ALIGN = 64
#: Values are hashed in blocks of this size, so a reader verifies as it streams, and the
#: blocks of one big value can be read in parallel ranges. 64 MiB keeps the index small
#: (a 14 GB shard has ~220 block hashes) and the ranges long enough for full throughput.
HASH_BLOCK = 64 << 20
#: A shard object is split only past this size. 4 GiB stays under S3's 5 GiB limit for a
#: single PUT and a single CopyObject (so any tool, or the node-local tier, can move a
#: shard in one request), keeps a failed upload's redo bounded, and is 256 parts of 16 MiB,
#: far from the 10,000-part limit. Orbax's OCDBT targets 2 GiB data files for the same
#: reasons; below it, one object per rank (as PyTorch DCP's one .distcp file per rank).
SHARD_SPLIT_BYTES = 4 << 30
#: Values of one shard closer than this are read in one request (the gap is read and dropped).
COALESCE_GAP = 1 << 20
#: A read stream is at least this long (shorter shards are one request).
MIN_STREAM_BYTES = 16 << 20
#: Parallel read streams for stores that do not say (``Store.read_streams``).
DEFAULT_READ_STREAMS = 4
#: Buffer :func:`verify_shard` streams a whole shard through.
VERIFY_WINDOW = 64 << 20

_ZEROS = bytes(ALIGN)


def align_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class Placement:
    """Where one value goes: shard object ``shard``, byte ``offset``."""

    shard: int
    offset: int


def place(sizes: Sequence[int], split: int = SHARD_SPLIT_BYTES) -> tuple[list[Placement], list[int]]:
    """Placements of values of ``sizes`` in order, and each shard object's size.

    A value that would end past ``split`` starts a new object, unless the current one is
    empty (a value larger than ``split`` gets an object of its own)."""
    placements: list[Placement] = []
    ends = [0]
    for size in sizes:
        offset = align_up(ends[-1])
        if offset + size > split and ends[-1] > 0:
            ends.append(0)
            offset = 0
        placements.append(Placement(len(ends) - 1, offset))
        ends[-1] = offset + size
    return placements, ends


#: Yields the chunks of item ``i``; a chunk is consumed once the generator resumes.
ChunkSource = Callable[[int, Item], Iterator[memoryview]]


class SaveCancelled(CheckpointError):
    """The save was abandoned (its time budget ran out) before the commit."""


class ShardStream:
    """The bytes of one shard object in order: each value's chunks, zeros to align the next.

    Iterating hashes every value block by block into :attr:`hashes` (value index -> block
    hashes). A stream over the caller's own buffers (a sync save) can be iterated again, and
    a retried upload starts the hashes over; one over snapshot chunks that are freed once
    read (an async save) cannot (:meth:`payload` tells the store which it is)."""

    def __init__(
        self,
        values: Sequence[tuple[int, Item, int]],
        chunks_for: ChunkSource,
        algorithm: str,
        *,
        block: int = HASH_BLOCK,
        cancelled: Callable[[], bool] = lambda: False,
        step: int | None = None,
    ) -> None:
        self.values, self.chunks_for, self.algorithm = values, chunks_for, algorithm
        self.block, self.cancelled, self.step = block, cancelled, step
        self.hashes: dict[int, list[str]] = {}
        self.size = 0
        #: The chunks stay valid until the upload ends (the caller's own buffers).
        self.stable = False

    def payload(self, replayable: bool) -> ShardStream | Iterator[memoryview]:
        """``self`` for the caller's own buffers: iterable again, and its chunks stay valid
        until the upload ends (``stable``: a store need not copy them); a one-shot iterator
        over snapshot chunks that are reused as soon as they are read."""
        self.stable = replayable
        return self if replayable else iter(self)

    def __iter__(self) -> Iterator[memoryview]:
        self.hashes = {}
        pos = 0
        for index, item, offset in self.values:
            if offset > pos:
                yield memoryview(_ZEROS)[: offset - pos]
            hashes: list[str] = []
            hasher: Hasher = new_hasher(self.algorithm)
            in_block = written = 0
            for chunk in self.chunks_for(index, item):
                if self.cancelled():
                    raise SaveCancelled(f"save of step {self.step} cancelled while writing {item.key!r}")
                start = 0
                while start < chunk.nbytes:
                    take = min(chunk.nbytes - start, self.block - in_block)
                    hasher.update(chunk[start : start + take])
                    in_block += take
                    start += take
                    if in_block == self.block:
                        hashes.append(hasher.hexdigest())
                        hasher, in_block = new_hasher(self.algorithm), 0
                written += chunk.nbytes
                yield chunk
            if in_block or not hashes:
                hashes.append(hasher.hexdigest())
            if written != item.size:
                raise CheckpointError(f"{item.key!r}: wrote {written} bytes of {item.size}")
            self.hashes[index] = hashes
            pos = offset + item.size
        self.size = pos


# ---- reading -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Segment:
    """A stretch of a shard: one hash block of a value (``expected`` set) or a gap to drop."""

    offset: int
    target: memoryview
    expected: str | None
    label: str


def _segments(entry: ItemEntry, target: memoryview) -> list[_Segment]:
    spans = [(i * entry.block, min(entry.size, (i + 1) * entry.block)) for i in range(block_count(entry.size, entry.block))]
    return [
        _Segment(entry.offset + a, target[a:b], expected, f"{entry.key!r} block {i}")
        for i, ((a, b), expected) in enumerate(zip(spans, entry.hashes, strict=True))
    ]


def read_streams(store: Store) -> int:
    return int(getattr(store, "read_streams", DEFAULT_READ_STREAMS))


def read_items(store: Store, algorithm: str, wanted: Sequence[tuple[ItemEntry, memoryview]]) -> None:
    """Read every value into its target buffer (exactly its size), checking every block's
    hash; raise :class:`VerificationError` naming the value and block that do not match."""
    runs: list[tuple[str, list[_Segment]]] = []
    by_shard: dict[str, list[tuple[ItemEntry, memoryview]]] = {}
    for entry, target in wanted:
        if target.nbytes != entry.size:
            raise ValueError(f"buffer for {entry.key!r} has {target.nbytes} bytes, the value {entry.size}")
        by_shard.setdefault(entry.path, []).append((entry, target))
    streams = max(1, read_streams(store))
    for path, values in by_shard.items():
        values.sort(key=lambda v: v[0].offset)
        total = sum(e.size for e, _ in values)
        per_stream = max(MIN_STREAM_BYTES, -(-total // streams))
        run: list[_Segment] = []
        run_bytes = 0
        end = None
        for entry, target in values:
            for seg in _segments(entry, target):
                gap = 0 if end is None else seg.offset - end
                if run and (gap > COALESCE_GAP or run_bytes >= per_stream):
                    runs.append((path, run))
                    run, run_bytes, gap = [], 0, 0
                if gap > 0:
                    run.append(_Segment(end or 0, memoryview(bytearray(gap)), None, "gap"))
                run.append(seg)
                run_bytes += seg.target.nbytes + gap
                end = seg.offset + seg.target.nbytes
        if run:
            runs.append((path, run))

    def read_run(path: str, run: list[_Segment]) -> None:
        hashers = [new_hasher(algorithm) for _ in run]
        try:
            store.get_range_into(path, run[0].offset, [s.target for s in run], lambda i, piece: hashers[i].update(piece))
        except ObjectMissingError:
            raise VerificationError(f"{path}: shard object is missing") from None
        except ValueError as err:  # the object ends early
            raise VerificationError(f"{path}: {err}") from None
        for seg, hasher in zip(run, hashers, strict=True):
            if seg.expected is not None and hasher.hexdigest() != seg.expected:
                raise VerificationError(f"{path}: hash mismatch in {seg.label} (corrupt or overwritten)")

    if len(runs) <= 1:
        for path, run in runs:
            read_run(path, run)
        return
    with ThreadPoolExecutor(min(len(runs), streams)) as pool:
        for future in [pool.submit(read_run, path, run) for path, run in runs]:
            future.result()


class ShardCheck:
    """The checks of one whole shard object, fed its bytes in order, in pieces of any size.

    Every block hash must match, every byte between values must be zero, and exactly ``size``
    bytes must arrive. :func:`verify_shard` feeds it from a store; a peer copy (issue 33) feeds
    it each chunk as it arrives over the network, so the copy is verified in the same pass
    that receives it. The first problem is kept (``problem``); later bytes are ignored.
    """

    def __init__(self, algorithm: str, path: str, size: int, entries: Sequence[ItemEntry]) -> None:
        self.algorithm, self.path, self.size = algorithm, path, size
        #: (offset, length, expected hash or None for padding, label), covering [0, size) in order
        self.spans: list[tuple[int, int, str | None, str]] = []
        pos = 0
        for entry in sorted((e for e in entries if e.path == path), key=lambda e: e.offset):
            if entry.offset > pos:
                self.spans.append((pos, entry.offset - pos, None, "padding"))
            for i, expected in enumerate(entry.hashes):
                a = i * entry.block
                self.spans.append((entry.offset + a, min(entry.size, a + entry.block) - a, expected,
                                   f"{entry.key!r} block {i}"))  # fmt: skip
            pos = entry.offset + entry.size
        if pos < size:
            self.spans.append((pos, size - pos, None, "padding"))
        self.problem: str | None = None if pos <= size else f"{path}: {size} bytes, its values end at byte {pos}"
        self.received = 0
        self._hasher = new_hasher(algorithm)
        self._span, self._span_done = 0, 0

    def update(self, data: memoryview | bytes) -> None:
        """The next bytes of the object."""
        view = memoryview(data).cast("B")
        n = len(view)
        if self.problem is not None:
            self.received += n
            return
        if self.received + n > self.size:
            self.problem = f"{self.path}: more than its {self.size} bytes"
            self.received += n
            return
        at = 0
        while at < n:
            start, length, want, label = self.spans[self._span]
            take = min(n - at, length - self._span_done)
            piece = view[at : at + take]
            if want is None:
                if any(piece):
                    self.problem = f"{self.path}: non-zero {label} at byte {start + self._span_done}"
                    break
            else:
                self._hasher.update(piece)
            at += take
            self._span_done += take
            if self._span_done == length:
                if want is not None and self._hasher.hexdigest() != want:
                    self.problem = f"{self.path}: hash mismatch in {label} (corrupt or overwritten)"
                    break
                self._hasher, self._span, self._span_done = new_hasher(self.algorithm), self._span + 1, 0
        self.received += n

    def finish(self) -> None:
        """Raise VerificationError unless every byte arrived and checked out."""
        if self.problem is None and self.received != self.size:
            self.problem = f"{self.path}: {self.received} bytes arrived, the part says {self.size}"
        for _start, length, want, label in self.spans[self._span :]:  # empty values at the very end
            if self.problem is None and length == 0 and want is not None and new_hasher(self.algorithm).hexdigest() != want:
                self.problem = f"{self.path}: hash mismatch in {label}"
        if self.problem is not None:
            raise VerificationError(self.problem)


def verify_shard(store: Store, algorithm: str, path: str, size: int, entries: Sequence[ItemEntry]) -> int:
    """Read the whole shard object ``path`` once, sequentially, through a bounded buffer, into a
    :class:`ShardCheck`. Returns the bytes checked; raises VerificationError."""
    try:
        stored = store.head(path).size
    except ObjectMissingError:
        raise VerificationError(f"{path}: shard object is missing") from None
    if stored != size:
        raise VerificationError(f"{path}: {stored} bytes, the part says {size}")
    check = ShardCheck(algorithm, path, size, entries)
    window = bytearray(min(VERIFY_WINDOW, max(size, 1)))
    offset = 0
    while offset < size and check.problem is None:
        n = min(len(window), size - offset)
        view = memoryview(window)[:n]
        try:
            store.get_range_into(path, offset, [view])
        except ValueError as err:
            raise VerificationError(f"{path}: {err}") from None
        check.update(view)
        offset += n
    check.finish()
    return size
