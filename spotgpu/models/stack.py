"""StackConfig: everything one Pulumi stack declares, parsed once at the edge."""

from __future__ import annotations

from pydantic import Field, model_validator

from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.ladder import FallbackLadder
from spotgpu.models.pools import PoolSpec
from spotgpu.models.workload import WorkloadProfile


class StackConfig(SpotModel):
    environment: str = Field(
        pattern=r"^[a-z][a-z0-9-]{0,15}$", json_schema_extra=fix_hint("use a short lowercase name such as dev or prod")
    )
    owner: str = Field(min_length=1, json_schema_extra=fix_hint("name the owning team, e.g. ml-platform"))
    workloads: dict[str, WorkloadProfile] = Field(
        min_length=1, json_schema_extra=fix_hint("define at least one workload profile by name")
    )
    ladders: dict[str, FallbackLadder] = Field(
        min_length=1, json_schema_extra=fix_hint("define at least one fallback ladder by name")
    )
    pools: tuple[PoolSpec, ...] = Field(
        min_length=1, json_schema_extra=fix_hint("list at least one pool, each with cloud: aws, gcp or azure")
    )

    @model_validator(mode="after")
    def _references(self) -> StackConfig:
        seen: set[str] = set()
        global_names: dict[str, str] = {}
        for pool in self.pools:
            at = f"pools[{pool.name}]"
            # Storage account names are global in Azure; two pools cannot share one.
            account = getattr(pool, "storage_account_name", None)
            if account is not None:
                if account in global_names:
                    raise FieldProblem(
                        f"storage account is already used by pool {global_names[account]}",
                        at=f"{at}.storageAccountName", value=account,
                        fix="give each pool its own storage account (names are global in Azure)",
                    )
                global_names[account] = pool.name
            if pool.name in seen:
                raise FieldProblem("pool name is used twice", at=f"{at}.name", value=pool.name,
                                   fix="give every pool a unique name")
            seen.add(pool.name)
            if pool.workload not in self.workloads:
                raise FieldProblem(
                    "names no workload profile", at=f"{at}.workload", value=pool.workload,
                    fix=f"use one of {sorted(self.workloads)} or add it under spotgpu:workloads",
                )
            if pool.ladder not in self.ladders:
                raise FieldProblem(
                    "names no fallback ladder", at=f"{at}.ladder", value=pool.ladder,
                    fix=f"use one of {sorted(self.ladders)} or add it under spotgpu:ladders",
                )
        return self

    def workload_for(self, pool: PoolSpec) -> WorkloadProfile:
        return self.workloads[pool.workload]

    def ladder_for(self, pool: PoolSpec) -> FallbackLadder:
        return self.ladders[pool.ladder]

    def pools_for(self, cloud: str) -> list[PoolSpec]:
        return [p for p in self.pools if p.cloud == cloud]
