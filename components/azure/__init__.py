"""Azure side of spotgpu: ``GpuPool`` (``spotgpu:azure:GpuPool``) and its child components.

Pure planning lives in :mod:`components.azure.naming`, :mod:`components.azure.plan`
and :mod:`components.azure.roles`; the component classes only register resources.
"""

from components.azure.controller import ControllerIdentity, ControllerIdentityArgs
from components.azure.fallback import OnDemandFallbackGroup, OnDemandFallbackGroupArgs
from components.azure.plan import PlanError, PoolPlan, plan_pool
from components.azure.pool import GpuPool
from components.azure.storage import CheckpointStorage, CheckpointStorageArgs

__all__ = [
    "CheckpointStorage",
    "CheckpointStorageArgs",
    "ControllerIdentity",
    "ControllerIdentityArgs",
    "GpuPool",
    "OnDemandFallbackGroup",
    "OnDemandFallbackGroupArgs",
    "PlanError",
    "PoolPlan",
    "plan_pool",
]
