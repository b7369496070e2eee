"""``spotgpu cost``: the cost model from a shell, for a profile file or a stack's pool.

It lives above the economics, beside ``simulate``: for a stack's pool it prints the preview's own
document, the model's bill and its check against the replay (:func:`spotgpu.simulation.check.checked_economics`),
and the economics import no simulation (``tests/foundation/test_layers.py``).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from spotgpu.catalogue import CLOUDS
from spotgpu.cliutil import PROBABILITY, STACK, add_deprecated_alias, add_json_flag, camel_keys, whole
from spotgpu.economics.cost import effective_cost
from spotgpu.economics.estimate import estimate_from_traces
from spotgpu.economics.fit import nest
from spotgpu.economics.inputs import CliError, guard, profile_and_ladder
from spotgpu.economics.interval import choose_interval
from spotgpu.economics.measured import fit_files, measured_profile
from spotgpu.economics.profile_cli import add_telemetry_args, telemetry_sources
from spotgpu.economics.report import (
    figure_origins,
    load_stack,
    render_economics,
    render_figures,
    render_hours,
    render_terms,
    tiers_line,
)
from spotgpu.economics.tiers import pool_joint_loss
from spotgpu.models import WorkloadProfile, default_notice
from spotgpu.traces import load_group


def cmd_cost_stack(args: argparse.Namespace) -> int:
    """``cost --stack S --pool P``: the pool's own prices, notice and ladder, and the model checked against the
    replay, by the preview's code path (``--no-replay`` skips the replay)."""
    from spotgpu.simulation.check import checked_economics  # numpy and the twin: only when a stack is priced

    if args.profile or args.ladder or args.telemetry or args.trace_group or args.sku:
        raise CliError("--stack prices a pool of the stack; leave out --profile, --ladder, --telemetry, --sku and "
                       "--trace-group (a stack takes measured figures from its workload's measuredProfile)")
    if not args.pool:
        raise CliError("--stack needs --pool NAME (the pool whose economics to show)")
    report, seconds = checked_economics(load_stack(args.stack, args.program), only=args.pool, replay=not args.no_replay)
    if args.json:  # the preview's pool document, byte for byte: the replay's time is not in it
        print(json.dumps(camel_keys(report["pools"][args.pool]), indent=2, sort_keys=True, allow_nan=False))
        return 0
    lines = render_economics(report).splitlines()
    jobs = report["pools"][args.pool]["replay"].get("jobs")
    if jobs:  # under the replay's line: what the check cost on this machine
        at = next(i for i, line in enumerate(lines) if line.startswith("      replay: ")) + 1
        lines.insert(at, f"      replay took {seconds:.2f} s ({jobs} jobs; --no-replay skips it)")
    print("\n".join(lines))
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    if args.stack:
        return cmd_cost_stack(args)
    if args.no_replay:
        raise CliError("--no-replay skips the replay check of --stack S --pool P; --profile prices the model alone "
                       "(leave --no-replay out)")
    if not args.profile:
        raise CliError("give --profile PROFILE.yaml, or --stack S --pool P")
    profile, ladder = profile_and_ladder(args)
    notice = default_notice(args.provider)
    hazard = None
    if args.trace_group:
        hazard = estimate_from_traces(load_group(args.trace_group), nodes=1).run_survival
    samples = None
    measured: dict[str, Any] = {}
    updates: dict[str, float] = {}
    why: dict[str, str] = {}
    if args.sku and not args.telemetry:
        raise CliError("--sku picks a spot price from the telemetry; add --telemetry PRICES.json (a price export)")
    if args.telemetry:
        fitted = fit_files(args.telemetry, args.pool, args.format, args.sku)
        profile = measured_profile(profile, fitted.fit)
        samples = fitted.fit.reacquisition_seconds or None
        updates, why = fitted.fit.profile_updates()
        measured = {"telemetry": {"files": list(args.telemetry), "measured": nest(updates), "notMeasured": nest(why),
                                  "notes": fitted.stats.notes}}  # fmt: skip
    joint = pool_joint_loss(profile, args.zones)  # a tiered workload: peers across zones when it spans them
    decision = choose_interval(profile, notice, hazard=hazard, joint_loss=joint)
    bill = effective_cost(profile, notice, ladder, interval=decision, notice_delivery_probability=args.notice_credit,
                          reacquisition_samples=samples)  # fmt: skip
    figures = profile_figures(profile, args.profile, telemetry_sources(fitted.fit, args.telemetry) if args.telemetry else {})
    doc = {"provider": args.provider, "interval": {"seconds": decision.seconds, "method": decision.method,
           "reasons": list(decision.reasons)}, **bill.to_dict(), **measured, "figures": figures}  # fmt: skip
    if decision.tiers is not None:
        doc["interval"]["tiers"] = decision.tiers.as_dict()
    if measured and not args.json:
        fields = ", ".join(f"{k} {v:g}" for k, v in updates.items()) or "none"
        print(f"measured from telemetry: {fields}")
        for k, v in why.items():
            print(f"  kept {k} from the profile: {v}")
        for note in measured["telemetry"]["notes"]:
            print(f"  - {note}")
    if args.json:
        print(json.dumps(camel_keys(doc), indent=2, sort_keys=True, allow_nan=False))
        return 0
    verdict = "SPOT-ELIGIBLE" if bill.spot_eligible else "NOT spot-eligible"
    print(f"{verdict} on {args.provider}: checkpoint every {decision.seconds} s ({decision.method})")
    if decision.tiers is not None:
        print(f"  {tiers_line(decision.tiers.as_dict())}")
    print("\n".join(render_figures(figures, indent="  ", prices=True)))
    print(f"  {'term':<24}{'USD':>11}  share")
    print("\n".join(render_terms(doc, indent="  ")))
    base = bill.details["onDemandBaseline"]
    print(f"  on-demand total is the work alone (W N on-demand); `spotgpu simulate`'s on-demand-only replay also "
          f"pays its checkpoint stalls ${base['checkpointStallUsd']:,.2f} and one start ${base['firstStartUsd']:,.2f}: "
          f"${base['replayedUsd']:,.2f}")  # fmt: skip
    if math.isfinite(bill.savings_fraction):
        print(f"  savings vs on-demand: {bill.savings_fraction:.1%}")
    if math.isfinite(bill.expected_interruptions):
        print(f"  expected interruptions {bill.expected_interruptions:.2f}, finish {bill.expected_finish_hours:.1f} h, "
              f"on-demand share {bill.on_demand_share:.1%}")  # fmt: skip
        print("  " + render_hours(bill.hours))
    else:
        print("  expected interruptions and finish: unbounded (the job does not finish on spot)")
    for reason in [*decision.reasons, *bill.reasons]:
        print(f"  - {reason}")
    return 0


