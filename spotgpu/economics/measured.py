"""From telemetry to a measured profile, and what that changes in the verdict.

Shared by ``spotgpu profile fit`` and ``spotgpu cost --telemetry``: read the files, fit,
lay the measured figures over a base profile (validated like any profile), and compare the
interval, the spot total and the verdict before and after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from spotgpu.config import format_error
from spotgpu.economics.cost import effective_cost
from spotgpu.economics.fit import FitAccumulator, ProfileFit, nest
from spotgpu.economics.interval import AnyNotice, choose_interval
from spotgpu.economics.telemetry import ReadStats
from spotgpu.economics.telemetry_files import read_files
from spotgpu.models import FallbackLadder, WorkloadProfile


@dataclass(frozen=True)
class Fitted:
    fit: ProfileFit
    stats: ReadStats


def fit_files(paths: Sequence[str], pool: str | None = None, fmt: str = "auto", sku: str | None = None) -> Fitted:
    """The fit of every file; ``sku`` names the SKU whose median spot price the measured profile takes."""
    stats = ReadStats()
    acc = FitAccumulator(pool=pool).add_all(read_files(paths, fmt, stats))
    if pool is not None and pool not in acc.pools | acc.price_pools:
        raise ValueError(f"--pool {pool!r}: no record of that pool in the telemetry; pools seen: "
                         f"{', '.join(sorted(_pools_in(paths, fmt))) or 'none'}")  # fmt: skip
    if sku is not None and sku not in acc.prices:
        priced = ", ".join(sorted(acc.prices)) or "none"
        raise ValueError(f"--sku {sku!r}: no spot price of that SKU in the telemetry (priced: {priced}); fix: name a "
                         "priced SKU, or add its price export (aws ec2 describe-spot-price-history, Azure retail "
                         "prices) to --telemetry")  # fmt: skip
    return Fitted(acc.result(price_sku=sku), stats)


def _pools_in(paths: Sequence[str], fmt: str) -> set[str]:
    return {r.pool for r in read_files(paths, fmt) if r.pool is not None}


def _get(doc: dict[str, Any], name: str) -> Any:
    """The base's value of a measured field, a dotted name reaching into its block (None: not set)."""
    head, _, rest = name.partition(".")
    value = doc.get(head)
    return _get(value, rest) if rest and isinstance(value, dict) else (None if rest else value)


def measured_profile(base: WorkloadProfile, fit: ProfileFit) -> WorkloadProfile:
    """``base`` with the measured figures laid over it, validated (a measured figure can break a rule).

    The measured GPU speeds merge into ``gpu.relativeThroughput`` (measured wins per model, the
    reference stays 1.0) only when the base names the reference model (:class:`GpuSpeeds`)."""
    updates, _ = fit.profile_updates()
    doc = nest(updates, base.model_dump(by_alias=True, exclude_none=True, exclude={"measured_profile"}))
    speeds = fit.gpu_speeds(base)
    if speeds.applies and speeds.speeds and base.gpu is not None:
        doc["gpu"] = {**doc["gpu"], "relativeThroughput": speeds.table_over(base.gpu.relative_throughput)}
    try:
        return WorkloadProfile.model_validate(doc)
    except ValidationError as err:
        raise ValueError(f"the measured profile is not valid: {format_error(err, 'profile', WorkloadProfile)}") from None


def verdict_change(
    base: WorkloadProfile, measured: WorkloadProfile, notice: AnyNotice, ladder: FallbackLadder, fit: ProfileFit
) -> dict[str, Any]:
    """Interval, spot total and verdict from the base figures and from the measured ones."""
    out: dict[str, Any] = {}
    samples = fit.reacquisition_seconds or None
    for name, profile, lat in (("base", base, None), ("measured", measured, samples)):
        decision = choose_interval(profile, notice)
        bill = effective_cost(profile, notice, ladder, interval=decision, reacquisition_samples=lat)
        out[name] = {"intervalSeconds": decision.seconds, "intervalMethod": decision.method,
                     "spotTotalUsd": round(bill.spot_total, 2) if bill.spot_total != float("inf") else None,
                     "onDemandTotalUsd": round(bill.on_demand_total, 2), "spotEligible": bill.spot_eligible,
                     "reasons": list(bill.reasons)}  # fmt: skip
    out["changed"] = [k for k in ("intervalSeconds", "spotEligible") if out["base"][k] != out["measured"][k]]
    return out


def field_diff(base: WorkloadProfile, fit: ProfileFit) -> list[dict[str, Any]]:
    updates, why = fit.profile_updates()
    doc = base.model_dump(by_alias=True)
    rows = []
    for name in sorted({*updates, *why}):
        old = _get(doc, name)
        new = updates.get(name)
        rows.append({"field": name, "base": old, "measured": new, "change": _change(old, new),
                     **({"note": why[name]} if name in why else {})})  # fmt: skip
    return rows + speed_diff(base, fit)


def _change(old: float | None, new: float | None) -> float | None:
    return None if new is None or not old else round((new - old) / old, 4)


def speed_diff(base: WorkloadProfile, fit: ProfileFit) -> list[dict[str, Any]]:
    """One row per GPU model the base table or the telemetry names: the typed speed against the measured one."""
    speeds = fit.gpu_speeds(base)
    table = base.gpu.relative_throughput if base.gpu is not None else {}
    measured = {m.gpu_model: m for m in speeds.models if m.gpu_model is not None}
    rows = []
    for model in sorted({*table, *measured}):
        old = base.gpu.speed_of(model) if base.gpu is not None else None
        new = speeds.speeds.get(model)
        steps = measured.get(model)
        if steps is None:
            note: str | None = "not in the telemetry: the typed speed stays"
        else:
            note = steps.why_unused() or speeds.unused.get(model)
            if note is None and new is None:
                note = f"no reference to compare with: {speeds.basis}"
            elif note is None and not speeds.applies:
                note = f"measured, not laid over the profile: {speeds.basis}"
        rows.append({"field": f"gpu.relativeThroughput.{model}", "base": old, "measured": new,
                     "change": _change(old, new), **({"note": note} if note else {})})  # fmt: skip
    return rows
