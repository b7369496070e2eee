"""Azure in the registry of clouds (:mod:`spotgpu_pulumi.clouds`): its planner, its ``GpuPool`` and
what its pools share (the subscription's one Scheduled Events topic)."""

from collections.abc import Sequence

from spotgpu_pulumi.azure.plan import AzurePoolPlan, plan_pool, share_topic
from spotgpu_pulumi.azure.pool import GpuPool
from spotgpu_pulumi.clouds import Cloud, PoolComponent


def link(plan: AzurePoolPlan, built: Sequence[PoolComponent]) -> AzurePoolPlan:
    """The first topic an earlier Azure pool of this program created, if this pool would create another."""
    topics = [t for pool in built if isinstance(pool, GpuPool) and (t := pool.events_topic) is not None]
    return share_topic(plan, topics[0] if topics else None)


CLOUD: Cloud[AzurePoolPlan] = Cloud(name="azure", plan=plan_pool, component=GpuPool, link=link)
