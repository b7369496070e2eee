"""``gpu-type-holds-workload`` (mandatory): every GPU type of a spot pool can hold its workload.

The rule config validation makes (``spotgpu.models.gpu_fit``), made on concrete
resources: a stack of raw resources states the workload's GPU need in the
``spotgpu-workload`` link (``c=8;m=60;v=H100``, decoded once by
:func:`spotgpu.tags.decode_gpu`), and each instance type, machine type,
accelerator or VM size the pool may launch is judged by the same
:func:`spotgpu.catalogue.fit.shortfalls`. A workload tag without a GPU need, or a
type the GPU catalogue does not know (``gpu-types-known`` reports those), is not judged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu import catalogue
from spotgpu.catalogue import GpuShape
from spotgpu.catalogue.fit import GpuNeed, shortfalls
from spotgpu.tags import decode_gpu
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.links import WORKLOAD
from spotgpu_guard.model import SpotPool
from spotgpu_guard.rule import Finding, stack_rule
from spotgpu_guard.values import as_list, dig


def _need(pool: SpotPool) -> GpuNeed | None:
    text = pool.links.get(WORKLOAD)
    try:
        return decode_gpu(text) if isinstance(text, str) else None
    except ValueError:
        return None  # spot-eligible reports a malformed workload tag


def _gcp_accelerators(pool: SpotPool) -> dict[str, int]:
    """Accelerator type -> count attached by the template (N1 machines carry no GPU of their own)."""
    out: dict[str, int] = {}
    for a in as_list(pool.res.get("guestAccelerators")):
        kind, count = dig(a, "type"), dig(a, "count")
        if isinstance(kind, str):
            out[kind.rsplit("/", 1)[-1]] = int(count) if isinstance(count, int | float) else 0
    return out


def _shapes(pool: SpotPool) -> Iterator[tuple[GpuShape, bool]]:
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


def check_gpu_fit(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        need = _need(pool)
        if need is None:
            continue
        for shape, count_known in _shapes(pool):
            short = shortfalls(need, shape, count_known)
            if short:
                yield Finding(pool.res.urn, (
                    f"{pool.describe()}: {shape.name} ({shape.describe()}) cannot hold the workload ({WORKLOAD}): "
                    + "; ".join(s.what for s in short) + "; fix: " + " and ".join(s.fix for s in short)))


RULES = [
    stack_rule(
        "gpu-type-holds-workload",
        "Every GPU type a spot pool may launch has the memory, GPU count and model its workload needs.",
        EnforcementLevel.MANDATORY,
        check_gpu_fit,
        remediation="Drop the type that cannot hold the workload, or correct the GPU need in spotgpu-workload",
    ),
]
