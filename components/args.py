"""What every cloud's ``GpuPool`` component receives: one validated bundle.

The stack program resolves names (workload profile, ladder) and the checkpoint
interval once; components never re-read config.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu import tags
from spotgpu.config import ConfigError
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

    def __post_init__(self) -> None:
        """Every cloud's planner starts from these args: a type that cannot hold the workload stops here.

        The stack config refuses it when read; this repeats the check for args built from a spec
        that skipped validation (``model_construct``, ``dataclasses.replace``), as the planners
        repeat the diversity check.
        """
        from spotgpu.models.gpu_fit import pool_problem

        problem = pool_problem(self.spec, self.workload)
        if problem is not None:
            raise ConfigError(
                f"spotgpu:pools[{self.spec.name}].{problem.at}: {problem.what} (value: {problem.value!r}); "
                f"fix: {problem.fix}"
            )

    @property
    def base_tags(self) -> dict[str, str]:
        """Tags every child carries (the link tags come from :mod:`spotgpu.tags`)."""
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
