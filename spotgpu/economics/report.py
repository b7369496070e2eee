"""Per-pool economics for the preview: interval, effective spot cost and the spot verdict.

The preview prints this next to the resource tree so a reviewer sees, before
``pulumi up``, what each pool is expected to cost on spot against on-demand,
which term dominates, and whether the pool is spot-eligible at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spotgpu.economics.cost import effective_cost, json_safe
from spotgpu.economics.fit import nest
from spotgpu.economics.interval import choose_interval
from spotgpu.economics.tiers import pool_joint_loss
from spotgpu.economics.work_rate import pool_speeds, render_rungs, restate, rung_rates
from spotgpu.models import PoolSpec, StackConfig, WorkloadProfile
from spotgpu.models.stack import idle_rungs
from spotgpu.models.workload import MEASURED_FIELDS


def stack_economics(config: StackConfig, only: str | None = None) -> dict[str, Any]:
    """Every pool's economics (or only the pool named ``only``): the preview's and ``cost --stack``'s one code path."""
    if only is not None and only not in {p.name for p in config.pools}:
        raise ValueError(f"--pool {only!r} is not a pool of the stack; use one of {', '.join(p.name for p in config.pools)}")
    pools = {}
    for pool in config.pools:
        if only is not None and pool.name != only:
            continue
        workload = config.workload_for(pool)
        decision = choose_interval(workload, pool.notice, joint_loss=pool_joint_loss(workload, len(pool.zones)))
        speeds = pool_speeds(pool, workload)
        priced, ladder = restate(workload, config.ladder_for(pool), speeds)
        breakdown = effective_cost(
            priced,
            pool.notice,
            ladder,
            interval=decision,
            keep_generations=pool.checkpoint.keep_generations,
        )
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
            **({"checkpointTiers": decision.tiers.as_dict()} if decision.tiers is not None else {}),
        }, nulls, breakdown.unbounded_reason)  # fmt: skip
        pools[pool.name]["rungs"] = rung_rates(config, pool)
        if not speeds.neutral or speeds.unmeasured:
            pools[pool.name]["speeds"] = {
                "spot": speeds.spot, "onDemand": speeds.on_demand, "spotType": speeds.spot_type,
                "unmeasured": list(speeds.unmeasured), "line": speeds.describe(),
                "why": "workHours is at the reference type's speed: spot takes workHours / spot speed hours, and an "
                       "on-demand hour does onDemand/spot as much of the job; an unmeasured model counts at the "
                       "slowest listed speed",
            }  # fmt: skip
        if nulls:
            pools[pool.name]["nulls"] = nulls
        if workload.measured_profile is not None:
            pools[pool.name]["measuredProfile"] = _measured_figures(config, pool, workload)
        warnings = [f"ladder {pool.ladder} steps[{i}]: {why}, so the rung has no group behind it and only adds its "
                    f"wait (kept: optOut.idleRungs {pool.opt_out.idle_rungs!r})"
                    for i, why in idle_rungs(pool, config.ladder_for(pool))]  # fmt: skip
        if warnings:
            pools[pool.name]["warnings"] = warnings
    return {"pools": pools}


def _measured_figures(config: StackConfig, pool: PoolSpec, workload: WorkloadProfile) -> dict[str, Any]:
    """The figures the workload's measuredProfile file set (its spot price too), and the speeds in use."""
    measured = config.workloads[pool.workload].model_dump(by_alias=True)
    out: dict[str, Any] = {"file": workload.measured_profile,
                           "figures": nest({k: _dotted(measured, k) for k in MEASURED_FIELDS})}  # fmt: skip
    if pool.spot_per_hour is not None:
        out["note"] = (f"pools[{pool.name}].spotPerHour {pool.spot_per_hour:g} wins over the workload's "
                       "prices.spotPerHour for this pool")  # fmt: skip
    if workload.gpu is not None and workload.gpu.relative_throughput:
        out["relativeThroughputInUse"] = dict(workload.gpu.relative_throughput)
    return out


def _dotted(doc: dict[str, Any], name: str) -> Any:
    """``doc``'s value at ``name``, a key or a dotted path into a block (``prices.spotPerHour``)."""
    for key in name.split("."):
        doc = doc[key]
    return doc


def _flat(doc: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A document's leaves by dotted name (``prices.spotPerHour``), the names MEASURED_FIELDS uses."""
    out: list[tuple[str, Any]] = []
    for key, value in doc.items():
        name = f"{prefix}{key}"
        out.extend(_flat(value, f"{name}.") if isinstance(value, dict) else [(name, value)])
    return out


def _price_sources(config: StackConfig, pool: PoolSpec, workload: WorkloadProfile) -> dict[str, Any]:
    """Each price the estimate used and where it came from (the workload, or the GPU catalogue)."""
    quote = config.on_demand_quote(pool)
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


def _usd(value: float | None) -> str:
    """Dollars right-aligned in 11 columns; a null (an unbounded figure) reads as such."""
    return f"{'unbounded':>11}" if value is None else f"{value:>11,.2f}"


def render_economics(report: dict[str, Any]) -> str:
    lines = ["Economics per pool:"]
    for name, p in report.get("pools", {}).items():
        fits = "fits" if p["finalCheckpointFitsNotice"] else "does NOT fit"
        lines.append(
            f"  {name} ({p['cloud']}, {p['workload']}): checkpoint every {p['checkpointIntervalSeconds']} s "
            f"({p['intervalMethod']}); final checkpoint {fits} the notice"
        )
        if "checkpointTiers" in p:
            t = p["checkpointTiers"]
            mix = ", ".join(f"{k} {v:.0%}" for k, v in t["restoreMix"].items())
            lines.append(
                f"    tiers: local every {t['localIntervalSeconds']} s (blocks {t['localWriteSeconds']:g} s), store "
                f"every {t['durableIntervalSeconds']} s (every {t['durableEvery']} local); restores expected from: "
                f"{mix}; P(a node's peers go with it) {t['jointLossProbability']:.1%}"
            )
        if "effectiveCost" not in p:
            continue
        verdict = "SPOT-ELIGIBLE" if p["spotEligible"] else "NOT spot-eligible"
        spot = "unbounded" if p["spotTotalUsd"] is None else f"${p['spotTotalUsd']:,.2f}"
        saves = "-" if p["savingsFraction"] is None else f"{p['savingsFraction']:.0%}"
        lines.append(f"    {verdict}: spot {spot} vs on-demand ${p['onDemandTotalUsd']:,.2f} per job (saves {saves})")
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
        lines.extend(f"      WARNING: {w}" for w in p.get("warnings", []))
        if "speeds" in p:
            lines.append(f"      speed: {p['speeds']['line']}")
        if "rungs" in p:
            lines.extend(render_rungs(p["rungs"]))
        lines.extend(render_terms(p["effectiveCost"], indent="      "))
        lines.extend(f"      - {r}" for r in p["effectiveCost"]["reasons"])
    return "\n".join(lines)


def load_stack(stack: str, project_dir: str | Path = ".") -> StackConfig:
    """The stack's spotgpu config, read by the one stack reader the preview uses (:func:`spotgpu.project.load_stack`)."""
    from spotgpu.project import load_stack as read_stack

    return read_stack(stack, project_dir)
