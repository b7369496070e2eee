"""One reader of a Pulumi project's stack config, for every command that takes ``--stack``.

Pulumi hands a program the stack's config in layers, and so does this module (no Pulumi
import: ``spotgpu cost`` and ``simulate`` run on machines without the SDK):

1. ``Pulumi.yaml``'s project-level ``config:`` block (what ``spotgpu init`` writes the
   starter workloads, ladders and pools to), every stack's base;
2. ``<stackConfigDir>/Pulumi.<stack>.yaml``, key by key on top.

``spotgpu preview`` (which then runs the program), ``cost --stack`` and ``simulate --stack``
all read a stack through :func:`load_project` and :func:`engine_config`, so one stack has one
config whichever command reads it. Every problem is one :class:`~spotgpu.config.ConfigError`
line naming the file, the value and the fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotgpu.config import ConfigError, load_stack_yaml, read_stack_file, stack_config_from_engine
from spotgpu.models import StackConfig

#: The file names Pulumi accepts for a project, in the order it looks for them.
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
#: The namespace spotgpu keys live in unless a program names another (``load_config("ml")``).
DEFAULT_NAMESPACE = "spotgpu"


@dataclass(frozen=True)
class Project:
    """What ``Pulumi.yaml`` says about a project: its name, program, stack files and base config."""

    name: str
    #: the project directory (where ``Pulumi.yaml`` is)
    root: Path
    #: the ``Pulumi.yaml`` file itself
    path: Path
    #: ``runtime`` (or ``runtime.name``)
    runtime: str | None
    #: ``main`` as written (default ``.``), relative to ``root``
    main: str
    #: where ``Pulumi.<stack>.yaml`` files live (``stackConfigDir``, default the project directory)
    stack_config_dir: Path
    #: project-level config from the ``config:`` block, in engine form (``{"ns:key": text}``)
    config: dict[str, str] = field(default_factory=dict)

    def stack_file(self, stack: str) -> Path:
        """``Pulumi.<stack>.yaml``; a stack with no file is one line listing the stacks there are."""
        path = self.stack_config_dir / f"Pulumi.{stack}.yaml"
        if not path.exists():
            known = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in self.stack_config_dir.glob("Pulumi.*.yaml"))
            fix = f"use one of {', '.join(known)}" if known else f"create {path.name} (`spotgpu init` writes one)"
            raise ConfigError(f"--stack {stack!r}: no {path} (value: {json.dumps(stack)}); fix: {fix}")
        return path


def find_project_file(project_dir: str | Path) -> Path | None:
    root = Path(project_dir)
    return next((root / name for name in PROJECT_FILES if (root / name).exists()), None)


def no_project(project_dir: str | Path) -> ConfigError:
    """The one line for a directory that holds no Pulumi project (no fallback to any other)."""
    where = Path(project_dir).resolve()
    return ConfigError(
        f"--program: found no Pulumi.yaml in {where} (value: {json.dumps(str(where))}; the default is the current "
        "directory); fix: run from the Pulumi project's directory or pass --program DIR "
        "(`spotgpu init DIR --owner TEAM` starts a project)"
    )


def load_project(project_dir: str | Path) -> Project:
    """Read ``Pulumi.yaml`` of ``project_dir`` (never any other directory's)."""
    path = find_project_file(project_dir)
    if path is None:
        raise no_project(project_dir)
    doc = load_stack_yaml(str(path))
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: name: the project has no name (value: {json.dumps(name)}); fix: add `name: my-project`")
    runtime = doc.get("runtime")
    root = path.parent
    return Project(
        name=name,
        root=root,
        path=path,
        runtime=runtime.get("name") if isinstance(runtime, dict) else runtime,
        main=str(doc.get("main", ".")),
        stack_config_dir=root / str(doc.get("stackConfigDir", ".")),
        config=project_config(doc.get("config"), name, path),
    )


def project_config(block: object, project: str, path: Path) -> dict[str, str]:
    """The values ``Pulumi.yaml``'s ``config:`` block gives every stack, as the engine passes them.

    Pulumi's rules: a key in the project's own namespace (``owner`` or ``<project>:owner``) may
    declare a ``type`` and a ``default``; a key in another namespace (``spotgpu:pools``,
    ``aws:region``) may only give a ``value``, structured YAML included. A stack's own
    ``Pulumi.<stack>.yaml`` overrides any of them key by key (:func:`engine_config`).
    """
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise ConfigError(f"{path}: config: must be a mapping of key: {{value|default|type}} (value: "
                          f"{json.dumps(block, default=str)[:60]}); fix: indent the keys under config:")  # fmt: skip
    out: dict[str, str] = {}
    for key, spec in block.items():
        full = str(key) if ":" in str(key) else f"{project}:{key}"
        own = full.startswith(f"{project}:")
        if not isinstance(spec, dict):  # the short form `aws:region: us-east-1`
            spec = {"value": spec}
        if not own and ("type" in spec or "default" in spec):
            raise ConfigError(
                f"{path}: config key {full} is not in the project's namespace ({project}), so Pulumi refuses a "
                "type or default on it (value: {...}); fix: give it as `value:` (or set it in Pulumi.<stack>.yaml)"
            )
        value = spec.get("value", spec.get("default")) if own else spec.get("value")
        if value is not None:
            out[full] = value if isinstance(value, str) else json.dumps(value, default=str)
    return out


def engine_config(project: Project, stack: str) -> dict[str, str]:
    """The config the engine hands the program: ``Pulumi.yaml``'s values, then the stack file's on top."""
    _, stack_keys = read_stack_file(str(project.stack_file(stack)))
    return {**project.config, **stack_keys}


def stack_namespace(engine: dict[str, Any]) -> str | None:
    """The namespace holding the stack's spotgpu keys: ``spotgpu``, else the one that declares
    ``pools`` (a program may name its own); None when no namespace declares pools."""
    spaces = sorted({key.split(":", 1)[0] for key in engine if key.endswith(":pools")})
    if not spaces:
        return None
    return DEFAULT_NAMESPACE if DEFAULT_NAMESPACE in spaces else spaces[0]


def load_stack(stack: str, project_dir: str | Path = ".") -> StackConfig:
    """The stack's spotgpu config, validated exactly as the program reads it (project-level
    config, the stack file, ``stackConfigDir``; a workload's ``measuredProfile`` relative to the project)."""
    project = load_project(project_dir)
    engine = engine_config(project, stack)
    namespace = stack_namespace(engine) or DEFAULT_NAMESPACE
    if not any(key.startswith(f"{namespace}:") for key in engine):
        raise ConfigError(
            f"--stack {stack}: neither {project.path.name}'s config: nor {project.stack_file(stack).name} sets a "
            f"{namespace}: key (value: not set); fix: point --program at the spotgpu project (`spotgpu init` writes one)"
        )
    return stack_config_from_engine(engine, namespace, project_dir=str(project.root))
