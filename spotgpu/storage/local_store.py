"""The local-filesystem store: durable (fsync) and atomic (rename), create-only via link(2).

Every write goes to a hidden temporary file in the target directory, is fsynced, then
renamed (``put``) or hard-linked (``put_if_absent``) into place, and the directory is
fsynced. ``link`` fails with EEXIST if the name is taken, so two writers racing for the
same commit marker can never both win, even across processes or NFS clients with
POSIX link semantics. Temporaries left by a crash start with ``.tmp-`` and are
ordinary debris for GC.

A local directory has no conditional update, so ``put_if`` and ``put_versioned`` check
and write under an exclusive ``flock`` on a sidecar lock file (``.locks/<path>.lock``):
safe between processes on one host, which is all a local directory is for. The
version is a digest of the content, so no file-system timestamp or reused inode can
make a stale version look current.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from spotgpu.storage.errors import ObjectExistsError, ObjectMissingError, VersionMismatchError
from spotgpu.storage.objects import ObjectInfo, Version
from spotgpu.storage.payload import Payload, iter_chunks

#: Write size for one os.write call: large enough to stream at disk speed, small
#: enough that a single call never copies a huge slice.
WRITE_CHUNK = 32 << 20
#: Read size for streamed reads: small enough that the chunk is still in the CPU's
#: cache (L3 here is 32 MiB) when ``on_chunk`` hashes it, large enough that syscalls
#: are noise next to the copy.
READ_CHUNK = 4 << 20
#: Every write goes to a hidden temporary named like this first (GC treats it as debris).
TMP_PREFIX = ".tmp-"
#: Sidecar lock files of the conditional writes, under the store's root.
LOCKS_DIR = ".locks"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: Payload) -> None:
    for view in iter_chunks(data):
        for start in range(0, len(view), WRITE_CHUNK):
            piece = view[start : start + WRITE_CHUNK]
            while piece:
                written = os.write(fd, piece)
                piece = piece[written:]


class LocalStore:
    """A directory tree as an object store (paths use '/')."""

    #: Parallel ranged reads a restore uses per shard: two long sequential streams keep a
    #: disk's readahead whole and still spread the page faults of fresh arrays over two cores.
    read_streams = 2

    def __init__(self, root: Path) -> None:
        if not root.is_absolute():
            raise ValueError(f"url: file path {str(root)!r} is relative; fix: use file:///absolute/path")
        self.root = root
        self.url = root.as_uri()
        #: Drop written pages from the page cache after fsync (benchmarks set this so
        #: a restore reads from disk, like a fresh VM would).
        self.drop_cache_after_write = False

    def _path(self, path: str) -> Path:
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"store path {path!r} must be relative without '..'")
        return self.root / path

    def _write_temp(self, target: Path, data: Payload) -> Path:
        tmp = target.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}-{target.name}"
        for attempt in range(3):
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                break
            except FileNotFoundError:  # a GC removed the (then empty) directory meanwhile
                if attempt == 2:
                    raise
        try:
            _write_all(fd, data)
            os.fsync(fd)
            if self.drop_cache_after_write:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.close(fd)
        return tmp

    def put(self, path: str, data: Payload) -> None:
        target = self._path(path)
        tmp = self._write_temp(target, data)
        os.replace(tmp, target)
        _fsync_dir(target.parent)

    def put_if_absent(self, path: str, data: bytes) -> None:
        target = self._path(path)
        tmp = self._write_temp(target, data)
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise ObjectExistsError(f"{self.url}/{path} already exists") from None
        finally:
            tmp.unlink()
        _fsync_dir(target.parent)

    def get(self, path: str) -> bytearray:
        try:
            with open(self._path(path), "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                out = bytearray(size)
                view = memoryview(out)
                got = 0
                while got < size:
                    n = f.readinto(view[got:])
                    if not n:
                        break
                    got += n
                return out if got == size else out[:got]
        except FileNotFoundError:
            raise ObjectMissingError(f"{self.url}/{path} does not exist") from None

    def get_into(self, path: str, out: memoryview) -> None:
        self.get_into_streamed(path, out, lambda _chunk: None)

    def get_into_streamed(self, path: str, out: memoryview, on_chunk: Callable[[memoryview], object]) -> None:
        """Read the object into ``out`` in order, calling ``on_chunk`` on each piece just
        read, while it is still in the CPU's cache (the reader hashes it there instead of
        making a second pass over the whole object from main memory)."""
        try:
            fd = os.open(self._path(path), os.O_RDONLY)
        except FileNotFoundError:
            raise ObjectMissingError(f"{self.url}/{path} does not exist") from None
        try:
            size = os.fstat(fd).st_size
            if size != out.nbytes:
                raise ValueError(f"{self.url}/{path} has {size} bytes, the buffer {out.nbytes}")
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # larger kernel readahead
            got = 0
            while got < size:
                piece = out[got : got + READ_CHUNK]
                n = os.readv(fd, [piece])
                if not n:
                    raise ValueError(f"{self.url}/{path} shrank while reading")
                on_chunk(piece[:n])
                got += n
        finally:
            os.close(fd)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        try:
            with open(self._path(path), "rb") as f:
                f.seek(start)
                return f.read(max(0, end - start))
        except FileNotFoundError:
            raise ObjectMissingError(f"{self.url}/{path} does not exist") from None

    def get_range_into(
        self,
        path: str,
        start: int,
        targets: Sequence[memoryview],
        on_piece: Callable[[int, memoryview], object] | None = None,
    ) -> None:
        """Read ``[start, start + total)`` into ``targets`` in order (one sequential pass, no
        intermediate buffer), calling ``on_piece(target_index, piece)`` after each read."""
        try:
            fd = os.open(self._path(path), os.O_RDONLY)
        except FileNotFoundError:
            raise ObjectMissingError(f"{self.url}/{path} does not exist") from None
        try:
            total = sum(t.nbytes for t in targets)
            os.posix_fadvise(fd, start, total, os.POSIX_FADV_SEQUENTIAL)
            pos = start
            for index, target in enumerate(targets):
                for begin in range(0, target.nbytes, READ_CHUNK):
                    piece = target[begin : begin + READ_CHUNK]
                    got = 0
                    while got < piece.nbytes:
                        n = os.preadv(fd, [piece[got:]], pos + got)
                        if not n:
                            raise ValueError(f"{self.url}/{path} ends before byte {pos + piece.nbytes} of the range")
                        got += n
                    if on_piece is not None:
                        on_piece(index, piece)
                    pos += piece.nbytes
        finally:
            os.close(fd)

    def head(self, path: str) -> ObjectInfo:
        try:
            st = self._path(path).stat()
        except FileNotFoundError:
            raise ObjectMissingError(f"{self.url}/{path} does not exist") from None
        return ObjectInfo(path, st.st_size, dt.datetime.fromtimestamp(st.st_mtime, dt.UTC))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not base.is_dir():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                full = Path(dirpath) / name
                rel = full.relative_to(self.root).as_posix()
                if not rel.startswith(prefix):
                    continue
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue  # deleted while listing
                yield ObjectInfo(rel, st.st_size, dt.datetime.fromtimestamp(st.st_mtime, dt.UTC))

    def get_versioned(self, path: str) -> tuple[bytes, Version]:
        data = bytes(self.get(path))
        return data, _content_version(data)

    def put_if(self, path: str, data: bytes, expected: Version | None) -> Version:
        target = self._path(path)
        lost = f"{self.url}/{path} {'exists' if expected is None else 'changed since it was read'}"
        with self._locked(path):
            if expected is None:
                try:
                    self.put_if_absent(path, data)  # link(2): create-only even against unlocked writers
                except ObjectExistsError:
                    raise VersionMismatchError(f"{lost}; another writer got there first") from None
                return _content_version(data)
            try:
                current: Version | None = _content_version(target.read_bytes())
            except FileNotFoundError:
                current = None
            if current != expected:
                raise VersionMismatchError(f"{lost}; another writer got there first")
            self.put(path, data)
        return _content_version(data)

    def put_versioned(self, path: str, data: bytes) -> Version:
        with self._locked(path):  # never lands between another writer's check and its write
            self.put(path, data)
        return _content_version(data)

    @contextlib.contextmanager
    def _locked(self, path: str) -> Iterator[None]:
        """Hold the exclusive ``flock`` of ``path`` (one sidecar file per object, kept)."""
        self._path(path)  # validate before creating anything
        lock = self.root / LOCKS_DIR / (path.replace("/", "__") + ".lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def delete_many(self, paths: Sequence[str]) -> None:
        for path in paths:
            self.delete(path)

    def delete(self, path: str) -> None:
        target = self._path(path)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        # Remove now-empty directories up to the root so GC leaves no husks behind.
        parent = target.parent
        while parent != self.root and parent.is_relative_to(self.root):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent


def _content_version(data: bytes) -> Version:
    return Version(e_tag=hashlib.blake2b(data, digest_size=16).hexdigest())
