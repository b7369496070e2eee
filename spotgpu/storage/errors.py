"""What a store raises about an object: missing, already there, or changed since it was read.

Few and specific, so callers tell "someone else got there first" from "not there" without
parsing messages. Transport failures (credentials, network) stay obstore's and the OS's own.
The checkpoint library's ``CheckpointError`` is :class:`StoreError` under the library's
name, so ``except CheckpointError`` around a read still catches a missing object.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error a store raises about an object (and of the checkpoint library's errors)."""


class ObjectMissingError(StoreError):
    """The object is not in the store."""


class ObjectExistsError(StoreError):
    """A create-only write found the object already present (the loser of a commit race)."""


class VersionMismatchError(StoreError):
    """A conditional write (``put_if``) found the object not at the version it expected:
    it appeared (create-only), changed or vanished since it was read. Another writer won."""
