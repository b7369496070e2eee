"""Google Cloud side of spotgpu: ``GpuPool`` (``spotgpu:gcp:GpuPool``) and its thin children.

Planning lives in :mod:`spotgpu_pulumi.gcp.plan` and :mod:`spotgpu_pulumi.gcp.naming`
(pure, tested directly); the component modules only turn decisions into resources.
"""

from spotgpu_pulumi.gcp.plan import GcpPoolPlan, plan_pool
from spotgpu_pulumi.gcp.pool import GpuPool

__all__ = ["GcpPoolPlan", "GpuPool", "plan_pool"]
