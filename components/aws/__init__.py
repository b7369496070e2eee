"""AWS spot GPU pools: ``GpuPool`` (``spotgpu:aws:GpuPool``) and its child components.

Planning is pure (:mod:`components.aws.plan`, :mod:`components.aws.documents`,
:mod:`components.aws.patterns`); the components only turn a plan into resources.
"""

from components.aws.bucket import CheckpointBucket, CheckpointBucketArgs, ObjectLock
from components.aws.drill import InterruptionDrill, InterruptionDrillArgs
from components.aws.events import InterruptionEvents, InterruptionEventsArgs
from components.aws.fallback import FallbackArgs, OnDemandFallbackGroup
from components.aws.identity import NodeIdentity, NodeIdentityArgs
from components.aws.plan import PoolPlan, PoolPlanError, plan_pool
from components.aws.pool import GpuPool
from components.aws.spot import SpotCapacity, SpotCapacityArgs

__all__ = [
    "CheckpointBucket",
    "CheckpointBucketArgs",
    "FallbackArgs",
    "GpuPool",
    "InterruptionDrill",
    "InterruptionDrillArgs",
    "InterruptionEvents",
    "InterruptionEventsArgs",
    "NodeIdentity",
    "NodeIdentityArgs",
    "ObjectLock",
    "OnDemandFallbackGroup",
    "PoolPlan",
    "PoolPlanError",
    "SpotCapacity",
    "SpotCapacityArgs",
    "plan_pool",
]
