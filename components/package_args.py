"""Typed args shared by the packaged components, and the config document built from them.

The pools (``spotgpu_pulumi.package``) and the standalone fallback groups
(``spotgpu_pulumi.package_fallback``) describe a pool with the same nested
types (workload, ladder, capacity, subnets, machine types); the SDK's analyzer
names each type once in the schema, so they live here, imported by both.
:func:`pool_args_from` turns them into the stack config document a Python
stack writes and validates it with the same pydantic models; :func:`planned`
plans it with the cloud's planner. Every error names the key as the args hold it
(``<resource name>.<key>``, :func:`keys`), rendered so, never rewritten.
"""

# No `from __future__ import annotations`: the SDK's analyzer reads the annotations as objects.
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict, TypeVar

import pulumi
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from spotgpu.config import ConfigError, KeyPaths, PlanError, format_error, parse_stack_config
from spotgpu.models.base import FieldProblem
from spotgpu.models.tiers import LocalTier
from spotgpu.models.workload import GpuRequirement
from spotgpu_pulumi.args import PoolArgs

PACKAGE_NAME = "spotgpu"
_WORKLOAD_KEY = "workload"
_LADDER_KEY = "ladder"
_Model = TypeVar("_Model", bound=BaseModel)
_Plan = TypeVar("_Plan")


class PricesArgs(TypedDict):
    """USD prices the cost model uses, per node-hour unless stated."""

    spot_per_hour: float
    """Spot price per node-hour."""
    on_demand_per_hour: float
    """On-demand price per node-hour."""
    storage_per_gb_month: NotRequired[float]
    """Checkpoint storage, USD per GB-month (default 0.023)."""
    request_per_1000: NotRequired[float]
    """Checkpoint write requests, USD per 1000 (default 0.005)."""
    deadline_penalty_per_hour: NotRequired[float]
    """Cost of each hour past the deadline (default 0)."""


class GpuArgs(TypedDict):
    """What every GPU type must hold, and how fast each GPU model works (docs/configuration.md, gpu)."""

    gpus_per_node: int
    """GPUs per node the job is laid out for on its first type."""
    gpus_per_rank: NotRequired[int]
    """GPUs one rank drives (default 1)."""
    memory_per_gpu_gib: NotRequired[float]
    """GiB each GPU must have (the measured peak)."""
    model_state_gib: NotRequired[float]
    """Or: GiB of the whole training state, sharded over the gang's GPUs."""
    headroom: NotRequired[float]
    """Share added to a derived shard (default 0.25)."""
    models: NotRequired[list[str]]
    """GPU models the job was validated on (catalogue names); empty: any."""
    world_sizes: NotRequired[list[int]]
    """Other gang sizes in GPUs the job may restart at."""
    relative_throughput: NotRequired[dict[str, float]]
    """Measured work per hour of each GPU model against the reference type (1.0)."""


class LocalTierArgs(TypedDict):
    """The node-local tier (docs/configuration.md, checkpointTiers.local)."""

    path: NotRequired[str]
    """Where every VM of the pool mounts its local NVMe (or RAM disk) (default /var/lib/spotgpu/local)."""
    keep: NotRequired[int]
    """Committed generations each node keeps (1-16, default 2)."""
    write_seconds: NotRequired[float]
    """Measured seconds a periodic save blocks training with the tier on; unset: a prior."""
    commit_seconds: NotRequired[float]
    """Measured seconds from a save's start to its local commit with verified peer copies; unset: a prior."""
    load_seconds: NotRequired[float]
    """Measured seconds to restore a node's shard from its tier or a peer's; unset: a prior."""
    ram_disk_gib: NotRequired[float]
    """GiB of the RAM disk on a type without local NVMe (the stack key is ramDiskGiB); unset: sized from the workload."""
    memory_budget_gib: NotRequired[float]
    """GiB of host memory each rank's background save may hold for its state copy (the stack key is memoryBudgetGiB)."""


class CheckpointTiersArgs(TypedDict):
    """A node-local tier and peer copies in front of the object store (docs/configuration.md, checkpointTiers)."""

    local: NotRequired[LocalTierArgs]
    """The node-local tier."""
    peer_copies: NotRequired[int]
    """Other nodes holding a verified copy of each node's shard (0-3, default 1)."""
    durable_interval_seconds: NotRequired[str]
    """Seconds between uploads to the object store, or "auto" (default)."""


