"""What a store raises about an object: missing, already there, or changed since it was read.

Few and specific, so callers tell "someone else got there first" from "not there" from "the
store did not answer for sure" without parsing messages. Permanent failures the store reports
(credentials, a bad request) stay obstore's and the OS's own.
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


class TransientStoreError(StoreError):
    """The store did not answer for sure: the connection was reset or timed out, the reply or
    the body was cut short, or the store asked to slow down (429, 5xx). A read may simply be
    tried again; a write's outcome is *unknown* (it may have been applied), which is what
    :class:`~spotgpu.storage.resilient.ResilientStore` resolves. ``status`` is the HTTP status
    when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StoreUnavailableError(StoreError):
    """Retries of transient errors ran out of time (the save's deadline or the policy's limit):
    one line naming the operation, the object, the attempts and the last error."""
