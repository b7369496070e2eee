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
    AwsPoolSpec,
    AwsSubnet,
    AzureImage,
    AzurePoolSpec,
    Capacity,
    CheckpointStoreSpec,
    GcpAccelerator,
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
    "AwsNoticeContract",
    "AwsPoolSpec",
    "AwsSubnet",
    "AzureImage",
    "AzureNoticeContract",
    "AzurePoolSpec",
    "Capacity",
    "CheckpointStoreSpec",
    "FallbackLadder",
    "GcpAccelerator",
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
