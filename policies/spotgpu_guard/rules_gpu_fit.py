"""``gpu-type-holds-workload`` (mandatory): every GPU type of a spot pool can hold its workload.

The rule config validation makes (``spotgpu.models.gpu_fit``), made on concrete
resources: a stack of raw resources states the workload's GPU need in the
``spotgpu-workload`` link (``c=8;m=60;v=H100``, decoded once by
:func:`spotgpu_guard.links.read_gpu_need`), and each instance type, machine type,
accelerator or VM size the pool may launch is judged by the same
:func:`spotgpu.catalogue.fit.shortfalls`. A workload tag without a GPU need, or a
type the GPU catalogue does not know (``gpu-types-known`` reports those), is not judged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu.catalogue.fit import GpuNeed, shortfalls
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.links import WORKLOAD, read_gpu_need
from spotgpu_guard.model import SpotPool
from spotgpu_guard.rule import Finding, stack_rule
from spotgpu_guard.shapes import pool_shapes
from spotgpu_guard.stack_keys import restate


def _need(pool: SpotPool) -> GpuNeed | None:
    return read_gpu_need(pool.links).value  # a malformed workload tag: spot-eligible reports it


def check_gpu_fit(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        need = _need(pool)
        if need is None:
            continue
        for shape, count_known in pool_shapes(pool):
            short = shortfalls(need, shape, count_known)
            if short:
                yield Finding(pool.res.urn, restate(
                    f"{pool.describe()}: {shape.name} ({shape.describe()}) cannot hold the workload ({WORKLOAD}): "
                    + "; ".join(s.what for s in short) + "; fix: " + " and ".join(s.fix for s in short),
                    pool.res, pool.links, f"drop {shape.name} from {{pool}}'s types, or correct the gpu block of the "
                    "workload {pool}.workload names"))  # fmt: skip


RULES = [
    stack_rule(
        "gpu-type-holds-workload",
        "Every GPU type a spot pool may launch has the memory, GPU count and model its workload needs.",
        EnforcementLevel.MANDATORY,
        check_gpu_fit,
        remediation="Drop the type that cannot hold the workload, or correct the GPU need in spotgpu-workload",
    ),
]
