"""Recovery strategies, chosen by name (SkyPilot style: a registry keyed by a config string).

A strategy answers one question: which ladder rung should a pool that lost
capacity be on now? It holds no state (the planner keeps the episode clock and
never lets a pool climb back up within one episode) and does no I/O, so every
strategy can be replayed against a trace and compared. All strategies keep the
ladder's guarantee: once the sum of the spot waits has passed, the pool is on
on-demand or deferred.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from spotgpu.controller.ladder import LadderWalker
from spotgpu.models.ladder import FallbackLadder, StepKind


@dataclass(frozen=True)
class StrategyContext:
    waited_seconds: float  # since capacity was lost (episode clock)
    deadline_at_risk: bool  # the cost model's verdict (spotgpu.economics.deadline)
    behind_schedule: bool  # progress below the uniform-progress line work * elapsed / deadline


class RecoveryStrategy(ABC):
    name: ClassVar[str]
    #: Whether :meth:`step_index` reads ``behind_schedule`` (so the planner must wake when it flips).
    reads_behind_schedule: ClassVar[bool] = False

    def __init__(self, ladder: FallbackLadder) -> None:
        self.ladder = ladder
        self.walker = LadderWalker(ladder)
        kinds = [s.kind for s in ladder.steps]
        self._first_non_spot = next(i for i, k in enumerate(kinds) if not k.uses_spot)
        self._on_demand = kinds.index(StepKind.ON_DEMAND) if StepKind.ON_DEMAND in kinds else None

    @abstractmethod
    def step_index(self, ctx: StrategyContext) -> int:
        """Index into ``ladder.steps``."""


_REGISTRY: dict[str, type[RecoveryStrategy]] = {}


def register(name: str) -> Callable[[type[RecoveryStrategy]], type[RecoveryStrategy]]:
    def add(cls: type[RecoveryStrategy]) -> type[RecoveryStrategy]:
        if name in _REGISTRY:
            raise ValueError(f"recovery strategy {name!r} is registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return add


def registered() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def make_strategy(name: str, ladder: FallbackLadder) -> RecoveryStrategy:
    try:
        return _REGISTRY[name](ladder)
    except KeyError:
        raise ValueError(
            f"fallbackPolicy {name!r} has no registered strategy; use one of {', '.join(sorted(_REGISTRY))}"
        ) from None


@register("ladder")
class LadderStrategy(RecoveryStrategy):
    """Walk every rung for its max wait; a deadline at risk jumps to on-demand."""

    def step_index(self, ctx: StrategyContext) -> int:
        return self.walker.index_for(ctx.waited_seconds, ctx.deadline_at_risk)


@register("fixed-wait")
class FixedWaitStrategy(RecoveryStrategy):
    """Wait on the same pool for the whole spot budget, then go straight to on-demand.

    No widening: for work pinned to one zone or SKU (data locality, a placement
    group). The wait equals the sum of the ladder's spot steps, so the worst case
    matches the ladder's.
    """

    def step_index(self, ctx: StrategyContext) -> int:
        walked = self.walker.index_for(ctx.waited_seconds, ctx.deadline_at_risk)
        return 0 if walked < self._first_non_spot else walked


@register("uniform-progress")
class UniformProgressStrategy(RecoveryStrategy):
    """Can't Be Late's Uniform Progress: use on-demand whenever the job is behind schedule.

    While progress is at or above the straight line from submission to deadline,
    waiting for spot is free slack; below it, each second waited is a second the
    deadline loses, so the pool goes to on-demand at once.
    """

    reads_behind_schedule = True

    def step_index(self, ctx: StrategyContext) -> int:
        behind = ctx.deadline_at_risk or ctx.behind_schedule
        walked = self.walker.index_for(ctx.waited_seconds, False)
        if behind and self._on_demand is not None and walked < self._on_demand:
            return self._on_demand
        return walked


@register("on-demand-only")
class OnDemandOnlyStrategy(RecoveryStrategy):
    """Lost spot is replaced by on-demand at once (or deferred when the ladder has no on-demand)."""

    def step_index(self, ctx: StrategyContext) -> int:
        walked = self.walker.index_for(ctx.waited_seconds, False)
        return max(walked, self._first_non_spot)
