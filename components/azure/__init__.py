"""Azure side of spotgpu: ``GpuPool`` (``spotgpu:azure:GpuPool``) and its child components.

Pure planning lives in :mod:`spotgpu_pulumi.azure.naming`, :mod:`spotgpu_pulumi.azure.plan`
and :mod:`spotgpu_pulumi.azure.roles`; the component classes only register resources.
"""

from spotgpu_pulumi.azure.controller import ControllerIdentity, ControllerIdentityArgs
from spotgpu_pulumi.azure.fallback import OnDemandFallbackGroup, OnDemandFallbackGroupArgs
from spotgpu_pulumi.azure.plan import AzurePoolPlan, plan_pool
from spotgpu_pulumi.azure.pool import GpuPool
from spotgpu_pulumi.azure.storage import CheckpointStorage, CheckpointStorageArgs

__all__ = [
    "AzurePoolPlan",
    "CheckpointStorage",
    "CheckpointStorageArgs",
    "ControllerIdentity",
    "ControllerIdentityArgs",
    "GpuPool",
    "OnDemandFallbackGroup",
    "OnDemandFallbackGroupArgs",
    "plan_pool",
]
