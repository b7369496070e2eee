"""Build every pool of a stack: the entry points a stack program calls.

``load_config()`` reads the ``spotgpu:`` config namespace whatever the Pulumi
project is called (``pulumi.Config()`` would read the project's own namespace,
so a project named anything but ``spotgpu`` found no keys); ``deploy()`` creates
one ``GpuPool`` per configured pool.
"""

from __future__ import annotations

import importlib
from typing import Any

import pulumi

from components.args import PoolArgs
from spotgpu.config import STACK_KEYS, ConfigError, parse_stack_config
from spotgpu.models import StackConfig

#: cloud -> module exporting ``GpuPool(name, args: PoolArgs, opts)``
CLOUD_MODULES = {"aws": "components.aws", "gcp": "components.gcp", "azure": "components.azure"}

#: The config namespace spotgpu keys live in unless a program names another.
DEFAULT_NAMESPACE = "spotgpu"


def load_config(namespace: str = DEFAULT_NAMESPACE) -> StackConfig:
    """Validate the stack's ``<namespace>:`` keys once; a bad value is one line, no traceback."""
    cfg = pulumi.Config(namespace)
    try:
        return parse_stack_config({key: cfg.get(key) for key in STACK_KEYS}, namespace=namespace)
    except ConfigError as err:
        # RunError: the CLI shows the one-line message without a Python traceback.
        raise pulumi.RunError(str(err)) from None


def deploy(config: StackConfig, opts: pulumi.ResourceOptions | None = None) -> dict[str, Any]:
    """Create one GpuPool per configured pool, keyed by pool name (stable URNs)."""
    pools: dict[str, Any] = {}
    for spec in config.pools:
        module = importlib.import_module(CLOUD_MODULES[spec.cloud])
        pools[spec.name] = module.GpuPool(spec.name, PoolArgs.for_pool(config, spec), opts)
    return pools
