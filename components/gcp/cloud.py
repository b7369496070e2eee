"""Google Cloud in the registry of clouds (:mod:`spotgpu_pulumi.clouds`): its planner and its ``GpuPool``."""

from spotgpu_pulumi.clouds import Cloud
from spotgpu_pulumi.gcp.plan import GcpPoolPlan, plan_pool
from spotgpu_pulumi.gcp.pool import GpuPool

CLOUD: Cloud[GcpPoolPlan] = Cloud(name="gcp", plan=plan_pool, component=GpuPool)
