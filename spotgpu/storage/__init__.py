"""One object-store layer for checkpoints, controller records and leases (issue 24).

Storage sits behind one interface, :class:`~spotgpu.storage.store.Store`, opened by URL
with :func:`~spotgpu.storage.store.open_store`: immutable objects written temp-then-atomic
with a create-only commit primitive for the checkpoint library, and small documents
read with their version and written only if unchanged for the controller's JSON state
store. ``file://`` is :class:`~spotgpu.storage.local_store.LocalStore`; ``s3://``,
``gs://`` and ``az://`` are :class:`~spotgpu.storage.object_store.ObjectStore` over obstore.

This package is below every part: it imports none of them (not the contract, not the
checkpoint library), and both import it. ``tests/foundation/test_layers.py`` checks it.
"""

from spotgpu.storage.errors import ObjectExistsError, ObjectMissingError, StoreError, VersionMismatchError
from spotgpu.storage.payload import Payload, iter_chunks, join
from spotgpu.storage.store import ObjectInfo, Store, Version, open_store
from spotgpu.storage.urls import StoreUrl, parse_store_url, redact_url

__all__ = [
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectMissingError",
    "Payload",
    "Store",
    "StoreError",
    "StoreUrl",
    "Version",
    "VersionMismatchError",
    "iter_chunks",
    "join",
    "open_store",
    "parse_store_url",
    "redact_url",
]
