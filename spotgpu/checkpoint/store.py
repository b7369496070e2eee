"""One storage interface for checkpoints, opened by URL.

``file://`` goes to :class:`LocalStore` (POSIX: fsync, rename, ``link`` for create-only);
``s3://``, ``gs://`` and ``az://`` go to :class:`ObjectStore`, a thin adapter over obstore.
The commit protocol needs exactly one special operation, :meth:`Store.put_if_absent`
(create-only), which every backend maps to its native primitive: ``If-None-Match: *``
on S3 and Azure, ``ifGenerationMatch=0`` on GCS (both via obstore ``mode="create"``),
and ``link(2)`` locally.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

from typing_extensions import Buffer

#: What a ``put`` accepts: one contiguous buffer or an iterable of chunks (streamed).
Payload = Buffer | Iterable[Buffer]

CLOUD_SCHEMES = ("s3", "gs", "az")


@dataclass(frozen=True)
class ObjectInfo:
    """What ``head``/``list`` report about one object (path is relative to the store root)."""

    path: str
    size: int
    last_modified: dt.datetime


@runtime_checkable
class Store(Protocol):
    """The seven operations the checkpoint library needs from any storage backend."""

    url: str

    def put(self, path: str, data: Payload) -> None:
        """Write the whole object atomically (readers never see a partial object)."""
        ...

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create-only write; raises ``ObjectExistsError`` if the object exists."""
        ...

    def get(self, path: str) -> bytearray:
        """The whole object as a writable buffer; raises ``ObjectMissingError``."""
        ...

    def get_into(self, path: str, out: memoryview) -> None:
        """Read the whole object into ``out`` (a writable byte view of exactly its size).

        Restoring into the caller's existing arrays skips allocating and first-touching
        fresh memory: 1.8 s of a 2.3 s cold 1 GiB read on the benchmark VM.

        Optional capability (both built-in stores have it): ``get_into_streamed(path,
        out, on_chunk)`` does the same and calls ``on_chunk`` on each piece right after
        reading it, so the reader hashes it while it is still in the CPU's cache.
        Stores without it are read whole and hashed afterwards."""
        ...

    def get_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object."""
        ...

    def head(self, path: str) -> ObjectInfo:
        """Size and time of one object; raises ``ObjectMissingError``."""
        ...

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object whose path starts with ``prefix`` (any order)."""
        ...

    def delete(self, path: str) -> None:
        """Delete the object; a missing object is not an error."""
        ...


@dataclass(frozen=True)
class StoreUrl:
    """A checkpoint store URL, parsed once (the one parser every part should use).

    Forms (exactly what the pools export, see ``spotgpu.tags.CHECKPOINT_STORE``):

    - ``file:///abs/path`` or a plain path (``/abs/path``, ``rel/path``, ``~/x``);
    - ``s3://BUCKET/PREFIX`` and ``gs://BUCKET/PREFIX``;
    - ``az://ACCOUNT/CONTAINER/PREFIX`` (also ``https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX``).

    Credentials never belong in a URL: one is refused, and ``text`` never shows it.
    """

    scheme: str
    #: Bucket (S3, GCS) or container (Azure); empty for file://.
    bucket: str
    #: Key prefix inside the bucket (no leading or trailing '/').
    prefix: str
    #: The storage account (Azure only).
    account: str | None = None
    #: The directory (file:// only).
    path: Path | None = None

    @property
    def text(self) -> str:
        """The canonical URL (what messages show)."""
        if self.path is not None:
            return self.path.as_uri()
        head = f"{self.scheme}://{self.account}/{self.bucket}" if self.account else f"{self.scheme}://{self.bucket}"
        return f"{head}/{self.prefix}" if self.prefix else head

    def obstore_location(self) -> tuple[str, dict[str, str]]:
        """The URL and config obstore's ``from_url`` needs to open the bucket/container."""
        config = {"account_name": self.account} if self.account else {}
        return f"{self.scheme}://{self.bucket}", config


_AZURE_BLOB_HOST = re.compile(r"^([a-z0-9]{3,24})\.blob\.core\.windows\.net$")
FORMS = "file:///abs/path (or a plain path), s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://ACCOUNT/CONTAINER/PREFIX"


def redact_url(url: str) -> str:
    """``url`` with any user info (keys, passwords) replaced by ``***``."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{head}{sep}{authority}{slash}{tail}"


def _bad(url: str, problem: str, fix: str) -> ValueError:
    return ValueError(f"url: {redact_url(url)!r} {problem}; fix: {fix}")


def parse_store_url(url: str) -> StoreUrl:
    """Parse a store URL or plain path; a bad one is one ValueError line (field, value, fix)."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"url: {url!r} is not a store URL; fix: use {FORMS}")
    if "://" not in url:
        return StoreUrl("file", "", "", path=Path(url).expanduser().resolve())
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if parsed.username is not None or parsed.password is not None or "@" in parsed.netloc:
        raise _bad(
            url,
            "has credentials in it",
            "drop them from the URL and pass them as store options or the usual environment variables "
            "(AWS_*, GOOGLE_*, AZURE_STORAGE_*)",
        )
    path = unquote(parsed.path)
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise _bad(url, f"has host {parsed.netloc!r}", "use file:///absolute/path")
        return StoreUrl("file", "", "", path=Path(path))
    segments = [p for p in path.split("/") if p]
    if scheme == "https" and (m := _AZURE_BLOB_HOST.match(parsed.netloc.lower())):
        scheme, account = "az", m.group(1)
    elif scheme == "az":
        account = parsed.netloc
    elif scheme in ("s3", "gs"):
        if not parsed.netloc:
            raise _bad(url, "has no bucket", f"use {scheme}://BUCKET/PREFIX")
        return StoreUrl(scheme, parsed.netloc, "/".join(segments))
    else:
        raise _bad(url, f"has scheme {parsed.scheme!r}", f"use {FORMS}")
    if not account or not segments:
        raise _bad(url, "does not name a storage account and a container", "use az://ACCOUNT/CONTAINER/PREFIX")
    return StoreUrl("az", segments[0], "/".join(segments[1:]), account=account)


def open_store(url: str, **options: Any) -> Store:
    """Open the store a checkpoint URL (or plain local path) names.

    ``options`` go to obstore for cloud URLs: store config keys (``endpoint``,
    ``access_key_id``, ``use_emulator``...), ``client_options`` (``{"allow_http": True}``
    for emulators) and ``credential_provider``. obstore also reads its usual environment
    variables (``AWS_ENDPOINT_URL``, ``AZURE_STORAGE_*``...). Azure's account comes from
    the URL (``az://ACCOUNT/CONTAINER/PREFIX``).
    """
    where = parse_store_url(url)
    if where.path is not None:
        from spotgpu.checkpoint.local_store import LocalStore

        if options:
            raise ValueError(f"store options {sorted(options)} are not used by file:// stores; fix: drop them")
        if where.path.exists() and not where.path.is_dir():
            raise _bad(url, "is a file, not a directory", "name the directory the checkpoints go to")
        return LocalStore(where.path)
    from spotgpu.checkpoint.object_store import ObjectStore

    return ObjectStore.open(where, **options)


def join(*parts: str) -> str:
    """Join store path segments with '/', ignoring empty ones."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def iter_chunks(data: Payload) -> Iterator[memoryview]:
    """A payload as flat byte views: one view for a buffer, one per chunk for an iterable."""
    try:
        yield memoryview(data).cast("B")  # type: ignore[arg-type]
        return
    except TypeError:
        pass
    for chunk in data:  # type: ignore[union-attr]
        yield memoryview(chunk).cast("B")
