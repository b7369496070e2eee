"""Build every pool of a stack: the entry points a stack program calls.

``load_config()`` reads the ``spotgpu:`` config namespace whatever the Pulumi
project is called (``pulumi.Config()`` would read the project's own namespace,
so a project named anything but ``spotgpu`` found no keys), validates it and plans
every pool once; ``deploy()`` hands each pool's plan to the ``GpuPool`` the pool's
cloud registers in :data:`spotgpu_pulumi.clouds.CLOUDS`.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env

from spotgpu.config import ConfigError
from spotgpu_pulumi.clouds import CLOUDS, StackPlan

#: The config namespace spotgpu keys live in unless a program names another.
DEFAULT_NAMESPACE = "spotgpu"


def load_config(namespace: str = DEFAULT_NAMESPACE) -> StackPlan:
    """Validate and plan the stack's ``<namespace>:`` keys once; a bad value is one line, no traceback.

    Every key of the namespace is validated (a misspelt key is an error, not ignored), with
    the provider regions the pools must agree with, and every pool is planned before the
    first resource is registered (the plans are what :func:`deploy` builds; ``.config`` is the
    validated config). ``<namespace>:clouds`` selects clouds (:func:`spotgpu.config.select_clouds`).
    """
    from spotgpu_pulumi.offline.validate import plan_engine_config

    try:
        return plan_engine_config({**get_config_env(), **CONFIG.get()}, namespace=namespace)
    except ConfigError as err:
        # RunError: the CLI shows the one-line message without a Python traceback.
        raise pulumi.RunError(str(err)) from None


def deploy(stack: StackPlan, opts: pulumi.ResourceOptions | None = None) -> dict[str, Any]:
    """Create one GpuPool per planned pool from its plan, keyed by pool name (stable URNs).

    ``stack`` is :func:`load_config`'s, or :func:`spotgpu_pulumi.clouds.plan_stack` of a config
    built in the program: every pool was planned before the first one registers anything.
    """
    built: dict[str, Any] = {}
    for plan in stack.pools:  # in order: a pool may share what an earlier one built (Cloud.link)
        cloud = CLOUDS[plan.args.spec.cloud]
        linked = cloud.link(plan, list(built.values())) if cloud.link is not None else plan
        built[plan.pool] = cloud.component(plan.pool, linked, opts)
    return built
