"""Durable, verified checkpoints for spot/preemptible training (no Pulumi here).

A checkpoint counts only once it is *committed* (a create-only commit marker written
after every rank's manifest part was read back) and *verified* (every block's hash
matches on read). Each rank packs its state into one shard object per save; the request
count of a save does not depend on the number of tensors. See docs/checkpoints.md for the
layout and the protocol, and ``writer.ShardWriter`` for the call order.
"""

from spotgpu.checkpoint.async_save import SaveHandle
from spotgpu.checkpoint.errors import (
    CheckpointError,
    CommitConflictError,
    CommitTimeoutError,
    GenerationFailedError,
    LeaseLostError,
    ObjectExistsError,
    ObjectMissingError,
    VerificationError,
    WorldSizeMismatch,
)
from spotgpu.checkpoint.manager import CheckpointManager
from spotgpu.checkpoint.policies import (
    AnyRetention,
    AnySavePolicy,
    DebrisPolicy,
    EveryNSeconds,
    EveryNSteps,
    GracePeriod,
    KeepEveryNSteps,
    KeepLast,
    RetentionPolicy,
    SavePolicy,
)
from spotgpu.checkpoint.reader import VerifyReport
from spotgpu.checkpoint.results import FinalSaveResult, GcReport, GenerationInfo, RestoreResult
from spotgpu.storage.store import ObjectInfo, Store, open_store
from spotgpu.storage.urls import StoreUrl, parse_store_url, redact_url

__all__ = [
    "AnyRetention",
    "AnySavePolicy",
    "CheckpointError",
    "CheckpointManager",
    "CommitConflictError",
    "CommitTimeoutError",
    "DebrisPolicy",
    "EveryNSeconds",
    "EveryNSteps",
    "FinalSaveResult",
    "GcReport",
    "GenerationFailedError",
    "GenerationInfo",
    "GracePeriod",
    "KeepEveryNSteps",
    "KeepLast",
    "LeaseLostError",
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectMissingError",
    "RestoreResult",
    "RetentionPolicy",
    "SaveHandle",
    "SavePolicy",
    "Store",
    "StoreUrl",
    "VerificationError",
    "VerifyReport",
    "WorldSizeMismatch",
    "open_store",
    "parse_store_url",
    "redact_url",
]
