"""The checkpoint tests' backends: one factory over file, moto S3, Azurite and the GCS client boundary.

The loopback servers themselves (``s3_server``, ``azurite``) are session fixtures in tests/conftest.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spotgpu.storage.object_store import ObjectStore
from spotgpu.storage.store import Store, open_store


def memory_gcs_store(prefix: str) -> Store:
    """The GCS client boundary: the same obstore adapter over obstore's in-memory store,
    which enforces create-only puts like GCS's ifGenerationMatch=0 (the GCS emulator
    ignores preconditions and obstore's GCSStore cannot talk to it)."""
    from obstore.store import MemoryStore

    return ObjectStore(f"gs://ckpt/{prefix}", MemoryStore(), prefix)


@pytest.fixture(params=["file", "s3", "az", "gs"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], tuple[str, Store, dict[str, Any]]]:
    """A factory of (url, store, options) on one backend; every call gets a fresh prefix."""
    kind = request.param
    options: dict[str, Any] = {}
    if kind == "s3":
        options = request.getfixturevalue("s3_server")
    elif kind == "az":
        options = request.getfixturevalue("azurite")

    def make() -> tuple[str, Store, dict[str, Any]]:
        prefix = f"t-{uuid.uuid4().hex[:10]}"
        if kind == "file":
            url = (tmp_path / prefix).as_uri()
            return url, open_store(url), {}
        if kind == "gs":
            return f"gs://ckpt/{prefix}", memory_gcs_store(prefix), {}
        # Azure in the form the pools export: az://ACCOUNT/CONTAINER/PREFIX.
        url = f"az://{options['account_name']}/ckpt/{prefix}" if kind == "az" else f"{kind}://ckpt/{prefix}"
        return url, open_store(url, **options), options

    make.kind = kind  # type: ignore[attr-defined]
    return make
