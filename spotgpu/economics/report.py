"""Per-pool economics for the preview: interval, effective spot cost and the spot verdict.

The preview prints this next to the resource tree so a reviewer sees, before
``pulumi up``, what each pool is expected to cost on spot against on-demand,
which term dominates, and whether the pool is spot-eligible at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotgpu.economics.cost import CostBreakdown, effective_cost, json_safe
from spotgpu.economics.fit import nest
from spotgpu.economics.interval import IntervalDecision, choose_interval
from spotgpu.economics.tiers import pool_joint_loss
from spotgpu.economics.work_rate import PoolSpeeds, pool_speeds, render_rungs, restate, rung_rates
from spotgpu.models import FallbackLadder, PoolSpec, StackConfig, WorkloadProfile
from spotgpu.models.stack import idle_groups, idle_rungs
from spotgpu.models.workload import MEASURED_FIELDS, SOURCE_KINDS
from spotgpu.traces import trace_cloud


@dataclass(frozen=True)
class PoolBill:
    """One pool's priced inputs and the cost model's answer: what the preview, ``cost --stack`` and the
    replay check (``spotgpu.simulation.check``) all read."""

    pool: PoolSpec
    workload: WorkloadProfile  # as typed (measured figures laid over), priced for the pool
    priced: WorkloadProfile  # restated in node-hours of the pool's first type (what the model and the twin run)
    ladder: FallbackLadder  # restated alike
    decision: IntervalDecision
    breakdown: CostBreakdown
    speeds: PoolSpeeds


def pool_bill(config: StackConfig, pool: PoolSpec) -> PoolBill:
    workload = config.workload_for(pool)
    decision = choose_interval(workload, pool.notice, joint_loss=pool_joint_loss(workload, len(pool.zones)))
    speeds = pool_speeds(pool, workload)
    priced, ladder = restate(workload, config.ladder_for(pool), speeds)
    breakdown = effective_cost(priced, pool.notice, ladder, interval=decision,
                               keep_generations=pool.checkpoint.keep_generations)  # fmt: skip
    return PoolBill(pool, workload, priced, ladder, decision, breakdown, speeds)


def stack_economics(config: StackConfig, only: str | None = None) -> dict[str, Any]:
    """Every pool's economics (or only the pool named ``only``): the preview's and ``cost --stack``'s one code path."""
    if only is not None and only not in {p.name for p in config.pools}:
        raise ValueError(f"--pool {only!r} is not a pool of the stack; use one of {', '.join(p.name for p in config.pools)}")
    pools = {}
    for pool in config.pools:
        if only is not None and pool.name != only:
            continue
        bill = pool_bill(config, pool)
        workload, decision, speeds, breakdown = bill.workload, bill.decision, bill.speeds, bill.breakdown
        nulls: dict[str, str] = {}
        pools[pool.name] = json_safe({
            "cloud": pool.cloud,
            "workload": pool.workload,
            "ladder": pool.ladder,
            "checkpointIntervalSeconds": decision.seconds,
            "intervalMethod": decision.method,
            "finalCheckpointFitsNotice": decision.final_checkpoint_fits_notice,
            "reasons": list(decision.reasons),
            "spotEligible": breakdown.spot_eligible,
            "spotTotalUsd": round(breakdown.spot_total, 2),
            "onDemandTotalUsd": round(breakdown.on_demand_total, 2),
            "savingsFraction": round(breakdown.savings_fraction, 4),
            "effectiveCost": breakdown.to_dict(),
            "prices": _price_sources(config, pool, workload),
            "figures": figure_sources(config, pool),
            **({"checkpointTiers": decision.tiers.as_dict()} if decision.tiers is not None else {}),
        }, nulls, breakdown.unbounded_reason)  # fmt: skip
        pools[pool.name]["rungs"] = rung_rates(config, pool)
        if not speeds.neutral or speeds.unmeasured:
            pools[pool.name]["speeds"] = {
                "spot": speeds.spot, "onDemand": speeds.on_demand, "spotType": speeds.spot_type,
                "onDemandType": speeds.on_demand_type, "spotSource": speeds.spot_source,
                "onDemandSource": speeds.on_demand_source,
                "unmeasured": list(speeds.unmeasured), "line": speeds.describe(),
                "why": "workHours is at the reference type's speed: spot takes workHours / spot speed hours, and an "
                       "on-demand hour does onDemand/spot as much of the job; a model neither measured nor in the "
                       "spec sheets counts at the slowest known speed",
            }  # fmt: skip
        if nulls:
            pools[pool.name]["nulls"] = nulls
        if workload.measured_profile is not None:
            pools[pool.name]["measuredProfile"] = _measured_figures(config, pool, workload)
        kept = f"(kept: optOut.idleRungs {pool.opt_out.idle_rungs!r})"
        warnings = [f"ladder {pool.ladder} steps[{i}]: {why}, so the rung has no group behind it and only adds its "
                    f"wait {kept}" for i, why in idle_rungs(pool, config.ladder_for(pool), workload)]  # fmt: skip
        warnings += [f"{p.at} {p.value}: {p.what} {kept}" for p in idle_groups(pool, config.ladder_for(pool), workload)]
        if warnings:
            pools[pool.name]["warnings"] = warnings
    return {"pools": pools}


