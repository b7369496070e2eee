"""A tiny JSON object store over obstore: the controller record, drain requests, agent commits.

The controller keeps its record in the pool's checkpoint store (``file://`` in
tests, ``s3://``/``gs://``/``az://`` in production) so it needs no database. Writes
use the previous ETag as a precondition where the backend supports it, so two
controllers that raced on the same record fail loudly instead of silently
overwriting each other. Both the ETag and the object version are kept, because
backends differ in which one a conditional update checks (GCS: the generation,
passed as ``version``; Azure: the ETag).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import obstore
from obstore.store import from_url


class JsonStore(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...
    def put(self, key: str, doc: dict[str, Any]) -> None: ...
    def list(self, prefix: str) -> list[str]: ...


class StaleRecordError(RuntimeError):
    """Another writer changed the object since we read it."""


class ObjectJsonStore:
    """JsonStore on any obstore URL; remembers the ETag of what it read."""

    def __init__(self, url: str, store: Any = None, **options: Any) -> None:
        self.url = url
        if url.startswith("file://"):
            options.setdefault("mkdir", True)
        self._store = store if store is not None else from_url(url, **options)
        self._etags: dict[str, dict[str, str]] = {}  # key -> obstore UpdateVersion (e_tag, version)

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            result = obstore.get(self._store, key)
        except FileNotFoundError:
            self._etags.pop(key, None)
            return None
        self._remember(key, result.meta)
        doc = json.loads(bytes(result.bytes()))
        if not isinstance(doc, dict):
            raise ValueError(f"{self.url}/{key}: expected a JSON object, got {type(doc).__name__}")
        return doc

    def put(self, key: str, doc: dict[str, Any]) -> None:
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
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

    def list(self, prefix: str) -> list[str]:
        return sorted(str(m["path"]) for batch in obstore.list(self._store, prefix=prefix) for m in batch)


class MemoryJsonStore:
    """In-process JsonStore for tests, simulations and benchmarks."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        doc = self.objects.get(key)
        return json.loads(json.dumps(doc)) if doc is not None else None

    def put(self, key: str, doc: dict[str, Any]) -> None:
        self.objects[key] = json.loads(json.dumps(doc))

    def list(self, prefix: str) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix))
