"""Errors the checkpoint library raises.

They are few and specific so callers can tell "someone else committed first" from
"the bytes are wrong" from "the object is not there" without parsing messages.
"""

from __future__ import annotations


class CheckpointError(Exception):
    """Base class for every error raised by ``spotgpu.checkpoint``."""


class ObjectExistsError(CheckpointError):
    """A create-only write found the object already present (the loser of a commit race)."""


class ObjectMissingError(CheckpointError):
    """The object is not in the store."""


class CommitConflictError(CheckpointError):
    """Another writer committed this step first; this attempt's objects are debris for GC."""


class VerificationError(CheckpointError):
    """A generation failed verification: missing part, size or hash mismatch, malformed manifest."""


class CommitTimeoutError(CheckpointError):
    """The coordinator gave up waiting for every rank's manifest part."""


class WorldSizeMismatch(CheckpointError):
    """The newest committed generation was written by another number of ranks: restoring
    this rank's part would silently give it the wrong slice (or nothing). Raised on every
    rank; restore through ``spotgpu.checkpoint.dcp`` (which reshards) or relaunch with
    the generation's world size."""


class LeaseLostError(CheckpointError):
    """This writer's lease lapsed (it stalled longer than GC waits), so GC may have
    deleted its objects: the generation is not committed."""