class WorkloadArgs(TypedDict):
    """Measured figures of the work the pool runs (docs/configuration.md, spotgpu:workloads)."""

    checkpoint_bytes: int
    """Size of one full checkpoint."""
    checkpoint_write_seconds: float
    """Measured seconds to save and commit one checkpoint."""
    checkpoint_load_seconds: float
    """Measured seconds to restore one checkpoint."""
    restart_seconds: float
    """Boot to training-ready, excluding the load."""
    expected_reacquisition_seconds: float
    """Mean seconds from an interruption to a replacement running."""
    interruptions_per_hour: float
    """Interruption exposure per node-hour."""
    gang_interruptions_per_hour: NotRequired[float]
    """Interruptions per hour of the whole gang, measured on gangs of its size (replaces the rate x nodes)."""
    work_hours: float
    """Wall-clock hours of useful compute one job needs on all its nodes."""
    prices: PricesArgs
    """Spot, on-demand and storage prices."""
    checkpoint_interval_seconds: NotRequired[str]
    """Seconds between checkpoints, or "auto" (default): the optimum bounded by the loss bound."""
    deadline_hours: NotRequired[float]
    """Hours from submission the job must finish within."""
    max_lost_work_seconds: NotRequired[float]
    """Bound on expected work lost per interruption (default 3600)."""
    nodes: NotRequired[int]
    """Nodes per job (default 1)."""
    fallback_policy: NotRequired[str]
    """ladder (default), fixed-wait, uniform-progress or on-demand-only."""
    gpu: NotRequired[GpuArgs]
    """What every GPU type must hold and each GPU model's speed (optional)."""
    checkpoint_tiers: NotRequired[CheckpointTiersArgs]
    """A node-local tier and peer copies in front of the object store (optional)."""


class LadderStepArgs(TypedDict):
    """One rung of the reacquisition ladder."""

    kind: str
    """same_pool, alternate_zone, alternate_sku, on_demand or queue_defer (in this order, each once)."""
    max_wait_seconds: int
    """Longest wait on this rung before the next."""
    cost_ceiling_per_hour: NotRequired[float]
    """Most this rung may cost per node-hour (0 only for queue_defer); give this or costCeilingPerWorkHour."""
    cost_ceiling_per_work_hour: NotRequired[float]
    """Most this rung may cost per work-hour (one hour of the reference GPU's work; needs the workload's gpu)."""


class LadderArgs(TypedDict):
    """How capacity is reacquired after an interruption (docs/configuration.md, spotgpu:ladders)."""

    steps: list[LadderStepArgs]
    """The rungs, in order; at least on_demand or queue_defer."""
    deadline_escalation: NotRequired[bool]
    """Let a deadline at risk skip to on-demand (default true)."""


class CapacityArgs(TypedDict):
    """Pool size in nodes."""

    target: int
    """Nodes the spot group aims for."""
    max: int
    """Most nodes the spot group may grow to."""
    fallback_max: NotRequired[int]
    """Most on-demand nodes the fallback group may grow to (default max)."""


class AwsSubnetArgs(TypedDict):
    """A subnet of the landing zone."""

    id: pulumi.Input[str]
    """Subnet id (subnet-...), or an Output of one."""
    zone: str
    """Its availability zone (us-east-1a): spread and names are planned from it."""


class GcpMachineArgs(TypedDict):
    """A ranked machine type."""

    machine_type: str
    """Machine type, e.g. a2-highgpu-1g or g2-standard-8."""
    accelerator_type: NotRequired[str]
    """Only for N1: the attached GPU type, e.g. nvidia-tesla-t4."""
    accelerator_count: NotRequired[int]
    """Only for N1: GPUs per VM."""


def _workload(args: WorkloadArgs) -> dict[str, Any]:
    workload: dict[str, Any] = dict(args)
    interval = workload.get("checkpoint_interval_seconds")
    if isinstance(interval, str) and interval.isdigit():
        workload["checkpoint_interval_seconds"] = int(interval)
    tiers = workload.get("checkpoint_tiers")
    if isinstance(tiers, dict):  # "auto" or seconds: one string type in the schema
        durable = tiers.get("durable_interval_seconds")
        if isinstance(durable, str) and durable.isdigit():
            workload["checkpoint_tiers"] = {**tiers, "durable_interval_seconds": int(durable)}
    return workload


