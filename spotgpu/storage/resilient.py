"""Retries and unknown outcomes, resolved in one place for every writer of the store.

A real object store under load throttles (503 SlowDown), resets connections, loses replies
after it applied a write and cuts bodies short. obstore retries what is safe to repeat at
the HTTP level, but not a create-only or conditional PUT whose connection failed (the write
may have been applied), and it cannot know a save's deadline. :class:`ResilientStore` wraps
any :class:`~spotgpu.storage.store.Store` (``open_store`` returns one) and decides, per
operation, with one rule book shared by the checkpoint library, the controller's records
and its lease:

- **Idempotent requests** (GET, HEAD, LIST, DELETE, ranged reads, an unconditional PUT whose
  payload can be sent again) are repeated on a
  :class:`~spotgpu.storage.errors.TransientStoreError`. A read that broke mid-body resumes
  from the byte where it stopped; a listing is read again whole.
- **Create-only and conditional writes** whose outcome is unknown are *resolved by reading
  the object back*, as SlateDB does: our bytes -> success; someone else's -> the conflict
  error (``ObjectExistsError`` / ``VersionMismatchError``); absent (or still at the expected
  version) -> the write did not land, so it is sent again. A later "already exists" after an
  unknown outcome is read back too: it may be our own first try that landed late.
- **A one-shot stream** (the async save's snapshot chunks) cannot be sent again: if the
  whole stream went out and only the reply was lost, the object's size decides (its key is
  unique to this save); otherwise the put fails with that reason.

Waits are exponential with jitter (half fixed, half random, so a throttled fleet spreads out
but never hammers), and stop at the earlier of the policy's limit and the caller's deadline
(:meth:`ResilientStore.within`): the error is then one
:class:`~spotgpu.storage.errors.StoreUnavailableError` line naming the operation, the
object, the attempts and the last error.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from spotgpu.storage.errors import (
    ObjectExistsError,
    ObjectMissingError,
    StoreUnavailableError,
    TransientStoreError,
    VersionMismatchError,
)
from spotgpu.storage.objects import ObjectInfo, Version
from spotgpu.storage.payload import Payload, iter_chunks

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often to retry a transient failure."""

    #: The first wait; each retry doubles it up to ``max_backoff``.
    first_backoff: float = 0.05
    max_backoff: float = 2.0
    #: Total seconds one operation may spend retrying when the caller set no earlier deadline.
    max_seconds: float = 60.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Wait before retry number ``attempt`` (1-based): half fixed, half random."""
        cap = min(self.max_backoff, self.first_backoff * (2 ** (attempt - 1)))
        return cap / 2 + rng.uniform(0, cap / 2)


DEFAULT_POLICY = RetryPolicy()


def replayable(data: Payload) -> bool:
    """True if ``data`` can be sent again: a buffer, or an iterable that is not an iterator
    (each ``iter()`` starts over)."""
    try:
        memoryview(data)  # type: ignore[arg-type]
        return True
    except TypeError:
        pass
    return iter(data) is not data  # type: ignore[call-overload,arg-type]


class _Counted:
    """A one-shot stream that counts what it handed out."""

    def __init__(self, data: Payload) -> None:
        self._chunks = iter_chunks(data)
        self.bytes = 0
        self.exhausted = False

    def __iter__(self) -> Iterator[memoryview]:
        for chunk in self._chunks:
            self.bytes += chunk.nbytes
            yield chunk
        self.exhausted = True


class ResilientStore:
    """A :class:`~spotgpu.storage.store.Store` that retries and resolves (see the module docstring)."""

    def __init__(
        self,
        inner: Any,
        policy: RetryPolicy = DEFAULT_POLICY,
        deadline: float | None = None,
        *,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        seed: int | None = None,
        stats: Counter[str] | None = None,
    ) -> None:
        self.inner = inner
        self.url: str = inner.url
        self.policy = policy
        #: ``clock()`` value after which nothing is retried (a save's deadline); None: the policy's limit.
        self.deadline = deadline
        self._sleep, self._clock = sleep, clock
        self._rng = random.Random(seed)
        #: What happened, for tests and benchmarks: ``retry:<op>``, ``resolved:ours|theirs|absent``.
        self.stats: Counter[str] = stats if stats is not None else Counter()
        self._lock = threading.Lock()

    def within(self, deadline: float | None) -> ResilientStore:
        """The same store, giving up at ``deadline`` (``time.monotonic()`` seconds) or earlier."""
        if deadline is None:
            return self
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)
        view = ResilientStore(self.inner, self.policy, deadline, sleep=self._sleep, clock=self._clock, stats=self.stats)
        view._rng = self._rng
        return view

    def __getattr__(self, name: str) -> Any:  # the backend's own extras (root, prefix...)
        return getattr(self.inner, name)

    # ---- the retry loop ---------------------------------------------------------
    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _call(self, op: str, path: str, fn: Callable[[], T]) -> T:
        started = self._clock()
        limit = started + self.policy.max_seconds
        give_up = limit if self.deadline is None else min(limit, self.deadline)
        attempt = 0
        while True:
            try:
                return fn()
            except TransientStoreError as err:
                last: TransientStoreError = err
            attempt += 1
            delay = self.policy.backoff(attempt, self._rng)
            now = self._clock()
            if now + delay >= give_up:
                why = "the deadline" if self.deadline is not None and give_up == self.deadline else (
                    f"the retry limit of {self.policy.max_seconds:g}s"
                )
                raise StoreUnavailableError(
                    f"{op} {self.url}/{path}: gave up after {attempt} attempt(s) in {now - started:.1f}s "
                    f"({why}); last error: {last}"
                ) from last
            self._count(f"retry:{op}")
            self._sleep(delay)

    # ---- reads: repeat, resuming a cut body ---------------------------------------
    def get(self, path: str) -> bytearray:
        return self._call("get", path, lambda: self.inner.get(path))

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self._call("get_range", path, lambda: self.inner.get_range(path, start, end))

    def head(self, path: str) -> ObjectInfo:
        return self._call("head", path, lambda: self.inner.head(path))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # A listing cut mid-body is read again whole (pages are not resumable through obstore).
        return iter(self._call("list", prefix or "(root)", lambda: list(self.inner.list(prefix))))

    def get_versioned(self, path: str) -> tuple[bytes, Version]:
        return self._call("get", path, lambda: self.inner.get_versioned(path))

    def get_into(self, path: str, out: memoryview) -> None:
        self.get_into_streamed(path, out, lambda _chunk: None)

    def get_into_streamed(self, path: str, out: memoryview, on_chunk: Callable[[memoryview], object]) -> None:
        """The whole object into ``out``; after a cut body, the rest is read from where it stopped."""
        done = 0

        def counted(piece: memoryview) -> None:
            nonlocal done
            on_chunk(piece)
            done += piece.nbytes

        def attempt() -> None:
            if done == 0:
                streamed = getattr(self.inner, "get_into_streamed", None)
                if streamed is not None:
                    streamed(path, out, counted)
                else:
                    self.inner.get_into(path, out)
                    counted(out)
            else:
                self.inner.get_range_into(path, done, [out[done:]], lambda _i, piece: counted(piece))

        self._call("get", path, attempt)

    def get_range_into(
        self,
        path: str,
        start: int,
        targets: Sequence[memoryview],
        on_piece: Callable[[int, memoryview], object] | None = None,
    ) -> None:
        """Scatter ``[start, start + total)`` into ``targets``; a cut body resumes where it stopped."""
        done = 0

        def attempt() -> None:
            index, into = 0, done
            while index < len(targets) and into >= targets[index].nbytes:
                into -= targets[index].nbytes
                index += 1
            rest = [targets[index][into:], *targets[index + 1 :]] if index < len(targets) else []

            def landed(i: int, piece: memoryview) -> None:
                nonlocal done
                if on_piece is not None:
                    on_piece(index + i, piece)
                done += piece.nbytes

            if any(t.nbytes for t in rest):
                self.inner.get_range_into(path, start + done, rest, landed)

        self._call("get_range", path, attempt)

    # ---- writes -------------------------------------------------------------------
    def delete(self, path: str) -> None:
        self._call("delete", path, lambda: self.inner.delete(path))

    def delete_many(self, paths: Sequence[str]) -> None:
        paths = list(paths)
        if paths:
            self._call("delete", f"{paths[0]} (+{len(paths) - 1})", lambda: self.inner.delete_many(paths))

    def put(self, path: str, data: Payload) -> None:
        if replayable(data):
            self._call("put", path, lambda: self.inner.put(path, data))
            return
        counted = _Counted(data)
        failed: list[TransientStoreError] = []

        def attempt() -> None:
            try:
                self.inner.put(path, counted)
            except TransientStoreError as err:
                if counted.bytes == 0 and not counted.exhausted:
                    raise  # not one chunk was taken (e.g. reset before sending): send it again
                failed.append(err)

        self._call("put", path, attempt)
        if not failed:
            return
        cause = failed[0]
        if not counted.exhausted:
            raise StoreUnavailableError(
                f"put {self.url}/{path}: the upload failed after {counted.bytes} bytes ({cause}) and its source "
                "is a one-shot stream (an async snapshot) that cannot be sent again"
            ) from cause
        # The whole stream went out and only the answer is missing: the key is this writer's
        # alone, so an object of exactly the bytes sent is ours.
        try:
            size = self.head(path).size
        except ObjectMissingError:
            size = -1
        if size != counted.bytes:
            self._count("resolved:absent")
            raise StoreUnavailableError(
                f"put {self.url}/{path}: the reply was lost ({cause}) and the store holds "
                f"{'nothing' if size < 0 else f'{size} bytes'}, not the {counted.bytes} sent; the one-shot "
                "stream cannot be sent again"
            ) from cause
        self._count("resolved:ours")

    def put_versioned(self, path: str, data: bytes) -> Version:
        return self._call("put", path, lambda: self.inner.put_versioned(path, data))

    def _read_back(self, path: str) -> tuple[bytes, Version] | None:
        try:
            return self.get_versioned(path)
        except ObjectMissingError:
            return None

    def put_if_absent(self, path: str, data: bytes) -> None:
        unknown = False

        def attempt() -> None:
            nonlocal unknown
            try:
                self.inner.put_if_absent(path, data)
                return
            except TransientStoreError:
                unknown = True
                found = self._read_back(path)
                if found is None:
                    self._count("resolved:absent")
                    raise  # it did not land: send it again
            except ObjectExistsError:
                if not unknown:
                    raise
                found = self._read_back(path)  # perhaps our earlier try, landed late
            if found is not None and bytes(found[0]) == bytes(data):
                self._count("resolved:ours")
                return
            self._count("resolved:theirs")
            raise ObjectExistsError(f"{self.url}/{path} already exists (another writer's bytes)")

        self._call("create", path, attempt)

    def put_if(self, path: str, data: bytes, expected: Version | None) -> Version:
        unknown = False

        def attempt() -> Version:
            nonlocal unknown
            try:
                return self.inner.put_if(path, data, expected)
            except TransientStoreError:
                unknown = True
                found = self._read_back(path)
                still = found is None if expected is None else found is not None and found[1] == expected
                if still and not (found is not None and bytes(found[0]) == bytes(data)):
                    self._count("resolved:absent")
                    raise  # nothing changed: it did not land, send it again
            except VersionMismatchError:
                if not unknown:
                    raise
                found = self._read_back(path)
            if found is not None and bytes(found[0]) == bytes(data):
                self._count("resolved:ours")
                return found[1]
            self._count("resolved:theirs")
            state = "exists" if expected is None else "changed since it was read"
            raise VersionMismatchError(f"{self.url}/{path} {state}; another writer got there first")

        return self._call("conditional put", path, attempt)


def resilient(store: Any, deadline: float | None = None) -> ResilientStore:
    """``store`` behind the retry rules (not wrapped twice), bounded by ``deadline`` if given."""
    wrapped = store if isinstance(store, ResilientStore) else ResilientStore(store)
    return wrapped.within(deadline)

