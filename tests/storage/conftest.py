"""Backends for the storage layer's tests: a local directory, moto S3 and Azurite, unwrapped.

``backend()`` returns the bare backend (``LocalStore`` or ``ObjectStore``), so a test can put
a :class:`~spotgpu.storage.faults.FaultyStore` or a counting wrapper *below* the
``ResilientStore`` the way ``open_store`` stacks them. The loopback servers are the session
fixtures of tests/conftest.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spotgpu.storage.store import open_store


@pytest.fixture(params=["file", "s3", "az"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """A factory of fresh bare backends (a new prefix each call) of one kind."""
    kind = request.param
    options: dict[str, Any] = {}
    if kind == "s3":
        options = request.getfixturevalue("s3_server")
    elif kind == "az":
        options = request.getfixturevalue("azurite")

    def make() -> Any:
        prefix = f"t-{uuid.uuid4().hex[:10]}"
        if kind == "file":
            return open_store((tmp_path / prefix).as_uri()).inner
        url = f"az://{options['account_name']}/ckpt/{prefix}" if kind == "az" else f"s3://ckpt/{prefix}"
        return open_store(url, **options).inner

    make.kind = kind  # type: ignore[attr-defined]
    return make
