"""A tiny JSON object store over obstore: the controller record, leases, drain requests, agent commits.

The controller keeps its record in the pool's checkpoint store (``file://`` in
tests, ``s3://``/``gs://``/``az://`` in production) so it needs no database. Writes
use the previous ETag as a precondition where the backend supports it, so two
controllers that raced on the same record fail loudly instead of silently
overwriting each other. Both the ETag and the object version are kept, because
backends differ in which one a conditional update checks (GCS: the generation,
passed as ``version``; S3 and Azure: the ETag).

:meth:`ObjectJsonStore.read` / :meth:`ObjectJsonStore.write_if` expose the same
conditional writes explicitly (create-only, or update-if-unchanged) for the
controller's lease (``lease.py``). ``file://`` has no conditional update in
obstore, so there the check and the write happen under an exclusive ``flock`` on
a sidecar lock file: safe between processes on one host, which is all a local
directory is for.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import obstore
from obstore.store import from_url

from spotgpu.contract.store_url import parse_store_url


class JsonStore(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...
    def put(self, key: str, doc: dict[str, Any]) -> None: ...
    def list(self, prefix: str) -> list[str]: ...


class StaleRecordError(RuntimeError):
    """Another writer changed the object since we read it."""


@dataclass(frozen=True)
class Versioned:
    """A document and the store's version of it (obstore ``UpdateVersion``: ``e_tag`` and/or ``version``)."""

    doc: dict[str, Any]
    version: dict[str, str]


class ConditionalJsonStore(JsonStore, Protocol):
    """A JsonStore whose writes can be conditional: the basis of the lease and of fencing."""

    def read(self, key: str) -> Versioned | None: ...
    def write_if(self, key: str, doc: dict[str, Any], expected: Versioned | None) -> Versioned:
        """Write ``doc`` only if ``key`` is still at ``expected`` (absent when None); else StaleRecordError."""
        ...


def _encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _decode(url: str, key: str, blob: bytes) -> dict[str, Any]:
    doc = json.loads(blob)
    if not isinstance(doc, dict):
        raise ValueError(f"{url}/{key}: expected a JSON object, got {type(doc).__name__}")
    return doc


def open_json_store(url: str, **options: Any) -> Any:
    """The obstore store a state URL names, parsed by the checkpoint library's one parser
    (:func:`spotgpu.checkpoint.store.parse_store_url`): the same forms as a checkpoint store,
    Azure as ``az://ACCOUNT/CONTAINER/PREFIX`` (or the blob endpoint URL), credentials refused."""
    where = parse_store_url(url)
    if where.path is not None:
        return from_url(where.path.as_uri(), mkdir=True, **options)
    location, config = where.obstore_location()
    if where.account is not None:
        given = options.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
        if given and given != where.account:
            raise ValueError(
                f"state URL {where.text!r} names storage account {where.account!r}, but {given!r} is configured "
                f"(account_name or AZURE_STORAGE_ACCOUNT_NAME); fix: the URL's first segment is the account: "
                + f"az://{given}/{where.account}/{where.bucket}/{where.prefix}".rstrip("/")
            )
        options = {k: v for k, v in options.items() if k != "account_name"}
    prefixed = f"{location}/{where.prefix}" if where.prefix else location
    return from_url(prefixed, **{**config, **options})


