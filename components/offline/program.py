"""Execute a Pulumi Python program under the mock runtime, as the CLI would.

The program file is run with :func:`runpy.run_path` (what Pulumi's Python exec
shim does), after the stack's config is loaded into the runtime, so the very same
``stacks/__main__.py`` that ``pulumi up`` runs is what the preview records.
"""

from __future__ import annotations

import asyncio
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.settings import ROOT, get_root_resource

from spotgpu.project import Project
from spotgpu.project import engine_config as stack_engine_config
from spotgpu.project import load_project as read_project
from spotgpu_pulumi.offline.mocks import RecordedResource, RecordingMocks, RecordingMonitor


class ProgramError(RuntimeError):
    """The program failed; the message is what the user should read."""


@dataclass
class Recording:
    project: str
    stack: str
    resources: list[RecordedResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProjectFile:
    """A project the preview can run: :class:`spotgpu.project.Project` plus its Python program."""

    project: Project
    main: Path

    @property
    def name(self) -> str:
        return self.project.name

    @property
    def config(self) -> dict[str, str]:
        return self.project.config


def load_project(project_dir: Path) -> ProjectFile:
    """The project (read by :func:`spotgpu.project.load_project`, the one reader) and its program file."""
    project = read_project(project_dir)
    if project.runtime != "python":
        raise ProgramError(f"{project.path}: runtime is {project.runtime!r}; only Python programs can be previewed offline")
    main = project.root / project.main
    if main.is_dir():
        main = main / "__main__.py"
    if not main.exists():
        raise ProgramError(f"{project.path}: main program {main} does not exist")
    return ProjectFile(project, main)


def engine_config(project: ProjectFile, stack: str) -> dict[str, str]:
    """The config the engine hands the program (:func:`spotgpu.project.engine_config`)."""
    return stack_engine_config(project.project, stack)


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
