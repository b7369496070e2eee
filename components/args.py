"""What every cloud's planner receives: one validated pool with what it names.

The stack's edge resolves names (workload profile, ladder) and the checkpoint
interval once; the planner decides the pool from these, and the components build
from its plan, never re-reading config nor re-checking what the models guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu.contract import tags
from spotgpu.economics.interval import IntervalDecision, choose_interval
from spotgpu.economics.tiers import pool_joint_loss
from spotgpu.models import FallbackLadder, PoolSpec, StackConfig, WorkloadProfile


@dataclass(frozen=True)
class PoolArgs:
    spec: PoolSpec
    workload: WorkloadProfile
    ladder: FallbackLadder
    environment: str
    owner: str
    interval: IntervalDecision

    @property
    def base_tags(self) -> dict[str, str]:
        """Tags every child carries (the link tags come from :mod:`spotgpu.contract.tags`)."""
        return {tags.ENVIRONMENT: self.environment, tags.OWNER: self.owner, "managed-by": "spotgpu"}

    @classmethod
    def for_pool(cls, config: StackConfig, spec: PoolSpec) -> PoolArgs:
        workload = config.workload_for(spec)
        return cls(
            spec=spec,
            workload=workload,
            ladder=config.ladder_for(spec),
            environment=config.environment,
            owner=config.owner,
            interval=choose_interval(workload, spec.notice, joint_loss=pool_joint_loss(workload, len(spec.zones))),
        )
