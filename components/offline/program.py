"""Execute a Pulumi Python program under the mock runtime, as the CLI would.

The program file is run with :func:`runpy.run_path` (what Pulumi's Python exec
shim does), after the stack's config is loaded into the runtime, so the very same
``stacks/__main__.py`` that ``pulumi up`` runs is what the preview records.
"""

from __future__ import annotations

import asyncio
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
        raise ProgramError(f"{project_dir}: no Pulumi.yaml; fix: point --program at a Pulumi project directory")
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
    return ProjectFile(
        name=str(doc["name"]),
        main=main,
        stack_config_dir=project_dir / doc.get("stackConfigDir", "."),
    )


def stack_file(project: ProjectFile, stack: str) -> Path:
    path = project.stack_config_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project.stack_config_dir.glob("Pulumi.*.yaml"))
        raise ProgramError(f"stack {stack!r} has no {path}; fix: use one of {known}")
    return path


def run_program(project_dir: Path, stack: str) -> Recording:
    """Run the project's program for ``stack`` under mocks and return every registration."""
    project = load_project(project_dir)
    _, engine_config = read_stack_file(str(stack_file(project, stack)))

    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    # A fresh root Stack per run: set_mocks keeps an existing one, which would put a
    # second program's stack (and its outputs) under the first program's URN.
    ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project.name, stack=stack, preview=True, monitor=monitor)
    pulumi.runtime.set_all_config(engine_config)

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

    try:
        pulumi.runtime.test(program)()
    except pulumi.RunError as err:
        raise ProgramError(str(err)) from None
    finally:
        pulumi.runtime.set_all_config({})
    return Recording(project.name, stack, monitor.recorded, outputs, engine_config)
