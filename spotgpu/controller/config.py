"""Controller config file: which pools to reconcile, where their groups live, and how.

A pool is a set of *groups* the controller moves desired capacity between. Each
group has a role named after the ladder rung from which it may be grown:
``same_pool`` (the primary spot group, always kept at target so the cloud keeps
retrying), ``alternate_zone`` / ``alternate_sku`` (other spot groups, e.g. one
Azure scale set per GPU size), and ``on_demand`` (the fallback group, usually at
size 0). Identifiers are the cloud's own names: ASG names and an SQS queue URL on
AWS, regional MIG names and a Pub/Sub subscription on GCP, scale set names on Azure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from spotgpu.catalogue import names
from spotgpu.config import ConfigError, format_error
from spotgpu.models.base import SpotModel, fix_hint
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.models.pools import Capacity
from spotgpu.models.urls import EndpointUrl, StoreUrlText
from spotgpu.models.workload import WorkloadProfile


class GroupSpec(SpotModel):
    name: str = Field(
        min_length=1, json_schema_extra=fix_hint("give the ASG, MIG or scale set name exactly as the cloud has it")
    )
    role: StepKind = Field(
        json_schema_extra=fix_hint("use same_pool, alternate_zone, alternate_sku or on_demand")
    )
    price_per_hour: float | None = Field(
        default=None,
        gt=0,
        description="USD per node-hour; defaults to the workload's spot or on-demand price by role.",
        json_schema_extra=fix_hint("set a positive USD/hour price, or leave it out"),
    )
    max_size: int | None = Field(
        default=None, ge=0, le=1000, json_schema_extra=fix_hint("set 0 to 1000 nodes, or leave it out")
    )
    gpus_per_node: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="GPUs per node of the group's type; when groups differ, each is sized in GPUs so the gang "
        "keeps its GPU count (an 8-GPU primary lost to a 4-GPU rung asks for twice the nodes). Defaults to "
        "the primary's, else the workload's gpu.gpusPerNode.",
        json_schema_extra=fix_hint("set the GPUs one node of this group carries, e.g. 8, or leave it out"),
    )
    gpu_model: str | None = Field(
        default=None,
        min_length=1,
        description="GPU model of the group's type (catalogue name), looked up in the workload's "
        "gpu.relativeThroughput by the deadline test.",
        json_schema_extra=fix_hint("give the catalogue GPU model name, e.g. H100, or leave it out"),
    )

    @model_validator(mode="after")
    def _role_is_a_group(self) -> GroupSpec:
        if self.role is StepKind.QUEUE_DEFER:
            raise ValueError(
                f"group {self.name} has role queue_defer, which holds no capacity; use same_pool, "
                "alternate_zone, alternate_sku or on_demand"
            )
        return self


class _PoolBase(SpotModel):
    name: str = Field(pattern=names.whole(names.POOL_NAME), json_schema_extra=fix_hint(names.POOL_NAME_FIX))
    workload: str = Field(json_schema_extra=fix_hint("name a key of workloads"))
    ladder: str = Field(json_schema_extra=fix_hint("name a key of ladders"))
    capacity: Capacity
    groups: tuple[GroupSpec, ...] = Field(
        min_length=1, json_schema_extra=fix_hint("list groups as [{name: ..., role: same_pool}, ...]")
    )
    job_started_at: float | None = Field(
        default=None,
        ge=0,
        description="Unix time the job was submitted; enables deadline tracking from the workload's deadlineHours.",
        json_schema_extra=fix_hint("set a Unix timestamp in seconds, or leave it out"),
    )
    total_steps: int | None = Field(
        default=None,
        ge=1,
        description="The job's last training step: committed work = the newest committed step / totalSteps * workHours.",
        json_schema_extra=fix_hint("set the step count at which the job is done (a positive integer)"),
    )

    @model_validator(mode="after")
    def _groups_ok(self) -> _PoolBase:
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ValueError(f"pool {self.name} lists a group twice; list each group once")
        primaries = [g for g in self.groups if g.role is StepKind.SAME_POOL]
        if len(primaries) != 1:
            raise ValueError(
                f"pool {self.name} has {len(primaries)} same_pool groups; give exactly one primary spot group"
            )
        if sum(g.role is StepKind.ON_DEMAND for g in self.groups) > 1:
            raise ValueError(f"pool {self.name} has more than one on_demand group; keep one fallback group")
        return self

    def price(self, group: GroupSpec, workload: WorkloadProfile) -> float:
        """The group's USD per node-hour (the planner's rule: its own, else the workload's by role)."""
        if group.price_per_hour is not None:
            return group.price_per_hour
        prices = workload.prices
        return prices.on_demand if group.role is StepKind.ON_DEMAND else prices.spot_per_hour

    def group(self, name: str) -> GroupSpec:
        return next(g for g in self.groups if g.name == name)


