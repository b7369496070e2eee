"""Whether a GPU type can hold a workload, and in what gang shape.

Falling back to another GPU type is a change of machine, not of price: the new
type may have too little memory per GPU for the model's shards, a GPU model the
job was never validated on, or another GPU count per node (so the gang needs
another node count to keep its world size). One pure judgement, read by config
validation (``spotgpu.models.gpu_fit``), the components' planners, the policy
pack (from the workload link tag) and the controller (gang sizing).

Nothing here imports a model: the need is a plain frozen value, built from the
workload's ``gpu`` block or decoded from its tag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spotgpu.catalogue import GpuShape


@dataclass(frozen=True)
class GpuNeed:
    """What a workload needs of every GPU type it may run on."""

    #: Nodes of the reference shape (the workload's ``nodes``).
    nodes: int
    #: GPUs per node of the reference shape: the gang is ``nodes * gpus_per_node`` GPUs.
    gpus_per_node: int
    #: GPUs one rank drives; a type must carry a whole number of ranks.
    gpus_per_rank: int = 1
    #: Memory one GPU must have, stated; None when derived from ``model_state_gib``.
    memory_per_gpu_gib: float | None = None
    #: The model's whole training state (weights, gradients, optimizer), sharded over the gang's GPUs.
    model_state_gib: float | None = None
    #: Extra share of the shard for activations, buffers and fragmentation.
    headroom: float = 0.25
    #: GPU models the job was validated on (catalogue names); empty: any.
    models: tuple[str, ...] = ()
    #: Gang sizes in GPUs the job may restart at (its restore reshards); empty: only the reference size.
    world_sizes: tuple[int, ...] = ()

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def allowed_world_sizes(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.world_sizes) | {self.world_size}))

    def memory_needed_gib(self, world_size: int | None = None) -> float | None:
        """GiB one GPU needs at ``world_size`` GPUs (the stated figure, or the shard plus headroom)."""
        if self.memory_per_gpu_gib is not None:
            return self.memory_per_gpu_gib
        if self.model_state_gib is None:
            return None
        return self.model_state_gib / (world_size or self.world_size) * (1.0 + self.headroom)

    def memory_source(self, world_size: int | None = None) -> str:
        """How the memory need was found, for error lines and the docs."""
        if self.memory_per_gpu_gib is not None:
            return "gpu.memoryPerGpuGiB"
        n = world_size or self.world_size
        return f"gpu.modelStateGiB {self.model_state_gib:g} / {n} GPUs x (1 + headroom {self.headroom:g})"


@dataclass(frozen=True)
class Shortfall:
    """Why one type cannot hold the workload: what is short, and how to fix it."""

    what: str
    fix: str


def nodes_for(need: GpuNeed, gpus_per_node: float) -> int | None:
    """Nodes of a type with ``gpus_per_node`` GPUs that give an allowed gang size; None when none does.

    The reference world size first (same number of GPUs, so no resharding); else the
    largest allowed size the type divides.
    """
    if gpus_per_node < 1 or not float(gpus_per_node).is_integer():
        return None
    per = int(gpus_per_node)
    if per % need.gpus_per_rank:
        return None
    fitting = [w for w in need.allowed_world_sizes if w % per == 0]
    if not fitting:
        return None
    world = need.world_size if need.world_size in fitting else max(fitting)
    return world // per


def shortfalls(need: GpuNeed, shape: GpuShape, count_known: bool = True) -> list[Shortfall]:
    """Everything that stops ``shape`` holding ``need``; empty when it fits.

    ``count_known`` is False for a GCP accelerator judged without its machine (the policy
    pack sees the accelerator name): then only its model and memory are judged.
    """
    out: list[Shortfall] = []
    if need.models and shape.gpu_model not in need.models:
        out.append(Shortfall(
            f"carries {shape.gpu_model}, which the workload was not validated on (gpu.models: {', '.join(need.models)})",
            f"validate the job on {shape.gpu_model} and add it to gpu.models, or drop {shape.name}",
        ))
    world: int | None = None
    if count_known:
        n = nodes_for(need, shape.gpu_count)
        if n is None:
            count = f"{shape.gpu_count:g}"
            out.append(Shortfall(
                f"has {count} GPU(s) per node: no whole number of its nodes makes a gang of "
                f"{'/'.join(map(str, need.allowed_world_sizes))} GPUs in ranks of {need.gpus_per_rank}",
                f"drop {shape.name}, or list a gang size it divides in gpu.worldSizes (the restore must reshard)",
            ))
        else:
            world = n * int(shape.gpu_count)
    needed = need.memory_needed_gib(world)
    if needed is not None and shape.gpu_memory_gib < needed:
        out.append(Shortfall(
            f"has {shape.gpu_memory_gib:g} GiB per GPU, {needed - shape.gpu_memory_gib:.3g} GiB short of the "
            f"{needed:.3g} GiB the workload needs ({need.memory_source(world)})",
            f"drop {shape.name}, or use a type with at least {math.ceil(needed)} GiB per GPU",
        ))
    return out


def fitting_names(need: GpuNeed, shapes: list[GpuShape], n: int = 3) -> list[str]:
    """Up to ``n`` of ``shapes`` that do hold the need (smallest memory first), to suggest in a fix."""
    ok = [s for s in shapes if not shortfalls(need, s)]
    return [s.name for s in sorted(ok, key=lambda s: (s.gpu_memory_gib, s.gpu_count, s.name))[:n]]