def profile_figures(profile: WorkloadProfile, path: str, measured: dict[str, str]) -> dict[str, Any]:
    """Every figure ``cost --profile`` prices with and where it came from: the telemetry that measured it
    (``measured``: files and samples), a ``sources`` entry the file carries (a measured or fitted profile),
    the profile file's key (typed), or the model's default."""
    return nest(figure_origins(profile, lambda key: f"{path}: {key}", {**profile.sources, **measured}))


def register(subparsers: Any) -> None:
    cost = subparsers.add_parser("cost", help="effective spot cost of a workload profile, term by term")
    cost.add_argument("--profile", help="WorkloadProfile as YAML or JSON (camelCase keys)")
    cost.add_argument("--stack", type=STACK, help="price pool --pool of this stack as the preview does (its whole config: Pulumi.yaml's "
                           "project config under Pulumi.<stack>.yaml)")
    cost.add_argument("--program", default=".", help="Pulumi project directory for --stack (default: .)")
    cost.add_argument("--no-replay", action="store_true",
                      help="with --stack: skip the check of the model against the pool's ladder replayed on its "
                           "cloud's traces (about 0.7 s for the prod AWS pool)")  # fmt: skip
    cost.add_argument("--ladder", help="FallbackLadder as YAML or JSON (default: a prod-like ladder)")
    cost.add_argument("--provider", choices=CLOUDS, default="aws",
                      help="cloud whose interruption notice the model assumes (default aws)")  # fmt: skip
    add_json_flag(cost, "the cost terms and the chosen interval instead of a table")
    cost.add_argument(
        "--notice-credit", type=PROBABILITY, default=0.0, metavar="P",
        help="probability a notice arrives in time for a final checkpoint (default 0: no credit)",
    )  # fmt: skip
    cost.add_argument("--zones", type=whole(1), default=1,
                      help="zones the pool spans (checkpointTiers: 2 or more puts peer copies across zones)")
    cost.add_argument("--trace-group", metavar="GROUP", help="choose the interval by the hazard fitted to GROUP's traces")
    add_deprecated_alias(cost, "--hazard-traces", "--trace-group")
    add_telemetry_args(cost, required=False)
    cost.add_argument("--pool", metavar="NAME", help="with --stack: the pool to price; with --telemetry: fit only its records")
    cost.set_defaults(func=guard(cmd_cost))