class AwsControlledPool(_PoolBase):
    cloud: Literal["aws"] = "aws"
    region: str = Field(pattern=names.whole(names.AWS_REGION), json_schema_extra=fix_hint(names.AWS_REGION_FIX))
    queue_url: EndpointUrl | None = Field(
        default=None,
        pattern=r"^https?://",
        description="SQS queue the EventBridge interruption and launch rules deliver to.",
        json_schema_extra=fix_hint("give the queue URL, e.g. https://sqs.us-east-1.amazonaws.com/123/pool-events"),
    )


class GcpControlledPool(_PoolBase):
    cloud: Literal["gcp"] = "gcp"
    project: str = Field(pattern=names.whole(names.GCP_PROJECT), json_schema_extra=fix_hint(names.GCP_PROJECT_FIX))
    region: str = Field(pattern=names.whole(names.GCP_REGION), json_schema_extra=fix_hint(names.GCP_REGION_FIX))
    subscription: str | None = Field(
        default=None,
        pattern=r"^projects/[^/]+/subscriptions/[^/]+$",
        description="Pub/Sub subscription fed by the preemption log sink.",
        json_schema_extra=fix_hint("use projects/PROJECT/subscriptions/NAME"),
    )


class AzureControlledPool(_PoolBase):
    cloud: Literal["azure"] = "azure"
    subscription_id: str = Field(
        pattern=r"^[0-9a-f-]{36}$", json_schema_extra=fix_hint("give the subscription GUID")
    )
    resource_group_name: str = Field(min_length=1, json_schema_extra=fix_hint("name the pool's resource group"))
    events_queue_url: EndpointUrl | None = Field(
        default=None,
        pattern=r"^https?://[^/\s]+/[^\s]+$",
        description="The Storage queue the pool's Scheduled Events reach through Event Grid "
        "(publishEventsToEventGrid); evictions are read from it. None: from the VMs' states.",
        json_schema_extra=fix_hint("use https://ACCOUNT.queue.core.windows.net/QUEUE (the pool exports it)"),
    )


ControlledPool = Annotated[
    AwsControlledPool | GcpControlledPool | AzureControlledPool, Field(discriminator="cloud")
]


class TelemetrySpec(SpotModel):
    json_lines: str | None = Field(
        default=None, description="File to append one JSON event per line to; '-' for stdout."
    )
    prometheus_port: int | None = Field(
        default=None, ge=1, le=65535, json_schema_extra=fix_hint("use a TCP port such as 9108")
    )
    prometheus_addr: str = "127.0.0.1"


class LeaseSpec(SpotModel):
    """The one-writer lease on the record (``spotgpu.controller.lease``)."""

    ttl_seconds: float | None = Field(
        default=None,
        ge=5,
        le=86400,
        description="How long a tick may hold the lease; defaults to max(120, 3 x tickSeconds). Keep it above the "
        "longest tick (the job's timeout).",
        json_schema_extra=fix_hint("use 5 to 86400 seconds"),
    )
    max_clock_skew_seconds: float = Field(
        default=10,
        ge=0,
        le=600,
        description="Largest wall-clock difference between two controllers; an expired lease is taken only after it.",
        json_schema_extra=fix_hint("use 0 to 600 seconds"),
    )


