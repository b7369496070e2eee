"""StackConfig: everything one Pulumi stack declares, parsed once at the edge."""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import Field, ValidationInfo, model_validator

from spotgpu.catalogue import PriceQuote
from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.ladder import FallbackLadder, StepKind, ceiling_far_above
from spotgpu.models.pool_types import (
    alternate_types,
    catalogue_price,
    fallback_types,
    pool_region,
    pool_types,
    primary_types,
    spot_groups,
    spot_type_price,
    type_keys,
)
from spotgpu.models.pools import AwsPoolSpec, AzurePoolSpec, GcpPoolSpec, PoolSpec
from spotgpu.models.workload import WorkloadProfile


class StackConfig(SpotModel):
    environment: str = Field(
        pattern=r"^[a-z][a-z0-9-]{0,15}$", json_schema_extra=fix_hint("use a short lowercase name such as dev or prod")
    )
    owner: str = Field(min_length=1, json_schema_extra=fix_hint("name the owning team, e.g. ml-platform"))
    workloads: dict[str, WorkloadProfile] = Field(
        min_length=1, json_schema_extra=fix_hint("define at least one workload profile by name")
    )
    ladders: dict[str, FallbackLadder] = Field(
        min_length=1, json_schema_extra=fix_hint("define at least one fallback ladder by name")
    )
    pools: tuple[PoolSpec, ...] = Field(
        min_length=1, json_schema_extra=fix_hint("list at least one pool, each with cloud: aws, gcp or azure")
    )

    @model_validator(mode="after")
    def _references(self) -> StackConfig:
        seen: set[str] = set()
        global_names: dict[str, str] = {}
        for pool in self.pools:
            at = f"pools[{pool.name}]"
            # Storage account names are global in Azure; two pools cannot share one.
            account = getattr(pool, "storage_account_name", None)
            if account is not None:
                if account in global_names:
                    raise FieldProblem(
                        f"storage account is already used by pool {global_names[account]}",
                        at=f"{at}.storageAccountName", value=account,
                        fix="give each pool its own storage account (names are global in Azure)",
                    )
                global_names[account] = pool.name
            if pool.name in seen:
                raise FieldProblem("pool name is used twice", at=f"{at}.name", value=pool.name,
                                   fix="give every pool a unique name")
            seen.add(pool.name)
            if pool.workload not in self.workloads:
                raise FieldProblem(
                    "names no workload profile", at=f"{at}.workload", value=pool.workload,
                    fix=f"use one of {sorted(self.workloads)} or add it under spotgpu:workloads",
                )
            if pool.ladder not in self.ladders:
                raise FieldProblem(
                    "names no fallback ladder", at=f"{at}.ladder", value=pool.ladder,
                    fix=f"use one of {sorted(self.ladders)} or add it under spotgpu:ladders",
                )
        return self

    @model_validator(mode="after")
    def _cross_field(self, info: ValidationInfo) -> StackConfig:
        """Checks that span a pool, its workload's prices, its ladder and the provider config."""
        provider = (info.context or {}).get("provider", {})
        for pool in self.pools:
            _check_region(pool, provider)
            quote = self.on_demand_quote(pool)
            workload = self.workloads[pool.workload]
            if quote is None:
                raise FieldProblem(
                    f"is not set, and the GPU catalogue has no on-demand price for pool {pool.name}'s fallback "
                    f"({', '.join(fallback_types(pool, workload))} in {pool_region(pool)})",
                    at=f"workloads.{pool.workload}.prices.onDemandPerHour", value=None,
                    fix="set the on-demand USD/hour per node of the fallback type",
                )
            spot, spot_at = self.spot_price(pool)
            billed = self.bill_quote(pool) or quote  # what the on-demand it would be chosen over costs
            if spot > billed.usd_per_hour:
                raise FieldProblem(
                    f"is above the on-demand price {billed.usd_per_hour:g} of pool {pool.name} ({billed.source})",
                    at=spot_at, value=spot, fix="check the prices (spot above on-demand is never worth it)",
                )
            _check_ceilings(pool, self.ladders[pool.ladder], spot, spot_at, quote, workload)
            idle = idle_rungs(pool, self.ladders[pool.ladder], workload)
            if idle and not pool.opt_out.idle_rungs:
                index, why = idle[0]
                raise FieldProblem(
                    f"{why}, so this rung has no group behind it in pool {pool.name}: it only adds its wait",
                    at=f"ladders.{pool.ladder}.steps[{index}].kind", value=self.ladders[pool.ladder].steps[index].kind.value,
                    fix=f"give pool {pool.name} the capacity the rung needs, use a ladder without it, or set "
                        f"pools[{pool.name}].optOut.idleRungs to a stated reason (the preview then warns)",
                )  # fmt: skip
            _check_gpu_fit(pool, workload)
            unreached = idle_groups(pool, self.ladders[pool.ladder], workload)
            if unreached and not pool.opt_out.idle_rungs:
                raise unreached[0]
            if isinstance(pool, AzurePoolSpec):
                _check_max_price(pool, spot, spot_at, self._size_quotes(pool))
        return self

    def on_demand_quote(self, pool: PoolSpec) -> PriceQuote | None:
        """The most the pool's on-demand rung may pay per node-hour, and its source: the workload's figure,
        else the catalogue's list price of the dearest type its fallback group may grow (what the checks
        judge a ceiling and a spot price against). The bill takes :meth:`bill_quote`."""
        prices = self.workloads[pool.workload].prices
        if prices.on_demand_per_hour is not None:
            return PriceQuote(prices.on_demand_per_hour, f"workloads.{pool.workload}.prices.onDemandPerHour")
        quotes = [catalogue_price(pool, t) for t in fallback_types(pool, self.workloads[pool.workload])]
        if not quotes or any(q is None for q in quotes):
            return None
        return max((q for q in quotes if q is not None), key=lambda q: q.usd_per_hour)

    def bill_quote(self, pool: PoolSpec) -> PriceQuote | None:
        """The on-demand USD per node-hour the cost model and the controller price the pool's on-demand at:
        the workload's figure, else the catalogue list price of the fallback group's first type (the one its
        ranked, prioritized allocation launches first; the dearest it may grow is :meth:`on_demand_quote`)."""
        prices = self.workloads[pool.workload].prices
        if prices.on_demand_per_hour is not None:
            return PriceQuote(prices.on_demand_per_hour, f"workloads.{pool.workload}.prices.onDemandPerHour")
        first = fallback_types(pool, self.workloads[pool.workload])[0]
        quote = catalogue_price(pool, first)
        if quote is None:
            return None
        return PriceQuote(quote.usd_per_hour, f"{quote.source}, {first}: the fallback group's first type")

    def _size_quotes(self, pool: AzurePoolSpec) -> dict[str, PriceQuote | None]:
        prices = self.workloads[pool.workload].prices
        if prices.on_demand_per_hour is not None:
            quote = PriceQuote(prices.on_demand_per_hour, f"workloads.{pool.workload}.prices.onDemandPerHour")
            return dict.fromkeys(pool.vm_sizes, quote)
        return {size: catalogue_price(pool, size) for size in pool.vm_sizes}

    def spot_price(self, pool: PoolSpec) -> tuple[float, str]:
        """The pool's spot USD per node-hour and the key it came from: the pool's own
        ``spotPerHour``, else its workload's ``prices.spotPerHour``."""
        if pool.spot_per_hour is not None:
            return pool.spot_per_hour, f"pools[{pool.name}].spotPerHour"
        return self.workloads[pool.workload].prices.spot_per_hour, f"workloads.{pool.workload}.prices.spotPerHour"

    def workload_for(self, pool: PoolSpec) -> WorkloadProfile:
        """The pool's workload priced for the pool: its own spot price if it has one, the on-demand
        price resolved (the workload's, else the catalogue's for the fallback group's first type in the
        pool's region: :meth:`bill_quote`)."""
        workload = self.workloads[pool.workload]
        update: dict[str, float] = {}
        if pool.spot_per_hour is not None:
            update["spot_per_hour"] = pool.spot_per_hour
        if workload.prices.on_demand_per_hour is None:
            quote = self.bill_quote(pool)
            if quote is None:  # validation refuses this; only a model_construct'ed config gets here
                raise ValueError(f"pool {pool.name} has no on-demand price; set prices.onDemandPerHour")
            update["on_demand_per_hour"] = quote.usd_per_hour
        if not update:
            return workload
        return workload.model_copy(update={"prices": workload.prices.model_copy(update=update)})

    def ladder_for(self, pool: PoolSpec) -> FallbackLadder:
        return self.ladders[pool.ladder]

    def pools_for(self, cloud: str) -> list[PoolSpec]:
        return [p for p in self.pools if p.cloud == cloud]


