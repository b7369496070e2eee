"""``spotgpu profile fit``: the measured profile from the fleet's telemetry, and what it changes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from spotgpu.catalogue import CLOUDS
from spotgpu.catalogue.names import region_of
from spotgpu.cliutil import add_json_flag, whole
from spotgpu.economics.inputs import guard, load_model
from spotgpu.economics.measured import field_diff, fit_files, measured_profile, verdict_change
from spotgpu.economics.report import load_stack
from spotgpu.economics.telemetry_files import FORMATS
from spotgpu.economics.topology import map_pool_zones
from spotgpu.economics.trace_fit import fit_group, read_trace_dir, render_trace_fit
from spotgpu.models import FallbackLadder, WorkloadProfile, default_notice
from spotgpu.models.ladder import default_ladder


def cmd_fit(args: argparse.Namespace) -> int:
    if args.traces:
        return cmd_fit_traces(args)
    if not args.telemetry:
        raise ValueError("give --telemetry LOGS... (the fleet's logs) or --traces DIR (availability traces)")
    for flag in ("stack", "zones", "nodes"):
        if getattr(args, flag):
            raise ValueError(f"--{flag} goes with --traces DIR (it picks the traced zones and gang); with --telemetry "
                             "use --pool NAME to fit one pool's records")  # fmt: skip
    base: WorkloadProfile | None = load_model(args.profile, WorkloadProfile, "profile") if args.profile else None
    fitted = fit_files(args.telemetry, args.pool, args.format, args.sku)
    fit = fitted.fit
    doc: dict[str, Any] = {
        "read": {"lines": fitted.stats.lines, "records": fitted.stats.records,
                 "skipped": dict(sorted(fitted.stats.skipped.items())), "notes": fitted.stats.notes},
        **fit.to_dict(base),
    }
    if base is not None:
        ladder: FallbackLadder = (
            load_model(args.ladder, FallbackLadder, "ladder") if args.ladder
            else default_ladder(base.prices.spot_per_hour, base.prices.on_demand)
        )  # fmt: skip
        measured = measured_profile(base, fit)
        provider = args.provider or (fit.providers[0] if len(fit.providers) == 1 else "aws")
        notice = default_notice(provider)  # type: ignore[arg-type]  # a provider the schema validated
        doc["diff"] = field_diff(base, fit)
        doc["verdict"] = {"provider": provider, **verdict_change(base, measured, notice, ladder, fit)}
        if args.out:
            sources = {**base.sources, **telemetry_sources(fit, args.telemetry)}
            dumped = measured.model_copy(update={"sources": sources})
            Path(args.out).write_text(
                "# measured by `spotgpu profile fit` from: " + ", ".join(args.telemetry) + "\n"
                + _yaml(dumped.model_dump(by_alias=True, exclude_none=True, exclude={"measured_profile"})), encoding="utf-8")  # fmt: skip
            print(f"wrote {args.out}", file=sys.stderr)
    elif args.out:
        raise ValueError("--out needs --profile: a measured profile is the base profile with the measured figures laid over it")
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True, allow_nan=False))
    else:
        print("\n".join(render_fit(doc)))
    return 0


def cmd_fit_traces(args: argparse.Namespace) -> int:
    """``profile fit --traces DIR``: interruptions and reacquisition waits per zone and type, and pooled over
    the zones a pool may use (``--zones``, or ``--stack S --pool P``: the traced zones standing in for the
    pool's, as ``simulate --stack`` maps them, at its workload's nodes)."""
    if args.telemetry or args.sku:
        raise ValueError("--traces fits availability traces; leave out --telemetry and --sku (fit them apart)")
    groups = read_trace_dir(args.traces)
    zones = [z for z in (args.zones or "").split(",") if z]
    nodes, base = args.nodes, None
    if args.stack:
        if not args.pool:
            raise ValueError("--stack needs --pool NAME (the pool whose zones and gang to fit)")
        if zones or args.profile:
            raise ValueError("--stack --pool takes the pool's zones and workload; leave out --zones and --profile")
        config = load_stack(args.stack, args.program)
        pool = next((p for p in config.pools if p.name == args.pool), None)
        if pool is None:
            raise ValueError(f"--pool {args.pool!r} is not a pool of stack {args.stack}; use one of "
                             f"{', '.join(p.name for p in config.pools)}")  # fmt: skip
        # the stack's workload, its on-demand price resolved for the pool (a profile file must carry one)
        typed = config.workloads[pool.workload]
        base = typed.model_copy(update={"prices": typed.prices.model_copy(
            update={"on_demand_per_hour": config.workload_for(pool).prices.on_demand})})
        nodes = nodes or base.nodes
    elif args.pool:
        raise ValueError("--pool goes with --stack S (with --traces) or --telemetry (the pool's records)")
    elif args.profile:
        base = load_model(args.profile, WorkloadProfile, "profile")
        nodes = nodes or base.nodes
    docs = []
    fits = []
    for traces in groups:
        chosen = zones
        if args.stack:
            chosen = _pool_trace_zones(pool, traces)
            if not chosen:
                continue  # no zone of the pool's region in this group
        elif zones and not {t.zone for t in traces} & set(zones):
            continue
        fit = fit_group(traces, nodes or 1, chosen or None, root=str(args.traces))
        fits.append(fit)
        docs.append(fit.to_dict())
    if not docs:
        raise ValueError(f"--traces {args.traces}: no trace group holds the zones asked for; fix: name zones the "
                         "traces hold (--zones) or a group of the pool's region")  # fmt: skip
    doc: dict[str, Any] = {"groups": docs}
    if args.out:
        if base is None:
            raise ValueError("--out needs --profile BASE.yaml or --stack S --pool P: a measured profile is a base "
                             "profile with the fitted figures laid over it")  # fmt: skip
        if len(fits) > 1:
            raise ValueError(f"--out: {len(fits)} trace groups fit; fix: point --traces at one group folder")
        updates, sources = fits[0].profile_updates()
        fitted = WorkloadProfile.model_validate({**base.model_dump(by_alias=True, exclude_none=True,
                                                                   exclude={"measured_profile"}),
                                                 **updates, "sources": {**base.sources, **sources}})  # fmt: skip
        Path(args.out).write_text(
            f"# fitted by `spotgpu profile fit --traces {args.traces}` ({fits[0].where()})\n"
            + _yaml(fitted.model_dump(by_alias=True, exclude_none=True, exclude={"measured_profile"})), encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True, allow_nan=False))
    else:
        print("\n\n".join("\n".join(render_trace_fit(d)) for d in docs))
    return 0


def _pool_trace_zones(pool: Any, traces: list[Any]) -> list[str]:
    """The traced zones standing in for ``pool``'s zones (``simulate --stack``'s mapping), if the group holds
    its region."""
    from spotgpu.models.pool_types import pool_region, pool_types

    region = pool_region(pool)
    mapping = map_pool_zones(pool.name, region, pool.zones, pool_types(pool), [t.zone for t in traces])
    return mapping.trace_zones if any(region_of(z) == region for z in mapping.trace_zones) else []


def telemetry_sources(fit: Any, files: list[str]) -> dict[str, str]:
    """The ``sources`` line of each figure the telemetry measured: the files and the samples behind it."""
    updates, _ = fit.profile_updates()
    where = f"telemetry {', '.join(files)}"
    rate = fit.pool_rate()
    samples = {
        "interruptionsPerHour": f"{rate.interruptions} interruptions in {rate.node_hours:.1f} spot node-hours" if rate else "",
        "expectedReacquisitionSeconds": f"mean of {len(fit.reacquisition_seconds)} latencies",
        "checkpointWriteSeconds": f"p90 of {len(fit.checkpoint_write_seconds)} writes",
        "checkpointLoadSeconds": f"p90 of {len(fit.checkpoint_load_seconds)} loads",
        "restartSeconds": f"p90 of {len(fit.boot_to_ready_seconds)} boots",
        "checkpointBytes": f"largest of {len(fit.checkpoint_bytes)} checkpoints",
        "prices.spotPerHour": fit.spot_price()[1],
    }
    return {k: f"measured: {samples.get(k, '')}; {where}" for k in updates}


def _yaml(doc: dict[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump(doc, sort_keys=False))


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float | int) else str(value)


def render_fit(doc: dict[str, Any]) -> list[str]:
    read = doc["read"]
    skipped = ", ".join(f"{n} {k}" for k, n in read["skipped"].items()) or "none"
    out = [f"read {read['lines']} lines: {read['records']} records; skipped (not used by the fit): {skipped}",
           *(f"  - {note}" for note in read["notes"]), "interruptions per spot node-hour:"]  # fmt: skip
    for c in doc["interruptions"]:
        rate = "-" if c["perNodeHour"] is None else f"{c['perNodeHour']:.4g}/h"
        interval = "" if not c["interval"] else f"  [{c['interval'][0]:.4g}, {c['interval'][1]:.4g}] at {c['confidence']:.0%}"
        out.append(f"  {c['slice']:<40} {rate:>10}  ({c['interruptions']} in {c['spotNodeHours']:.2f} node-h){interval}")
        if "note" in c:
            out.append(f"    - {c['note']}")
    if doc["lostWithoutLifetime"]:
        out.append(f"  losses of VMs with no lifetime in the logs (not in the rates): {doc['lostWithoutLifetime']}")
    for name, key in (("reacquisition latency s", "reacquisitionSeconds"), ("checkpoint write s", "checkpointWriteSeconds"),
                      ("checkpoint load s", "checkpointLoadSeconds"), ("checkpoint bytes", "checkpointBytes"),
                      ("boot to ready s", "bootToReadySeconds")):  # fmt: skip
        out.append(_summary_line(name, doc[key]))
    for kind, s in doc["noticeLeadSeconds"].items():
        out.append(_summary_line(f"notice lead s ({kind})", s))
    fails = doc["launchFailures"]["byReason"]
    out.append(f"launch failures by reason: {', '.join(f'{k} {v}' for k, v in sorted(fails.items())) or 'none'}")
    out.extend(render_speeds(doc["gpuSpeeds"]))
    out.extend(render_prices(doc["spotPrices"]))
    if "diff" in doc:
        out.append("measured vs base profile:")
        for row in doc["diff"]:
            change = "" if row["change"] is None else f" ({row['change']:+.0%})"
            note = f"  - {row['note']}" if "note" in row else ""
            out.append(f"  {row['field']:<30} {_fmt(row['base']):>14} -> {_fmt(row['measured']):<14}{change}{note}")
        v = doc["verdict"]
        for name in ("base", "measured"):
            s = v[name]
            verdict = "SPOT-ELIGIBLE" if s["spotEligible"] else "NOT spot-eligible"
            out.append(f"  {name:<9} checkpoint every {s['intervalSeconds']} s ({s['intervalMethod']}); spot "
                       f"${_fmt(s['spotTotalUsd'])} vs on-demand ${_fmt(s['onDemandTotalUsd'])}: {verdict}")  # fmt: skip
        out.append(f"  changed: {', '.join(v['changed']) or 'neither the interval nor the verdict'}")
    else:
        out.append("measured profile fields: " + json.dumps(doc["measuredProfile"], sort_keys=True))
    return out


def render_speeds(speeds: dict[str, Any]) -> list[str]:
    """Per GPU model: reports, median step time and the measured speed (reference 1.0), or why none."""
    out = [f"GPU speed (relativeThroughput = reference median step s / the model's); reference "
           f"{speeds['reference'] or '-'}: {speeds['referenceBasis']}"]  # fmt: skip
    for m in speeds["models"]:
        speed = "-" if m["relativeThroughput"] is None else f"{m['relativeThroughput']:g}"
        note = f"  - {m['note']}" if "note" in m else ""
        out.append(f"  {m['gpuModel'] or '(no model)':<16} {m['samples']:>5} reports {m['steps']:>9} steps "
                   f"{m['nodes']:>4} VMs  median {m['medianStepSeconds']:g} s/step  speed {speed}{note}")  # fmt: skip
    if "note" in speeds:
        out.append(f"  - {speeds['note']}")
    return out


def render_prices(prices: dict[str, Any]) -> list[str]:
    """Per SKU: the median, min and max spot price and what they rest on; then which became the profile's."""
    if not prices["skus"]:
        return [f"spot prices: {prices['note']}"]
    out = ["spot prices (USD per VM-hour, Linux; each observation counts once):"]
    for c in prices["skus"]:
        listed = "" if c["onDemandListUsdPerHour"] is None else f", on-demand list {c['onDemandListUsdPerHour']:g}"
        out.append(f"  {c['sku']:<26} median {c['medianUsdPerHour']:g}, min {c['minUsdPerHour']:g}, max "
                   f"{c['maxUsdPerHour']:g}{listed} ({_count(c['samples'], 'sample')}, {_count(len(c['zones']), 'zone')}"
                   f": {', '.join(c['zones'])}; {c['window'][0]} to {c['window'][1]})")  # fmt: skip
        if "note" in c:
            out.append(f"    - {c['note']}")
    applied = prices["applied"]
    if applied is None:
        out.append(f"  - {prices['note']}")
    else:
        out.append(f"  prices.spotPerHour {applied['usdPerHour']:g}: {applied['basis']}")
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _summary_line(name: str, s: dict[str, Any]) -> str:
    if not s["samples"]:
        return f"{name}: {s['note']}"
    note = f" ({s['note']})" if "note" in s else ""
    return f"{name}: median {_fmt(s['median'])}, p90 {_fmt(s['p90'])}, {s['samples']} samples{note}"


