"""StackConfig: everything one Pulumi stack declares, parsed once at the edge."""

from __future__ import annotations

from pydantic import Field, model_validator

from spotgpu.models.base import SpotModel, fix_hint
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
        default=(), json_schema_extra=fix_hint("list pools, each with cloud: aws, gcp or azure")
    )

    @model_validator(mode="after")
    def _references(self) -> StackConfig:
        seen: set[str] = set()
        global_names: dict[str, int] = {}
        for i, pool in enumerate(self.pools):
            # Storage account names are global in Azure; two pools cannot share one.
            account = getattr(pool, "storage_account_name", None)
            if account is not None:
                if account in global_names:
                    raise ValueError(
                        f"pools[{i}].storageAccountName {account!r} is already used by "
                        f"pools[{global_names[account]}]; give each pool its own storage account"
                    )
                global_names[account] = i
            if pool.name in seen:
                raise ValueError(f"pools[{i}].name {pool.name!r} is used twice; pool names must be unique")
            seen.add(pool.name)
            if pool.workload not in self.workloads:
                raise ValueError(
                    f"pools[{i}].workload {pool.workload!r} is not defined; use one of "
                    f"{sorted(self.workloads)} or add it under spotgpu:workloads"
                )
            if pool.ladder not in self.ladders:
                raise ValueError(
                    f"pools[{i}].ladder {pool.ladder!r} is not defined; use one of "
                    f"{sorted(self.ladders)} or add it under spotgpu:ladders"
                )
        return self

    def workload_for(self, pool: PoolSpec) -> WorkloadProfile:
        return self.workloads[pool.workload]

    def ladder_for(self, pool: PoolSpec) -> FallbackLadder:
        return self.ladders[pool.ladder]

    def pools_for(self, cloud: str) -> list[PoolSpec]:
        return [p for p in self.pools if p.cloud == cloud]
