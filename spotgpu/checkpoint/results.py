"""What the manager returns: plain frozen dataclasses (stable, easy to log and to JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spotgpu.checkpoint.manifest import CommitRecord


@dataclass(frozen=True)
class GenerationInfo:
    generation: str
    step: int
    committed: bool
    world_size: int | None = None
    total_bytes: int | None = None
    committed_at: str | None = None
    #: Why it failed verification (committed, but restore skips it and gc retires it first).
    failed: str | None = None

    @property
    def state(self) -> str:
        """``committed``, ``failed`` or ``uncommitted`` (what ``spotgpu ckpt list`` shows)."""
        return "failed" if self.failed else "committed" if self.committed else "uncommitted"

    @classmethod
    def from_record(cls, record: CommitRecord) -> GenerationInfo:
        return cls(record.generation, record.step, True, record.world_size, record.total_bytes, record.committed_at)


@dataclass(frozen=True)
class RestoreResult:
    step: int
    state: dict[str, Any]
    generation: str
    #: Newer committed generations that failed verification: (generation, reason).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Where this rank's state came from: ``store``, or with checkpoint tiers ``local`` (this node's tier)
    #: or ``peer`` (a copy another node held); the seconds and bytes it took; why nearer copies were not used.
    source: str = "store"
    seconds: float | None = None
    nbytes: int | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class FinalSaveResult:
    committed: bool
    seconds: float
    generation: str | None
    reason: str


@dataclass
class GcReport:
    retired: list[str] = field(default_factory=list)
    deleted_debris: list[str] = field(default_factory=list)
    deleted_objects: int = 0
    kept: list[str] = field(default_factory=list)
    young_debris: list[str] = field(default_factory=list)
    #: Uncommitted generations kept because their writer's lease is live (a save in progress).
    live_writers: list[str] = field(default_factory=list)
    newest_verified: str | None = None
    #: Committed generations retired because they failed verification (also in ``retired``).
    failed: list[str] = field(default_factory=list)
    #: True for ``gc(dry_run=True)``: nothing was deleted, ``would_delete`` lists the paths.
    dry_run: bool = False
    would_delete: list[str] = field(default_factory=list)
