"""The write side of the commit protocol: :class:`ShardWriter` (its docstring is the call order).

The request count is the design: a rank's save costs a constant number of requests whatever
its number of values, and the coordinator's commit two per rank, read 64 at a time (the
formula is in docs/checkpoints.md, "Requests per save", and ``tests/checkpoint/
test_ckpt_requests.py`` holds the code to it).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.errors import (
    CheckpointError,
    CommitConflictError,
    CommitTimeoutError,
    GenerationFailedError,
    LeaseLostError,
    ObjectExistsError,
    ObjectMissingError,
    VerificationError,
)
from spotgpu.checkpoint.hashing import digest
from spotgpu.checkpoint.manifest import (
    FORMAT,
    CommitRecord,
    FailedVerdict,
    ItemEntry,
    ObjectEntry,
    PartRef,
    RankPart,
    ShardRef,
    decode_commit,
    decode_part,
    decode_verdict,
    encode,
)
from spotgpu.checkpoint.shard import HASH_BLOCK, SHARD_SPLIT_BYTES, ChunkSource, SaveCancelled, ShardStream, place
from spotgpu.checkpoint.snapshot import Item, chunk_views
from spotgpu.storage.resilient import ResilientStore, resilient
from spotgpu.storage.store import Store

__all__ = [
    "CHECKING_OBJECTS",
    "WAITING_FOR_MARKER",
    "WRITING_OBJECTS",
    "ChunkSource",
    "CommitAgreement",
    "PhaseHook",
    "SaveCancelled",
    "ShardWriter",
    "WriteLease",
    "commit",
    "direct_chunks",
    "poll_cap",
    "wait_for_commit",
    "waiting_for_part",
    "write_part",
    "writing_marker",
]

#: Told which phase a save is in (the final save names it when its budget runs out).
PhaseHook = Callable[[str], None]
WRITING_OBJECTS = "writing this rank's objects"
WAITING_FOR_MARKER = "waiting for the commit marker"
CHECKING_OBJECTS = "checking every object before the commit marker"

#: Parts the coordinator reads (and shards it checks) at once: bounded, so a 1,024-rank
#: commit is 16 rounds of requests, not 1,024 threads.
GATHER_WORKERS = 64
#: The first wait between two polls of a missing part or marker; it grows to :func:`poll_cap`.
FIRST_POLL_SECONDS = 0.05
#: Reads per second the whole gang may spend polling for one save's marker and verdict:
#: a fifth of S3's 5,500 reads/s per prefix and of GCS's initial 5,000, so polling never
#: throttles itself, whatever the gang's size.
POLL_BUDGET_PER_SECOND = 1000.0
#: An async save's shard up to this size is gathered in memory before its upload (one PUT
#: on the cloud anyway), so a reset or a lost reply is simply retried; a larger one streams
#: (obstore retries each multipart part itself) and a failure past that fails the save.
#: A manager with a memory budget gathers only what fits it twice (the pieces, then the
#: joined body): ``CheckpointManager(memory_budget_bytes=)``.
GATHER_ONE_SHOT_BYTES = 32 << 20
#: A verdict gets this long to be written after the save's own deadline has passed.
VERDICT_GRACE_SECONDS = 10.0


def poll_cap(world_size: int) -> float:
    """The longest wait between two polls of one waiting rank (two reads per poll)."""
    return max(0.5, 2.0 * world_size / POLL_BUDGET_PER_SECOND)


def writing_marker(path: str) -> str:
    return f"writing the commit marker {path}"


def waiting_for_part(rank: int) -> str:
    return f"waiting for rank {rank}'s part"


def _no_phase(_phase: str) -> None:
    return None


def direct_chunks(_index: int, item: Item) -> Iterator[memoryview]:
    """Chunks straight from the caller's buffers (synchronous saves: no copy)."""
    return chunk_views(item.view)


class CommitAgreement(Protocol):
    """How the ranks of one save learn each other's progress without polling the store.

    With a process group (``spotgpu.checkpoint.collective.ProcessGroupAgreement``, or
    ``Gang.commit_agreement()``), every rank calls both, in this order, once per save."""

    def written(self, failure: str | None) -> dict[int, str]:
        """This rank's part is written (``None``) or why not; returns every rank's failure
        (rank -> reason), the same on every rank."""
        ...

    def outcome(self, failure: str | None, marker: bytes | None = None) -> tuple[str | None, bytes | None]:
        """The coordinator passes ``None`` and the marker's bytes once it is written, else
        why it gave up; every rank gets the coordinator's pair."""
        ...