def _check_region(pool: PoolSpec, provider: dict[str, str]) -> None:
    if not isinstance(pool, AwsPoolSpec) or pool.subnet_region is None:
        return
    own = getattr(pool, "region", None)
    region, key = (own, f"pools[{pool.name}].region") if own else (provider.get("aws:region"), "aws:region")
    if region and region != pool.subnet_region:
        raise FieldProblem(
            f"subnets are in {pool.subnet_region}, but the pool deploys to {region} ({key})",
            at=f"pools[{pool.name}].subnets", value=[s.zone for s in pool.subnets],
            fix=f"use subnets in {region}, or set {key} to {pool.subnet_region}",
        )


def idle_rungs(pool: PoolSpec, ladder: FallbackLadder, workload: WorkloadProfile) -> list[tuple[int, str]]:
    """(step index, why) for each rung that has no group behind it in ``pool``.

    ``alternate_zone`` needs a second zone, ``alternate_sku`` a spot group besides the primary
    (:func:`spotgpu.models.pool_types.spot_groups`: an AWS Auto Scaling group takes every type, a GCP MIG
    every type sharing the first's template), ``on_demand`` a fallback group that may grow
    (``capacity.fallbackMax`` above 0). One rule for the stack check, the preview and ``cost``/``simulate --stack``.
    """
    zones = len(pool.zones) if isinstance(pool, AwsPoolSpec | GcpPoolSpec | AzurePoolSpec) else 0
    types = pool_types(pool)
    out = []
    for i, step in enumerate(ladder.steps):
        if step.kind is StepKind.ALTERNATE_ZONE and zones < 2:
            out.append((i, f"alternate_zone needs a second zone and the pool has {zones}"))
        elif step.kind is StepKind.ALTERNATE_SKU and len(types) < 2:
            out.append((i, f"alternate_sku needs a second GPU type or size and the pool has {len(types)}"))
        elif step.kind is StepKind.ALTERNATE_SKU and not alternate_types(pool, workload):
            out.append((i, f"alternate_sku takes no type of this pool: its spot types ({', '.join(types)}) are all in "
                           "the primary group, which same_pool and alternate_zone grow"))
        elif step.kind is StepKind.ON_DEMAND and pool.capacity.fallback_limit == 0:
            out.append((i, "on_demand needs a fallback group and the pool's capacity.fallbackMax is 0"))
    return out