#: The cost model's inputs a reader wants traced to their origin, in the order the preview prints them.
FIGURES = (
    "interruptionsPerHour", "gangInterruptionsPerHour", "expectedReacquisitionSeconds", "checkpointWriteSeconds",
    "checkpointLoadSeconds", "restartSeconds", "checkpointBytes", "workHours", "nodes", "deadlineHours",
    "maxLostWorkSeconds", "prices.spotPerHour", "prices.onDemandPerHour", "prices.deadlinePenaltyPerHour",
    "prices.storagePerGbMonth", "prices.requestPer1000",
)  # fmt: skip


def figure_sources(config: StackConfig, pool: PoolSpec) -> dict[str, Any]:
    """Every figure the pool's bill rests on: its value and where it came from, as ``{kind, from}``.

    ``kind`` is ``typed`` (``from`` names the stack key), ``measured`` (the telemetry files and samples, via
    the workload's measuredProfile), ``fitted`` (the traces and runs), ``catalogue`` (the list price and
    its source) or ``default`` (the model's default, no key set)."""
    name = pool.workload
    workload = config.workloads[name]
    out = figure_origins(workload, lambda key: f"workloads.{name}.{key}", workload.sources)
    if pool.spot_per_hour is not None and "prices.spotPerHour" in out:
        out["prices.spotPerHour"] = {"value": pool.spot_per_hour, "kind": "typed", "from": f"pools[{pool.name}].spotPerHour"}
    for figure in out.values():
        figure["from"] = _stand_in(figure, pool.cloud)
    quote = config.bill_quote(pool)  # the pool's on-demand price, typed or the catalogue's, always shown
    out["prices.onDemandPerHour"] = {
        "value": quote.usd_per_hour if quote else None,
        "kind": "typed" if workload.prices.on_demand_per_hour is not None else "catalogue",
        "from": quote.source if quote else "no price",
    }
    return nest({key: out[key] for key in FIGURES if key in out})


#: A trace group named in a fitted figure's source: ``traces/availability/1-node/aws-02-15-2023``.
_TRACE_GROUP = re.compile(r"traces/availability/([\w.-]+/[\w.-]+)")


def _stand_in(figure: Mapping[str, Any], cloud: str) -> str:
    """A fitted figure's source, saying so when its traces were recorded on another cloud than the pool's
    (a workload shared by pools of several clouds is fitted on the one cloud that has traces)."""
    where = str(figure["from"])
    found = _TRACE_GROUP.search(where) if figure["kind"] == "fitted" else None
    if found is None or (recorded := trace_cloud(found.group(1))) == cloud:
        return where
    return f"{where} [{recorded} traces: a stand-in for {cloud}]"


