"""``spotgpu preview``: registered into the spotgpu CLI when the Pulumi extra is installed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pulumi  # noqa: F401  # the [pulumi] extra: without it `spotgpu preview` says which extra to install

from spotgpu.cliutil import STACK, Progress
from spotgpu_pulumi.offline.pack import default_policy_pack

if TYPE_CHECKING:
    from spotgpu_pulumi.clouds import StackPlan


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "preview",
        help="offline preview of a stack: resource tree, policy verdicts, economics",
        description="Run a Pulumi Python program under Pulumi's mock runtime (no CLI, no cloud) "
        "and judge it with the policy pack.",
    )
    p.add_argument("--stack", "-s", required=True, type=STACK, help="stack name (reads Pulumi.<stack>.yaml)")
    p.add_argument(
        "--program",
        type=Path,
        default=None,
        help="Pulumi project directory, where Pulumi.yaml is (default: the current directory)",
    )
    p.add_argument("--policy-pack", type=Path, default=default_policy_pack(), help="policy pack directory")
    p.add_argument(
        "--policy-config",
        type=Path,
        default=None,
        help="policy config JSON (default: policy-config.json next to Pulumi.yaml, if any)",
    )
    p.add_argument("--no-policy", action="store_true", help="skip the policy pack")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=run)


def default_program(cwd: Path | None = None) -> Path:
    """What ``pulumi preview`` uses: the current directory. Never another project (the package's own
    stack, say): outside a project the preview says it found no Pulumi.yaml and how to point at one."""
    return (cwd or Path.cwd()).resolve()


def check_config(program: Path, stack: str) -> StackPlan | None:
    """Validate and plan the stack's spotgpu config before any Pulumi machinery runs; the plans, which
    the program then builds from (:func:`~spotgpu_pulumi.clouds.reuse_plans`).

    Raises :class:`~spotgpu.config.ConfigError` (one line) for every YAML, config,
    model or plan problem. Projects that carry no ``spotgpu:`` keys (a raw program
    under another namespace) are left to the program itself (None).
    """
    from spotgpu_pulumi.offline.program import engine_config, load_project
    from spotgpu_pulumi.offline.validate import plan_engine_config

    project = load_project(program)
    engine = engine_config(project, stack)
    namespace = "spotgpu"
    if project.name == namespace or any(k.startswith(f"{namespace}:") for k in engine):
        return plan_engine_config(engine, namespace, str(program))
    return None


def run(args: argparse.Namespace) -> int:
    """Exit 0: clean; 1: a mandatory policy violation, only; 2: any config, YAML, model or plan error."""
    from spotgpu.config import ConfigError
    from spotgpu_pulumi.offline.preview import render_text, run_preview, to_document
    from spotgpu_pulumi.offline.program import ProgramError

    program = (args.program or default_program()).resolve()
    policy_pack = None if args.no_policy else args.policy_pack
    if policy_pack is not None and not (policy_pack / "PulumiPolicy.yaml").exists():
        print(f"spotgpu preview: --policy-pack {policy_pack} has no PulumiPolicy.yaml; fix: point it at a policy pack", file=sys.stderr)
        return 2
    policy_config = args.policy_config
    if policy_config is None and (program / "policy-config.json").exists():
        policy_config = program / "policy-config.json"
    try:
        stack_plan = check_config(program, args.stack)
        with Progress(f"previewing {args.stack}"):  # stderr, terminal only: the mock run takes seconds
            result = run_preview(program, args.stack, policy_pack, policy_config, stack_plan)
    except (ProgramError, ConfigError) as err:
        print(f"spotgpu preview: {_one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:  # a bug in the program: still exit 2, never 1 (1 means a mandatory violation)
        if os.environ.get("SPOTGPU_TRACEBACK"):
            raise
        print(f"spotgpu preview: the program failed: {type(err).__name__}: {_one_line(err)}; fix: correct the "
              "program (set SPOTGPU_TRACEBACK=1 to see the traceback)", file=sys.stderr)
        return 2
    if args.json:
        json.dump(to_document(result), sys.stdout, indent=1, sort_keys=False)
        sys.stdout.write("\n")
    else:
        print(render_text(result))
    if result.mandatory:
        print(f"spotgpu preview: {len(result.mandatory)} mandatory policy violation(s)", file=sys.stderr)
        return 1
    return 0


def _one_line(err: Exception) -> str:
    """The first line of an error: a config error is one line already; a program error may not be."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
