"""Controller telemetry: Prometheus metrics and JSON lines from the same events.

Launch failures are counted by reason (capacity, quota, price, other) and group,
never folded into one "failed" number: quota needs a ticket, capacity needs the
ladder. Reacquisition latency runs from the first interruption (or, lacking an
event, the first tick that saw the loss) to the replacement being ready.
"""

from __future__ import annotations

import json
from typing import IO

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from spotgpu.contract.controller_events import (
    ActionFailed,
    ActionTaken,
    Deferred,
    Event,
    EventDropped,
    FallbackUsage,
    Interruption,
    LaunchFailure,
    ProgressUnreported,
    Reacquired,
    Resumed,
    StepChanged,
)
from spotgpu.models.ladder import StepKind

REACQUISITION_BUCKETS = (30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400)


class ControllerTelemetry:
    def __init__(self, registry: CollectorRegistry | None = None, json_lines: IO[str] | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.json_lines = json_lines
        r = self.registry
        self.launch_failures = Counter(
            "spotgpu_launch_failures",
            "Launch failures by pool, group and reason.",
            ["pool", "group", "reason"],
            registry=r,
        )
        self.interruptions = Counter("spotgpu_interruptions", "Interruption events seen.", ["pool", "type"], registry=r)
        self.reacquisition = Histogram(
            "spotgpu_reacquisition_seconds",
            "Interruption (or loss) to replacement ready.",
            ["pool"],
            buckets=REACQUISITION_BUCKETS,
            registry=r,
        )
        self.fallback_seconds = Counter(
            "spotgpu_fallback_node_seconds", "Node-seconds on the on-demand fallback group.", ["pool"], registry=r
        )
        self.fallback_cost = Counter(
            "spotgpu_fallback_cost_usd", "USD spent on fallback capacity.", ["pool"], registry=r
        )
        self.step_seconds = Histogram(
            "spotgpu_ladder_step_seconds",
            "Seconds a pool spent on a rung before leaving it (next rung or reacquired).",
            ["pool", "step"],
            buckets=REACQUISITION_BUCKETS,
            registry=r,
        )
        self.step = Gauge(
            "spotgpu_ladder_step", "Current ladder rung rank; -1 when the pool is whole.", ["pool"], registry=r
        )
        self.deferred = Gauge("spotgpu_deferred", "1 while the pool's work is deferred.", ["pool"], registry=r)
        self.progress_unreported = Gauge(
            "spotgpu_progress_unreported",
            "1 once a pool with a deadline saw commits without a step: its deadline test runs on the clock alone.",
            ["pool"],
            registry=r,
        )
        self.deadline_slack = Gauge(
            "spotgpu_deadline_slack_seconds",
            "Deadline slack on committed work: seconds to the deadline left after moving to on-demand now.",
            ["pool"],
            registry=r,
        )
        self.deadline_at_risk = Gauge(
            "spotgpu_deadline_at_risk",
            "1 while the pool's deadline is at risk (its slack would not survive losing spot now).",
            ["pool"],
            registry=r,
        )
        self.events_dropped = Counter(
            "spotgpu_controller_events_dropped",
            "Received event messages that became no observation, by pool, source (sqs, pubsub, eventgrid) and "
            "reason (each logged once).",
            ["pool", "source", "reason"],
            registry=r,
        )
        self.actions = Counter("spotgpu_controller_actions", "Actions issued.", ["pool", "action"], registry=r)
        self.action_failures = Counter(
            "spotgpu_controller_action_failures", "Actions the cloud refused.", ["pool", "action"], registry=r
        )

    def emit(self, event: Event) -> None:
        pool = event.pool
        match event.fields:
            case LaunchFailure(group=group, reason=reason):
                self.launch_failures.labels(pool, group, reason.value).inc()
            case Interruption(type=kind):
                self.interruptions.labels(pool, kind.value).inc()
            case EventDropped(source=source, reason=reason):
                self.events_dropped.labels(pool, source, reason).inc()
            case Reacquired(latency_seconds=latency, step=step, seconds_on_step=on_step):
                self.reacquisition.labels(pool).observe(latency)
                self.step_seconds.labels(pool, step).observe(on_step)
            case FallbackUsage(node_seconds=seconds, cost_usd=cost):
                self.fallback_seconds.labels(pool).inc(seconds)
                self.fallback_cost.labels(pool).inc(cost)
            case StepChanged(from_=before, to=after, seconds_on_previous=on_previous):
                self.step.labels(pool).set(StepKind(after).rank)
                self.step_seconds.labels(pool, before).observe(on_previous)
            case Deferred():
                self.deferred.labels(pool).set(1)
            case Resumed():
                self.deferred.labels(pool).set(0)
            case ProgressUnreported():
                self.progress_unreported.labels(pool).set(1)
            case ActionTaken(action=action):
                self.actions.labels(pool, action).inc()
            case ActionFailed(action=action):
                self.action_failures.labels(pool, action).inc()
        if self.json_lines is not None:
            self.json_lines.write(json.dumps(event.to_json(), sort_keys=True, default=str) + "\n")
            self.json_lines.flush()

    def pool_whole(self, pool: str) -> None:
        self.step.labels(pool).set(-1)

    def deadline(self, pool: str, slack_seconds: float, at_risk: bool) -> None:
        """A deadline-tracking pool's standing after a tick (so a dashboard and an alert can watch it).

        It also makes ``spotgpu_progress_unreported`` exist at 0 for the pool, so "no alarm"
        is a value, not a missing series; the event still raises it to 1.
        """
        self.deadline_slack.labels(pool).set(slack_seconds)
        self.deadline_at_risk.labels(pool).set(1 if at_risk else 0)
        self.progress_unreported.labels(pool)