class ObjectJsonStore:
    """JsonStore on any obstore URL; remembers the ETag of what it read."""

    def __init__(self, url: str, store: Any = None, **options: Any) -> None:
        self.url = url
        self._store = store if store is not None else open_json_store(url, **options)
        self._etags: dict[str, dict[str, str]] = {}  # key -> obstore UpdateVersion (e_tag, version)

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            result = obstore.get(self._store, key)
        except FileNotFoundError:
            self._etags.pop(key, None)
            return None
        self._remember(key, result.meta)
        return _decode(self.url, key, bytes(result.bytes()))

    def put(self, key: str, doc: dict[str, Any]) -> None:
        blob = _encode(doc)
        etag = self._etags.get(key)
        try:
            if etag is None:
                result = obstore.put(self._store, key, blob)
            else:
                result = obstore.put(self._store, key, blob, mode=etag)  # type: ignore[arg-type]
        except obstore.exceptions.PreconditionError as err:
            raise StaleRecordError(f"{self.url}/{key} changed since it was read; another controller is running") from err
        except (obstore.exceptions.NotSupportedError, NotImplementedError):
            result = obstore.put(self._store, key, blob)  # backend has no conditional put (local files)
        self._remember(key, result)

    def _remember(self, key: str, meta: Any) -> None:
        seen = {k: str(meta[k]) for k in ("e_tag", "version") if meta.get(k)}
        if seen:
            self._etags[key] = seen

    def read(self, key: str) -> Versioned | None:
        try:
            result = obstore.get(self._store, key)
        except FileNotFoundError:
            return None
        meta = result.meta
        version = {k: str(meta[k]) for k in ("e_tag", "version") if meta.get(k)}
        return Versioned(_decode(self.url, key, bytes(result.bytes())), version)

    def write_if(self, key: str, doc: dict[str, Any], expected: Versioned | None) -> Versioned:
        blob = _encode(doc)
        if self._local_root is not None:
            with self._local_lock(key):
                return self._write_if_locked(key, doc, blob, expected)
        mode: Any = "create" if expected is None else expected.version
        try:
            result = obstore.put(self._store, key, blob, mode=mode)
        except (obstore.exceptions.PreconditionError, obstore.exceptions.AlreadyExistsError) as err:
            state = "exists" if expected is None else "changed since it was read"
            raise StaleRecordError(f"{self.url}/{key} {state}; another writer got there first") from err
        return Versioned(doc, {k: str(result[k]) for k in ("e_tag", "version") if result.get(k)})  # type: ignore[literal-required]

    def _write_if_locked(self, key: str, doc: dict[str, Any], blob: bytes, expected: Versioned | None) -> Versioned:
        current = self.read(key)
        if (current is None) != (expected is None) or (current and expected and current.version != expected.version):
            raise StaleRecordError(f"{self.url}/{key} changed since it was read; another writer got there first")
        result = obstore.put(self._store, key, blob)
        return Versioned(doc, {k: str(result[k]) for k in ("e_tag", "version") if result.get(k)})  # type: ignore[literal-required]

    @property
    def _local_root(self) -> Path | None:
        try:
            return parse_store_url(self.url).path
        except ValueError:  # an injected store under a name of the caller's own
            return None

    @contextlib.contextmanager
    def _local_lock(self, key: str) -> Iterator[None]:
        root = self._local_root
        assert root is not None
        lock = root / ".locks" / (key.replace("/", "__") + ".lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def list(self, prefix: str) -> list[str]:
        return sorted(str(m["path"]) for batch in obstore.list(self._store, prefix=prefix) for m in batch)


class MemoryJsonStore:
    """In-process JsonStore for tests, simulations and benchmarks."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, int] = {}
        self._counter = 0

    def get(self, key: str) -> dict[str, Any] | None:
        doc = self.objects.get(key)
        return json.loads(json.dumps(doc)) if doc is not None else None

    def put(self, key: str, doc: dict[str, Any]) -> None:
        self.objects[key] = json.loads(json.dumps(doc))
        self._counter += 1
        self.versions[key] = self._counter

    def list(self, prefix: str) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix))

    def read(self, key: str) -> Versioned | None:
        doc = self.get(key)
        return None if doc is None else Versioned(doc, {"version": str(self.versions[key])})

    def write_if(self, key: str, doc: dict[str, Any], expected: Versioned | None) -> Versioned:
        current = self.versions.get(key)
        if (expected is None and current is not None) or (
            expected is not None and expected.version.get("version") != str(current)
        ):
            raise StaleRecordError(f"memory://{key} changed since it was read; another writer got there first")
        self.put(key, doc)
        return Versioned(json.loads(json.dumps(doc)), {"version": str(self.versions[key])})
