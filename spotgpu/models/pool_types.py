"""The GPU types a pool may launch, which of its groups take them, and their prices.

One place for what the stack check, the GPU fit, the economics and the rendered controller
config all read: the types as listed; the spot groups the components create and the types each
may launch (:func:`spot_groups`: the primary's are what same_pool and alternate_zone grow, the
others' what alternate_sku grows); the fallback group's (what on_demand pays for); and prices:
the catalogue's list price per type and region, and one rule for a type's spot price.

The groups depend on the workload as well as the pool: on GCP a tiered workload's templates
request each type's Local SSDs, which splits types with different counts into MIGs of their own
(:mod:`spotgpu.models.gcp_groups`), so every question about groups takes the workload.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu import catalogue
from spotgpu.catalogue import PriceQuote
from spotgpu.models.gcp_groups import machine_groups
from spotgpu.models.pools import AwsPoolSpec, GcpPoolSpec, PoolSpec
from spotgpu.models.workload import WorkloadProfile


@dataclass(frozen=True)
class SpotGroup:
    """One spot group the pool's components create: the types it may launch and how a message names it."""

    types: tuple[str, ...]
    label: str
    #: VMs the group is created with: ``capacity.target`` for the primary, 0 for the others. The
    #: controller keeps the primary at target and drains a VM elsewhere as surplus once it is, so a
    #: share created elsewhere would only be bought twice and then taken from the running gang.
    start: int
    #: why the group is not part of the primary (empty for the primary): what a finding about it says
    apart: str = ""


def pool_types(pool: PoolSpec) -> tuple[str, ...]:
    """The GPU instance types, machine types or VM sizes the pool may take, as listed."""
    if isinstance(pool, AwsPoolSpec):
        return tuple(pool.instance_types)
    if isinstance(pool, GcpPoolSpec):
        return tuple(c.machine_type for c in pool.machine_types)
    return tuple(pool.vm_sizes)


def type_keys(pool: PoolSpec) -> tuple[str, ...]:
    """Where each of :func:`pool_types` is written in the pool, for a finding's ``at``."""
    if isinstance(pool, AwsPoolSpec):
        return tuple(f"instanceTypes[{i}]" for i in range(len(pool.instance_types)))
    if isinstance(pool, GcpPoolSpec):
        return tuple(f"machineTypes[{i}].machineType" for i in range(len(pool.machine_types)))
    return tuple(f"vmSizes[{i}]" for i in range(len(pool.vm_sizes)))


def pool_region(pool: PoolSpec) -> str:
    """Where the pool runs: its region or location (AWS: the subnets' region)."""
    if isinstance(pool, AwsPoolSpec):
        return getattr(pool, "region", None) or pool.subnet_region or "?"
    if isinstance(pool, GcpPoolSpec):
        return pool.region
    return pool.location


def spot_groups(pool: PoolSpec, workload: WorkloadProfile) -> tuple[SpotGroup, ...]:
    """The pool's spot groups, the primary first (what same_pool and alternate_zone grow); the others
    are what alternate_sku grows. AWS: one Auto Scaling group mixes every type; GCP: one MIG per
    template (:func:`spotgpu.models.gcp_groups.machine_groups`: accelerator signature, and Local SSD
    count for a tiered workload); Azure: one scale set per size."""
    target = pool.capacity.target
    if isinstance(pool, AwsPoolSpec):
        return (SpotGroup(tuple(pool.instance_types), "the Auto Scaling group", target),)
    if isinstance(pool, GcpPoolSpec):
        groups = machine_groups(pool, workload)
        return tuple(
            SpotGroup(g.machine_types, g.describe(), target if i == 0 else 0, g.apart_from(groups[0]) if i else "")
            for i, g in enumerate(groups)
        )
    return tuple(
        SpotGroup((size,), f"scale set {size}", target if i == 0 else 0,
                  "" if i == 0 else "a scale set runs one VM size here (instance mix takes no GPU size)")
        for i, size in enumerate(pool.vm_sizes)
    )


def primary_types(pool: PoolSpec, workload: WorkloadProfile) -> tuple[str, ...]:
    """The types of the pool's primary spot group: what same_pool and alternate_zone grow."""
    return spot_groups(pool, workload)[0].types


def alternate_types(pool: PoolSpec, workload: WorkloadProfile) -> tuple[str, ...]:
    """The types of the pool's other spot groups: what alternate_sku grows, in the pool's order."""
    return tuple(t for group in spot_groups(pool, workload)[1:] for t in group.types)


def fallback_types(pool: PoolSpec, workload: WorkloadProfile) -> tuple[str, ...]:
    """The types the pool's on-demand fallback group may grow (what the on_demand rung pays for)."""
    if isinstance(pool, AwsPoolSpec):
        return pool.instance_types  # the fallback ASG uses the same overrides
    if isinstance(pool, GcpPoolSpec):
        return primary_types(pool, workload)  # the fallback MIG is built from the primary MIG's template
    return (pool.fallback_vm_size or pool.vm_sizes[0],)


def catalogue_price(pool: PoolSpec, name: str) -> PriceQuote | None:
    accelerator = None
    if isinstance(pool, GcpPoolSpec):
        choice = next((c for c in pool.machine_types if c.machine_type == name), None)
        if choice is not None and choice.accelerator is not None:
            accelerator = (choice.accelerator.type, choice.accelerator.count)
    return catalogue.on_demand_price(pool.cloud, name, pool_region(pool), accelerator)


def spot_type_price(pool: PoolSpec, name: str, base: float) -> tuple[float, str]:
    """USD per node-hour of one of the pool's types on spot, and how it was found.

    The pool has one spot price (``spotPerHour``), its first type's; another type's is that price
    scaled by the two types' catalogue list prices, because no per-type spot price is configured
    or measured. Without both list prices the pool's price stands.
    """
    first = pool_types(pool)[0]
    if name == first:
        return base, "the pool's spot price"
    own, ref = catalogue_price(pool, name), catalogue_price(pool, first)
    if own is None or ref is None or ref.usd_per_hour <= 0:
        return base, "the pool's spot price (no list prices to scale it by)"
    return round(base * own.usd_per_hour / ref.usd_per_hour, 4), f"x list price {own.usd_per_hour:g}/{ref.usd_per_hour:g}"