class ControllerConfig(SpotModel):
    state_url: StoreUrlText = Field(
        pattern=r"^(file|s3|gs|az|abfs|https)://",
        description="Object store URL holding the controller's JSON record (the pool's checkpoint store).",
        json_schema_extra=fix_hint("use file:///path, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix"),
    )
    tick_seconds: float = Field(default=30, ge=1, le=3600, json_schema_extra=fix_hint("use 1 to 3600 seconds"))
    stable_spot_seconds: float = Field(
        default=300,
        ge=0,
        description="Spot must cover the target this long before fallback VMs are drained.",
        json_schema_extra=fix_hint("use a non-negative number of seconds"),
    )
    event_max_age_seconds: float = Field(
        default=1800,
        gt=0,
        description="An interruption event older than this (or than the pool's last recovery) is recorded, never acted on.",
        json_schema_extra=fix_hint("use a positive number of seconds, e.g. 1800"),
    )
    telemetry: TelemetrySpec = TelemetrySpec()
    lease: LeaseSpec = LeaseSpec()
    workloads: dict[str, WorkloadProfile] = Field(min_length=1, json_schema_extra=fix_hint("define at least one workload"))
    ladders: dict[str, FallbackLadder] = Field(min_length=1, json_schema_extra=fix_hint("define at least one ladder"))
    pools: tuple[ControlledPool, ...] = Field(min_length=1, json_schema_extra=fix_hint("list at least one pool"))

    @model_validator(mode="after")
    def _references(self) -> ControllerConfig:
        seen: set[str] = set()
        for i, pool in enumerate(self.pools):
            if pool.name in seen:
                raise ValueError(f"pools[{i}].name {pool.name!r} is used twice; pool names must be unique")
            seen.add(pool.name)
            if pool.workload not in self.workloads:
                raise ValueError(f"pools[{i}].workload {pool.workload!r} is not defined; use one of {sorted(self.workloads)}")
            if pool.ladder not in self.ladders:
                raise ValueError(f"pools[{i}].ladder {pool.ladder!r} is not defined; use one of {sorted(self.ladders)}")
            ladder = self.ladders[pool.ladder]
            has_fallback = any(g.role is StepKind.ON_DEMAND for g in pool.groups)
            if ladder.step(StepKind.ON_DEMAND) is not None and not has_fallback:
                raise ValueError(
                    f"pools[{i}] ({pool.name}) uses ladder {pool.ladder!r} with an on_demand step but has no "
                    "on_demand group; add {name: <fallback group>, role: on_demand}"
                )
            workload = self.workloads[pool.workload]
            _rungs_can_act(i, pool, pool.ladder, ladder, workload)
            if pool.job_started_at is not None and workload.deadline_hours is not None and pool.total_steps is None:
                raise ValueError(
                    f"pools[{i}] ({pool.name}) tracks a deadline (jobStartedAt and deadlineHours) but has no totalSteps; "
                    "progress is committed work (newest committed step / totalSteps), so set totalSteps"
                )
        return self

    @property
    def lease_ttl_seconds(self) -> float:
        return self.lease.ttl_seconds if self.lease.ttl_seconds is not None else max(120.0, 3 * self.tick_seconds)


def reference_gpus(groups: Sequence[GroupSpec], workload: WorkloadProfile) -> int:
    """GPUs per node of the primary group: one unit of capacity (``capacity.target`` counts these).

    The primary's ``gpusPerNode``, else the workload's ``gpu.gpusPerNode``, else 1 (every node counts
    as one); a group that states no count has this one.
    """
    primary = next(g for g in groups if g.role is StepKind.SAME_POOL)
    return primary.gpus_per_node or (workload.gpu.gpus_per_node if workload.gpu is not None else None) or 1


def _rungs_can_act(i: int, pool: _PoolBase, name: str, ladder: FallbackLadder, workload: WorkloadProfile) -> None:
    """A rung whose ceiling is below the price of every group it may grow could never act
    (compared in the ceiling's unit: per node-hour, or per work-hour of the group's GPUs and speed)."""
    reference = reference_gpus(pool.groups, workload)
    for step in ladder.steps:
        if step.kind is StepKind.QUEUE_DEFER:
            continue
        groups = [g for g in pool.groups if g.role is step.kind]
        model = next((g.gpu_model for g in pool.groups if g.role is StepKind.SAME_POOL), None)
        rates = [workload.work_per_node_hour(g.gpus_per_node or reference, g.gpu_model, model) for g in groups]
        costs = [pool.price(g, workload) / (r if step.per_work_hour else 1.0) for g, r in zip(groups, rates, strict=True)]
        if costs and min(costs) > step.ceiling:
            cheapest = groups[costs.index(min(costs))]
            least, unit = (round(min(costs), 4), "work-hour") if step.per_work_hour else (min(costs), "h")
            raise ValueError(
                f"pools[{i}] ({pool.name}): ladder {name!r} rung {step.kind.value} has {step.ceiling_key} "
                f"{step.ceiling:g}, below ${least:g}/{unit} of its cheapest group {cheapest.name}, "
                f"so it could never act; raise the ceiling to at least {least:g} or lower the group's price"
            )


def parse_controller_config(data: dict[str, Any]) -> ControllerConfig:
    try:
        return ControllerConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_error(err, namespace="controller", model=ControllerConfig)) from None


def load_controller_config(path: str | Path) -> ControllerConfig:
    """Read YAML or JSON; every problem comes back as one ConfigError line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{p}: cannot read the controller config ({err.strerror}); fix: pass --config FILE") from None
    if p.suffix == ".json":
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the controller config must be a mapping of key: value")
    return parse_controller_config(data)
