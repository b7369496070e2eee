"""Build every pool of a stack: the one entry point the stack program calls."""

from __future__ import annotations

import importlib
from typing import Any

import pulumi

from components.args import PoolArgs
from spotgpu.models import StackConfig

#: cloud -> module exporting ``GpuPool(name, args: PoolArgs, opts)``
CLOUD_MODULES = {"aws": "components.aws", "gcp": "components.gcp", "azure": "components.azure"}


def deploy(config: StackConfig, opts: pulumi.ResourceOptions | None = None) -> dict[str, Any]:
    """Create one GpuPool per configured pool, keyed by pool name (stable URNs)."""
    pools: dict[str, Any] = {}
    for spec in config.pools:
        module = importlib.import_module(CLOUD_MODULES[spec.cloud])
        pools[spec.name] = module.GpuPool(spec.name, PoolArgs.for_pool(config, spec), opts)
    return pools
