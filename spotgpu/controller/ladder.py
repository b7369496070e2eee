"""Which ladder rung a pool should be on, given how long it has waited.

Pure and clock-free on purpose: the controller, the cost-model simulator and the
tests all ask the same question ("capacity was lost ``t`` seconds ago; where are
we?") and must get the same answer. Each step owns the window
``[entered_at, entered_at + max_wait)``; the last step has no end, because the
ladder validator guarantees it is on-demand or a queue, where waiting is safe.

A deadline at risk jumps straight to on-demand (when the ladder allows
escalation and has an on-demand step); the walker never moves *back* up the
ladder, so escalation cannot undo a step the pool has already passed.
"""

from __future__ import annotations

import bisect
import itertools

from spotgpu.models.ladder import FallbackLadder, LadderStep, StepKind


class LadderWalker:
    """Maps elapsed wait to a ladder step; holds no mutable state."""

    def __init__(self, ladder: FallbackLadder) -> None:
        self.ladder = ladder
        waits = [s.max_wait_seconds for s in ladder.steps[:-1]]
        #: Seconds after capacity loss at which step i+1 is entered.
        self._boundaries: tuple[int, ...] = tuple(itertools.accumulate(waits))
        self._on_demand_index = next(
            (i for i, s in enumerate(ladder.steps) if s.kind is StepKind.ON_DEMAND), None
        )

    def index_for(self, waited_seconds: float, deadline_at_risk: bool = False) -> int:
        """Index into ``ladder.steps`` of the rung for this wait."""
        if waited_seconds < 0 or waited_seconds != waited_seconds:  # NaN check without math import
            raise ValueError(
                f"waited_seconds {waited_seconds!r} must be a non-negative number of seconds "
                "since capacity was lost"
            )
        index = bisect.bisect_right(self._boundaries, waited_seconds)
        if (
            deadline_at_risk
            and self.ladder.deadline_escalation
            and self._on_demand_index is not None
            and index < self._on_demand_index
        ):
            return self._on_demand_index
        return index

    def step_for(self, waited_seconds: float, deadline_at_risk: bool = False) -> LadderStep:
        """The step the pool should be on after ``waited_seconds`` without its capacity."""
        return self.ladder.steps[self.index_for(waited_seconds, deadline_at_risk)]

    def entered_at(self, index: int) -> int:
        """Seconds after capacity loss at which step ``index`` begins (without escalation)."""
        if not 0 <= index < len(self.ladder.steps):
            raise IndexError(f"step index {index} outside ladder of {len(self.ladder.steps)} steps")
        return 0 if index == 0 else self._boundaries[index - 1]

    def seconds_left(self, waited_seconds: float) -> float | None:
        """Seconds until the next step; ``None`` on the last step (it has no end)."""
        index = self.index_for(waited_seconds)
        if index >= len(self._boundaries):
            return None
        return self._boundaries[index] - waited_seconds
