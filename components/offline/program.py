"""Execute a Pulumi Python program under the mock runtime, as the CLI would.

The program file is run with :func:`runpy.run_path` (what Pulumi's Python exec
shim does), after the stack's config is loaded into the runtime, so the very same
``stacks/__main__.py`` that ``pulumi up`` runs is what the preview records.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.settings import ROOT, get_root_resource

from spotgpu.config import read_stack_file
from spotgpu_pulumi.offline.mocks import RecordedResource, RecordingMocks, RecordingMonitor


class ProgramError(RuntimeError):
    """The program failed; the message is what the user should read."""


@dataclass
class ProjectFile:
    name: str
    main: Path
    stack_config_dir: Path
    #: project-level config from ``Pulumi.yaml``'s ``config:`` block, in engine form (``{"ns:key": text}``)
    config: dict[str, str] = field(default_factory=dict)


@dataclass
class Recording:
    project: str
    stack: str
    resources: list[RecordedResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)


def load_project(project_dir: Path) -> ProjectFile:
    for candidate in ("Pulumi.yaml", "Pulumi.yml"):
        path = project_dir / candidate
        if path.exists():
            break
    else:
        raise ProgramError(
            f"{project_dir.resolve()}: no Pulumi.yaml; fix: run from a Pulumi project directory or pass --program DIR "
            "(`spotgpu init DIR --owner TEAM` starts one)"
        )
    doc = yaml.safe_load(path.read_text()) or {}
    runtime = doc.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise ProgramError(f"{path}: runtime is {runtime_name!r}; only Python programs can be previewed offline")
    main = project_dir / doc.get("main", ".")
    if main.is_dir():
        main = main / "__main__.py"
    if not main.exists():
        raise ProgramError(f"{path}: main program {main} does not exist")
    name = str(doc["name"])
    return ProjectFile(
        name=name,
        main=main,
        stack_config_dir=project_dir / doc.get("stackConfigDir", "."),
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
        raise ProgramError(f"{path}: config: must be a mapping of key: {{value|default|type}}; fix: indent the keys under config:")
    out: dict[str, str] = {}
    for key, spec in block.items():
        full = str(key) if ":" in str(key) else f"{project}:{key}"
        own = full.startswith(f"{project}:")
        if not isinstance(spec, dict):  # the short form `aws:region: us-east-1`
            spec = {"value": spec}
        if not own and ("type" in spec or "default" in spec):
            raise ProgramError(
                f"{path}: config key {full} is not in the project's namespace ({project}), so Pulumi refuses a "
                "type or default on it; fix: give it as `value:` (or set it in Pulumi.<stack>.yaml)"
            )
        value = spec.get("value", spec.get("default")) if own else spec.get("value")
        if value is not None:
            out[full] = value if isinstance(value, str) else json.dumps(value, default=str)
    return out


def engine_config(project: ProjectFile, stack: str) -> dict[str, str]:
    """The config the engine hands the program: ``Pulumi.yaml``'s values, then the stack file's on top."""
    _, stack_keys = read_stack_file(str(stack_file(project, stack)))
    return {**project.config, **stack_keys}


def stack_file(project: ProjectFile, stack: str) -> Path:
    path = project.stack_config_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project.stack_config_dir.glob("Pulumi.*.yaml"))
        raise ProgramError(f"stack {stack!r} has no {path}; fix: use one of {known}")
    return path


def run_program(project_dir: Path, stack: str) -> Recording:
    """Run the project's program for ``stack`` under mocks and return every registration."""
    project = load_project(project_dir)
    config = engine_config(project, stack)

    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    # A fresh root Stack per run: set_mocks keeps an existing one, which would put a
    # second program's stack (and its outputs) under the first program's URN.
    ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project.name, stack=stack, preview=True, monitor=monitor)
    pulumi.runtime.set_all_config(config)

    outputs: dict[str, Any] = {}
    main_dir = str(project.main.parent)

    async def capture_outputs() -> None:
        # `pulumi.export` stores Outputs on the root Stack; serialise them as the
        # engine records stack outputs (unknowns become the preview sentinel).
        stack_resource = get_root_resource()
        exported = dict(getattr(stack_resource, "outputs", {}) or {})
        struct = await rpc.serialize_properties(exported, {})
        outputs.update(json_format.MessageToDict(struct))

    def program() -> asyncio.Future[None]:
        sys.path.insert(0, main_dir)
        try:
            runpy.run_path(str(project.main), run_name="__main__")
        finally:
            if sys.path and sys.path[0] == main_dir:
                sys.path.pop(0)
        return asyncio.ensure_future(capture_outputs())

    # Pulumi runs a program in its project directory: relative paths in it (a Lambda zip's
    # FileArchive) mean the same here, wherever `spotgpu preview --program DIR` was started.
    before = os.getcwd()
    os.chdir(project_dir)
    try:
        pulumi.runtime.test(program)()
    except pulumi.RunError as err:
        raise ProgramError(str(err)) from None
    finally:
        os.chdir(before)
        pulumi.runtime.set_all_config({})
    return Recording(project.name, stack, monitor.recorded, outputs, config)
