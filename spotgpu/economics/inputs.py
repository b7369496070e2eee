"""The economics commands' edge: profile and ladder files in, one line out on a mistake (exit 2).

``spotgpu cost``, ``spotgpu profile`` and ``spotgpu simulate`` read the same files the same way:
a YAML or JSON document validated by its model once, a ladder's ceilings checked against the
profile's prices, and any user mistake printed as one line naming the file, the field, the
value and the fix.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from spotgpu.config import format_error
from spotgpu.models import FallbackLadder, WorkloadProfile
from spotgpu.models.ladder import ceiling_far_above, default_ladder


class CliError(Exception):
    """A user mistake: printed as one line, exit code 2."""


def load_model(path: str, model: type[BaseModel], what: str) -> Any:
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{what} file {path} does not exist; pass a YAML or JSON file") from None
    except yaml.YAMLError as err:
        raise CliError(f"{what} file {path} is not YAML/JSON: {err}") from None
    if not isinstance(doc, dict):
        raise CliError(f"{what} file {path} must hold a mapping of {what} fields (camelCase keys)")
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        raise CliError(f"{path}: {format_error(err, what, model)}") from None


def profile_and_ladder(args: argparse.Namespace) -> tuple[WorkloadProfile, FallbackLadder]:
    profile: WorkloadProfile = load_model(args.profile, WorkloadProfile, "profile")
    if args.ladder:
        ladder: FallbackLadder = load_model(args.ladder, FallbackLadder, "ladder")
    else:
        ladder = default_ladder(profile.prices.spot_per_hour, profile.prices.on_demand)
    if ladder.per_work_hour and profile.gpu is None:
        raise CliError(f"{args.ladder}: a costCeilingPerWorkHour needs the profile's gpu block (gpusPerNode) to count "
                       f"work; fix: add gpu: {{gpusPerNode: N}} to {args.profile}, or state the ceilings per node-hour")
    for i, step in enumerate(ladder.steps):
        far = ceiling_far_above(step.ceiling, profile.prices.on_demand,
                                profile.work_per_node_hour() if step.per_work_hour else None)
        if far is not None:
            raise CliError(f"{args.ladder}: steps[{i}].{step.ceiling_key} {step.ceiling:g} {far[0]}; "
                           f"fix: {far[1]}")  # fmt: skip
    return profile, ladder


def guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (CliError, ValueError, FileNotFoundError) as err:
            print(f"spotgpu {args.command}: {err}", file=sys.stderr)
            return 2

    return run
