"""``spotgpu cost`` and ``spotgpu simulate``: the cost model and the trace replay from a shell."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from spotgpu.cliutil import Progress, add_deprecated_alias, add_json_flag, camel_keys
from spotgpu.config import format_error
from spotgpu.economics.compare import (
    POLICY_NAMES,
    build_policies,
    compare,
    default_ladder,
    render_table,
    start_grid,
)
from spotgpu.economics.cost import effective_cost, on_demand_baseline
from spotgpu.economics.estimate import aligned_availability, aligned_counts, estimate_from_traces
from spotgpu.economics.interval import choose_interval
from spotgpu.economics.measured import fit_files, measured_profile
from spotgpu.economics.report import load_stack, render_economics, render_terms, stack_economics
from spotgpu.economics.simulator import Job
from spotgpu.economics.topology import ZoneMapping, map_pool_zones
from spotgpu.economics.twin_ladder import ControllerLadder, ladder_progress
from spotgpu.economics.work_rate import pool_speeds, restate
from spotgpu.models import FallbackLadder, WorkloadProfile, default_notice
from spotgpu.models.ladder import ceiling_far_above
from spotgpu.models.pools import PoolSpec
from spotgpu.models.stack import pool_types
from spotgpu.traces import all_groups, load_group


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


def _profile_and_ladder(args: argparse.Namespace) -> tuple[WorkloadProfile, FallbackLadder]:
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


def cmd_cost_stack(args: argparse.Namespace) -> int:
    """``cost --stack S --pool P``: the pool's own prices, notice and ladder, by the preview's code path."""
    if args.profile or args.ladder or args.telemetry or args.trace_group:
        raise CliError("--stack prices a pool of the stack; leave out --profile, --ladder, --telemetry and --trace-group")
    if not args.pool:
        raise CliError("--stack needs --pool NAME (the pool whose economics to show)")
    report = stack_economics(load_stack(args.stack, args.program), only=args.pool)
    if args.json:
        print(json.dumps(camel_keys(report["pools"][args.pool], legacy=True), indent=2, sort_keys=True, allow_nan=False))
    else:
        print(render_economics(report))
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    if args.stack:
        return cmd_cost_stack(args)
    if not args.profile:
        raise CliError("give --profile PROFILE.yaml, or --stack S --pool P")
    profile, ladder = _profile_and_ladder(args)
    notice = default_notice(args.provider)
    hazard = None
    if args.trace_group:
        hazard = estimate_from_traces(load_group(args.trace_group), nodes=1).run_survival
    samples = None
    measured: dict[str, Any] = {}
    if args.telemetry:
        fitted = fit_files(args.telemetry, args.pool, args.format)
        profile = measured_profile(profile, fitted.fit)
        samples = fitted.fit.reacquisition_seconds or None
        updates, why = fitted.fit.profile_updates()
        measured = {"telemetry": {"files": list(args.telemetry), "measured": updates, "notMeasured": why}}
    decision = choose_interval(profile, notice, hazard=hazard)
    bill = effective_cost(profile, notice, ladder, interval=decision, notice_delivery_probability=args.notice_credit,
                          reacquisition_samples=samples)  # fmt: skip
    doc = {"provider": args.provider, "interval": {"seconds": decision.seconds, "method": decision.method,
           "reasons": list(decision.reasons)}, **bill.to_dict(), **measured}  # fmt: skip
    if measured and not args.json:
        fields = ", ".join(f"{k} {v:g}" for k, v in measured["telemetry"]["measured"].items()) or "none"
        print(f"measured from telemetry: {fields}")
        for k, v in measured["telemetry"]["notMeasured"].items():
            print(f"  kept {k} from the profile: {v}")
    if args.json:
        print(json.dumps(camel_keys(doc, legacy=True), indent=2, sort_keys=True, allow_nan=False))
        return 0
    verdict = "SPOT-ELIGIBLE" if bill.spot_eligible else "NOT spot-eligible"
    print(f"{verdict} on {args.provider}: checkpoint every {decision.seconds} s ({decision.method})")
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
    else:
        print("  expected interruptions and finish: unbounded (the job does not finish on spot)")
    for reason in [*decision.reasons, *bill.reasons]:
        print(f"  - {reason}")
    return 0


def _job_for(profile: WorkloadProfile, args: argparse.Namespace, groups: list[str]) -> tuple[Job, str]:
    notice = default_notice(args.provider)
    if args.interval == "auto":
        decision = choose_interval(profile, notice)
    elif args.interval == "hazard":
        traces = load_group(groups[0])  # fitted to the first group's zones
        decision = choose_interval(profile, notice, hazard=estimate_from_traces(traces, nodes=1).run_survival)
    else:
        try:
            seconds = int(args.interval)
        except ValueError:
            raise CliError(f"--interval {args.interval!r} is invalid; use auto, hazard or seconds") from None
        if seconds <= profile.checkpoint_write_seconds:
            raise CliError(
                f"--interval {seconds} must exceed checkpointWriteSeconds {profile.checkpoint_write_seconds:g}"
            )
        return Job.from_profile(profile, seconds, **_job_overrides(profile, args)), "given"
    return Job.from_profile(profile, decision.seconds, **_job_overrides(profile, args)), decision.method


def _job_overrides(profile: WorkloadProfile, args: argparse.Namespace) -> dict[str, Any]:
    """Command-line replacements for the profile's job shape (all optional)."""
    out: dict[str, Any] = {"nodes": args.nodes or profile.nodes}
    if args.work_hours is not None:
        out["work_hours"] = args.work_hours
    if args.deadline_hours is not None:
        out["deadline_hours"] = args.deadline_hours
    elif profile.deadline_hours is None:
        out["deadline_hours"] = 2.0 * (args.work_hours or profile.work_hours)
    return out


