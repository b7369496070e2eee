"""The config edge every command shares: stack file -> validated models -> pure plans.

``spotgpu preview`` runs this before it starts Pulumi's mock runtime, so every
config, YAML, model and plan problem surfaces as one :class:`~spotgpu.config.ConfigError`
line (exit 2) instead of a traceback from inside a component. The planners run
here are the same pure functions the components call (each cloud's ``plan`` in
:data:`spotgpu_pulumi.clouds.CLOUDS`); nothing is registered.
"""

from __future__ import annotations

from pathlib import Path

from spotgpu.config import ConfigError, read_stack_file, stack_config_from_engine
from spotgpu.models import StackConfig
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import CLOUDS


def _restyle(namespace: str, pool: str, message: str) -> str:
    """A planner's ``what; how`` message in the one-line style, under the pool's key path."""
    if message.startswith(f"{namespace}:"):
        return message
    what, sep, fix = message.partition("; ")
    if fix.startswith("fix: "):
        fix = fix.removeprefix("fix: ")
    tail = f"; fix: {fix}" if sep else "; fix: see docs/configuration.md"
    return f"{namespace}:pools[{pool}]: {what}{tail}"


def plan_all(config: StackConfig, namespace: str = "spotgpu") -> None:
    """Run every pool's pure planner (its cloud's, from the registry); the first rejection becomes a ConfigError line."""
    for spec in config.pools:
        args = PoolArgs.for_pool(config, spec)
        try:
            CLOUDS[spec.cloud].plan(args)
        except ValueError as err:  # ConfigError subclasses (plan errors) and naming errors
            raise ConfigError(_restyle(namespace, spec.name, str(err))) from None


def validate_engine_config(
    engine: dict[str, str], namespace: str = "spotgpu", project_dir: str | None = None
) -> StackConfig:
    """Validate and plan a stack from its engine config map (``{"ns:key": text}``); relative
    paths in it (a workload's ``measuredProfile``) are read from ``project_dir`` (default: cwd)."""
    config = stack_config_from_engine(engine, namespace, project_dir)
    plan_all(config, namespace)
    return config


def validate_stack_file(path: Path | str, text: str | None = None, namespace: str = "spotgpu") -> StackConfig:
    """Read, validate and plan one ``Pulumi.<stack>.yaml``; raises ConfigError with one line."""
    _, engine = read_stack_file(str(path), text)
    return validate_engine_config(engine, namespace)