class WriteLease:
    """A save in progress, visible to every process that can list the store.

    While the save runs, a thread rewrites ``_writing-r<rank>.json`` every
    :data:`~spotgpu.checkpoint.layout.LEASE_REFRESH_SECONDS`. GC treats a generation whose
    lease was modified less than :data:`~spotgpu.checkpoint.layout.LEASE_TTL_SECONDS` ago as
    live and never deletes it, whatever its grace period. The writer, in turn, refuses to
    commit (see :meth:`check`) unless its last successful refresh is younger than half the
    TTL, so a writer that stalled long enough for GC to call it dead never commits objects GC
    may be deleting. On exit the refreshing stops; the lease is *not* deleted (one request
    per rank saved): it ages out in 30 s, and goes with its generation.
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
        # One refresh every refresh_seconds counted from the start of the last, not from its end: a
        # store slow to answer (a big upload beside it, throttling, retries) must not stretch the
        # gap to the PUT's time plus the period, which check() would count against the save.
        next_at = time.monotonic() + self.refresh_seconds
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            started = time.monotonic()
            try:
                self.refresh()
            except Exception as err:  # a store hiccup; check() decides whether it mattered
                self._error = err
            next_at = started + self.refresh_seconds

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

    def release(self) -> None:
        """Stop refreshing (idempotent)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


@dataclass
class CommitTimings:
    """Where the coordinator's commit time went (seconds)."""

    #: Reading every part and checking every shard, waiting for late ranks included.
    gather: float = 0.0
    #: Writing the marker and reading it back.
    marker: float = 0.0


