"""The replacement ladder: what to try, in order, when spot capacity is lost.

Reacquiring a GPU is not restarting a VM. Each step bounds how long the pool may
wait there and what it may spend per hour; the last resort is always either
paying for on-demand capacity or queueing the work, never waiting forever.
"""

from __future__ import annotations

import itertools
from enum import StrEnum

from pydantic import Field, model_validator

from spotgpu.models.base import SpotModel, fix_hint

#: The longest any single step may wait: a week. Longer is indistinguishable from "forever".
MAX_STEP_WAIT_SECONDS = 7 * 24 * 3600
#: A rung's ceiling above this multiple of the on-demand price is a unit mistake (cents, a monthly
#: figure, a whole gang's price): no rung is worth paying ten on-demand prices per node-hour.
MAX_CEILING_OVER_ON_DEMAND = 10.0


def ceiling_far_above(ceiling: float, on_demand: float) -> tuple[str, str] | None:
    """(why a ceiling is implausible against the on-demand price, the fix), or None."""
    if on_demand <= 0 or ceiling <= MAX_CEILING_OVER_ON_DEMAND * on_demand:
        return None
    return (f"is {ceiling / on_demand:.0f}x the on-demand price {on_demand:g}/h, above the plausible "
            f"{MAX_CEILING_OVER_ON_DEMAND:g}x: cents or a monthly figure typed as USD per node-hour?",
            f"set USD per node-hour, e.g. {round(on_demand * 1.25, 2):g}")  # fmt: skip


class StepKind(StrEnum):
    """Ladder rungs, in the only order they may appear."""

    SAME_POOL = "same_pool"
    ALTERNATE_ZONE = "alternate_zone"
    ALTERNATE_SKU = "alternate_sku"
    ON_DEMAND = "on_demand"
    QUEUE_DEFER = "queue_defer"

    @property
    def rank(self) -> int:
        return _ORDER.index(self)

    @property
    def uses_spot(self) -> bool:
        return self in (StepKind.SAME_POOL, StepKind.ALTERNATE_ZONE, StepKind.ALTERNATE_SKU)


_ORDER = list(StepKind)


class LadderStep(SpotModel):
    kind: StepKind = Field(
        json_schema_extra=fix_hint(
            "use one of same_pool, alternate_zone, alternate_sku, on_demand, queue_defer"
        )
    )
    max_wait_seconds: int = Field(
        gt=0,
        le=MAX_STEP_WAIT_SECONDS,
        description="How long the pool may sit on this step before moving down the ladder.",
        json_schema_extra=fix_hint(f"set a bounded wait between 1 and {MAX_STEP_WAIT_SECONDS} seconds"),
    )
    cost_ceiling_per_hour: float = Field(
        ge=0,
        description="Most this step may spend per node-hour, USD. 0 is valid only for queue_defer.",
        json_schema_extra=fix_hint("set a non-negative USD/hour ceiling, e.g. 12.5"),
    )

    @model_validator(mode="after")
    def _ceiling_allows_spend(self) -> LadderStep:
        if self.kind is not StepKind.QUEUE_DEFER and self.cost_ceiling_per_hour == 0:
            raise ValueError(
                f"step {self.kind.value} has costCeilingPerHour 0, so it can never run; "
                "set the USD/hour it may spend"
            )
        return self


class FallbackLadder(SpotModel):
    """Ordered steps; validated so that the pool always ends on on-demand or a queue."""

    steps: tuple[LadderStep, ...] = Field(
        min_length=1,
        json_schema_extra=fix_hint("list at least one step, ending with on_demand or queue_defer"),
    )
    deadline_escalation: bool = Field(
        default=True,
        description=(
            "Skip ahead to on-demand when the cost model says the deadline is at risk. Needs an on_demand "
            "step; a ladder without one has no escalation (setting it true there is an error)."
        ),
    )

    @model_validator(mode="after")
    def _well_formed(self) -> FallbackLadder:
        kinds = [s.kind for s in self.steps]
        if StepKind.ON_DEMAND not in kinds and StepKind.QUEUE_DEFER not in kinds:
            raise ValueError(
                "ladder has no on_demand and no queue_defer step, so a pool could wait for "
                "spot forever; add {kind: on_demand, ...} or {kind: queue_defer, ...}"
            )
        if StepKind.ON_DEMAND not in kinds and self.deadline_escalation:
            if "deadline_escalation" in self.model_fields_set:
                raise ValueError(
                    "deadlineEscalation is true but the ladder has no on_demand step to escalate to; "
                    "add {kind: on_demand, ...} or set deadlineEscalation: false"
                )
            object.__setattr__(self, "deadline_escalation", False)  # the default means "when there is a rung"
        for prev, cur in itertools.pairwise(kinds):
            if cur.rank <= prev.rank:
                raise ValueError(
                    f"step {cur.value} comes after {prev.value}; steps must follow the order "
                    "same_pool, alternate_zone, alternate_sku, on_demand, queue_defer, each at most once"
                )
        return self

    @property
    def total_wait_seconds(self) -> int:
        """Worst-case seconds before the last step is reached."""
        return sum(s.max_wait_seconds for s in self.steps[:-1])

    def step(self, kind: StepKind) -> LadderStep | None:
        return next((s for s in self.steps if s.kind is kind), None)

    @property
    def on_demand_ceiling_per_hour(self) -> float | None:
        od = self.step(StepKind.ON_DEMAND)
        return od.cost_ceiling_per_hour if od else None
