"""Errors the checkpoint library raises.

They are few and specific so callers can tell "someone else committed first" from
"the bytes are wrong" from "the object is not there" without parsing messages.
"""

from __future__ import annotations

from spotgpu.storage.errors import ObjectExistsError, ObjectMissingError, StoreError

#: Base class for every error raised by ``spotgpu.checkpoint``, the store's included: it is
#: the storage layer's base error, so ``ObjectMissingError`` and ``ObjectExistsError`` (raised
#: by the store below this library) are ``CheckpointError``s as they always were.
CheckpointError = StoreError

__all__ = [
    "CheckpointError",
    "CommitConflictError",
    "CommitTimeoutError",
    "GenerationFailedError",
    "LeaseLostError",
    "ObjectExistsError",
    "ObjectMissingError",
    "VerificationError",
    "WorldSizeMismatch",
]


class CommitConflictError(CheckpointError):
    """Another writer committed this step first; this attempt's objects are debris for GC."""


class VerificationError(CheckpointError):
    """A generation failed verification: missing part, size or hash mismatch, malformed manifest."""


class CommitTimeoutError(CheckpointError):
    """The coordinator gave up waiting for every rank's manifest part."""


class GenerationFailedError(CheckpointError):
    """The generation this rank wrote will not be committed: the coordinator gave up, or a
    rank could not write its part, and said so in a commit verdict (``failed/<step>.json``)
    or through the gang's process group. Raised at the waiting rank's next poll, never
    after waiting out the commit timeout."""


class WorldSizeMismatch(CheckpointError):
    """The newest committed generation was written by another number of ranks: restoring
    this rank's part would silently give it the wrong slice (or nothing). Raised on every
    rank; restore through ``spotgpu.checkpoint.dcp`` (which reshards) or relaunch with
    the generation's world size."""


class LeaseLostError(CheckpointError):
    """This writer's lease lapsed (it stalled longer than GC waits), so GC may have
    deleted its objects: the generation is not committed."""
