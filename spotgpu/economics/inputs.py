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

from spotgpu.catalogue import PriceQuote
from spotgpu.config import format_error
from spotgpu.models import FallbackLadder, WorkloadProfile
from spotgpu.models.base import FieldProblem
from spotgpu.models.ladder import default_ladder
from spotgpu.models.stack import ceiling_problem


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
    ladder_rules(profile, ladder, args.profile, args.ladder or "the default ladder")
    return profile, ladder


def ladder_rules(profile: WorkloadProfile, ladder: FallbackLadder, profile_file: str, ladder_file: str) -> None:
    """The stack check's ceiling rules (``spotgpu.models.stack.ceiling_problem``) for a profile and ladder file:
    a rung that could never run is an error here as it is in the preview, never a SPOT-ELIGIBLE verdict."""
    spot = profile.prices.spot_per_hour
    work = profile.work_per_node_hour()
    quote = PriceQuote(profile.prices.on_demand, f"{profile_file}: prices.onDemandPerHour")
    try:
        ceiling_problem(ladder, spot, f"{profile_file}: prices.spotPerHour", quote, profile,
                        lambda kind: (spot, work), work, f"profile {profile_file}", "steps")  # fmt: skip
    except FieldProblem as problem:
        raise CliError(f"{ladder_file}: {problem.at} {problem.value:g} {problem.what}; fix: {problem.fix}") from None


def guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (CliError, ValueError, FileNotFoundError) as err:
            print(f"spotgpu {args.command}: {err}", file=sys.stderr)
            return 2

    return run