class ShardWriter:
    """One rank's side of saving one generation; on the coordinator (rank 0), its commit.

    Call order, every rank (``write``), then the coordinator (``commit``) or the others
    (``wait``). Requests are counted on the right; N ranks, T values per rank, P polls:

    0. *(caller, every rank)* Check the step is free: ``GET commits/<step>.json``. Present
       and naming this generation: done already (a retry). Another's: a conflict, or a failed
       generation the manager retires first. ......................................... 1 GET
    1. Lease: ``PUT shards/<hh>/<gen>/_writing-r<rank>.json``, refreshed every 5 s by a
       thread until this rank's part is written (the coordinator's: until the marker). It is
       not deleted: it ages out. ................................... 1 PUT (+1 per 5 s of save)
    2. Shard: the rank's values, in order, 64-byte aligned, streamed into *one* object,
       ``r<rank>-000.shard`` (a second only past ``SHARD_SPLIT_BYTES``, 4 GiB), hashing every
       value in 64 MiB blocks on the way. One PUT up to 32 MiB; above, a multipart upload
       with 8 parts in flight. ..................... 1 PUT (multipart: 2 + size / 16 MiB)
    3. Check the shard: ``HEAD``; its size must be what was written. ..................... 1 HEAD
    4. Part: ``PUT part-r<rank>.json``, the shard's index: per value key, offset, size,
       dtype, shape and block hashes; per shard object path and the size the store reported
       in step 3. It is not read back: the coordinator's read is the read-back. .............. 1 PUT
    5. *(coordinator)* Gather, 64 ranks at a time: ``GET`` each part (polled with backoff
       while missing, until ``commit_timeout_seconds``), check it names this generation,
       step, rank, world size and hash, hash it; ``HEAD`` each of its shard objects once
       (the size the part says). Values are never checked one by one. ....... 2 per rank
       While parts are missing, a verdict for this generation (step 8) ends the wait at
       once. .................................................... 1 GET per poll round
    6. *(coordinator)* Lease check (refreshed within half its TTL), then ``PUT
       commits/<step>.json`` create-only. An unknown outcome (reset, lost reply) is
       resolved by reading the marker back (``spotgpu.storage.resilient``): ours is
       success, another generation's a :class:`CommitConflictError`, none a retry. ....... 1 PUT
    7. *(coordinator)* ``GET`` the marker: the bytes must be ours. Committed. ............. 1 GET
    8. On failure: the coordinator that gives up before the marker, or any rank that
       could not write its part, ``PUT``s ``failed/<step>.json`` (a *commit* verdict
       naming the generation and why). .................................. 1 PUT, failures only
    9. *(every other rank)* Wait: ``GET`` the marker, and if it is missing ``GET`` the
       verdict. The first poll comes after most of the rank's last wait (a periodic save
       polls about once), then the wait grows from 50 ms to :func:`poll_cap` (0.5 s, 2 s at
       1,024 ranks: the gang polls at most ~1,000 reads/s). With a :class:`CommitAgreement` (a process
       group), nothing is polled: step 5 starts when every rank said its part is written,
       and the coordinator's outcome, with the marker it wrote, reaches every rank through
       the group. ............................... 2 per poll (agreement: none)

    So a save is ``7 N + 2`` requests with an agreement, whatever T is (format 1 needed about
    ``5 T N + 18 N``). Without one, each waiting rank adds one ``GET`` if the marker is there
    at its first poll, else two per poll, and a part that is late costs the coordinator one
    ``GET`` per poll of it; a save longer than 5 s adds a lease refresh per rank per 5 s.
    """

    def __init__(
        self,
        store: Store,
        generation: str,
        step: int,
        rank: int,
        world_size: int,
        hash_algorithm: str,
        *,
        deadline: float | None = None,
        phase: PhaseHook = _no_phase,
        agreement: CommitAgreement | None = None,
        split_bytes: int = SHARD_SPLIT_BYTES,
        hash_block: int = HASH_BLOCK,
    ) -> None:
        #: Every request of this save gives up retrying at ``deadline`` (``time.monotonic()``).
        self.store = resilient(store, deadline)
        self.generation, self.step, self.rank, self.world_size = generation, step, rank, world_size
        self.hash_algorithm = hash_algorithm
        self.deadline = deadline
        self.phase = phase
        self.agreement = agreement
        self.split_bytes, self.hash_block = split_bytes, hash_block
        self.part: RankPart | None = None
        self.timings = CommitTimings()
        self._rng = random.Random()
        #: Agreement votes cast: [written, outcome] (outcome None until written succeeded).
        self._said: list[bool | None] = [False, None]
        self._marker_body: bytes | None = None
        #: Seconds step 9 took (set by :meth:`wait`).
        self.waited: float | None = None

    # ---- steps 2-4 -------------------------------------------------------------------
    def write(
        self,
        items: Sequence[Item],
        chunks_for: ChunkSource = direct_chunks,
        cancelled: Callable[[], bool] = lambda: False,
        *,
        replayable: bool = True,
        gather_bytes: int = GATHER_ONE_SHOT_BYTES,
    ) -> RankPart:
        """Steps 2-4: this rank's shard(s) and its part. ``replayable``: the chunks can be
        produced again (the caller's own buffers), so a failed upload is simply retried;
        else a shard of at most ``gather_bytes`` is gathered first, so it can be."""
        self.phase(WRITING_OBJECTS)
        placements, sizes = place([item.size for item in items], self.split_bytes)
        shards: list[ShardRef] = []
        entries: list[ItemEntry | None] = [None] * len(items)
        for k, size in enumerate(sizes):
            path = layout.shard_path(self.generation, self.rank, k)
            values = [(i, items[i], p.offset) for i, p in enumerate(placements) if p.shard == k]
            stream = ShardStream(
                values, chunks_for, self.hash_algorithm, block=self.hash_block, cancelled=cancelled, step=self.step
            )
            if replayable or size > gather_bytes:
                self.store.put(path, stream.payload(replayable))
            else:  # a small one-shot stream is gathered first, so a failed upload can be sent again
                self.store.put(path, b"".join(bytes(chunk) for chunk in stream))
            if stream.size != size:
                raise CheckpointError(f"{path}: wrote {stream.size} bytes of {size}")
            stored = self.store.head(path).size
            if stored != size:
                raise VerificationError(f"{path}: store reports {stored} bytes after writing {size}")
            shards.append(ShardRef(path, size))
            for i, item, offset in values:
                entries[i] = ItemEntry(
                    item.key, path, offset, item.size, tuple(stream.hashes[i]), self.hash_block,
                    item.kind, item.dtype, item.shape,
                )  # fmt: skip
        if cancelled():
            raise SaveCancelled(f"save of step {self.step} cancelled before its manifest part")
        part = RankPart(
            self.generation,
            self.step,
            self.rank,
            self.world_size,
            self.hash_algorithm,
            shards=tuple(shards),
            items=tuple(e for e in entries if e is not None),
            hash_block=self.hash_block,
        )
        self.store.put(layout.part_path(self.generation, self.rank), encode(part))
        self.part = part
        return part

    # ---- steps 5-8, the coordinator ---------------------------------------------------
    def commit(
        self,
        *,
        timeout: float,
        extra_objects: Sequence[ObjectEntry] = (),
        before_marker: Callable[[], None] = lambda: None,
        check_objects: bool = True,
    ) -> CommitRecord:
        """Steps 5-7; on failure, step 8 (the verdict) before the error is raised."""
        failure: str | None = None
        self._marker_body = None
        try:
            record = self._commit(timeout, extra_objects, before_marker, check_objects)
        except (CommitConflictError, GenerationFailedError) as err:  # another's step, or a verdict already written
            failure = str(err)
            raise
        except BaseException as err:
            failure = f"the coordinator (rank {self.rank}) gave up: {_one_line(err)}"
            self.record_failure(failure)
            raise
        finally:
            self._say_outcome(failure, self._marker_body)
        return record

    def _commit(
        self,
        timeout: float,
        extra_objects: Sequence[ObjectEntry],
        before_marker: Callable[[], None],
        check_objects: bool,
    ) -> CommitRecord:
        started = time.monotonic()
        deadline = started + timeout
        failed = self._say_written(None)
        if failed:
            rank = min(failed)
            raise CheckpointError(f"rank {rank} did not write its part: {failed[rank]}")
        refs, total = self._gather(deadline, check_objects)
        total += sum(e.size for e in extra_objects)
        if check_objects:
            self._check_present(extra_objects)
        self.timings.gather = time.monotonic() - started
        before_marker()
        record = CommitRecord(
            self.generation, self.step, self.world_size, self.hash_algorithm, tuple(refs), total, tuple(extra_objects)
        )
        marker_started = time.monotonic()
        body = encode(record)
        marker = layout.commit_path(self.step)
        self.phase(writing_marker(marker))
        try:
            self.store.put_if_absent(marker, body)
        except ObjectExistsError:
            found = bytes(self.store.get(marker))
            existing = decode_commit(found, marker)
            if existing.generation == self.generation:
                self._marker_body = found
                return existing  # this generation's own earlier commit
            raise CommitConflictError(
                f"step {self.step} was already committed by generation {existing.generation}; "
                f"{self.generation} is left as debris for gc"
            ) from None
        if bytes(self.store.get(marker)) != body:
            raise VerificationError(f"{marker}: read back differs from what was written")
        self._marker_body = body
        self.timings.marker = time.monotonic() - marker_started
        return record

    def _gather(self, deadline: float, check_objects: bool) -> tuple[list[PartRef], int]:
        """Step 5: every part read and checked, every shard HEADed, ``GATHER_WORKERS`` at a time."""
        stop = threading.Event()
        cap = poll_cap(self.world_size)
        done: set[int] = set()
        late: set[int] = set()  # ranks whose part was missing at least once, until found

        def one(rank: int) -> tuple[PartRef, int]:
            path = layout.part_path(self.generation, rank)
            delay = FIRST_POLL_SECONDS
            while True:
                try:
                    body = self.store.get(path)
                    late.discard(rank)
                    break
                except ObjectMissingError:  # _watch owns the deadline and names the first missing rank
                    late.add(rank)
                    if stop.wait(self._jitter(delay)):
                        raise _Stopped from None
                    delay = min(cap, delay * 2)
            part = decode_part(body, path)
            expected = (self.generation, self.step, rank, self.world_size, self.hash_algorithm, FORMAT)
            found = (part.generation, part.step, part.rank, part.world_size, part.hash_algorithm, part.format)
            if found != expected:
                raise VerificationError(f"{path}: names {found}, expected {expected}")
            for shard in part.shards:
                if not layout.belongs_to(shard.path, self.generation):
                    raise VerificationError(f"{path}: shard {shard.path} is outside generation {self.generation}")
                if check_objects:
                    try:
                        stored = self.store.head(shard.path).size
                    except ObjectMissingError:
                        raise VerificationError(
                            f"not committing: {shard.path} is gone before the commit marker"
                        ) from None
                    if stored != shard.size:
                        raise VerificationError(
                            f"not committing: {shard.path} has {stored} bytes, the part says {shard.size}"
                        )
            done.add(rank)
            return PartRef(rank, path, len(body), digest(self.hash_algorithm, body)), part.total_bytes

        with ThreadPoolExecutor(min(GATHER_WORKERS, self.world_size)) as pool:
            futures: list[Future[tuple[PartRef, int]]] = [pool.submit(one, r) for r in range(self.world_size)]
            try:
                self._watch(futures, done, late, deadline, cap)
            finally:
                stop.set()
        errors = [e for f in futures if (e := f.exception()) is not None and not isinstance(e, _Stopped)]
        if errors:
            raise errors[0]
        results = [f.result() for f in futures]
        return [r for r, _ in results], sum(n for _, n in results)

    def _watch(
        self, futures: Sequence[Future[tuple[PartRef, int]]], done: set[int], late: set[int], deadline: float, cap: float
    ) -> None:
        """While parts are missing: name the lowest missing rank, and stop at a verdict (read
        only while some part is late: a gang whose parts are all there costs no verdict read)."""
        delay = FIRST_POLL_SECONDS
        while True:
            finished, pending = wait(futures, timeout=self._jitter(delay), return_when=FIRST_EXCEPTION)
            for future in finished:
                if future.exception() is not None:
                    return  # raised by result()
            if not pending:
                self.phase(CHECKING_OBJECTS)
                return
            missing = min(r for r in range(self.world_size) if r not in done)
            self.phase(waiting_for_part(missing))
            verdict = self._verdict() if late else None
            if verdict is not None:
                raise GenerationFailedError(
                    f"generation {self.generation} of step {self.step} failed: {verdict.reason}"
                )
            if time.monotonic() >= deadline:
                path = layout.part_path(self.generation, missing)
                raise CommitTimeoutError(f"rank {missing}'s manifest part ({path}) still missing at the deadline")
            delay = min(cap, delay * 2)

    def _check_present(self, entries: Sequence[ObjectEntry]) -> None:
        for entry in entries:
            try:
                size = self.store.head(entry.path).size
            except ObjectMissingError:
                raise VerificationError(f"not committing: {entry.path} is gone before the commit marker") from None
            if size != entry.size:
                raise VerificationError(f"not committing: {entry.path} has {size} bytes, expected {entry.size}")

    # ---- steps 8-9 ---------------------------------------------------------------------
    def record_failure(self, reason: str) -> None:
        """Step 8: the commit verdict, so every waiting rank stops at its next poll. Best
        effort (a store that refuses is only logged by the caller's error)."""
        verdict = FailedVerdict(self.step, self.generation, reason[:10_000], kind="commit", rank=self.rank)
        grace = time.monotonic() + VERDICT_GRACE_SECONDS
        store = ResilientStore(self.store.inner, self.store.policy, grace, stats=self.store.stats)
        with contextlib.suppress(Exception):
            store.put(layout.failed_path(self.step), encode(verdict))

    def _verdict(self) -> FailedVerdict | None:
        """This generation's commit verdict, if one was written."""
        path = layout.failed_path(self.step)
        try:
            verdict = decode_verdict(self.store.get(path), path)
        except (ObjectMissingError, VerificationError):
            return None
        if verdict.kind == "commit" and verdict.generation == self.generation:
            return verdict
        return None

    def wait(self, *, timeout: float, first_wait: float = 0.0) -> CommitRecord:
        """Step 9 on a rank other than the coordinator. ``first_wait``: seconds before the first
        poll (the manager passes most of its last save's wait, so a periodic save polls about
        once); :attr:`waited` is how long it took."""
        self.phase(WAITING_FOR_MARKER)
        started = time.monotonic()
        try:
            return self._wait(timeout, first_wait)
        finally:
            self.waited = time.monotonic() - started

    def _wait(self, timeout: float, first_wait: float) -> CommitRecord:
        if self.agreement is not None:
            self._say_written(None)
            failure, body = self._say_outcome(None)
            if failure is not None:
                raise GenerationFailedError(f"generation {self.generation} of step {self.step} failed: {failure}")
            if body is None:
                return self._marker_now()
            handed = decode_commit(body, layout.commit_path(self.step))
            if handed.generation != self.generation:
                raise CommitConflictError(
                    f"step {self.step} was committed by generation {handed.generation}, not {self.generation}"
                )
            return handed
        deadline = time.monotonic() + timeout
        cap = poll_cap(self.world_size)
        delay = FIRST_POLL_SECONDS
        marker = layout.commit_path(self.step)
        record: CommitRecord | None
        if first_wait > 0:
            time.sleep(min(first_wait, timeout))
            delay = min(cap, max(FIRST_POLL_SECONDS, first_wait / 10))
        while True:
            try:
                record = decode_commit(self.store.get(marker), marker)
            except ObjectMissingError:
                record = None
            if record is not None:
                if record.generation != self.generation:
                    raise CommitConflictError(
                        f"step {self.step} was committed by generation {record.generation}, not {self.generation}"
                    )
                return record
            verdict = self._verdict()
            if verdict is not None:
                raise GenerationFailedError(
                    f"generation {self.generation} of step {self.step} failed: {verdict.reason}"
                )
            if time.monotonic() >= deadline:
                raise CommitTimeoutError(f"the commit marker ({marker}) still missing at the deadline")
            time.sleep(self._jitter(delay))
            delay = min(cap, delay * 1.5)

    def _marker_now(self) -> CommitRecord:
        """The marker the coordinator said it wrote (one read: it must name this generation)."""
        marker = layout.commit_path(self.step)
        record = decode_commit(self.store.get(marker), marker)
        if record.generation != self.generation:
            raise CommitConflictError(f"step {self.step} was committed by generation {record.generation}, not {self.generation}")
        return record

    def written_or_failed(self, failure: BaseException | None) -> None:
        """A non-coordinator that could not write its part says so (step 8 and the agreement)."""
        if failure is None:
            return
        reason = f"rank {self.rank} could not write its part: {_one_line(failure)}"
        self.record_failure(reason)
        with contextlib.suppress(Exception):
            self._say_written(reason)
            self._say_outcome(reason if self.rank == 0 else None, None)

    # Each rank votes once per save, in order (written, then outcome); a vote after a
    # failed collective is skipped, since the group is broken and would only hang.
    def _say_written(self, failure: str | None) -> dict[int, str]:
        if self.agreement is None or self._said[0]:
            return {}
        self._said[0] = True
        answer = self.agreement.written(failure)
        self._said[1] = False
        return answer

    def _say_outcome(self, failure: str | None, marker: bytes | None = None) -> tuple[str | None, bytes | None]:
        if self.agreement is None or not self._said[0] or self._said[1] is not False:
            return None, None
        self._said[1] = True
        return self.agreement.outcome(failure, marker)

    def _jitter(self, delay: float) -> float:
        return delay / 2 + self._rng.uniform(0, delay / 2)


