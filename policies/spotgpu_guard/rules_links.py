"""Every spot GPU pool must name a checkpoint store and an on-demand fallback that exist here.

A pool without a store loses all work on preemption; a pool without a bounded
fallback ladder can wait for spot forever. Both links must resolve to resources
of *this* stack, so a typo or a store created elsewhere (and maybe unhardened)
is caught before ``pulumi up``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu.contract.tags import CONTROLLER_WAIVER
from spotgpu_guard.catalog import Catalog, parse_store_url
from spotgpu_guard.ladder import ladder_problems
from spotgpu_guard.links import (
    CHECKPOINT_STORE,
    FALLBACK_GROUP,
    LADDER,
    POOL,
    ROLE,
    describe_missing,
    ladder_value,
    links_of,
)
from spotgpu_guard.rule import Finding, stack_rule
from spotgpu_guard.values import UNKNOWN

_STORE_KINDS = {"aws": "S3 bucket", "gcp": "GCS bucket", "azure": "storage account"}


def check_checkpoint_link(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        who, url = pool.describe(), pool.links.get(CHECKPOINT_STORE)
        if url is UNKNOWN or url is None:
            yield Finding(pool.res.urn, f"{who}: {describe_missing(CHECKPOINT_STORE, pool.links)}, so nothing records "
                          "where its work is saved before the capacity is reclaimed; fix: set "
                          f"{CHECKPOINT_STORE}=s3://BUCKET/PREFIX (gs://BUCKET/PREFIX, az://ACCOUNT/CONTAINER/PREFIX) "
                          "naming a store declared in this stack, built from the store's configured name")
            continue
        parsed = parse_store_url(str(url))
        if parsed is None:
            yield Finding(pool.res.urn, f"{who}: {CHECKPOINT_STORE} {url!r} is not a store URL; fix: use "
                          "s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://ACCOUNT/CONTAINER/PREFIX")
            continue
        cloud, name = parsed
        if catalog.store_for(cloud, name) is None:
            yield Finding(pool.res.urn, f"{who}: {CHECKPOINT_STORE} points at {url!r} but no {_STORE_KINDS[cloud]} "
                          f"named {name!r} is declared in this stack; fix: declare the store in this stack (so "
                          "checkpoint-store-hardened can judge it) or correct the link")


def _fallback_problem(catalog: Catalog, pool_urn: str, name: Any) -> str | None:
    if name is UNKNOWN or name is None:
        return None
    group = catalog.group_named(str(name))
    if group is None:
        return (f"{FALLBACK_GROUP} names {name!r} but no Auto Scaling group, managed instance group or scale set "
                "of that name is declared in this stack; fix: declare the on-demand fallback group here or "
                "correct the link")
    if group.res.urn == pool_urn:
        return f"{FALLBACK_GROUP} names the spot pool itself; fix: point it at a separate on-demand group"
    if group.on_demand is None:
        why = group.detail or "its purchase option is unknown until apply"
        return (f"whether fallback {group.kind} {group.res.label()} is on-demand cannot be established ({why}); "
                "fix: declare it in this stack with a literal purchase option")
    if not group.on_demand:
        return (f"fallback {group.kind} {group.res.label()} is not on-demand ({group.detail}); fix: give the "
                "fallback group regular (on-demand) capacity only")
    return None


#: The scheduled jobs that run the fallback controller, per cloud (what the components deploy).
CONTROLLER_JOB_TYPES = ("aws:lambda/function:Function", "gcp:cloudrunv2/job:Job", "azure-native:app:Job")
#: A waiver must say why; "ok" is not a reason.
MIN_WAIVER_CHARS = 10


def _controlled_pools(catalog: Catalog) -> set[str]:
    """Pool names some controller job in this stack targets (its ``spotgpu-role=controller`` + ``spotgpu-pool``)."""
    out: set[str] = set()
    for res in catalog.inv.of_type(*CONTROLLER_JOB_TYPES):
        links = links_of(res)
        if links.get(ROLE) == "controller" and isinstance(links.get(POOL), str):
            out.add(str(links.get(POOL)))
    return out


def _growth_problem(catalog: Catalog, pool_links: Any, group_name: Any, controlled: set[str]) -> str | None:
    """Why the fallback group can never grow, if it cannot: capped at 0, or nothing in the stack resizes it."""
    group = catalog.group_named(str(group_name)) if isinstance(group_name, str) else None
    if group is not None and group.res.get("maxSize") == 0:
        return (f"fallback group {group.res.label()} has maxSize 0, so it can never grow; fix: set maxSize to the "
                "most on-demand nodes the ladder may use (capacity.fallbackMax)")
    pool_name = pool_links.get(POOL)
    if isinstance(pool_name, str) and pool_name in controlled:
        return None
    waiver = pool_links.get(CONTROLLER_WAIVER)
    if isinstance(waiver, str) and len(waiver.strip()) >= MIN_WAIVER_CHARS:
        return None
    if waiver is not None and waiver is not UNKNOWN:
        return (f"{CONTROLLER_WAIVER} {waiver!r} states no reason; fix: say who grows the fallback group instead "
                f"(at least {MIN_WAIVER_CHARS} characters)")
    return (f"no controller job in this stack targets pool {pool_name!r}, so its fallback group stays at size 0; "
            "fix: deploy the controller (GpuPool does unless controller.enabled is false: a Lambda function, Cloud "
            f"Run job or Container Apps job tagged {ROLE}=controller, {POOL}=<pool>), or state who grows it "
            f"with controller: {{enabled: false, waiver: <reason>}} ({CONTROLLER_WAIVER} tag)")


def check_fallback_link(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    controlled = _controlled_pools(catalog)
    for pool in catalog.pools:
        who, name = pool.describe(), pool.links.get(FALLBACK_GROUP)
        if name is UNKNOWN or name is None:
            yield Finding(pool.res.urn, f"{who}: {describe_missing(FALLBACK_GROUP, pool.links)}, so a capacity "
                          f"shortage has nowhere to go; fix: set {FALLBACK_GROUP}=NAME of an on-demand Auto Scaling "
                          "group / managed instance group / scale set declared in this stack")
        elif problem := _fallback_problem(catalog, pool.res.urn, name):
            yield Finding(pool.res.urn, f"{who}: {problem}")
        elif growth := _growth_problem(catalog, pool.links, name, controlled):
            yield Finding(pool.res.urn, f"{who}: {growth}")
        group = catalog.group_named(name) if isinstance(name, str) else None
        text = pool.links.get(LADDER)
        if text is None and group is not None:
            text = links_of(group.res).get(LADDER)
        if text is None or text is UNKNOWN:
            why = "is unknown until apply" if text is UNKNOWN else "is missing"
            yield Finding(pool.res.urn, f"{who}: the {LADDER} tag {why}, so reacquisition has no bounded waits or "
                          f"cost ceilings; fix: set {LADDER} with spotgpu.contract.tags.encode_ladder(...), e.g. "
                          "'sp:600:3.5;od:3600:7' (kind:maxWaitSeconds:ceilingUsdPerHour, or per work-hour with a w suffix), ending on od or qd")
            continue
        decoded = ladder_value(text)
        steps = decoded.value
        if steps is None:
            yield Finding(pool.res.urn, f"{who}: {LADDER} {text!r} is malformed ({decoded.error}); fix: write it "
                          "with spotgpu.contract.tags.encode_ladder(...)")
            continue
        problems = ladder_problems(steps)
        if problems:
            yield Finding(pool.res.urn, f"{who}: fallback ladder {text!r} is unsafe: {'; '.join(problems)}; "
                          "fix: re-encode a valid FallbackLadder with spotgpu.contract.tags.encode_ladder")


RULES = [
    stack_rule(
        "spot-gpu-requires-checkpoint",
        "Every spot/preemptible GPU pool links (spotgpu-checkpoint-store) to a checkpoint store declared in the "
        "same stack.",
        EnforcementLevel.MANDATORY,
        check_checkpoint_link,
        remediation="Tag the pool with spotgpu-checkpoint-store=<store URL> and declare that bucket or storage "
        "account in the same stack",
    ),
    stack_rule(
        "spot-gpu-requires-fallback",
        "Every spot/preemptible GPU pool links (spotgpu-fallback-group) to an on-demand fallback group in the same "
        "stack that can grow (max size above 0, and a controller job targeting the pool or a stated "
        "spotgpu-controller-waiver), with a ladder of bounded waits and cost ceilings ending on on_demand or "
        "queue_defer.",
        EnforcementLevel.MANDATORY,
        check_fallback_link,
        remediation="Tag the pool with spotgpu-fallback-group=<on-demand group name> and spotgpu-ladder="
        "encode_ladder(...)",
    ),
]