def _stack_pool(args: argparse.Namespace) -> tuple[WorkloadProfile, FallbackLadder, PoolSpec]:
    """``--stack S --pool P``: the pool's own workload (priced for it), ladder and cloud."""
    if args.profile or args.ladder:
        raise CliError("--stack replays a pool of the stack with its own workload and ladder; "
                       "leave out --profile and --ladder")  # fmt: skip
    if not args.pool:
        raise CliError("--stack needs --pool NAME (the pool to replay)")
    config = load_stack(args.stack, args.program)
    pool = next((p for p in config.pools if p.name == args.pool), None)
    if pool is None:
        names = ", ".join(p.name for p in config.pools)
        raise CliError(f"--pool {args.pool!r} is not a pool of stack {args.stack}; use one of {names}")
    args.provider = pool.cloud
    workload = config.workload_for(pool)
    speeds = pool_speeds(pool, workload)
    if not speeds.neutral and not args.json:  # the same restatement the preview and `cost --stack` price
        print(f"speeds: {speeds.describe()}; replayed in hours of {speeds.spot_type}")
    priced, ladder = restate(workload, config.ladder_for(pool), speeds)
    return priced, ladder, pool


def cmd_simulate(args: argparse.Namespace) -> int:
    pool: PoolSpec | None = None
    if args.stack:
        profile, ladder, pool = _stack_pool(args)
    elif args.profile:
        if args.pool:
            raise CliError("--pool goes with --stack S (the stack that defines the pool)")
        profile, ladder = _profile_and_ladder(args)
    else:
        raise CliError("give --profile PROFILE.yaml, or --stack S --pool P")
    groups = args.trace_group or all_groups()
    if not groups:
        raise CliError("no trace groups found; set SPOTGPU_TRACES to the availability folder")
    job, method = _job_for(profile, args, groups)
    names = args.policy or list(POLICY_NAMES)
    results: list[dict[str, Any]] = []
    curves: list[tuple[str, list[Curve]]] = []
    with Progress("replaying") as progress:
        for index, group in enumerate(groups):
            progress.update(f"{index + 1}/{len(groups)} {group}")
            doc, drawn = _simulate_group(args, profile, job, method, names, ladder, group, pool)
            results.append(doc)
            curves.append((group, drawn))
    if args.plot:
        written = _plot(curves, job, Path(args.plot))
        print(f"wrote {written}", file=sys.stderr)
    if args.json:
        doc = {"job": job.__dict__, "intervalMethod": method, "groups": results}
        print(json.dumps(camel_keys(doc, legacy=True), indent=2, allow_nan=False))
    return 0


#: One line of a --plot panel: (label, hours since start, committed work hours).
Curve = tuple[str, np.ndarray, np.ndarray]


def _pool_traces(args: argparse.Namespace, pool: PoolSpec, traces: list[Any], group: str) -> tuple[list[Any], ZoneMapping]:
    """The group's traces that stand in for the pool's zones (in the pool's order), and the mapping."""
    region = getattr(pool, "region", None) or getattr(pool, "subnet_region", None) or getattr(pool, "location", "")
    mapping = map_pool_zones(pool.name, str(region or ""), pool.zones, pool_types(pool), [t.zone for t in traces])
    if not mapping.trace_zones:
        raise CliError(f"trace group {group} has no zone to stand in for pool {pool.name}'s zones; pick another group")
    by_zone = {t.zone: t for t in traces}
    if not args.json:
        print("\n".join(mapping.lines()))
    return [by_zone[z] for z in mapping.trace_zones], mapping