def add_telemetry_args(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--telemetry", nargs="+", required=required, metavar="PATH",
                        help="agent or controller events logs (JSON lines) or log exports: CloudWatch "
                             "(aws logs filter-log-events), Cloud Logging (gcloud logging read --format=json), "
                             "Log Analytics rows; spot price exports: AWS describe-spot-price-history JSON, "
                             "Azure Retail Prices API pages")  # fmt: skip
    parser.add_argument("--telemetry-format", dest="format", choices=FORMATS, default="auto",
                        help="format of every --telemetry file (default: detected per file)")  # fmt: skip
    parser.add_argument("--sku", metavar="NAME",
                        help="the instance type or VM size whose median spot price in the telemetry (a price export: "
                             "aws ec2 describe-spot-price-history, Azure retail prices) becomes prices.spotPerHour")  # fmt: skip


def register(subparsers: Any) -> None:
    profile = subparsers.add_parser("profile", help="measure a workload profile from the fleet's telemetry")
    sub = profile.add_subparsers(dest="profile_command", metavar="SUBCOMMAND", required=True)
    fit = sub.add_parser("fit", help="fit interruption rates, latencies and checkpoint timings from telemetry or traces",
                         description="Fit a workload's measured figures from the fleet's telemetry (--telemetry) or "
                                     "interruption rates and reacquisition waits per zone and type from availability "
                                     "traces (--traces).")  # fmt: skip
    add_telemetry_args(fit, required=False)
    fit.add_argument("--traces", metavar="DIR", help="availability traces: a folder of <zone>_<type>_<n>.json (one "
                     "group) or of such folders, e.g. spotgpu/data/traces/availability/1-node/aws-02-15-2023")  # fmt: skip
    fit.add_argument("--zones", metavar="Z,Z", help="with --traces: the traced zones to pool (default: all of a group's)")
    fit.add_argument("--nodes", type=whole(1), metavar="N", help="with --traces: the gang's nodes (default: the workload's, else 1)")
    fit.add_argument("--stack", metavar="S", help="with --traces and --pool: fit the traced zones standing in for the "
                     "pool's zones at its workload's nodes (Pulumi.<S>.yaml)")  # fmt: skip
    fit.add_argument("--program", default=".", help="Pulumi project directory for --stack (default: .)")
    fit.add_argument("--profile", metavar="BASE.yaml", help="base WorkloadProfile to diff against and re-judge")
    fit.add_argument("--ladder", help="FallbackLadder for the verdict (default: a prod-like ladder)")
    fit.add_argument("--pool", metavar="NAME", help="fit only this pool's records (with --traces --stack: the pool to fit)")
    fit.add_argument("--provider", choices=CLOUDS,
                     help="notice contract for the verdict (default: the telemetry's provider, else aws)")  # fmt: skip
    fit.add_argument("--out", metavar="MEASURED.yaml", help="write the measured profile (needs --profile)")
    add_json_flag(fit, "the fit, the diff and the verdicts")
    fit.set_defaults(func=guard(cmd_fit), command="profile fit")
