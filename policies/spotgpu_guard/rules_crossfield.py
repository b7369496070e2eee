"""Cross-field rules: the checks config validation makes, made on concrete resources.

A stack of raw resources never passes through ``spotgpu.models``, so the pack
repeats the checks that span a pool's links and its neighbours:

* ``ladder-ceilings-cover-prices`` (mandatory): every spot rung's ceiling is at
  least the workload's spot price and the on_demand rung's at least its on-demand
  price, read from the pool's ``spotgpu-ladder`` and ``spotgpu-workload`` links; a
  rung below its price can never run.
* ``deadline-escalation-reachable`` (advisory): a workload with a deadline needs an
  on_demand rung for deadline escalation to go to.
* ``azure-max-price-covers-spot`` (mandatory): a Spot scale set's
  ``billingProfile.maxPrice`` is -1 or at least the workload's spot price.
* ``azure-max-price-below-on-demand`` (advisory): and at most the size's on-demand
  price (the workload's, else the GPU catalogue's list price).
* ``fallback-can-replace-pool`` (advisory): an AWS pool's on-demand fallback Auto
  Scaling group may grow (maxSize > 0) to at least the pool's desired capacity.
* ``gpu-types-known`` (advisory): every GPU type, machine type, accelerator and size
  of a spot pool, and every GCP region and Azure location, is in the GPU catalogue
  (:mod:`spotgpu.catalogue`); unknown names get the closest matches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu import catalogue
from spotgpu.contract.tags import DecodedStep
from spotgpu.models.ladder import StepKind
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.links import FALLBACK_GROUP, LADDER, WORKLOAD, read_gpu_block, read_ladder, read_workload
from spotgpu_guard.model import SpotPool
from spotgpu_guard.rule import Finding, stack_rule
from spotgpu_guard.shapes import best_work_per_node_hour
from spotgpu_guard.stack_keys import restate
from spotgpu_guard.values import as_number


def _steps(pool: SpotPool) -> list[DecodedStep] | None:
    return read_ladder(pool.links).value  # rules_links reports a malformed ladder


def _workload(pool: SpotPool) -> dict[str, float] | None:
    return read_workload(pool.links).value  # spot-eligible reports a malformed workload


def check_ceilings(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        steps, workload = _steps(pool), _workload(pool)
        if not steps or not workload:
            continue
        spot, on_demand = workload.get("spot_per_hour"), workload.get("on_demand_per_hour")
        rate = 1.0
        if any(s.per_work_hour for s in steps):
            need = read_gpu_block(pool.links).value
            rate = best_work_per_node_hour(pool, need)
        for i, step in enumerate(steps):
            price, which = (spot, "spot") if step.kind.uses_spot else (on_demand, "on-demand")
            if step.kind is StepKind.QUEUE_DEFER or price is None or step.allows(price, rate):
                continue
            least = round(price / rate, 4) if step.per_work_hour else price
            per = (f", {least:g} USD/work-hour on the pool's most productive type ({rate:g} work-hours per "
                   "node-hour)") if step.per_work_hour else ""
            key = "costCeilingPerWorkHour" if step.per_work_hour else "costCeilingPerHour"
            yield Finding(pool.res.urn, restate(
                f"{pool.describe()}: {LADDER} step {i + 1} ({step.kind.value}) has ceiling "
                f"{step.ceiling:g} {step.unit}, below the workload's {which} price {price:g} USD/h{per} "
                f"({WORKLOAD}), so the rung can never run; fix: raise the ceiling to at least {least:g}, or "
                "correct the price", pool.res, pool.links,
                f"raise steps[{i}].{key} of the ladder {{pool}}.ladder names to at least {least:g}, or correct the "
                "prices of the workload {pool}.workload names"))  # fmt: skip


def check_deadline_escalation(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        steps, workload = _steps(pool), _workload(pool)
        if not steps or not workload or workload.get("deadline_hours") is None:
            continue
        if not any(s.kind is StepKind.ON_DEMAND for s in steps):
            yield Finding(pool.res.urn, restate(
                f"{pool.describe()}: the workload has a {workload['deadline_hours']:g} h deadline but {LADDER} has "
                "no on_demand step, so deadline escalation has nowhere to go; fix: add an on_demand step, or "
                "set deadlineEscalation: false on the ladder and accept missing the deadline", pool.res, pool.links,
                "add an on_demand step to the ladder {pool}.ladder names, or set deadlineEscalation: false on it "
                "and accept missing the deadline"))  # fmt: skip


def _azure_spot(pool: SpotPool) -> tuple[float, str | None, str | None] | None:
    if pool.cloud != "azure":
        return None
    price = as_number(pool.res.get("virtualMachineProfile", "billingProfile", "maxPrice"))
    if price is None or price == -1:
        return None
    size, location = pool.res.get("sku", "name"), pool.res.get("location")
    return price, size if isinstance(size, str) else None, location if isinstance(location, str) else None


def check_max_price_covers_spot(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        found, workload = _azure_spot(pool), _workload(pool)
        if found is None:
            continue
        price = found[0]
        spot = (workload or {}).get("spot_per_hour")
        if price <= 0 or (spot is not None and price < spot):
            floor = f"at least the spot price {spot:g}" if spot is not None else "a positive USD/hour price"
            yield Finding(pool.res.urn, restate(
                f"{pool.describe()}: billingProfile.maxPrice {price:g} is below {floor}; Azure refuses or evicts "
                f"VMs priced under the current spot price; fix: use -1 (pay up to on-demand) or {floor}", pool.res,
                pool.links, f"set {{pool}}.maxPrice to -1 (pay up to on-demand) or {floor}"))  # fmt: skip


def check_max_price_below_on_demand(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        found = _azure_spot(pool)
        if found is None:
            continue
        price, size, location = found
        on_demand = (_workload(pool) or {}).get("on_demand_per_hour")
        source = WORKLOAD
        if on_demand is None and size and location:
            quote = catalogue.on_demand_price("azure", size, location)
            on_demand, source = (quote.usd_per_hour, quote.source) if quote else (None, "")
        if on_demand is not None and price > on_demand:
            yield Finding(pool.res.urn, restate(
                f"{pool.describe()}: billingProfile.maxPrice {price:g} is above the on-demand price {on_demand:g} "
                f"of {size or 'its size'} ({source}); spot would cost more than the on-demand fallback; fix: use -1 "
                f"or at most {on_demand:g}", pool.res, pool.links,
                f"set {{pool}}.maxPrice to -1 or at most {on_demand:g}, or state why under "
                "{pool}.optOut.maxPriceAboveOnDemand"))  # fmt: skip


def check_fallback_capacity(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        if pool.cloud != "aws" or pool.res.type != "aws:autoscaling/group:Group":
            continue
        name = pool.links.get(FALLBACK_GROUP)
        group = catalog.group_named(name) if isinstance(name, str) else None
        if group is None or group.res.type != "aws:autoscaling/group:Group":
            continue
        fallback_max = as_number(group.res.get("maxSize"))
        target = as_number(pool.res.get("desiredCapacity"))
        if target is None:
            target = as_number(pool.res.get("minSize"))
        if fallback_max is None or target is None:
            continue
        if fallback_max <= 0 or fallback_max < target:
            yield Finding(pool.res.urn, restate(
                f"{pool.describe()}: its on-demand fallback {group.res.label()} may grow to {fallback_max:g} "
                f"node(s), fewer than the pool's {target:g}, so losing the spot capacity cannot be made up; fix: "
                f"set the fallback group's maxSize to at least {target:g}", pool.res, pool.links,
                f"set {{pool}}.capacity.fallbackMax to at least {target:g}, or state why under "
                "{pool}.optOut.smallFallback"))  # fmt: skip


def _unknown_names(pool: SpotPool) -> Iterator[str]:
    if pool.cloud == "aws":
        known = catalogue.aws_instance_types()
        for name in sorted(pool.gpu_types):
            if name not in known:
                near = catalogue.closest(name, catalogue.aws_gpu_types())
                yield f"instance type {name!r} is not an EC2 type (closest: {', '.join(near) or 'none'})"
    elif pool.cloud == "gcp":
        machines, accelerators = catalogue.gcp_machine_types(), catalogue.gcp_accelerators()
        for name in sorted(pool.gpu_types):
            short = name.rsplit("/", 1)[-1]
            if short not in machines and short not in accelerators:
                near = catalogue.closest(short, [*machines, *accelerators])
                yield f"{short!r} is not a GPU machine or accelerator type (closest: {', '.join(near) or 'none'})"
        region = pool.res.get("region")
        if isinstance(region, str) and region not in catalogue.gcp_regions():
            yield f"region {region!r} is not a Google Cloud region (closest: {', '.join(catalogue.closest(region, catalogue.gcp_regions()))})"
    elif pool.cloud == "azure":
        for name in sorted(pool.gpu_types):
            if catalogue.azure_size(name) is None:
                near = catalogue.closest(name, catalogue.azure_sizes())
                yield f"VM size {name!r} is not a GPU size the catalogue knows (closest: {', '.join(near) or 'none'})"
        location = pool.res.get("location")
        if isinstance(location, str) and location not in catalogue.azure_locations():
            near = catalogue.closest(location, catalogue.azure_locations())
            yield f"location {location!r} is not an Azure location (closest: {', '.join(near) or 'none'})"


def check_known(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        for problem in _unknown_names(pool):
            yield Finding(pool.res.urn, restate(
                f"{pool.describe()}: {problem}; fix: use a name from the GPU catalogue (spotgpu/catalogue), or "
                "disable gpu-types-known if the provider launched it since", pool.res, pool.links,
                "use a name from the GPU catalogue in {pool}'s types, region or location, or state why under "
                "{pool}.optOut.catalogue"))  # fmt: skip


RULES = [
    stack_rule(
        "ladder-ceilings-cover-prices",
        "Every ladder rung's cost ceiling is at least the price of the capacity it buys.",
        EnforcementLevel.MANDATORY,
        check_ceilings,
        remediation="Raise the ceilings in spotgpu-ladder, or correct the prices in spotgpu-workload",
    ),
    stack_rule(
        "deadline-escalation-reachable",
        "A workload with a deadline has an on_demand rung for deadline escalation.",
        EnforcementLevel.ADVISORY,
        check_deadline_escalation,
        remediation="Add an on_demand step to the ladder, or turn deadline escalation off",
    ),
    stack_rule(
        "azure-max-price-covers-spot",
        "An Azure Spot scale set's maxPrice is -1 or at least the spot price.",
        EnforcementLevel.MANDATORY,
        check_max_price_covers_spot,
        remediation="Set billingProfile.maxPrice to -1 or at least the spot price",
    ),
    stack_rule(
        "azure-max-price-below-on-demand",
        "An Azure Spot scale set's maxPrice is at most the size's on-demand price.",
        EnforcementLevel.ADVISORY,
        check_max_price_below_on_demand,
        remediation="Set billingProfile.maxPrice to -1 or at most the on-demand price",
    ),
    stack_rule(
        "fallback-can-replace-pool",
        "An AWS pool's on-demand fallback group may grow to at least the pool's desired capacity.",
        EnforcementLevel.ADVISORY,
        check_fallback_capacity,
        remediation="Raise the fallback Auto Scaling group's maxSize",
    ),
    stack_rule(
        "gpu-types-known",
        "Every GPU type, accelerator, size, region and location of a spot pool is in the GPU catalogue.",
        EnforcementLevel.ADVISORY,
        check_known,
        remediation="Use a name from spotgpu/catalogue, or disable the rule for a type launched since",
    ),
]
