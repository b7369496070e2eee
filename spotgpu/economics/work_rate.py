"""A pool's economics per unit of work: what each type it may take costs per work-hour, rung by rung.

Falling back to another GPU type is a change of machine, not of price. A work-hour is
one hour of the reference GPU's work (the GPU ``workHours`` was measured on,
``gpu.relativeThroughput`` 1.0); a node of a type does ``GPUs x speed`` work-hours an
hour, so its price per work-hour is ``USD per node-hour / (GPUs x speed)``. An H100
node at 2.4x an A100 node's price that trains 2.5x faster is the cheaper way to finish,
which a per node-hour ceiling judges the other way round.

Two pure pieces, read by the preview and ``spotgpu cost --stack`` (``report.py``):

* :func:`rung_rates`: per ladder rung, every type it may take with its price per
  node-hour and per work-hour, and whether the rung's ceiling (in its own unit) admits it;
* :func:`at_pool_speed`: the workload restated in hours of the pool's primary type, so
  the cost model (which counts node-hours) prices work, not time: ``workHours / speed``
  on spot, and the on-demand price scaled by ``spot speed / on-demand speed`` (an hour
  on a slower on-demand type does less of the job).

Spot prices per type: the pool has one configured spot price (``spotPerHour``), taken as
its first type's; another type's is that price scaled by the two types' list prices
(labelled so; :func:`spotgpu.models.gpu_fit.spot_type_price`, the rule the stack check and the
rendered controller config use too), because no per-type spot price is configured or measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotgpu.models import PoolSpec, StackConfig, WorkloadProfile
from spotgpu.models.gpu_fit import TypeRate, nodes_per_type, type_rates
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.models.pool_types import alternate_types, catalogue_price, fallback_types, primary_types, spot_type_price


@dataclass(frozen=True)
class PoolSpeeds:
    """What one node-hour of the pool's types does: their speeds against the type workHours was measured on
    (``gpu.relativeThroughput``, else spec priors: :func:`spotgpu.models.gpu_fit.type_rates`), GPUs and the
    nodes the gang takes on each (the workload's ``nodes`` without a ``gpu`` block)."""

    spot: float  # the pool's first (primary) type
    on_demand: float  # the fallback group's first type (what its ranked allocation launches first)
    spot_type: str
    unmeasured: tuple[str, ...]  # GPU models with neither a measurement nor a spec row
    spot_gpus: float = 1.0  # GPUs per node of the primary type (what a per work-hour ceiling multiplies)
    on_demand_gpus: float = 1.0  # and of that fallback type
    nodes: int = 1  # the workload's nodes (its reference layout)
    spot_nodes: int = 1  # nodes of the primary type that hold the gang's GPUs
    on_demand_nodes: int = 1  # and of the on-demand type
    on_demand_type: str = ""
    spot_source: str = "reference"  # table | spec prior | reference | unmeasured (TypeRate.speed_source)
    on_demand_source: str = "reference"

    @property
    def neutral(self) -> bool:
        return self.spot == 1.0 and self.on_demand == 1.0 and self.spot_nodes == self.on_demand_nodes == self.nodes

    @property
    def on_demand_factor(self) -> float:
        """An on-demand node-hour's price per node-hour of the primary type doing the same work."""
        return (self.spot / self.on_demand) * (self.on_demand_nodes / self.spot_nodes)

    def describe(self) -> str:
        """One line: the speeds and gang sizes the pool is priced at, and which models were not measured."""
        unmeasured = f"; no measurement and no spec row: {', '.join(self.unmeasured)}" if self.unmeasured else ""
        shape = "" if self.spot_nodes == self.on_demand_nodes == self.nodes else (
            f"; the gang takes {self.spot_nodes} node(s) on spot, {self.on_demand_nodes} on on-demand")
        od = f"{self.on_demand_type}, " if self.on_demand_type else ""
        return (f"spot {self.spot:g} ({self.spot_type}, {_label(self.spot_source)}), on-demand {self.on_demand:g} "
                f"({od}the fallback group's first type, {_label(self.on_demand_source)}) against the reference "
                f"type{shape}{unmeasured}")


#: How each speed source reads in the preview's table and lines.
SPEED_LABELS = {"table": "measured", "spec prior": "spec prior", "reference": "reference", "unmeasured": "unmeasured"}


def _label(source: str) -> str:
    return SPEED_LABELS.get(source, source)


def pool_speeds(pool: PoolSpec, workload: WorkloadProfile) -> PoolSpeeds:
    rates = type_rates(pool, workload)
    spot = next((r for r in rates if r.type.spot), rates[0])
    first_od = fallback_types(pool, workload)[0]
    od = next((r for r in rates if r.type.name == first_od), spot)
    unmeasured = tuple(sorted({r.gpu_model or r.type.name for r in (spot, od) if r.speed_source == "unmeasured"}))
    reference = workload.gpu.gpus_per_node if workload.gpu is not None else 1
    nodes = nodes_per_type(pool, workload)
    return PoolSpeeds(spot.speed, od.speed, spot.type.name, unmeasured,
                      spot.gpus or reference, od.gpus or reference, workload.nodes,
                      nodes.get(spot.type.name, workload.nodes), nodes.get(od.type.name, workload.nodes),
                      od.type.name, spot.speed_source, od.speed_source)  # fmt: skip


def restate(workload: WorkloadProfile, ladder: FallbackLadder, speeds: PoolSpeeds) -> tuple[WorkloadProfile, FallbackLadder]:
    """The workload and ladder in node-hours of the pool's primary type, every ceiling per such node-hour.

    The cost model and the simulations count node-hours of one type: :func:`at_pool_speed` makes the
    job that many hours of the primary type on the nodes it takes, and scales the on-demand price by
    what an on-demand node-hour does (:attr:`PoolSpeeds.on_demand_factor`), so a ceiling is scaled
    alike to compare as the controller compares it: the on_demand rung's per node-hour ceiling by the
    same factor, and a per work-hour ceiling by the work one node does in those units (the primary
    type's GPUs x speed on spot; on-demand, the same times the factor's node ratio).
    """
    if speeds.neutral and not ladder.per_work_hour:
        return workload, ladder
    steps = []
    for step in ladder.steps:
        if step.per_work_hour:  # the work one node does in the restated unit, on the rung's type
            work = speeds.spot_gpus if step.kind.uses_spot else (
                speeds.on_demand_gpus * speeds.on_demand_nodes / speeds.spot_nodes)
            ceiling = step.node_hour_ceiling(work * speeds.spot)
        else:
            ceiling = step.ceiling * (speeds.on_demand_factor if step.kind is StepKind.ON_DEMAND else 1.0)
        steps.append(step.model_copy(update={"cost_ceiling_per_hour": ceiling, "cost_ceiling_per_work_hour": None}))
    return at_pool_speed(workload, speeds), ladder.model_copy(update={"steps": type(ladder.steps)(steps)})


def at_pool_speed(workload: WorkloadProfile, speeds: PoolSpeeds) -> WorkloadProfile:
    """The workload in node-hours of the primary type: the same job, priced by the work each hour does."""
    if speeds.neutral:
        return workload
    prices = workload.prices.model_copy(update={"on_demand_per_hour": workload.prices.on_demand * speeds.on_demand_factor})
    return workload.model_copy(update={"work_hours": workload.work_hours / speeds.spot, "nodes": speeds.spot_nodes,
                                       "prices": prices})  # fmt: skip


def _type_price(config: StackConfig, pool: PoolSpec, name: str, spot: bool) -> tuple[float | None, str]:
    """USD per node-hour of one type on a spot or the on-demand rung, and where the figure came from."""
    workload = config.workloads[pool.workload]
    if not spot:
        if workload.prices.on_demand_per_hour is not None:
            return workload.prices.on_demand_per_hour, f"workloads.{pool.workload}.prices.onDemandPerHour"
        own = catalogue_price(pool, name)
        return (own.usd_per_hour, own.source) if own is not None else (None, "no list price in the catalogue")
    price, source = config.spot_price(pool)
    scaled, how = spot_type_price(pool, name, price)
    return scaled, source if scaled == price and "no list" not in how else f"{source} {how}"


def rung_types(pool: PoolSpec, kind: StepKind, workload: WorkloadProfile) -> tuple[str, ...]:
    """The types a rung may take in this pool: same_pool and alternate_zone grow the primary group,
    alternate_sku the other spot groups, on_demand the fallback group (``spotgpu.models.pool_types``:
    the groups the components create and the rendered controller config resizes)."""
    if kind is StepKind.ON_DEMAND:
        return fallback_types(pool, workload)
    if kind is StepKind.ALTERNATE_SKU:
        return alternate_types(pool, workload)
    return primary_types(pool, workload)


def rung_rates(config: StackConfig, pool: PoolSpec) -> list[dict[str, Any]]:
    """Per ladder rung: the types it may take, USD per node-hour and per work-hour, and the ceiling's verdict."""
    workload = config.workloads[pool.workload]
    rates = {r.type.name: r for r in type_rates(pool, workload)}
    out = []
    for step in config.ladder_for(pool).steps:
        if step.kind is StepKind.QUEUE_DEFER:
            continue
        types = []
        for name in rung_types(pool, step.kind, workload):
            rate = rates[name]
            price, source = _type_price(config, pool, name, step.kind.uses_spot)
            per_work = None if price is None else round(price / rate.work_per_node_hour, 4)
            types.append({
                "type": name, "gpuModel": rate.gpu_model, "gpus": rate.gpus,
                "speed": rate.speed, "speedMeasured": rate.measured, "speedSource": _speed_source(workload, rate),
                "speedBasis": rate.speed_basis,
                "usdPerNodeHour": price, "usdPerWorkHour": per_work, "priceSource": source,
                "withinCeiling": None if price is None else step.allows(price, rate.work_per_node_hour),
            })  # fmt: skip
        out.append({"kind": step.kind.value, "ceiling": step.ceiling, "ceilingUnit": step.ceiling_unit, "types": types})
    return out


def _speed_source(workload: WorkloadProfile, rate: TypeRate) -> str:
    """``measured`` or ``typed`` (a ``relativeThroughput`` entry, by its ``sources`` entry), else the rate's
    own: ``spec prior``, ``reference`` or ``unmeasured``."""
    if rate.speed_source != "table":
        return rate.speed_source
    origin = workload.sources.get(rate.speed_basis, "")  # speed_basis names the key: gpu.relativeThroughput.<model>
    return "measured" if origin.startswith(("measured", "fitted")) else "typed"


def render_rungs(rungs: list[dict[str, Any]], indent: str = "      ") -> list[str]:
    """One row per type (GPUs x model, speed, USD per node-hour and per work-hour on spot and on-demand),
    then one line per rung naming the types its ceiling admits."""
    rows: dict[str, dict[str, Any]] = {}
    for rung in rungs:
        side = "spot" if StepKind(rung["kind"]).uses_spot else "od"
        for t in rung["types"]:
            rows.setdefault(t["type"], dict(t))[side] = (t["usdPerNodeHour"], t["usdPerWorkHour"])

    def money(pair: tuple[float | None, float | None] | None) -> str:
        if pair is None:
            return f"{'-':>19}"
        node, work = pair
        return f"{'no price':>19}" if node is None else f"{node:>9.4g} {work:>9.4g}"

    width = max(len(n) for n in rows) if rows else 4
    lines = [f"{indent}per unit of work (work-hour: one hour of the reference GPU; a node does GPUs x speed of them):",
             f"{indent}  {'type':<{width}}  {'GPUs x model':<22} {'speed':<17} {'spot $/h':>9} {'$/work-h':>9} "
             f"{'od $/h':>9} {'$/work-h':>9}"]  # fmt: skip
    for name, t in rows.items():
        gpus = f"{'?' if t['gpus'] is None else t['gpus']} x {t['gpuModel'] or '?'}"
        speed = f"{t['speed']:.3g} {t.get('speedSource', '')}".strip()
        lines.append(f"{indent}  {name:<{width}}  {gpus:<22} {speed:<17} {money(t.get('spot'))} {money(t.get('od'))}")
    for rung in rungs:
        unit = "h" if rung["ceilingUnit"] == "node-hour" else "work-hour"
        admitted = [t["type"] for t in rung["types"] if t["withinCeiling"]]
        above = [t["type"] for t in rung["types"] if t["withinCeiling"] is False]
        text = ", ".join(admitted) or ("no type" if rung["types"] else "no type of this pool (its spot types are all "
                                                                       "in the primary group, which same_pool grows)")
        lines.append(f"{indent}  {rung['kind']} (ceiling ${rung['ceiling']:g}/{unit}) takes {text}"
                     + (f"; above the ceiling: {', '.join(above)}" if above else ""))
    return lines
