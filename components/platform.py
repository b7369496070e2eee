"""Build every pool of a stack: the entry points a stack program calls.

``load_config()`` reads the ``spotgpu:`` config namespace whatever the Pulumi
project is called (``pulumi.Config()`` would read the project's own namespace,
so a project named anything but ``spotgpu`` found no keys); ``deploy()`` creates
one ``GpuPool`` per configured pool, with the class the pool's cloud registers in
:data:`spotgpu_pulumi.clouds.CLOUDS`.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env

from spotgpu.config import ConfigError
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import CLOUDS

#: The config namespace spotgpu keys live in unless a program names another.
DEFAULT_NAMESPACE = "spotgpu"


def load_config(namespace: str = DEFAULT_NAMESPACE) -> StackConfig:
    """Validate and plan the stack's ``<namespace>:`` keys once; a bad value is one line, no traceback.

    Every key of the namespace is validated (a misspelt key is an error, not ignored), with
    the provider regions the pools must agree with, and every pool is planned before the
    first resource is registered. ``<namespace>:clouds`` selects clouds
    (:func:`spotgpu.config.select_clouds`).
    """
    from spotgpu_pulumi.offline.validate import validate_engine_config

    try:
        return validate_engine_config({**get_config_env(), **CONFIG.get()}, namespace=namespace)
    except ConfigError as err:
        # RunError: the CLI shows the one-line message without a Python traceback.
        raise pulumi.RunError(str(err)) from None


def deploy(config: StackConfig, opts: pulumi.ResourceOptions | None = None) -> dict[str, Any]:
    """Create one GpuPool per configured pool, keyed by pool name (stable URNs); each plans before it registers."""
    return {
        spec.name: CLOUDS[spec.cloud].component(spec.name, PoolArgs.for_pool(config, spec), opts)
        for spec in config.pools
    }