class _Stopped(Exception):
    """A gather worker told to stop (another rank's failure ended the commit)."""


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


# ---- the functions the manager and the DCP plugin call --------------------------------


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
    *,
    phase: PhaseHook = _no_phase,
    replayable: bool = True,
    deadline: float | None = None,
) -> RankPart:
    """Steps 2-4 of :class:`ShardWriter` (no lease, no agreement)."""
    writer = ShardWriter(store, generation, step, rank, world_size, hash_algorithm, phase=phase, deadline=deadline)
    return writer.write(items, chunks_for, cancelled, replayable=replayable)


def commit(
    store: Store,
    generation: str,
    step: int,
    world_size: int,
    hash_algorithm: str,
    *,
    timeout: float = 600.0,
    extra_objects: Sequence[ObjectEntry] = (),
    before_marker: Callable[[], None] = lambda: None,
    phase: PhaseHook = _no_phase,
    check_objects: bool = True,
    deadline: float | None = None,
) -> CommitRecord:
    """Steps 5-8 of :class:`ShardWriter` on the coordinator."""
    writer = ShardWriter(store, generation, step, 0, world_size, hash_algorithm, phase=phase, deadline=deadline)
    return writer.commit(
        timeout=timeout, extra_objects=extra_objects, before_marker=before_marker, check_objects=check_objects
    )


def wait_for_commit(
    store: Store,
    generation: str,
    step: int,
    *,
    timeout: float = 600.0,
    world_size: int = 1,
    phase: PhaseHook = _no_phase,
) -> CommitRecord:
    """Step 9 of :class:`ShardWriter` on a rank other than the coordinator."""
    writer = ShardWriter(store, generation, step, 1, max(2, world_size), "xxh3_128", phase=phase)
    return writer.wait(timeout=timeout)