def idle_groups(pool: PoolSpec, ladder: FallbackLadder, workload: WorkloadProfile) -> list[FieldProblem]:
    """A finding for each spot group besides the primary that no rung of ``ladder`` grows.

    Only alternate_sku grows a spot group other than the primary (:func:`spotgpu.models.pool_types.spot_groups`:
    a GCP MIG per instance template, set apart by an N1 accelerator or a tiered workload's Local SSD count;
    an Azure scale set per VM size), so without that rung such a group keeps only the VMs it is created
    with, 0 (:attr:`spotgpu.models.pool_types.SpotGroup.start`): the primary carries ``capacity.target``. Each finding
    points at the group's first type, at its key in the pool, and says why the group is apart;
    ``optOut.idleRungs`` keeps them, as it keeps idle rungs (the preview then warns).
    """
    if ladder.step(StepKind.ALTERNATE_SKU) is not None:
        return []
    groups = spot_groups(pool, workload)
    primary = groups[0]
    types = pool_types(pool)
    keys = type_keys(pool)
    return [
        FieldProblem(
            f"is in spot {group.label}, apart from the primary {primary.label} that same_pool grows, because {group.apart}; "
            f"only an alternate_sku rung grows that group and ladder {pool.ladder} has none, so it stays at 0 nodes",
            at=f"pools[{pool.name}].{keys[types.index(group.types[0])]}", value=group.types[0],
            fix=f"add an alternate_sku rung to ladder {pool.ladder}, list only types that share the primary's group "
                f"({', '.join(primary.types)}), or set pools[{pool.name}].optOut.idleRungs to a stated reason",
        )
        for group in groups[1:]
    ]


def _check_ceilings(pool: PoolSpec, ladder: FallbackLadder, spot: float, spot_at: str, quote: PriceQuote,
                    workload: WorkloadProfile) -> None:
    """Each rung's ceiling is plausible and admits some capacity the rung buys, in the ceiling's own unit."""
    if ladder.per_work_hour and workload.gpu is None:
        first = next(i for i, s in enumerate(ladder.steps) if s.per_work_hour)
        raise FieldProblem(
            f"is per work-hour, and workload {pool.workload} of pool {pool.name} has no gpu block to count work by",
            at=f"ladders.{pool.ladder}.steps[{first}].costCeilingPerWorkHour", value=ladder.steps[first].ceiling,
            fix=f"add workloads.{pool.workload}.gpu.gpusPerNode (and gpu.relativeThroughput), or state the ceiling "
                "per node-hour (costCeilingPerHour)",
        )  # fmt: skip
    from spotgpu.models.gpu_fit import type_rates

    rates = type_rates(pool, workload)
    primary = set(primary_types(pool, workload))

    def best_spot(kind: StepKind) -> tuple[float, float] | None:
        """(USD per node-hour, work-hours per node-hour) of the spot type the rung may take that costs the
        least per unit of work, at its own spot price; None when the rung takes no type here."""
        takes = [r for r in rates if r.type.spot and ((r.type.name in primary) != (kind is StepKind.ALTERNATE_SKU))]
        priced = [(spot_type_price(pool, r.type.name, spot)[0], r.work_per_node_hour) for r in takes]
        return min(priced, key=lambda pw: pw[0] / pw[1] if pw[1] > 0 else math.inf, default=None)

    best_od = max((r.work_per_node_hour for r in rates if r.type.on_demand), default=workload.work_per_node_hour())
    ceiling_problem(ladder, spot, spot_at, quote, workload, best_spot, best_od, f"pool {pool.name}",
                    f"ladders.{pool.ladder}.steps")  # fmt: skip


