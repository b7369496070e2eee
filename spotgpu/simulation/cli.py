"""``spotgpu simulate``: replay the spot traces for a job under the baselines and the controller's ladder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from spotgpu.catalogue import CLOUDS
from spotgpu.cliutil import STACK, Progress, add_deprecated_alias, add_json_flag, camel_keys, number, whole
from spotgpu.economics.cost import on_demand_baseline
from spotgpu.economics.estimate import (
    aligned_availability,
    aligned_counts,
    estimate_from_traces,
    gang_traces,
    probe_size,
)
from spotgpu.economics.inputs import CliError, guard, profile_and_ladder
from spotgpu.economics.interval import choose_interval
from spotgpu.economics.report import load_stack
from spotgpu.economics.topology import ZoneMapping, map_pool_zones
from spotgpu.economics.work_rate import pool_speeds, restate
from spotgpu.models import FallbackLadder, StepKind, WorkloadProfile, default_notice
from spotgpu.models.pool_types import pool_types
from spotgpu.models.pools import PoolSpec
from spotgpu.simulation.check import job_for
from spotgpu.simulation.compare import POLICY_NAMES, RENAMED_POLICIES, build_policies, compare, render_table, start_grid
from spotgpu.simulation.ladder import ControllerLadder, ladder_progress
from spotgpu.simulation.replay import Job
from spotgpu.traces import all_groups, load_group, trace_cloud


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
    # a tiered workload replays as the preview's check does (one function: check.job_for)
    return job_for(profile, decision.seconds, decision.tiers, **_job_overrides(profile, args)), decision.method


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
        profile, ladder = profile_and_ladder(args)
    else:
        raise CliError("give --profile PROFILE.yaml, or --stack S --pool P")
    groups = args.trace_group or all_groups()
    if not groups:
        raise CliError("no trace groups found; set SPOTGPU_TRACES to the availability folder")
    job, method = _job_for(profile, args, groups)
    for old in sorted({n for n in args.policy or () if n in RENAMED_POLICIES}):
        print(f"note: --policy {old} is now {RENAMED_POLICIES[old]} (the controller's {old} strategy is another "
              "policy); the old name goes in the next release", file=sys.stderr)
    names = [RENAMED_POLICIES.get(n, n) for n in args.policy] if args.policy else list(POLICY_NAMES)
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
        print(json.dumps(camel_keys(doc), indent=2, allow_nan=False))
    return 0


#: One line of a --plot panel: (label, hours since start, committed work hours).
Curve = tuple[str, np.ndarray, np.ndarray]


def _pool_traces(args: argparse.Namespace, pool: PoolSpec, traces: list[Any], group: str,
                 ladder: FallbackLadder) -> tuple[list[Any], ZoneMapping]:  # fmt: skip
    """The group's traces that stand in for the pool's zones (in the pool's order), and the mapping."""
    region = getattr(pool, "region", None) or getattr(pool, "subnet_region", None) or getattr(pool, "location", "")
    mapping = map_pool_zones(pool.name, str(region or ""), pool.zones, pool_types(pool), [t.zone for t in traces])
    if not mapping.trace_zones:
        raise CliError(f"trace group {group} has no zone to stand in for pool {pool.name}'s zones; pick another group")
    by_zone = {t.zone: t for t in traces}
    if not args.json:
        print("\n".join(mapping.lines(ladder.step(StepKind.ALTERNATE_SKU) is not None)))
        if trace_cloud(group) != pool.cloud:
            print(f"  no {pool.cloud} traces ship: {group} ({trace_cloud(group)}) stands in; the preview judges this "
                  "pool by the model only")  # fmt: skip
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
        traces, mapping = _pool_traces(args, pool, traces, group, ladder)
    probe = probe_size(traces[0])
    assumption = None if job.nodes <= probe else (
        f"the {group} traces probed {probe} instance(s): a zone that held the probe is taken to hold the gang of "
        f"{job.nodes}")  # fmt: skip
    if assumption and not args.json:
        print(f"note: {assumption} (docs/economics.md, Simulator)")
    traces = gang_traces(traces, job.nodes)
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
    policies = build_policies(names, ladder, args.fixed_wait_minutes * 60.0, profile.fallback_policy)
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
    baseline = on_demand_baseline(profile, job.interval_seconds, job.work_hours, job.nodes, job.checkpoint_write_seconds)
    doc = {"group": group, "zones": zones, "rows": [r.to_dict() for r in rows], "onDemandBaseline": baseline.to_dict(),
           "units": {"money": "USD", "capacity": "node-hours (spotNodeHours, onDemandNodeHours: each billed node)",
                     "job": "job-hours (lostWorkJobHours, idleJobHours: the job itself)",
                     "goodput": "the job's work node-hours over paid node-hours"}}
    if assumption:
        doc["gangAssumption"] = assumption
    if mapping is not None:
        doc["topology"] = mapping.to_dict()
    return doc, drawn


def baseline_line(profile: WorkloadProfile, job: Job, rows: list[Any]) -> str:
    """The replayed on-demand-only cost beside the cost model's baseline, the difference named."""
    b = on_demand_baseline(profile, job.interval_seconds, job.work_hours, job.nodes, job.checkpoint_write_seconds)
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


def _interval_flag(text: str) -> str:
    """``--interval``: auto, hazard or a whole number of seconds above 0, checked while parsing."""
    if text in ("auto", "hazard") or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not auto, hazard or a number of seconds; fix: e.g. --interval 1800")


def register(subparsers: Any) -> None:
    sim = subparsers.add_parser("simulate", help="replay spot traces for a job under several policies")
    sim.add_argument("--profile", help="WorkloadProfile as YAML or JSON (or --stack S --pool P)")
    sim.add_argument("--stack", type=STACK, help="replay pool --pool of this stack: its workload, ladder and own zones")
    sim.add_argument("--program", default=".", help="Pulumi project directory for --stack (default: .)")
    sim.add_argument("--pool", metavar="NAME", help="with --stack: the pool to replay")
    sim.add_argument("--ladder", help="FallbackLadder as YAML or JSON (default: a prod-like ladder)")
    sim.add_argument("--provider", choices=CLOUDS, default="aws",
                     help="cloud whose interruption notice the replay assumes (default aws)")  # fmt: skip
    sim.add_argument("--trace-group", action="append", metavar="GROUP",
                     help="trace group to replay, repeatable, e.g. 1-node/aws-02-15-2023 (default: all)")  # fmt: skip
    add_deprecated_alias(sim, "--group", "--trace-group")
    sim.add_argument("--home", help="home zone (default: every zone of the group, or of the pool, in turn)")
    sim.add_argument("--nodes", type=whole(1), help="override the profile's node count")
    sim.add_argument("--work-hours", type=number(0, above=True), help="override the profile's workHours")
    sim.add_argument(
        "--deadline-hours", type=number(0, above=True), help="override the profile's deadlineHours (default without one: 2x work)"
    )
    sim.add_argument("--policy", action="append", choices=(*POLICY_NAMES, *RENAMED_POLICIES), metavar="POLICY",
                     help=f"policies to run, repeatable: {', '.join(POLICY_NAMES)} (default: all)")  # fmt: skip
    sim.add_argument(
        "--interval", default="auto", type=_interval_flag,
        help="auto (Daly), hazard (Kaplan-Meier of the traces' spot runs) or seconds",
    )  # fmt: skip
    sim.add_argument("--fixed-wait-minutes", type=number(0), default=30.0,
                     help="wait of baseline-fixed-wait before it goes on-demand (default 30)")  # fmt: skip
    sim.add_argument("--start-every-hours", type=number(0, above=True), default=24.0,
                     help="hours between the replayed jobs' start offsets (default 24)")  # fmt: skip
    sim.add_argument("--max-starts", type=whole(1), default=None, help="cap start offsets per home zone")
    add_json_flag(sim, "the job and every group's per-policy rows instead of tables")
    sim.add_argument("--plot", metavar="FILE.png",
                     help="draw the first job's committed progress per policy, the ladder included, into FILE "
                          "(one panel per trace group; needs matplotlib)")  # fmt: skip
    sim.set_defaults(func=guard(cmd_simulate))
