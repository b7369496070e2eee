"""JSON documents in the pool's object store: the controller record, leases, drain requests, agent commits.

The controller keeps its record in the pool's checkpoint store (``file://`` in
tests, ``s3://``/``gs://``/``az://`` in production) so it needs no database. This module
is only the JSON codec and the remembered versions; the storage itself is the same
:class:`~spotgpu.storage.store.Store` the checkpoint library writes through, opened by
:func:`~spotgpu.storage.store.open_store` from the same URL forms.

Writes use the version last read (or written) as a precondition, so two controllers
that raced on the same record fail loudly instead of silently overwriting each other.
:meth:`ObjectJsonStore.read` / :meth:`ObjectJsonStore.write_if` expose the same
conditional writes explicitly (create-only, or update-if-unchanged) for the
controller's lease (``lease.py``). How each backend checks a version (ETag, GCS
generation, a digest under ``flock`` on ``file://``) is the store's business.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Protocol

from spotgpu.storage.errors import ObjectMissingError, VersionMismatchError
from spotgpu.storage.store import Store, Version, open_store
from spotgpu.storage.urls import parse_store_url


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


def open_json_store(url: str, **options: Any) -> Store:
    """The store a state URL names: :func:`~spotgpu.storage.store.open_store` (the checkpoint
    store's forms, Azure as ``az://ACCOUNT/CONTAINER/PREFIX`` or the blob endpoint URL,
    credentials refused), after refusing the old ``az://CONTAINER/PREFIX`` form: an
    account configured apart from the URL's first segment is that mistake, named in one line."""
    where = parse_store_url(url)
    if where.account is not None:
        given = options.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
        if given and given != where.account:
            raise ValueError(
                f"state URL {where.text!r} names storage account {where.account!r}, but {given!r} is configured "
                f"(account_name or AZURE_STORAGE_ACCOUNT_NAME); fix: the URL's first segment is the account: "
                + f"az://{given}/{where.account}/{where.bucket}/{where.prefix}".rstrip("/")
            )
    return open_store(url, **options)


def _as_store(url: str, store: Any) -> Store:
    """An injected store: a :class:`Store`, or a bare obstore store (wrapped, keys unprefixed),
    behind the storage layer's retry rules (a lost reply to a conditional write is resolved
    by reading back, as for every store ``open_store`` opens)."""
    from spotgpu.storage.resilient import resilient

    if isinstance(store, Store):
        return resilient(store)
    from spotgpu.storage.object_store import ObjectStore

    return resilient(ObjectStore(url, store, ""))


class ObjectJsonStore:
    """JsonStore on any store URL; remembers the version of what it last read or wrote."""

    def __init__(self, url: str, store: Any = None, **options: Any) -> None:
        self.url = url
        self._store = _as_store(url, store) if store is not None else open_json_store(url, **options)
        self._etags: dict[str, dict[str, str]] = {}  # key -> obstore UpdateVersion (e_tag, version)

    def get(self, key: str) -> dict[str, Any] | None:
        found = self.read(key)
        if found is None:
            self._etags.pop(key, None)
            return None
        self._remember(key, found.version)
        return found.doc

    def put(self, key: str, doc: dict[str, Any]) -> None:
        blob, seen = _encode(doc), self._etags.get(key)
        try:
            if seen is None:  # never read: nothing to be conditional on
                version = self._store.put_versioned(key, blob)
            else:
                version = self._store.put_if(key, blob, _version(seen))
        except VersionMismatchError as err:
            stale = f"{self.url}/{key} changed since it was read; another controller is running"
            raise StaleRecordError(stale) from err
        self._remember(key, version.as_dict())

    def _remember(self, key: str, version: dict[str, str]) -> None:
        if version:
            self._etags[key] = version

    def read(self, key: str) -> Versioned | None:
        try:
            blob, version = self._store.get_versioned(key)
        except ObjectMissingError:
            return None
        return Versioned(_decode(self.url, key, blob), version.as_dict())

    def write_if(self, key: str, doc: dict[str, Any], expected: Versioned | None) -> Versioned:
        try:
            version = self._store.put_if(key, _encode(doc), None if expected is None else _version(expected.version))
        except VersionMismatchError as err:
            state = "exists" if expected is None else "changed since it was read"
            raise StaleRecordError(f"{self.url}/{key} {state}; another writer got there first") from err
        return Versioned(doc, version.as_dict())

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix``; hidden names (a local store's temporaries and lock files) are not keys."""
        return sorted(i.path for i in self._store.list(prefix) if not any(p.startswith(".") for p in i.path.split("/")))


def _version(tokens: dict[str, str]) -> Version:
    return Version(e_tag=tokens.get("e_tag"), version=tokens.get("version"))


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
