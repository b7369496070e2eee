"""Build every pool of a stack: the entry points a stack program calls.

``load_config()`` reads the ``spotgpu:`` config namespace whatever the Pulumi
project is called (``pulumi.Config()`` would read the project's own namespace,
so a project named anything but ``spotgpu`` found no keys); ``deploy()`` creates
one ``GpuPool`` per configured pool.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pulumi

from spotgpu.config import STACK_KEYS, ConfigError, parse_stack_config
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs

#: cloud -> module exporting ``GpuPool(name, args: PoolArgs, opts)``
CLOUD_MODULES = {"aws": "spotgpu_pulumi.aws", "gcp": "spotgpu_pulumi.gcp", "azure": "spotgpu_pulumi.azure"}

#: The config namespace spotgpu keys live in unless a program names another.
DEFAULT_NAMESPACE = "spotgpu"


#: Clouds a ``<namespace>:clouds`` key may name (the template's prompt).
CLOUDS = ("aws", "gcp", "azure")


def load_config(namespace: str = DEFAULT_NAMESPACE) -> StackConfig:
    """Validate the stack's ``<namespace>:`` keys once; a bad value is one line, no traceback.

    An optional ``<namespace>:clouds`` (``aws,gcp`` or a list) keeps only the pools
    of those clouds: a stack made from the template can start on one cloud and
    add the others later without deleting their pool entries.
    """
    cfg = pulumi.Config(namespace)
    try:
        config = parse_stack_config({key: cfg.get(key) for key in STACK_KEYS}, namespace=namespace)
        clouds = select_clouds(cfg.get("clouds"), namespace)
    except ConfigError as err:
        # RunError: the CLI shows the one-line message without a Python traceback.
        raise pulumi.RunError(str(err)) from None
    if clouds is None:
        return config
    return config.model_copy(update={"pools": tuple(p for p in config.pools if p.cloud in clouds)})


def select_clouds(value: str | None, namespace: str = DEFAULT_NAMESPACE) -> frozenset[str] | None:
    """Parse ``clouds`` (comma-separated or a JSON list); ``None`` keeps every pool."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    names = json.loads(text) if text.startswith("[") else [c.strip() for c in text.split(",")]
    unknown = [c for c in names if c not in CLOUDS]
    if unknown or not names:
        raise ConfigError(
            f"{namespace}:clouds: {unknown or names} is not a list of clouds (value: {value!r}); "
            f"fix: use a comma-separated subset of {', '.join(CLOUDS)}"
        )
    return frozenset(names)


def deploy(config: StackConfig, opts: pulumi.ResourceOptions | None = None) -> dict[str, Any]:
    """Create one GpuPool per configured pool, keyed by pool name (stable URNs)."""
    pools: dict[str, Any] = {}
    for spec in config.pools:
        module = importlib.import_module(CLOUD_MODULES[spec.cloud])
        pools[spec.name] = module.GpuPool(spec.name, PoolArgs.for_pool(config, spec), opts)
    return pools