def _simulate_group(
    args: argparse.Namespace, profile: WorkloadProfile, job: Job, method: str, names: list[str],
    ladder: FallbackLadder, group: str, pool: PoolSpec | None,
) -> tuple[dict[str, Any], list[Curve]]:  # fmt: skip
    """Replay one trace group under every policy; print its table unless ``--json``.

    With a pool, only the traced zones standing in for its own zones are replayed (the ladder
    can move only there), and ``--home`` names one of the pool's zones."""
    traces = load_group(group)
    mapping: ZoneMapping | None = None
    if pool is not None:
        traces, mapping = _pool_traces(args, pool, traces, group)
    avail = aligned_availability(traces, job.nodes)
    gap = traces[0].gap_seconds
    if not avail.any():
        print(
            f"note: no zone of {group} ever holds {job.nodes} instance(s), so spot is never available there; "
            "pass --nodes to replay a smaller gang",
            file=sys.stderr,
        )
    starts = start_grid(avail.shape[1], gap, 2 * job.deadline_hours, args.start_every_hours)[: args.max_starts]
    zones = [t.zone for t in traces]
    home_idx = list(range(len(zones)))
    if args.home and mapping is not None:
        if args.home not in mapping.traced:
            raise CliError(f"--home {args.home!r} is not a replayed zone of pool {mapping.pool}; "
                           f"use one of {', '.join(mapping.traced)}")  # fmt: skip
        home_idx = [zones.index(mapping.traced[args.home])]
    elif args.home:
        if args.home not in zones:
            raise CliError(f"--home {args.home!r} is not a zone of {group}; use one of {', '.join(zones)}")
        home_idx = [zones.index(args.home)]
    st = np.tile(starts, len(home_idx))
    homes = np.repeat(np.array(home_idx, dtype=np.int64), len(starts))
    policies = build_policies(names, ladder, args.fixed_wait_minutes * 60.0)
    rows, replays = compare(
        job, avail, gap, st, homes, policies, record_progress=bool(args.plot), counts=aligned_counts(traces), zones=zones
    )
    if not args.json:
        print(
            f"{group}: {len(st)} jobs ({job.work_hours:g} h work, {job.deadline_hours:g} h deadline, "
            f"{job.nodes} node(s), checkpoint every {job.interval_seconds:g} s [{method}])"
        )
        print(render_table(rows))
        print(baseline_line(profile, job, rows))
        print()
    drawn: list[Curve] = []
    if args.plot:
        for r in replays:
            if r.progress is not None:
                drawn.append((r.policy, np.arange(1, r.progress.shape[0] + 1) * r.gap_seconds / 3600.0, r.progress[:, 0]))
        for policy in policies:
            if isinstance(policy, ControllerLadder):
                hours, work = ladder_progress(policy, job, aligned_counts(traces), gap, int(st[0]), int(homes[0]), zones)
                drawn.append((policy.name, hours, work))
    baseline = on_demand_baseline(profile, job.interval_seconds, job.work_hours, job.nodes)
    doc = {"group": group, "zones": zones, "rows": [r.to_dict() for r in rows], "onDemandBaseline": baseline.to_dict()}
    if mapping is not None:
        doc["topology"] = mapping.to_dict()
    return doc, drawn


def baseline_line(profile: WorkloadProfile, job: Job, rows: list[Any]) -> str:
    """The replayed on-demand-only cost beside the cost model's baseline, the difference named."""
    b = on_demand_baseline(profile, job.interval_seconds, job.work_hours, job.nodes)
    replayed = next((r.mean_cost_usd for r in rows if r.policy == "on-demand only"), None)
    seen = "" if replayed is None else f" (replayed here: ${replayed:,.2f})"
    return (f"on-demand baseline: `spotgpu cost`'s on-demand total ${b.compute_usd:,.2f} (the work alone) + "
            f"checkpoint stalls ${b.checkpoint_stall_usd:,.2f} + one start ${b.first_start_usd:,.2f} = "
            f"${b.replayed_usd:,.2f}{seen}")  # fmt: skip


