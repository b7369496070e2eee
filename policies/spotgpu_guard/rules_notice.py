"""Notices are best effort; periodic checkpoints are the protection.

``notice-handled``: when a notice does come, something must act on it. AWS groups
rebalance early and hold terminating instances in a lifecycle hook; GCP Spot
templates ask for the 120 s notice instead of 0 s; every pool's bootstrap starts
the node agent (which turns a notice into stop-new-work, a final checkpoint and a
drain); AWS launch templates require IMDSv2, the only metadata path the agent uses.

``periodic-checkpoint-primary``: the pool declares its checkpoint interval, and when
the measured final checkpoint cannot fit the provider's usable notice, the
interval alone must keep expected lost work (interval/2 + write time) within the
workload's bound.

``azure-one-scheduled-events-topic``: Azure allows one ``MaintenanceResources`` system topic per
subscription, so a second one (two pools that each route their Scheduled Events) fails at
``pulumi up``: the second must subscribe to the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu.contract.sources import AZURE_SYSTEM_TOPIC_TYPE
from spotgpu.contract.tags import AGENT_MARKER
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.links import CHECKPOINT_INTERVAL, NOTICE, POOL, WORKLOAD, describe_missing, read_workload
from spotgpu_guard.model import Contract, SpotPool
from spotgpu_guard.rule import Finding, stack_rule
from spotgpu_guard.stack_keys import restate
from spotgpu_guard.values import UNKNOWN, as_number

#: Default bound when a workload tag leaves out ``b`` (WorkloadProfile.max_lost_work_seconds).
DEFAULT_MAX_LOST_WORK_SECONDS = 3600.0


def contract_name(contract: Contract) -> str:
    """The ``spotgpu-notice`` value a bootstrap installs for this contract."""
    if contract.provider == "gcp":
        return f"gcp-{contract.preemption_notice_seconds}"  # type: ignore[union-attr]
    return contract.provider


def _bootstrap_problem(pool: SpotPool) -> str | None:
    texts = [b.text for b in pool.bootstraps]
    if any(isinstance(t, str) and AGENT_MARKER in t for t in texts):
        return None
    wheres = ", ".join(b.where for b in pool.bootstraps)
    if UNKNOWN in texts:
        return (f"its bootstrap ({wheres}) is unknown until apply, so the node agent cannot be confirmed; fix: "
                "render the bootstrap from known values (spotgpu.bootstrap.render_bootstrap)")
    return (f"its bootstrap ({wheres}) does not start the node agent ({AGENT_MARKER} not found), so a notice is "
            "never turned into a drain and final checkpoint; fix: render it with spotgpu.bootstrap.render_bootstrap")


def _waived(pool: SpotPool, config: Mapping[str, Any]) -> bool:
    waivers = config.get("zeroNoticeWaivers") or {}
    keys = {pool.res.name, pool.links.get(POOL)}
    return any(isinstance(k, str) and isinstance(waivers.get(k), str) and len(waivers[k].strip()) >= 10 for k in keys)


def check_notice_handled(catalog: Catalog, config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        who = pool.describe()
        for gap in pool.notice_gaps:
            if gap.waiver == "zero-notice" and _waived(pool, config):
                continue
            message = f"{who}: {gap.message}"
            if gap.stack_fix:
                message = restate(message, pool.res, pool.links, gap.stack_fix)
            yield Finding(pool.res.urn, message)
        if problem := _bootstrap_problem(pool):
            yield Finding(pool.res.urn, f"{who}: {problem}")
        installed = pool.links.get(NOTICE)
        if isinstance(installed, str) and pool.contract is not None and installed != contract_name(pool.contract):
            yield Finding(pool.res.urn, f"{who}: the agent is configured for notice contract {installed!r} but the "
                          f"resource provides {contract_name(pool.contract)!r}; fix: render the bootstrap and the "
                          f"{NOTICE} tag from the same notice contract")


def _interval(pool: SpotPool) -> tuple[float | None, str]:
    raw = pool.links.get(CHECKPOINT_INTERVAL)
    if raw is None or raw is UNKNOWN:
        return None, (f"{describe_missing(CHECKPOINT_INTERVAL, pool.links)}; periodic checkpoints are the primary "
                      f"protection (notices are best effort); fix: set {CHECKPOINT_INTERVAL}=SECONDS, the interval "
                      "the workload actually checkpoints at (spotgpu.economics.interval.choose_interval)")
    value = as_number(raw)
    if value is None or value <= 0:
        return None, f"{CHECKPOINT_INTERVAL} {raw!r} is not a positive number of seconds; fix: set e.g. 900"
    return value, ""


def _lost_work_problem(pool: SpotPool, interval: float) -> str | None:
    raw = pool.links.get(WORKLOAD)
    if raw is None or raw is UNKNOWN:
        return (f"{describe_missing(WORKLOAD, pool.links)}, so the lost-work bound cannot be checked; fix: set "
                f"{WORKLOAD}=spotgpu.contract.tags.encode_workload(profile) (at least w=<write seconds>;b=<bound seconds>)")
    decoded = read_workload(pool.links)
    figures = decoded.value
    if figures is None:
        return f"{WORKLOAD} is malformed ({decoded.error}); fix: write it with spotgpu.contract.tags.encode_workload"
    write = figures.get("checkpoint_write_seconds")
    if write is None:
        return f"{WORKLOAD} {raw!r} has no w=<checkpoint write seconds>; fix: encode the measured write time"
    bound = figures.get("max_lost_work_seconds", DEFAULT_MAX_LOST_WORK_SECONDS)
    if interval <= write:
        return (f"interval {interval:g} s is not longer than the {write:g} s checkpoint write, so the job would "
                "only checkpoint; fix: lengthen the interval or speed up the write")
    if pool.contract is None:
        return (f"the provider's notice contract cannot be derived ({pool.contract_problem}); fix: set it "
                "literally so the final-checkpoint budget is known")
    if pool.contract.final_checkpoint_fits(write):
        return None
    lost = interval / 2 + write
    if lost <= bound:
        return None
    budget = pool.contract.final_checkpoint_budget_seconds
    fix = (f"set {CHECKPOINT_INTERVAL} to at most {2 * (bound - write):g} s" if bound > write
           else "no interval can meet the bound: speed up checkpoint writes or raise maxLostWorkSeconds")
    stack_fix = (f"set checkpointIntervalSeconds of the workload {{pool}}.workload names to at most {2 * (bound - write):g}"
                 if bound > write else "lower checkpointWriteSeconds or raise maxLostWorkSeconds of the workload "
                 "{pool}.workload names")  # fmt: skip
    return restate(f"its final checkpoint ({write:g} s) cannot fit the {pool.contract.provider} notice "
            f"({budget:g} s usable of {pool.contract.notice_seconds:g} s), so periodic checkpoints carry all the "
            f"protection, but interval {interval:g} s loses about {lost:g} s of work per interruption "
            f"(interval/2 + write), above the workload bound of {bound:g} s; fix: {fix}", pool.res, pool.links, stack_fix)


def check_periodic_checkpoint(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for pool in catalog.pools:
        interval, problem = _interval(pool)
        if interval is not None:
            problem = _lost_work_problem(pool, interval) or ""
        if problem:
            yield Finding(pool.res.urn, f"{pool.describe()}: {problem}")


SYSTEM_TOPIC = "azure-native:eventgrid:SystemTopic"


def check_one_events_topic(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    """A second Scheduled Events system topic of one subscription (an unknown source counts as the stack's own).

    The first is the first in the inventory's (URN) order.
    """
    first: dict[str, str] = {}
    for res in catalog.inv.of_type(SYSTEM_TOPIC):
        if res.get("topicType") != AZURE_SYSTEM_TOPIC_TYPE:
            continue
        source = res.get("source")
        key = source if isinstance(source, str) else "the stack's subscription"
        if key not in first:
            first[key] = res.name
            continue
        yield Finding(res.urn, f"{res.label()} is a second {AZURE_SYSTEM_TOPIC_TYPE} system topic of {key} (the first "
                      f"is '{first[key]}'); Azure allows one per subscription, so `pulumi up` fails here; fix: drop it "
                      f"and point this pool's SystemTopicEventSubscription at '{first[key]}' (spotgpu pools of one "
                      "stack share it by themselves; another stack's pool names it in scheduledEventsTopic)")  # fmt: skip


RULES = [
    stack_rule(
        "notice-handled",
        "Spot pools act on interruption notices: AWS capacity rebalance + termination lifecycle hook + IMDSv2, "
        "GCP 120 s preemption notice, and a bootstrap that starts the spotgpu node agent.",
        EnforcementLevel.MANDATORY,
        check_notice_handled,
        schema={
            "zeroNoticeWaivers": {
                "type": "object",
                "description": "Pool or resource name -> stated reason (>= 10 chars) for accepting a 0 s GCP notice.",
                "additionalProperties": {"type": "string", "minLength": 10},
                "default": {},
            }
        },
        remediation="Apply the setting named in the message; waive the GCP 120 s notice only with a stated reason",
    ),
    stack_rule(
        "periodic-checkpoint-primary",
        "Every spot pool declares its checkpoint interval, short enough that expected lost work stays within the "
        "workload's bound whenever the final checkpoint cannot fit the provider's notice.",
        EnforcementLevel.MANDATORY,
        check_periodic_checkpoint,
        remediation="Set spotgpu-checkpoint-interval (and spotgpu-workload) from the measured figures",
    ),
    stack_rule(
        "azure-one-scheduled-events-topic",
        "At most one Scheduled Events (MaintenanceResources) system topic per Azure subscription: Azure refuses a "
        "second, and every pool that routes its events subscribes to the one.",
        EnforcementLevel.MANDATORY,
        check_one_events_topic,
        remediation="Subscribe every pool to the subscription's one Scheduled Events system topic",
    ),
]
