"""AWS spot GPU pools: ``GpuPool`` (``spotgpu:aws:GpuPool``) and its child components.

Planning is pure (:mod:`spotgpu_pulumi.aws.plan`, :mod:`spotgpu_pulumi.aws.documents`,
:mod:`spotgpu_pulumi.aws.patterns`); the components only turn a plan into resources.
"""

from spotgpu_pulumi.aws.bucket import CheckpointBucket, CheckpointBucketArgs, ObjectLock
from spotgpu_pulumi.aws.drill import InterruptionDrill, InterruptionDrillArgs
from spotgpu_pulumi.aws.events import InterruptionEvents, InterruptionEventsArgs
from spotgpu_pulumi.aws.fallback import FallbackArgs, OnDemandFallbackGroup
from spotgpu_pulumi.aws.identity import NodeIdentity, NodeIdentityArgs
from spotgpu_pulumi.aws.plan import AwsPoolPlan, plan_pool
from spotgpu_pulumi.aws.pool import GpuPool
from spotgpu_pulumi.aws.spot import SpotCapacity, SpotCapacityArgs

__all__ = [
    "AwsPoolPlan",
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
    "SpotCapacity",
    "SpotCapacityArgs",
    "plan_pool",
]
