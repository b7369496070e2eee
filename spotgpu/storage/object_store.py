"""Cloud object stores (S3, GCS, Azure Blob) through obstore.

obstore gives one Rust client (object_store) for the three clouds with streaming
multipart uploads, native create-only puts (``mode="create"``) and conditional updates
(``mode=UpdateVersion``), so neither the checkpoint library nor the controller needs a
per-cloud SDK. The bucket/container (and Azure's account) come from
:func:`~spotgpu.storage.urls.parse_store_url`; the rest of the URL's path becomes a
key prefix this adapter adds itself, so the same relative layout is used on every backend.

What obstore raises is translated here, once: a missing object is ``ObjectMissingError``,
a lost create-only race ``ObjectExistsError``/``VersionMismatchError``, and anything that
leaves the outcome unknown (a reset or timed-out connection, a cut body, 429/5xx after
obstore's own quick retries) :class:`~spotgpu.storage.errors.TransientStoreError`, which
:class:`~spotgpu.storage.resilient.ResilientStore` retries or resolves. Permanent errors
(credentials, a bad request) pass through as obstore raised them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import obstore
from obstore.exceptions import AlreadyExistsError, GenericError, JoinError, NotFoundError, PreconditionError

from spotgpu.storage.errors import (
    ObjectExistsError,
    ObjectMissingError,
    TransientStoreError,
    VersionMismatchError,
)
from spotgpu.storage.objects import ObjectInfo, Version
from spotgpu.storage.payload import Payload, iter_chunks
from spotgpu.storage.urls import StoreUrl, parse_store_url

#: Multipart part size: 5 MiB is S3's minimum; 16 MiB cuts request count 3x.
PART_SIZE = 16 << 20
#: Objects up to this size go up in one PUT; a multipart upload costs at least 3 requests
#: (create, part, complete), so below two parts one request is 3x cheaper and as fast.
#: Above it, parts go up in parallel (:data:`UPLOAD_CONCURRENCY`), several flows at once:
#: one flow is capped (5 Gbps on AWS) well below a GPU VM's network.
SINGLE_PUT_MAX = 2 * PART_SIZE
#: Multipart parts of one object in flight at once (obstore's ``max_concurrency``).
UPLOAD_CONCURRENCY = 8
#: Objects per bulk delete request (S3's DeleteObjects limit; obstore batches Azure by 256).
BULK_DELETE = 1000
#: Reads stream in pieces of at least this size (hashed while still in the CPU's cache).
STREAM_CHUNK = 8 << 20
#: obstore's own retries, kept short: it retries 5xx and 429 itself but cannot know the
#: save's deadline, and its default (10 retries over up to 3 minutes) would hide a whole
#: notice window inside one call. ``ResilientStore`` retries on top, within the deadline.
DEFAULT_RETRY_CONFIG: dict[str, Any] = {
    "max_retries": 3,
    "retry_timeout": timedelta(seconds=10),
    "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2), "base": 2},
}

_STATUS = re.compile(r"status(?: code)?:? (\d{3})")
#: Statuses after which a request may work if simply sent again.
_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


def _transient(err: Exception) -> TransientStoreError | None:
    """The unknown-outcome error for ``err``, or None if the store answered for sure."""
    if isinstance(err, JoinError):
        return TransientStoreError(str(err).splitlines()[0])
    if not isinstance(err, GenericError):
        return None
    text = str(err)
    found = _STATUS.search(text)
    status = int(found.group(1)) if found else None
    if status is not None and status not in _RETRYABLE_STATUS:
        return None  # the store answered: e.g. 400, 403 (credentials), 416
    return TransientStoreError(text.splitlines()[0], status)


@contextlib.contextmanager
def _translated(url: str, path: str) -> Iterator[None]:
    try:
        yield
    except (NotFoundError, FileNotFoundError):
        raise ObjectMissingError(f"{url}/{path} does not exist") from None
    except (GenericError, JoinError) as err:
        transient = _transient(err)
        if transient is None:
            raise
        raise transient from err


class ObjectStore:
    """Adapter from :class:`~spotgpu.storage.store.Store` to an obstore store."""

    #: Parallel ranged reads a restore uses per shard: one flow is capped (5 Gbps on AWS),
    #: several reach the VM's bandwidth.
    read_streams = 8

    def __init__(self, url: str, inner: Any, prefix: str) -> None:
        self.url = url
        self.inner = inner
        self.prefix = prefix.strip("/")

    @classmethod
    def from_url(cls, url: str, **options: Any) -> ObjectStore:
        return cls.open(parse_store_url(url), **options)

    @classmethod
    def open(cls, where: StoreUrl, **options: Any) -> ObjectStore:
        location, config = where.obstore_location()
        given = options.get("account_name")
        if given is not None and config and given != config["account_name"]:
            raise ValueError(
                f"store_options.account_name: {given!r} differs from the account in the URL {where.text!r}; "
                "fix: drop account_name (the URL names the account)"
            )
        options = {"retry_config": DEFAULT_RETRY_CONFIG, **options}
        inner = from_url(location, **{**config, **options})
        return cls(where.text, inner, where.prefix)

    def _key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def _rel(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def put(self, path: str, data: Payload) -> None:
        """One PUT up to :data:`SINGLE_PUT_MAX` bytes, parallel multipart above (a stream is
        read until it passes that size before the choice is made)."""
        key = self._key(path)
        try:
            view = memoryview(data).cast("B")  # type: ignore[arg-type]
        except TypeError:
            view = None
        with _translated(self.url, path):
            if view is not None:
                if view.nbytes <= SINGLE_PUT_MAX:
                    obstore.put(self.inner, key, view, use_multipart=False)
                else:
                    obstore.put(self.inner, key, view, chunk_size=PART_SIZE, max_concurrency=UPLOAD_CONCURRENCY)
                return
            # A stream of chunks: copy each one so obstore never holds a view of a snapshot
            # buffer the library reuses once the generator moves on, unless the payload says
            # its chunks stay valid until the upload ends (a sync save's own arrays: copying
            # them cost a third of the upload's time on moto).
            keep: Callable[[memoryview], Any] = (lambda c: c) if getattr(data, "stable", False) else bytes
            pieces = (piece for chunk in iter_chunks(data) for piece in _parts(chunk))
            head: list[Any] = []
            size = 0
            for piece in pieces:
                head.append(keep(piece))
                size += piece.nbytes
                if size > SINGLE_PUT_MAX:
                    break
            else:
                obstore.put(self.inner, key, b"".join(head), use_multipart=False)
                return
            stream = itertools.chain(head, (keep(piece) for piece in pieces))
            obstore.put(self.inner, key, stream, chunk_size=PART_SIZE, max_concurrency=UPLOAD_CONCURRENCY)

    def put_if_absent(self, path: str, data: bytes) -> None:
        try:
            with _translated(self.url, path):
                obstore.put(self.inner, self._key(path), data, mode="create")
        except (AlreadyExistsError, PreconditionError):
            raise ObjectExistsError(f"{self.url}/{path} already exists") from None

    def get(self, path: str) -> bytearray:
        with _translated(self.url, path):
            result = obstore.get(self.inner, self._key(path))
            out = bytearray(result.meta["size"])
            offset = 0
            for chunk in result.stream(min_chunk_size=STREAM_CHUNK):
                view = memoryview(chunk)
                out[offset : offset + len(view)] = view
                offset += len(view)
        return out if offset == len(out) else out[:offset]

    def get_into(self, path: str, out: memoryview) -> None:
        self.get_into_streamed(path, out, lambda _chunk: None)

    def get_into_streamed(self, path: str, out: memoryview, on_chunk: Callable[[memoryview], object]) -> None:
        """Stream the object into ``out``, calling ``on_chunk`` on each piece as it lands."""
        with _translated(self.url, path):
            result = obstore.get(self.inner, self._key(path))
            if result.meta["size"] != out.nbytes:
                raise ValueError(f"{self.url}/{path} has {result.meta['size']} bytes, the buffer {out.nbytes}")
            offset = 0
            for chunk in result.stream(min_chunk_size=STREAM_CHUNK):
                view = memoryview(chunk)
                if offset + len(view) > out.nbytes:
                    raise ValueError(f"{self.url}/{path} returned more than {out.nbytes} bytes")
                out[offset : offset + len(view)] = view
                on_chunk(out[offset : offset + len(view)])
                offset += len(view)
        if offset != out.nbytes:
            raise ValueError(f"{self.url}/{path} returned {offset} of {out.nbytes} bytes")

    def get_range(self, path: str, start: int, end: int) -> bytes:
        with _translated(self.url, path):
            return bytes(obstore.get_range(self.inner, self._key(path), start=start, end=end))

    def get_range_into(
        self,
        path: str,
        start: int,
        targets: Sequence[memoryview],
        on_piece: Callable[[int, memoryview], object] | None = None,
    ) -> None:
        """One ranged GET of ``[start, start + total)`` scattered into ``targets`` in order."""
        total = sum(t.nbytes for t in targets)
        if total == 0:
            return
        with _translated(self.url, path):
            result = obstore.get(self.inner, self._key(path), options={"range": (start, start + total)})
            fill = _Scatter(targets, on_piece)
            for chunk in result.stream(min_chunk_size=STREAM_CHUNK):
                fill.write(memoryview(chunk), f"{self.url}/{path}")
        if fill.done != total:
            raise ValueError(f"{self.url}/{path} returned {fill.done} of {total} bytes from offset {start}")

    def head(self, path: str) -> ObjectInfo:
        with _translated(self.url, path):
            meta = obstore.head(self.inner, self._key(path))
        return ObjectInfo(path, meta["size"], _utc(meta["last_modified"]))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # obstore lists by path segment; list the parent "directory" and filter.
        parent = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        key_prefix = self._key(parent) or None
        with _translated(self.url, prefix or "(root)"):
            for batch in obstore.list(self.inner, prefix=key_prefix):
                for meta in batch:
                    rel = self._rel(meta["path"])
                    if rel.startswith(prefix):
                        yield ObjectInfo(rel, meta["size"], _utc(meta["last_modified"]))

    def delete(self, path: str) -> None:
        with contextlib.suppress(ObjectMissingError), _translated(self.url, path):
            obstore.delete(self.inner, self._key(path))

    def delete_many(self, paths: Sequence[str]) -> None:
        """Bulk deletes where the store has them (S3 DeleteObjects: 1,000 per request; Azure
        blob batch: 256); a batch the store refuses whole is deleted one by one."""
        paths = list(paths)
        for start in range(0, len(paths), BULK_DELETE):
            batch = paths[start : start + BULK_DELETE]
            try:
                with _translated(self.url, batch[0]):
                    obstore.delete(self.inner, [self._key(p) for p in batch])
            except TransientStoreError:
                raise
            except Exception:  # e.g. one object already gone (Azure, GCS): go one by one
                for path in batch:
                    self.delete(path)

    def get_versioned(self, path: str) -> tuple[bytes, Version]:
        with _translated(self.url, path):
            result = obstore.get(self.inner, self._key(path))
            return bytes(result.bytes()), Version.of(result.meta)

    def put_if(self, path: str, data: bytes, expected: Version | None) -> Version:
        # "create" is If-None-Match: * (S3, Azure) or ifGenerationMatch=0 (GCS); an
        # UpdateVersion carries both tokens, since GCS checks the generation and S3 and
        # Azure the ETag. A lost race is 412 (PreconditionError) or 409/AlreadyExists.
        mode: Any = "create" if expected is None else expected.as_dict()
        try:
            with _translated(self.url, path):
                return Version.of(obstore.put(self.inner, self._key(path), data, mode=mode))
        except (AlreadyExistsError, PreconditionError, ObjectMissingError):
            state = "exists" if expected is None else "changed since it was read"
            raise VersionMismatchError(f"{self.url}/{path} {state}; another writer got there first") from None

    def put_versioned(self, path: str, data: bytes) -> Version:
        with _translated(self.url, path):
            return Version.of(obstore.put(self.inner, self._key(path), data, use_multipart=False))


def _parts(chunk: memoryview) -> Iterator[memoryview]:
    """``chunk`` in slices of at most one part (no copy): obstore fills its parts from them
    without re-splitting large chunks (measured on moto: 64 MiB chunks took ~20 % longer)."""
    for start in range(0, max(chunk.nbytes, 1), PART_SIZE):
        yield chunk[start : start + PART_SIZE]


class _Scatter:
    """Copies a stream of pieces into consecutive target buffers (zero-size ones skipped),
    telling ``on_piece`` which target each piece landed in."""

    def __init__(self, targets: Sequence[memoryview], on_piece: Callable[[int, memoryview], object] | None) -> None:
        self.targets, self.on_piece = targets, on_piece
        self.index = self.offset = self.done = 0

    def write(self, view: memoryview, where: str) -> None:
        pos = 0
        while pos < len(view):
            while self.index < len(self.targets) and self.offset == self.targets[self.index].nbytes:
                self.index, self.offset = self.index + 1, 0
            if self.index == len(self.targets):
                raise ValueError(f"{where} returned more bytes than the range asked for")
            target = self.targets[self.index]
            n = min(len(view) - pos, target.nbytes - self.offset)
            dst = target[self.offset : self.offset + n]
            dst[:] = view[pos : pos + n]
            if self.on_piece is not None:
                self.on_piece(self.index, dst)
            self.offset += n
            self.done += n
            pos += n


def from_url(location: str, **options: Any) -> Any:
    """obstore's ``from_url`` (a seam for tests)."""
    from obstore.store import from_url as _from_url

    return _from_url(location, **options)


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