def _workload_doc(args: WorkloadArgs) -> dict[str, Any]:
    """The workload in the config's camelCase; the speed table's keys are GPU model names, kept as written."""
    workload = _workload(args)
    gpu = dict(workload.pop("gpu", None) or {})
    speeds = gpu.pop("relative_throughput", None)
    doc: dict[str, Any] = _camel_keys(workload)
    if gpu or speeds is not None:
        doc["gpu"] = {**_camel_keys(gpu), **({"relativeThroughput": dict(speeds)} if speeds is not None else {})}
    return doc


def _gcp_machines(machines: list[GcpMachineArgs]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in machines:
        choice: dict[str, Any] = {"machine_type": m["machine_type"]}
        if "accelerator_type" in m:
            choice["accelerator"] = {"type": m["accelerator_type"], "count": m.get("accelerator_count", 1)}
        out.append(choice)
    return out


_COMMON_FIELDS = (
    "environment",
    "owner",
    "workload",
    "ladder",
    "capacity",
    "pool_name",
    "workload_name",
    "ladder_name",
    "settings",
)


#: Stack keys whose spelling is not the camelCase of their Python name (``memoryPerGpuGiB``, not
#: ``memoryPerGpuGib``): the models' own aliases say it, so the args reach the config as a stack writes them.
_SPELLED = {
    name: str(field.alias)
    for model in (GpuRequirement, LocalTier)
    for name, field in model.model_fields.items()
    if field.alias and field.alias != to_camel(name)
}


def _camel_keys(value: Any) -> Any:
    """Schema-typed values arrive with Python names; errors must name the keys as the user wrote them."""
    if isinstance(value, dict):
        return {_SPELLED.get(k) or to_camel(k): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def pool_args_from(name: str, cloud: str, args: Any, exclude: tuple[str, ...] = ()) -> PoolArgs:
    """The typed args as the stack config document, validated by the same models as a Python stack.

    ``exclude`` names args that are not pool keys (a fallback group's ids of the pool's other parts).
    """
    pool: dict[str, Any] = {k: v for k, v in dict(args).items() if k not in _COMMON_FIELDS + exclude}
    if cloud == "gcp" and "machine_types" in pool:
        pool["machine_types"] = _gcp_machines(pool["machine_types"])
    pool = _camel_keys(pool)
    pool.update(dict(args.get("settings") or {}))  # already camelCase, as in docs/configuration.md
    pool.update(
        cloud=cloud,
        name=args.get("pool_name") or name,
        workload=args.get("workload_name") or _WORKLOAD_KEY,
        ladder=args.get("ladder_name") or _LADDER_KEY,
        capacity=_camel_keys(dict(args["capacity"])),
    )
    raw = {
        "environment": args["environment"],
        "owner": args["owner"],
        "workloads": {pool["workload"]: _workload_doc(args["workload"])},
        "ladders": {pool["ladder"]: _camel_keys(dict(args["ladder"]))},
        "pools": [pool],
    }
    try:
        config = parse_stack_config(raw, namespace=keys(name))
    except ConfigError as err:
        raise pulumi.RunError(str(err)) from None
    return PoolArgs.for_pool(config, config.pools[0])


def keys(name: str) -> KeyPaths:
    """How this package names a key: under the resource, as its args hold it (``train.zones``)."""
    return KeyPaths(name, component=True)


def planned(name: str, planner: Callable[[PoolArgs], _Plan], args: PoolArgs) -> _Plan:
    """The pool planned by its cloud's planner: the one plan the component builds from. A refusal
    is one line keyed ``<name>.<key>``, before anything registers."""
    try:
        return planner(args)
    except PlanError as err:
        raise pulumi.RunError(err.render(keys(name))) from None


def validated(name: str, model: type[_Model], args: Any) -> _Model:
    """The args ``model`` knows, validated by it; a bad value fails as one line keyed ``<name>.<key>``.

    Plain values are checked (patterns, ranges, fix hints); an Output is passed
    through untouched where the model's field is a ``Ref``.
    """
    try:
        return model.model_validate({to_camel(k): args[k] for k in model.model_fields if k in args})
    except ValidationError as err:
        raise pulumi.RunError(format_error(err, keys(name), model)) from None


def refused(name: str, problem: FieldProblem) -> pulumi.RunError:
    """A finding about one of the args, keyed ``<name>.<key>`` as every other input error is."""
    return pulumi.RunError(PlanError(problem).render(keys(name)))
