"""Shared, validated models. Pure pydantic: safe to import on a GPU VM."""

from spotgpu.models.ladder import MAX_STEP_WAIT_SECONDS, FallbackLadder, LadderStep, StepKind
from spotgpu.models.notice import (
    AwsNoticeContract,
    AzureNoticeContract,
    GcpNoticeContract,
    NoticeContract,
    Provider,
    default_notice,
)
from spotgpu.models.pools import (
    AwsDrillSpec,
    AwsPoolSpec,
    AwsSubnet,
    AzureImage,
    AzurePoolSpec,
    AzurePriorityMix,
    Capacity,
    CheckpointStoreSpec,
    GcpAccelerator,
    GcpAutoscaling,
    GcpMachineChoice,
    GcpPoolSpec,
    OptOut,
    PoolSpec,
)
from spotgpu.models.stack import StackConfig
from spotgpu.models.workload import FALLBACK_POLICIES, Prices, WorkloadProfile

__all__ = [
    "FALLBACK_POLICIES",
    "MAX_STEP_WAIT_SECONDS",
    "AwsDrillSpec",
    "AwsNoticeContract",
    "AwsPoolSpec",
    "AwsSubnet",
    "AzureImage",
    "AzureNoticeContract",
    "AzurePoolSpec",
    "AzurePriorityMix",
    "Capacity",
    "CheckpointStoreSpec",
    "FallbackLadder",
    "GcpAccelerator",
    "GcpAutoscaling",
    "GcpMachineChoice",
    "GcpNoticeContract",
    "GcpPoolSpec",
    "LadderStep",
    "NoticeContract",
    "OptOut",
    "PoolSpec",
    "Prices",
    "Provider",
    "StackConfig",
    "StepKind",
    "WorkloadProfile",
    "default_notice",
]
