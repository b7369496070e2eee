"""The config edge every command shares: stack file -> validated models -> pure plans.

``spotgpu preview`` runs this before it starts Pulumi's mock runtime, so every
config, YAML, model and plan problem surfaces as one :class:`~spotgpu.config.ConfigError`
line (exit 2) instead of a traceback from inside a component; a stack program's
``load_config()`` runs it too, and hands the plans to ``deploy()``. The planners run
here are the same pure functions the components build from (each cloud's ``plan`` in
:data:`spotgpu_pulumi.clouds.CLOUDS`, through :func:`~spotgpu_pulumi.clouds.plan_stack`);
nothing is registered.
"""

from __future__ import annotations

from pathlib import Path

from spotgpu.config import read_stack_file, stack_config_from_engine
from spotgpu_pulumi.clouds import StackPlan, plan_stack


def plan_engine_config(
    engine: dict[str, str], namespace: str = "spotgpu", project_dir: str | None = None
) -> StackPlan:
    """Validate and plan a stack from its engine config map (``{"ns:key": text}``); relative
    paths in it (a workload's ``measuredProfile``) are read from ``project_dir`` (default: cwd)."""
    return plan_stack(stack_config_from_engine(engine, namespace, project_dir), namespace)


def plan_stack_file(path: Path | str, text: str | None = None, namespace: str = "spotgpu") -> StackPlan:
    """Read, validate and plan one ``Pulumi.<stack>.yaml``; raises ConfigError with one line."""
    _, engine = read_stack_file(str(path), text)
    return plan_engine_config(engine, namespace)
