"""What every cloud's ``GpuPool`` component receives: one validated bundle.

The stack program resolves names (workload profile, ladder) and the checkpoint
interval once; components never re-read config.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu.economics.interval import IntervalDecision, choose_interval
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
        """Tags every child carries (the link tags come from :mod:`spotgpu.tags`)."""
        return {"spotgpu-environment": self.environment, "spotgpu-owner": self.owner, "managed-by": "spotgpu"}

    @classmethod
    def for_pool(cls, config: StackConfig, spec: PoolSpec) -> PoolArgs:
        workload = config.workload_for(spec)
        return cls(
            spec=spec,
            workload=workload,
            ladder=config.ladder_for(spec),
            environment=config.environment,
            owner=config.owner,
            interval=choose_interval(workload, spec.notice),
        )
