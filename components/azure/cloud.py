"""Azure in the registry of clouds (:mod:`spotgpu_pulumi.clouds`): its planner and its ``GpuPool``."""

from spotgpu_pulumi.azure.plan import AzurePoolPlan, plan_pool
from spotgpu_pulumi.azure.pool import GpuPool
from spotgpu_pulumi.clouds import Cloud

CLOUD: Cloud[AzurePoolPlan] = Cloud(name="azure", plan=plan_pool, component=GpuPool)
