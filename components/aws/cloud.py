"""AWS in the registry of clouds (:mod:`spotgpu_pulumi.clouds`): its planner and its ``GpuPool``."""

from spotgpu_pulumi.aws.plan import AwsPoolPlan, plan_pool
from spotgpu_pulumi.aws.pool import GpuPool
from spotgpu_pulumi.clouds import Cloud

CLOUD: Cloud[AwsPoolPlan] = Cloud(name="aws", plan=plan_pool, component=GpuPool)
