"""The GPU types a pool may launch, which of its groups take them, and their prices.

One place for what the stack check, the GPU fit, the economics and the rendered controller
config all read: the types as listed, the primary group's (what same_pool and alternate_zone
grow; the other spot types are the alternate_sku groups'), the fallback group's (what
on_demand pays for), and prices: the catalogue's list price per type and region, and one
rule for a type's spot price.
"""

from __future__ import annotations

from spotgpu import catalogue
from spotgpu.catalogue import PriceQuote
from spotgpu.models.pools import AwsPoolSpec, GcpPoolSpec, PoolSpec


def pool_types(pool: PoolSpec) -> tuple[str, ...]:
    """The GPU instance types, machine types or VM sizes the pool may take, as listed."""
    if isinstance(pool, AwsPoolSpec):
        return tuple(pool.instance_types)
    if isinstance(pool, GcpPoolSpec):
        return tuple(c.machine_type for c in pool.machine_types)
    return tuple(pool.vm_sizes)


def pool_region(pool: PoolSpec) -> str:
    """Where the pool runs: its region or location (AWS: the subnets' region)."""
    if isinstance(pool, AwsPoolSpec):
        return getattr(pool, "region", None) or pool.subnet_region or "?"
    if isinstance(pool, GcpPoolSpec):
        return pool.region
    return pool.location


def fallback_types(pool: PoolSpec) -> tuple[str, ...]:
    """The types the pool's on-demand fallback group may grow (what the on_demand rung pays for)."""
    if isinstance(pool, AwsPoolSpec):
        return pool.instance_types  # the fallback ASG uses the same overrides
    if isinstance(pool, GcpPoolSpec):
        return primary_types(pool)  # the fallback MIG takes the primary MIG's types
    return (pool.fallback_vm_size or pool.vm_sizes[0],)


def primary_types(pool: PoolSpec) -> tuple[str, ...]:
    """The types of the pool's primary spot group (what same_pool and alternate_zone grow); the other
    spot types are the alternate_sku groups'. AWS: one Auto Scaling group mixes every type; GCP: the
    types sharing the first's accelerator share its MIG; Azure: one scale set per size."""
    if isinstance(pool, AwsPoolSpec):
        return tuple(pool.instance_types)
    if isinstance(pool, GcpPoolSpec):
        first = pool.machine_types[0].accelerator
        return tuple(c.machine_type for c in pool.machine_types if c.accelerator == first)
    return (pool.vm_sizes[0],)


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
