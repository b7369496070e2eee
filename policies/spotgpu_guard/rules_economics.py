"""Advisory rules: is spot worth it here, and is the pool spread wide enough to find capacity?

``spot-eligible`` rebuilds the workload from its tag and asks the cost model
(:func:`spotgpu.economics.cost.effective_cost`) with the resource's own notice
contract, ladder and configured interval: spot is chosen by effective cost, not
by list price. Where the pool's cloud has availability traces, its ladder is also
replayed on them (:mod:`spotgpu.simulation.check`, the preview's own check) and the
rule judges on the more pessimistic of the two. ``capacity-diversified`` wants each pool (all resources sharing a
``spotgpu-pool`` link) to span several zones and several GPU types or sizes, so
one shortage cannot take all of it; a stated ``spotgpu-waiver`` satisfies it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel
from pydantic import ValidationError

from spotgpu.models.ladder import FallbackLadder
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.links import (
    CHECKPOINT_INTERVAL,
    WAIVER,
    WORKLOAD,
    describe_missing,
    read_ladder,
    read_workload_profile,
)
from spotgpu_guard.model import SpotPool
from spotgpu_guard.rule import Finding, NotApplicable, stack_rule
from spotgpu_guard.stack_keys import restate
from spotgpu_guard.values import UNKNOWN, as_number

#: A waiver must say why; "ok" is not a reason.
MIN_WAIVER_CHARS = 10


def _ladder(pool: SpotPool) -> FallbackLadder | None:
    steps = read_ladder(pool.links).value
    if steps is None:
        return None
    try:
        return FallbackLadder.model_validate({"steps": [
            {"kind": s.kind, "max_wait_seconds": round(s.max_wait_seconds),
             "cost_ceiling_per_work_hour" if s.per_work_hour else "cost_ceiling_per_hour": s.ceiling}
            for s in steps]})  # fmt: skip
    except ValidationError:
        return None


def check_spot_eligible(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    if not catalog.pools:
        return
    try:
        from spotgpu.economics.cost import effective_cost
        from spotgpu.economics.interval import IntervalDecision, choose_interval
        from spotgpu.economics.tiers import pool_joint_loss
    except ImportError as err:  # the cost model ships with spotgpu; say so rather than pass silently
        raise NotApplicable(f"the spotgpu cost model is not importable ({err})") from None
    for pool in catalog.pools:
        who, raw = pool.describe(), pool.links.get(WORKLOAD)
        if not isinstance(raw, str):
            yield Finding(pool.res.urn, f"{who}: cannot judge spot eligibility: "
                          f"{describe_missing(WORKLOAD, pool.links) if raw is UNKNOWN or raw is None else ''}; fix: "
                          f"set {WORKLOAD}=spotgpu.contract.tags.encode_workload(profile)")
            continue
        decoded = read_workload_profile(pool.links)
        profile = decoded.value
        if profile is None:
            first = str(decoded.error).splitlines()[0]
            yield Finding(pool.res.urn, f"{who}: {WORKLOAD} {raw!r} does not describe a workload ({first}); fix: "
                          "write it with spotgpu.contract.tags.encode_workload(profile)")
            continue
        if pool.contract is None:
            yield Finding(pool.res.urn, f"{who}: cannot judge spot eligibility: {pool.contract_problem}")
            continue
        interval = as_number(pool.links.get(CHECKPOINT_INTERVAL))
        joint = pool_joint_loss(profile, len(pool.zones))  # a tiered workload: its peers across the pool's zones
        decision = None
        if interval and interval > 0:
            decision = IntervalDecision(
                seconds=int(interval), method="configured",
                final_checkpoint_fits_notice=pool.contract.final_checkpoint_fits(profile.final_commit_seconds),
                reasons=(f"the pool's {CHECKPOINT_INTERVAL}",))
            if profile.checkpoint_tiers is not None:  # the durable interval and restore mix for that local one
                configured = profile.model_copy(update={"checkpoint_interval_seconds": int(interval)})
                decision = choose_interval(configured, pool.contract, joint_loss=joint)
        else:
            decision = choose_interval(profile, pool.contract, joint_loss=joint)
        ladder = _ladder(pool)
        breakdown = effective_cost(profile, pool.contract, ladder, interval=decision)
        if not breakdown.spot_eligible:
            yield Finding(pool.res.urn, restate(
                f"{who}: spot is not worth it for this workload by effective cost: {'; '.join(breakdown.reasons)}; "
                "fix: run it on on-demand capacity, or improve the figures (faster checkpoints, a shorter ladder "
                "wait), or disable spot-eligible for this stack", pool.res, pool.links,
                "improve the figures of the workload {pool}.workload names (checkpointWriteSeconds, restartSeconds) "
                "or shorten the waits of the ladder {pool}.ladder names, run it on on-demand, or set spot-eligible "
                "to disabled in policy-config.json"))  # fmt: skip
            continue
        check = _replayed(pool, profile, ladder, decision, breakdown)
        if check is not None and not check.pessimistic_eligible:  # the more pessimistic of the model and the replay
            yield Finding(pool.res.urn, restate(
                f"{who}: spot is not worth it by the replay of its ladder on the traces (the model alone says it "
                f"is): {check.line}; fix: fit the figures from the traces or the fleet (spotgpu profile fit --traces "
                "DIR / --telemetry LOGS), then judge again; or run it on on-demand capacity", pool.res, pool.links,
                "fit the figures of the workload {pool}.workload names from the traces (spotgpu profile fit --traces "
                "DIR) or the fleet (--telemetry LOGS), or run it on on-demand"))  # fmt: skip


def _replayed(pool: SpotPool, profile: Any, ladder: FallbackLadder | None, decision: Any, breakdown: Any) -> Any:
    """The pool's ladder replayed on its cloud's traces beside the model (``spotgpu.simulation.check``, the
    preview's own check, cached: the preview asks for the same pool); None without traces or a ladder."""
    try:
        from spotgpu.catalogue.names import region_of
        from spotgpu.economics.interval import choose_interval
        from spotgpu.simulation.check import clouds_with_traces, compare, job_for, replay_pool
    except ImportError:  # the simulations ship with spotgpu; without them the model alone judges
        return None
    zones = sorted(z for z in pool.zones if not z.startswith("subnet:"))
    if ladder is None or pool.contract is None or not zones or pool.cloud not in clouds_with_traces():
        return None
    seconds = decision.seconds if decision is not None else choose_interval(profile, pool.contract).seconds
    replayed = replay_pool(job_for(profile, seconds, getattr(decision, "tiers", None)), ladder, profile.fallback_policy, pool.cloud, region_of(zones[0]),
                           zones)  # fmt: skip
    sources = {k: f"{WORKLOAD} tag" for k in ("interruptionsPerHour", "gangInterruptionsPerHour",
                                               "expectedReacquisitionSeconds")}  # fmt: skip
    return compare(breakdown, profile, pool.contract, ladder, replayed, sources, pool.cloud)


def _waiver(pools: list[SpotPool]) -> str | None:
    for pool in pools:
        value = pool.links.get(WAIVER)
        if isinstance(value, str) and len(value.strip()) >= MIN_WAIVER_CHARS:
            return value
    return None


def check_diversified(catalog: Catalog, config: Mapping[str, Any]) -> Iterator[Finding]:
    min_zones, min_types = int(config.get("minZones", 2)), int(config.get("minTypes", 2))
    groups: dict[str, list[SpotPool]] = defaultdict(list)
    for pool in catalog.pools:
        groups[catalog.pool_key(pool)].append(pool)
    for key, pools in groups.items():
        zones = set().union(*(p.zones for p in pools))
        types = set().union(*(p.gpu_types for p in pools))
        if (len(zones) >= min_zones and len(types) >= min_types) or _waiver(pools):
            continue
        names = ", ".join(p.describe() for p in pools)
        label = f"pool {key!r}" if not key.startswith("urn:") else "pool"
        notes = "; ".join(n for p in pools if (n := p.zone_note))
        yield Finding(pools[0].res.urn, restate((
            f"{label} ({names}) spans {len(zones)} zone(s) {sorted(zones)} and {len(types)} GPU type(s)/size(s) "
            f"{sorted(types)}{f' ({notes})' if notes else ''}; one capacity shortage can take all of it; fix: spread "
            f"it over at least {min_zones} zones and {min_types} GPU types or sizes, or tag it {WAIVER}=<reason of "
            f"at least {MIN_WAIVER_CHARS} characters>"), pools[0].res, pools[0].links,
            f"list at least {min_zones} zones and {min_types} GPU types or sizes in {{pool}} (subnets or zones; "
            "instanceTypes, machineTypes or vmSizes), or state why under {pool}.optOut.singleZone or "
            "{pool}.optOut.singleType"))  # fmt: skip


RULES = [
    stack_rule(
        "spot-eligible",
        "The cost model finds spot cheaper than on-demand for the pool's workload, by effective cost.",
        EnforcementLevel.ADVISORY,
        check_spot_eligible,
        remediation="Move the workload to on-demand, or improve its figures",
    ),
    stack_rule(
        "capacity-diversified",
        "Each spot pool spans at least two zones and two GPU types or sizes, or states a waiver.",
        EnforcementLevel.ADVISORY,
        check_diversified,
        schema={
            "minZones": {"type": "integer", "minimum": 1, "default": 2},
            "minTypes": {"type": "integer", "minimum": 1, "default": 2},
        },
        remediation="Add zones and GPU types, or tag spotgpu-waiver with the reason",
    ),
]
