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


def ceiling_far_above(ceiling: float, on_demand: float, work_per_node_hour: float | None = None) -> tuple[str, str] | None:
    """(why a ceiling is implausible against the on-demand price, the fix), or None.

    ``work_per_node_hour`` given: the ceiling is per work-hour and is judged per node-hour of a
    node doing that much work (its GPUs x their speed).
    """
    per_node = ceiling if work_per_node_hour is None else ceiling * work_per_node_hour
    if on_demand <= 0 or per_node <= MAX_CEILING_OVER_ON_DEMAND * on_demand:
        return None
    if work_per_node_hour is None:
        unit, example = "node-hour", on_demand * 1.25
    else:
        unit, example = f"work-hour (a node does {work_per_node_hour:g})", on_demand * 1.25 / work_per_node_hour
    return (f"is {per_node / on_demand:.0f}x the on-demand price {on_demand:g}/h, above the plausible "
            f"{MAX_CEILING_OVER_ON_DEMAND:g}x: cents or a monthly figure typed as USD per {unit}?",
            f"set USD per {unit.split(' ')[0]}, e.g. {round(example, 2):g}")  # fmt: skip


def ceiling_admits(ceiling: float, per_work_hour: bool, usd_per_node_hour: float, work_per_node_hour: float) -> bool:
    """Whether a price is within a ceiling stated per node-hour, or per work-hour of a node doing
    ``work_per_node_hour`` (the one comparison the stack check, the controller and the policy pack make)."""
    if per_work_hour:
        return work_per_node_hour > 0 and usd_per_node_hour / work_per_node_hour <= ceiling + 1e-12
    return usd_per_node_hour <= ceiling


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
    cost_ceiling_per_hour: float | None = Field(
        default=None,
        ge=0,
        description="Most this step may spend per node-hour, USD. 0 is valid only for queue_defer. Give this or "
        "costCeilingPerWorkHour.",
        json_schema_extra=fix_hint("set a non-negative USD/hour ceiling, e.g. 12.5"),
    )
    cost_ceiling_per_work_hour: float | None = Field(
        default=None,
        ge=0,
        description="Most this step may spend per work-hour, USD: one hour of the reference GPU's work (the GPU "
        "workHours was measured on, relativeThroughput 1.0). A type costs price / (GPUs per node x its measured "
        "speed) per work-hour, so a dearer, faster GPU that finishes sooner passes where a per node-hour "
        "ceiling refuses it. Give this or costCeilingPerHour.",
        json_schema_extra=fix_hint("set a non-negative USD per reference GPU-hour of work, e.g. 1.8"),
    )

    @model_validator(mode="after")
    def _ceiling_allows_spend(self) -> LadderStep:
        given = [v for v in (self.cost_ceiling_per_hour, self.cost_ceiling_per_work_hour) if v is not None]
        if len(given) != 1:
            raise ValueError(
                f"step {self.kind.value} has {'both' if given else 'neither'} costCeilingPerHour and "
                "costCeilingPerWorkHour; give exactly one (USD per node-hour, or per work-hour of the reference GPU)"
            )
        if self.kind is not StepKind.QUEUE_DEFER and given[0] == 0:
            raise ValueError(
                f"step {self.kind.value} has {self.ceiling_key} 0, so it can never run; "
                "set the USD it may spend"
            )
        return self

    @property
    def per_work_hour(self) -> bool:
        """Whether the ceiling is stated per unit of work (else per node-hour)."""
        return self.cost_ceiling_per_work_hour is not None

    @property
    def ceiling(self) -> float:
        """The ceiling as stated, in :attr:`ceiling_unit`."""
        value = self.cost_ceiling_per_work_hour if self.per_work_hour else self.cost_ceiling_per_hour
        assert value is not None  # the validator gives exactly one
        return value

    @property
    def ceiling_key(self) -> str:
        return "costCeilingPerWorkHour" if self.per_work_hour else "costCeilingPerHour"

    @property
    def ceiling_unit(self) -> str:
        return "work-hour" if self.per_work_hour else "node-hour"

    def node_hour_ceiling(self, work_per_node_hour: float) -> float:
        """The ceiling per node-hour of a type whose node does ``work_per_node_hour`` work-hours an hour
        (its GPUs x their measured speed; see :mod:`spotgpu.economics.work_rate`)."""
        return self.ceiling * work_per_node_hour if self.per_work_hour else self.ceiling

    def allows(self, usd_per_node_hour: float, work_per_node_hour: float) -> bool:
        """Whether a type at this price and work rate is within the ceiling, compared in the ceiling's own unit."""
        return ceiling_admits(self.ceiling, self.per_work_hour, usd_per_node_hour, work_per_node_hour)

    def describe_ceiling(self) -> str:
        """``$12.5/h`` (per node-hour) or ``$1.8/work-hour``."""
        return f"${self.ceiling:g}/{'work-hour' if self.per_work_hour else 'h'}"


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
    def per_work_hour(self) -> bool:
        """Whether any rung states its ceiling per work-hour (the workload must then say its GPUs)."""
        return any(s.per_work_hour for s in self.steps)

    @property
    def on_demand_ceiling_per_hour(self) -> float | None:
        """The on_demand rung's ceiling per node-hour, when it is stated so."""
        od = self.step(StepKind.ON_DEMAND)
        return od.cost_ceiling_per_hour if od else None


def default_ladder(spot_per_hour: float, on_demand_per_hour: float) -> FallbackLadder:
    """A ladder like the prod stack's, with ceilings just above the given prices."""
    spot_cap, od_cap = spot_per_hour * 1.5, on_demand_per_hour * 1.25
    return FallbackLadder(
        steps=(
            LadderStep(kind=StepKind.SAME_POOL, max_wait_seconds=900, cost_ceiling_per_hour=spot_cap),
            LadderStep(kind=StepKind.ALTERNATE_ZONE, max_wait_seconds=900, cost_ceiling_per_hour=spot_cap),
            LadderStep(kind=StepKind.ALTERNATE_SKU, max_wait_seconds=1200, cost_ceiling_per_hour=spot_cap),
            LadderStep(kind=StepKind.ON_DEMAND, max_wait_seconds=14400, cost_ceiling_per_hour=od_cap),
        )
    )
