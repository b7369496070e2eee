"""The GPU shapes a spot pool may launch, and the work one node of them does an hour.

Read by ``gpu-type-holds-workload`` (memory, count, model) and by the ceiling rules
(a rung's ``costCeilingPerWorkHour`` is compared per unit of work: a node of a type does
``GPUs x measured speed`` work-hours an hour, the speed from the workload link's ``u=``).
"""

from __future__ import annotations

from collections.abc import Iterator

from spotgpu import catalogue
from spotgpu.catalogue import GpuShape
from spotgpu.models.workload import GpuRequirement
from spotgpu_guard.model import SpotPool
from spotgpu_guard.values import as_list, dig


def _gcp_accelerators(pool: SpotPool) -> dict[str, int]:
    """Accelerator type -> count attached by the template (N1 machines carry no GPU of their own)."""
    out: dict[str, int] = {}
    for a in as_list(pool.res.get("guestAccelerators")):
        kind, count = dig(a, "type"), dig(a, "count")
        if isinstance(kind, str):
            out[kind.rsplit("/", 1)[-1]] = int(count) if isinstance(count, int | float) else 0
    return out


def pool_shapes(pool: SpotPool) -> Iterator[tuple[GpuShape, bool]]:
    """(shape, GPU count known) of each type the pool may launch that the catalogue knows."""
    if pool.cloud == "gcp":
        attached = _gcp_accelerators(pool)
        for name, count in attached.items():
            info = catalogue.gcp_accelerators().get(name)
            if info is not None:
                yield GpuShape("gcp", name, info["gpuModel"], count, info["gpuMemoryGiB"]), count > 0
    for name in sorted(pool.gpu_types):
        shape = {"aws": catalogue.aws_gpu, "gcp": catalogue.gcp_machine, "azure": catalogue.azure_size}[pool.cloud](name)
        if shape is not None:
            yield shape, True


def best_work_per_node_hour(pool: SpotPool, gpu: GpuRequirement | None) -> float:
    """The most work-hours a node of the pool's types does an hour (GPUs x measured speed).

    The most productive type is the one a rung's ceiling must admit for the rung to act at all
    (config validation judges the same way). Without a ``gpu`` block: 1 (a per work-hour ceiling
    then reads per node-hour); with no known type: the workload's ``gpusPerNode`` at the fastest
    listed speed.
    """
    if gpu is None:
        return 1.0
    rates = [shape.gpu_count * gpu.speed(shape.gpu_model)[0] for shape, known in pool_shapes(pool) if known]
    return max(rates, default=gpu.gpus_per_node * max(gpu.relative_throughput.values(), default=1.0))