def figure_origins(profile: WorkloadProfile, key_at: Callable[[str], str], origins: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Each of :data:`FIGURES` the profile holds, flat by key: its value, its kind and where it came from.

    ``origins`` (a ``sources`` entry, or the telemetry that measured it) wins; else a key the profile set
    is ``typed`` at ``key_at(key)``; else it is the model's ``default``. The stack and ``cost --profile``
    both call it, so a figure is classified one way."""
    doc = profile.model_dump(by_alias=True)
    typed = {*profile.model_fields_set, *(f"prices.{k}" for k in profile.prices.model_fields_set)}
    aliases = {f.alias or k: k for k, f in type(profile).model_fields.items()}
    aliases |= {f"prices.{f.alias or k}": f"prices.{k}" for k, f in type(profile.prices).model_fields.items()}
    out: dict[str, dict[str, Any]] = {}
    for key in FIGURES:
        value = dotted(doc, key)
        if value is None:
            continue
        origin = origins.get(key)
        if origin is not None:
            kind, where = source_kind(origin), origin
        elif aliases.get(key, key) in typed:
            kind, where = "typed", key_at(key)
        else:
            kind, where = "default", f"{key_at(key)} not set: the model's default"
        out[key] = {"value": value, "kind": kind, "from": where}
    return out


def _measured_figures(config: StackConfig, pool: PoolSpec, workload: WorkloadProfile) -> dict[str, Any]:
    """The figures the workload's measuredProfile file set (its spot price too), and the speeds in use."""
    measured = config.workloads[pool.workload].model_dump(by_alias=True)
    given = [k for k in MEASURED_FIELDS if k in workload.sources and dotted(measured, k) is not None]
    out: dict[str, Any] = {"file": workload.measured_profile,
                           "figures": nest({k: dotted(measured, k) for k in given})}  # fmt: skip
    if pool.spot_per_hour is not None:
        out["note"] = (f"pools[{pool.name}].spotPerHour {pool.spot_per_hour:g} wins over the workload's "
                       "prices.spotPerHour for this pool")  # fmt: skip
    if workload.gpu is not None and workload.gpu.relative_throughput:
        out["relativeThroughputInUse"] = dict(workload.gpu.relative_throughput)
    return out


def dotted(doc: dict[str, Any], name: str) -> Any:
    """``doc``'s value at ``name``, a key or a dotted path into a block (``prices.spotPerHour``); None when absent."""
    value: Any = doc
    for key in name.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _flat(doc: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A document's leaves by dotted name (``prices.spotPerHour``), the names MEASURED_FIELDS uses."""
    out: list[tuple[str, Any]] = []
    for key, value in doc.items():
        name = f"{prefix}{key}"
        out.extend(_flat(value, f"{name}.") if isinstance(value, dict) else [(name, value)])
    return out


def _price_sources(config: StackConfig, pool: PoolSpec, workload: WorkloadProfile) -> dict[str, Any]:
    """Each price the estimate used and where it came from (the workload, or the GPU catalogue)."""
    quote = config.bill_quote(pool)
    return {
        "spotPerHour": workload.prices.spot_per_hour,
        "spotSource": config.spot_price(pool)[1],
        "onDemandPerHour": workload.prices.on_demand_per_hour,
        "onDemandSource": quote.source if quote else "unknown",
    }


def render_terms(cost: dict[str, Any], indent: str = "    ") -> list[str]:
    """The bill as aligned lines: term, USD, and its share of the spot total."""
    total = cost.get("spotTotal")
    lines = []
    for t in cost["terms"]:
        share = f"{t['usd'] / total:6.1%}" if total and t["usd"] is not None else "     -"
        lines.append(f"{indent}{t['name']:<24}{_usd(t['usd'])}  {share}")
    lines.append(f"{indent}{'spot total':<24}{_usd(total)}")
    lines.append(f"{indent}{'on-demand total':<24}{_usd(cost['onDemandTotal'])}")
    return lines


def render_hours(hours: Mapping[str, float | None]) -> str:
    """The model's expected hours in ``simulate``'s units (node-hours billed, job-hours, goodput)."""
    def h(key: str) -> str:
        v = hours.get(key)
        return "unbounded" if v is None or not math.isfinite(v) else f"{v:.1f}"

    goodput = hours.get("goodput")
    good = "-" if goodput is None or not math.isfinite(goodput) else f"{goodput:.1%}"
    return (f"expected hours: spot {h('spotNodeHours')} node-h, on-demand {h('onDemandNodeHours')} node-h, idle "
            f"{h('idleJobHours')} job-h, lost work {h('lostWorkJobHours')} job-h; goodput {good} (simulate's units)")


def _usd(value: float | None) -> str:
    """Dollars right-aligned in 11 columns; a null (an unbounded figure) reads as such."""
    return f"{'unbounded':>11}" if value is None else f"{value:>11,.2f}"


def tiers_line(t: Mapping[str, Any]) -> str:
    """One line for a tiered workload's decision (:meth:`TierDecision.as_dict`), for the preview and ``cost``."""
    mix = ", ".join(f"{k} {v:.0%}" for k, v in t["restoreMix"].items())
    return (f"tiers: local every {t['localIntervalSeconds']} s (blocks {t['localWriteSeconds']:g} s), store every "
            f"{t['durableIntervalSeconds']} s (every {t['durableEvery']} local); restores expected from: {mix}; "
            f"P(an interruption falls back to the store) {t['jointLossProbability']:.1%}")  # fmt: skip


def render_economics(report: dict[str, Any]) -> str:
    lines = ["Economics per pool:"]
    for name, p in report.get("pools", {}).items():
        fits = "fits" if p["finalCheckpointFitsNotice"] else "does NOT fit"
        lines.append(
            f"  {name} ({p['cloud']}, {p['workload']}): checkpoint every {p['checkpointIntervalSeconds']} s "
            f"({p['intervalMethod']}); final checkpoint {fits} the notice"
        )
        if "checkpointTiers" in p:
            lines.append(f"    {tiers_line(p['checkpointTiers'])}")
        if "effectiveCost" not in p:
            continue
        verdict = "SPOT-ELIGIBLE" if p["spotEligible"] else "NOT spot-eligible"
        spot = "unbounded" if p["spotTotalUsd"] is None else f"${p['spotTotalUsd']:,.2f}"
        saves = "-" if p["savingsFraction"] is None else f"{p['savingsFraction']:.0%}"
        lines.append(f"    {verdict}: spot {spot} vs on-demand ${p['onDemandTotalUsd']:,.2f} per job (saves {saves})")
        if "replay" in p:
            lines.append(f"      replay: {p['replay']['line']}")
        if "prices" in p:
            pr = p["prices"]
            lines.append(
                f"      prices: spot ${pr['spotPerHour']:g}/h ({pr['spotSource']}); "
                f"on-demand ${pr['onDemandPerHour']:g}/h ({pr['onDemandSource']})"
            )
        if "measuredProfile" in p:
            figures = ", ".join(f"{k} {v:g}" for k, v in _flat(p["measuredProfile"]["figures"]))
            lines.append(f"      measured figures from {p['measuredProfile']['file']}: {figures}")
            if "note" in p["measuredProfile"]:
                lines.append(f"      - {p['measuredProfile']['note']}")
            if "relativeThroughputInUse" in p["measuredProfile"]:
                speeds = ", ".join(f"{k} {v:g}" for k, v in p["measuredProfile"]["relativeThroughputInUse"].items())
                lines.append(f"      GPU speeds in use (measured over typed): {speeds}")
        if "figures" in p:
            lines.extend(render_figures(p["figures"]))
        lines.extend(f"      WARNING: {w}" for w in p.get("warnings", []))
        if "speeds" in p:
            lines.append(f"      speed: {p['speeds']['line']}")
        if "rungs" in p:
            lines.extend(render_rungs(p["rungs"]))
        lines.extend(render_terms(p["effectiveCost"], indent="      "))
        if p["effectiveCost"].get("hours"):
            lines.append("      " + render_hours(p["effectiveCost"]["hours"]))
        lines.extend(f"      - {r}" for r in p["effectiveCost"]["reasons"])
    return "\n".join(lines)


def flat_figures(figures: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """The figures document (nested like a profile: ``prices.spotPerHour`` under ``prices``) by dotted name."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in figures.items():
        if isinstance(value, dict) and "kind" not in value:
            out |= flat_figures(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def source_kind(origin: str) -> str:
    """The kind a ``sources`` line names by its first word (``measured: ...``, ``fitted from traces: ...``)."""
    word = origin.split(":")[0].split(" ")[0]
    return word if word in SOURCE_KINDS else "measured"


#: Figures the ``prices:`` line already shows; the figures table lists the rest.
_PRICE_LINE = ("prices.spotPerHour", "prices.onDemandPerHour")


def render_figures(figures: dict[str, dict[str, Any]], indent: str = "      ", prices: bool = False) -> list[str]:
    """The figures table: name, value, kind and where it came from (the preview prints prices on the line
    above it; ``prices`` lists them here too)."""
    rows = [(k, f) for k, f in flat_figures(figures).items() if prices or k not in _PRICE_LINE]
    if not rows:
        return []
    width = max(len(k) for k, _ in rows)
    out = [f"{indent}figures (value: where it came from):"]
    for key, f in rows:
        v = f["value"]
        value = "-" if v is None else (f"{int(v):,}" if float(v).is_integer() and abs(v) >= 1e6 else f"{v:g}")
        origin = f["from"] if f["from"].startswith(f["kind"]) else f"{f['kind']}: {f['from']}"
        out.append(f"{indent}  {key:<{width}} {value:>14}  {origin}")
    return out


def load_stack(stack: str, project_dir: str | Path = ".") -> StackConfig:
    """The stack's spotgpu config, read by the one stack reader the preview uses (:func:`spotgpu.project.load_stack`)."""
    from spotgpu.project import load_stack as read_stack

    return read_stack(stack, project_dir)