def _plot(curves: list[tuple[str, list[Curve]]], job: Job, path: Path) -> Path:
    """One figure, one panel per trace group, written to exactly ``path`` (returned)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CliError("--plot needs matplotlib; fix: pip install 'spotgpu[plot]'") from None
    fig, axes = plt.subplots(len(curves), 1, figsize=(8, 4.5 * len(curves)), squeeze=False)
    for ax, (group, drawn) in zip(axes[:, 0], curves, strict=True):
        for label, hours, work in drawn:
            ax.plot(hours, work, label=label)  # the ladder's points are the twin's ticks, joined by lines
        ax.plot([0, job.deadline_hours], [0, job.work_hours], ls=":", color="grey", label="uniform progress line")
        ax.axvline(job.deadline_hours, color="red", ls="--", label="deadline")
        ax.set_xlabel("hours since start")
        ax.set_ylabel("committed work (hours)")
        ax.set_title(f"{group}, first job ({job.work_hours:g} h work)")
        ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (CliError, ValueError, FileNotFoundError) as err:
            print(f"spotgpu {args.command}: {err}", file=sys.stderr)
            return 2

    return run


def register(subparsers: Any) -> None:
    from spotgpu.economics.profile_cli import add_telemetry_args

    cost = subparsers.add_parser("cost", help="effective spot cost of a workload profile, term by term")
    cost.add_argument("--profile", help="WorkloadProfile as YAML or JSON (camelCase keys)")
    cost.add_argument("--stack", help="price pool --pool of this stack (Pulumi.<stack>.yaml) as the preview does")
    cost.add_argument("--program", default=".", help="Pulumi project directory for --stack (default: .)")
    cost.add_argument("--ladder", help="FallbackLadder as YAML or JSON (default: a prod-like ladder)")
    cost.add_argument("--provider", choices=("aws", "gcp", "azure"), default="aws",
                      help="cloud whose interruption notice the model assumes (default aws)")  # fmt: skip
    add_json_flag(cost, "the cost terms and the chosen interval instead of a table")
    cost.add_argument(
        "--notice-credit", type=float, default=0.0, metavar="P",
        help="probability a notice arrives in time for a final checkpoint (default 0: no credit)",
    )  # fmt: skip
    cost.add_argument("--trace-group", metavar="GROUP", help="choose the interval by the hazard fitted to GROUP's traces")
    add_deprecated_alias(cost, "--hazard-traces", "--trace-group")
    add_telemetry_args(cost, required=False)
    cost.add_argument("--pool", metavar="NAME", help="with --stack: the pool to price; with --telemetry: fit only its records")
    cost.set_defaults(func=guard(cmd_cost))

    sim = subparsers.add_parser("simulate", help="replay spot traces for a job under several policies")
    sim.add_argument("--profile", help="WorkloadProfile as YAML or JSON (or --stack S --pool P)")
    sim.add_argument("--stack", help="replay pool --pool of this stack: its workload, ladder and own zones")
    sim.add_argument("--program", default=".", help="Pulumi project directory for --stack (default: .)")
    sim.add_argument("--pool", metavar="NAME", help="with --stack: the pool to replay")
    sim.add_argument("--ladder", help="FallbackLadder as YAML or JSON (default: a prod-like ladder)")
    sim.add_argument("--provider", choices=("aws", "gcp", "azure"), default="aws",
                     help="cloud whose interruption notice the replay assumes (default aws)")  # fmt: skip
    sim.add_argument("--trace-group", action="append", metavar="GROUP",
                     help="trace group to replay, repeatable, e.g. 1-node/aws-02-15-2023 (default: all)")  # fmt: skip
    add_deprecated_alias(sim, "--group", "--trace-group")
    sim.add_argument("--home", help="home zone (default: every zone of the group, or of the pool, in turn)")
    sim.add_argument("--nodes", type=int, help="override the profile's node count")
    sim.add_argument("--work-hours", type=float, help="override the profile's workHours")
    sim.add_argument(
        "--deadline-hours", type=float, help="override the profile's deadlineHours (default without one: 2x work)"
    )
    sim.add_argument("--policy", action="append", choices=POLICY_NAMES, help="policies to run (default: all)")
    sim.add_argument(
        "--interval", default="auto", help="auto (Daly), hazard (Kaplan-Meier of the traces' spot runs) or seconds"
    )
    sim.add_argument("--fixed-wait-minutes", type=float, default=30.0,
                     help="wait of the fixed-wait policy before it goes on-demand (default 30)")  # fmt: skip
    sim.add_argument("--start-every-hours", type=float, default=24.0,
                     help="hours between the replayed jobs' start offsets (default 24)")  # fmt: skip
    sim.add_argument("--max-starts", type=int, default=None, help="cap start offsets per home zone")
    add_json_flag(sim, "the job and every group's per-policy rows instead of tables")
    sim.add_argument("--plot", metavar="FILE.png",
                     help="draw the first job's committed progress per policy, the ladder included, into FILE "
                          "(one panel per trace group; needs matplotlib)")  # fmt: skip
    sim.set_defaults(func=guard(cmd_simulate))
