"""Save and retention decisions as small policy objects (Orbax style).

Each is a runtime-checkable ``Protocol`` with frozen-dataclass implementations, so a
caller can pass its own (``isinstance(obj, SavePolicy)`` checks the shape) and the
decisions are unit-tested without any storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class SavePolicy(Protocol):
    def should_save(self, step: int, *, last_saved_step: int | None, seconds_since_save: float | None) -> bool:
        """True if ``step`` should be checkpointed."""
        ...


@dataclass(frozen=True)
class EveryNSteps:
    """Save when ``step`` is a multiple of ``steps`` (and not already saved)."""

    steps: int

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps: {self.steps} must be >= 1; fix: e.g. 1000")

    def should_save(self, step: int, *, last_saved_step: int | None, seconds_since_save: float | None) -> bool:
        return step % self.steps == 0 and step != last_saved_step


@dataclass(frozen=True)
class EveryNSeconds:
    """Save once ``seconds`` have passed since the last save (use the interval from
    ``spotgpu.economics.interval.choose_interval``); the first call always saves."""

    seconds: float

    def __post_init__(self) -> None:
        if self.seconds <= 0:
            raise ValueError(f"seconds: {self.seconds} must be > 0; fix: e.g. 900")

    def should_save(self, step: int, *, last_saved_step: int | None, seconds_since_save: float | None) -> bool:
        if step == last_saved_step:
            return False
        return seconds_since_save is None or seconds_since_save >= self.seconds


@dataclass(frozen=True)
class AnySavePolicy:
    """Save if any member policy says so."""

    policies: tuple[SavePolicy, ...]

    def should_save(self, step: int, *, last_saved_step: int | None, seconds_since_save: float | None) -> bool:
        return any(
            p.should_save(step, last_saved_step=last_saved_step, seconds_since_save=seconds_since_save)
            for p in self.policies
        )


@runtime_checkable
class RetentionPolicy(Protocol):
    def keep(self, committed_steps: Sequence[int]) -> set[int]:
        """Of the committed steps (newest first), the ones to keep."""
        ...


@dataclass(frozen=True)
class KeepLast:
    """Keep the newest ``count`` committed generations."""

    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"keep: {self.count} must be >= 1; fix: keep at least one generation")

    def keep(self, committed_steps: Sequence[int]) -> set[int]:
        return set(sorted(committed_steps, reverse=True)[: self.count])


@dataclass(frozen=True)
class KeepEveryNSteps:
    """Keep generations whose step is a multiple of ``steps`` (long-term milestones)."""

    steps: int

    def keep(self, committed_steps: Sequence[int]) -> set[int]:
        return {s for s in committed_steps if s % self.steps == 0}


@dataclass(frozen=True)
class AnyRetention:
    """Keep what any member policy keeps."""

    policies: tuple[RetentionPolicy, ...]

    def keep(self, committed_steps: Sequence[int]) -> set[int]:
        kept: set[int] = set()
        for policy in self.policies:
            kept |= policy.keep(committed_steps)
        return kept


@runtime_checkable
class DebrisPolicy(Protocol):
    def expired(self, age_seconds: float) -> bool:
        """True if uncommitted objects this old may be deleted."""
        ...


@dataclass(frozen=True)
class GracePeriod:
    """Uncommitted objects younger than ``seconds`` may belong to a save in progress."""

    seconds: float

    def __post_init__(self) -> None:
        if self.seconds < 0:
            raise ValueError(f"grace_seconds: {self.seconds} must be >= 0; fix: e.g. 3600")

    def expired(self, age_seconds: float) -> bool:
        return age_seconds >= self.seconds