def ceiling_problem(ladder: FallbackLadder, spot: float, spot_at: str, quote: PriceQuote, workload: WorkloadProfile,
                    best_spot: Callable[[StepKind], tuple[float, float] | None], best_od: float, who: str,
                    steps_at: str) -> None:
    """Raise the first rung whose ceiling is implausible or below every price it may pay, in its own unit.

    One rule for a stack's pools (``best_spot`` per rung from the pool's types) and for a profile and
    ladder file (``spotgpu cost``/``simulate --profile --ladder``: the profile's one spot price and work
    rate), so the preview and those commands never give the same rungs two answers."""
    for i, step in enumerate(ladder.steps):
        at = f"{steps_at}[{i}].{step.ceiling_key}"
        far = ceiling_far_above(step.ceiling, quote.usd_per_hour, workload.work_per_node_hour() if step.per_work_hour else None)
        if far is not None:
            problem, fix = far
            raise FieldProblem(f"{problem} ({who}, {quote.source})", at=at, value=step.ceiling, fix=fix)
        best = best_spot(step.kind) if step.kind.uses_spot and step.per_work_hour else None
        if best is not None and not step.allows(*best):
            least = round(best[0] / best[1], 4)
            raise FieldProblem(
                f"is below {who}'s spot price per work-hour {least:g} on the cheapest type per unit of "
                f"work the rung may take (USD {best[0]:g}/h from {spot_at}, {best[1]:g} work-hours per node-hour), "
                f"so the {step.kind.value} rung can never run",
                at=at, value=step.ceiling,
                fix=f"raise it to at least {least:g}, or correct {spot_at} or gpu.relativeThroughput",
            )
        if step.kind.uses_spot and not step.per_work_hour and step.ceiling < spot:
            raise FieldProblem(
                f"is below {who}'s spot price {spot:g} ({spot_at}), so the {step.kind.value} rung can never run",
                at=at, value=step.ceiling,
                fix=f"raise it to at least {spot:g}, or correct {spot_at}",
            )
        if step.kind is StepKind.ON_DEMAND and not step.allows(quote.usd_per_hour, best_od):
            least = round(quote.usd_per_hour / best_od, 4) if step.per_work_hour else quote.usd_per_hour
            unit = "/work-hour" if step.per_work_hour else ""
            raise FieldProblem(
                f"is below {who}'s on-demand price {least:g}{unit} ({quote.source}), so the "
                "on_demand rung can never run",
                at=at, value=step.ceiling,
                fix=f"raise it to at least {least:g}, or correct the on-demand price",
            )


def _check_gpu_fit(pool: PoolSpec, workload: WorkloadProfile) -> None:
    from spotgpu.models.gpu_fit import capacity_problem, pool_problem

    problem = pool_problem(pool, workload) or capacity_problem(pool, workload)
    if problem is not None:
        problem.at = f"pools[{pool.name}].{problem.at}"
        raise problem


def _check_max_price(pool: AzurePoolSpec, spot: float, spot_at: str, quotes: dict[str, PriceQuote | None]) -> None:
    if pool.max_price == -1:
        return
    at = f"pools[{pool.name}].maxPrice"
    if pool.max_price < spot:
        raise FieldProblem(
            f"is below the spot price {spot:g} ({spot_at}); Azure refuses "
            "or evicts VMs whose max price is under the current spot price",
            at=at, value=pool.max_price, fix=f"use -1 (pay up to on-demand) or at least {spot:g}",
        )
    if pool.opt_out.max_price_above_on_demand:
        return
    for size, quote in quotes.items():
        if quote is not None and pool.max_price > quote.usd_per_hour:
            raise FieldProblem(
                f"is above {size}'s on-demand price {quote.usd_per_hour:g} ({quote.source}); spot would cost "
                "more than the on-demand fallback",
                at=at, value=pool.max_price,
                fix=f"use -1, or at most {quote.usd_per_hour:g}, or set optOut.maxPriceAboveOnDemand to a stated reason",
            )
