"""Every GPU type a pool or its ladder's rungs may launch, judged against the workload's need.

A pool's spot types are what its same_pool, alternate_zone and alternate_sku rungs
take; its fallback types are what the on_demand rung takes (``stack.fallback_types``).
:func:`pool_problem` is the one check: config validation raises it (the stack
refuses to load); the planners start from a validated config and do not repeat it.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu import catalogue
from spotgpu.catalogue import GpuShape
from spotgpu.catalogue.fit import GpuNeed, Shortfall, fitting_names, nodes_for, shortfalls
from spotgpu.models.base import FieldProblem
from spotgpu.models.pool_types import fallback_types, pool_types, spot_type_price, type_keys
from spotgpu.models.pools import AwsPoolSpec, AzurePoolSpec, PoolSpec
from spotgpu.models.workload import WorkloadProfile, speed_basis


@dataclass(frozen=True)
class PoolType:
    """One type a pool may launch: the key it is written at, its rung and its catalogue shape."""

    at: str
    name: str
    rungs: str
    shape: GpuShape | None
    #: Whether the spot rungs (same_pool, alternate_zone, alternate_sku) take it.
    spot: bool = True
    #: Whether the on_demand rung (the fallback group) takes it.
    on_demand: bool = True


def shape_of(pool: PoolSpec, name: str) -> GpuShape | None:
    """The catalogue's shape of one of the pool's types (GCP N1: machine plus its accelerator)."""
    if isinstance(pool, AwsPoolSpec):
        return catalogue.aws_gpu(name)
    if isinstance(pool, AzurePoolSpec):
        return catalogue.azure_size(name)
    choice = next((c for c in pool.machine_types if c.machine_type == name), None)
    if choice is not None and choice.accelerator is not None:
        info = catalogue.gcp_accelerators().get(choice.accelerator.type)
        if info is None:
            return None
        return GpuShape("gcp", name, info["gpuModel"], choice.accelerator.count, info["gpuMemoryGiB"])
    return catalogue.gcp_machine(name)


def listed_types(pool: PoolSpec, workload: WorkloadProfile) -> list[PoolType]:
    """Each type the pool may launch once, with the rungs that take it."""
    spot = "the spot rungs (same_pool, alternate_zone, alternate_sku)"
    grown = set(fallback_types(pool, workload))
    out = [PoolType(at, t, f"{spot} and on_demand" if t in grown else spot, shape_of(pool, t), on_demand=t in grown)
           for at, t in zip(type_keys(pool), pool_types(pool), strict=True)]
    if isinstance(pool, AzurePoolSpec) and not grown <= set(pool.vm_sizes):
        fallback = next(iter(grown))
        out.append(PoolType("fallbackVmSize", fallback, "the on_demand rung", shape_of(pool, fallback), spot=False))
    return out


def _known_shapes(cloud: str) -> list[GpuShape]:
    if cloud == "aws":
        return [s for t in catalogue.aws_gpu_types() if (s := catalogue.aws_gpu(t)) is not None]
    if cloud == "gcp":
        doc = catalogue.document("gcp")["machineTypes"]
        return [s for t in sorted(doc) if (s := catalogue.gcp_machine(t)) is not None]
    return [s for t in catalogue.azure_sizes() if (s := catalogue.azure_size(t)) is not None]


def _problem(pool: PoolSpec, need: GpuNeed, kind: PoolType, short: list[Shortfall]) -> FieldProblem:
    assert kind.shape is not None
    fits = fitting_names(need, _known_shapes(pool.cloud))
    hint = f" (types that fit: {', '.join(fits)})" if fits else ""
    return FieldProblem(
        f"{kind.name} ({kind.shape.describe()}, taken by {kind.rungs}) cannot hold workload {pool.workload}: "
        + "; ".join(s.what for s in short),
        at=kind.at, value=kind.name, fix=" and ".join(s.fix for s in short) + hint,
    )


def pool_problem(pool: PoolSpec, workload: WorkloadProfile) -> FieldProblem | None:
    """The first type of ``pool`` that cannot hold ``workload``'s GPU need, as a config problem.

    Types the catalogue does not know (passed by ``optOut.catalogue``) cannot be judged and pass.
    """
    need = workload.gpu_need
    if need is None:
        return None
    for kind in listed_types(pool, workload):
        if kind.shape is None:
            continue
        short = shortfalls(need, kind.shape)
        if short:
            return _problem(pool, need, kind, short)
    return None


def capacity_problem(pool: PoolSpec, workload: WorkloadProfile) -> FieldProblem | None:
    """The pool's ``capacity.target`` nodes of its first type cannot hold any gang size the workload runs at.

    The target counts nodes of the primary type; with a ``gpu`` block the gang is GPUs
    (``nodes x gpusPerNode``, or another of ``gpu.worldSizes``), so a 1-GPU primary needs four
    nodes for a 4-GPU gang. A target of 0 (a pool kept empty) is not judged.
    """
    need = workload.gpu_need
    target = pool.capacity.target
    kinds = listed_types(pool, workload)
    if need is None or target == 0 or not kinds or kinds[0].shape is None:
        return None
    first = kinds[0]
    assert first.shape is not None
    gpus = first.shape.gpu_count
    n = nodes_for(need, gpus)
    if n is None or n <= target:
        return None  # a type that cannot hold the gang at all is pool_problem's finding
    holds = target * gpus
    if any(w <= holds and w % gpus == 0 for w in need.allowed_world_sizes):
        return None
    return FieldProblem(
        f"holds {target} node(s) of {first.name} ({gpus:g} GPU(s) each), {holds:g} GPUs, and workload "
        f"{pool.workload}'s gang needs {need.world_size} (nodes {need.nodes} x gpu.gpusPerNode {need.gpus_per_node}): "
        f"{n} node(s) of {first.name}",
        at="capacity.target", value=target,
        fix=f"set capacity.target to {n} (and capacity.max to at least {n}), or list a gang size it holds in "
            "gpu.worldSizes (the restore must reshard)",
    )  # fmt: skip


def nodes_per_type(pool: PoolSpec, workload: WorkloadProfile) -> dict[str, int]:
    """Nodes of each known type that make the workload's gang (the controller's group sizes)."""
    need = workload.gpu_need
    if need is None:
        return {}
    out = {}
    for kind in listed_types(pool, workload):
        if kind.shape is not None and (n := nodes_for(need, kind.shape.gpu_count)) is not None:
            out[kind.name] = n
    return out


@dataclass(frozen=True)
class TypeRate:
    """How much work one node of a pool type does per hour for a workload (the unit of per-work ceilings)."""

    type: PoolType
    gpus: float | None  # GPUs per node (None: not in the catalogue; the workload's gpusPerNode is assumed)
    gpu_model: str | None
    speed: float  # against the reference type workHours was measured on
    measured: bool  # speed stated by gpu.relativeThroughput (typed or measured), not a prior
    work_per_node_hour: float
    #: where the speed came from (``spotgpu.models.workload.speed_basis``): table, spec prior, reference, unmeasured
    speed_source: str = "unmeasured"
    speed_basis: str = ""


def type_rates(pool: PoolSpec, workload: WorkloadProfile) -> list[TypeRate]:
    """Each type the pool may launch with its work per node-hour (GPUs x speed).

    A speed comes from ``gpu.relativeThroughput`` when it lists the model, else it is the model's spec
    prior (``spotgpu.catalogue.spec_prior``) against the table's reference model, or, without a table,
    against the pool's first type (what workHours is then taken to be measured on); a model with no
    spec row counts at the slowest speed the pool otherwise knows.
    """
    kinds = listed_types(pool, workload)
    table = workload.gpu.relative_throughput if workload.gpu is not None else {}
    first = kinds[0].shape if kinds else None
    found = []
    for kind in kinds:
        shape = kind.shape
        speed, source, basis = speed_basis(
            table, shape.gpu_model if shape else None, shape.gpu_memory_gib if shape else None,
            first.gpu_model if first else None, first.gpu_memory_gib if first else None)  # fmt: skip
        found.append((kind, speed, source, basis))
    known = [speed for _, speed, source, _ in found if source != "unmeasured"]
    out = []
    for kind, speed, source, basis in found:
        if source == "unmeasured" and not table and known:
            speed, basis = min(known), basis.replace("the slowest listed speed", "the slowest speed the pool knows")
        gpus = kind.shape.gpu_count if kind.shape is not None else None
        model = kind.shape.gpu_model if kind.shape is not None else None
        per_node = gpus or (workload.gpu.gpus_per_node if workload.gpu is not None else 1)
        out.append(TypeRate(kind, gpus, model, speed, source == "table", per_node * speed, source, basis))
    return out


def group_gpu_keys(pool: PoolSpec, workload: WorkloadProfile, types: tuple[str, ...], *, spot: bool) -> dict[str, object]:
    """What the controller needs to count a group's GPUs and work: ``gpusPerNode`` and ``gpuModel`` when all
    the group's types share them, and (a spot group) ``pricePerHour``, its first type's spot price.

    Nothing without the workload's ``gpu`` block (every output then stays as it was), and only what the
    catalogue knows: a group of mixed GPU models counts at the slowest listed speed (conservative).
    """
    if workload.gpu is None or not types:
        return {}
    shapes = [shape_of(pool, t) for t in types]
    out: dict[str, object] = {}
    if all(sh is not None for sh in shapes):
        counts = {sh.gpu_count for sh in shapes if sh is not None}
        models = {sh.gpu_model for sh in shapes if sh is not None}
        if len(counts) == 1 and float(next(iter(counts))).is_integer():
            out["gpusPerNode"] = int(next(iter(counts)))
        if len(models) == 1:
            out["gpuModel"] = next(iter(models))
    if spot:
        out["pricePerHour"] = spot_type_price(pool, types[0], workload.prices.spot_per_hour)[0]
    return out
