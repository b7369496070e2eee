"""``spotgpu:aws:InterruptionEvents``: the pool's interruption and capacity signals, in one SQS queue.

The node agent reacts to its own notice through IMDS; this queue is for the
fallback controller, which needs the fleet-wide view: which nodes got a
warning or a rebalance recommendation, which launches failed (the "capacity
unavailable" signal, measured apart from quota) and when replacements came up
(reacquisition latency). Delivery is best effort, like the notices themselves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from spotgpu.contract.sources import AWS_QUEUE
from spotgpu_pulumi.aws.documents import queue_policy
from spotgpu_pulumi.aws.patterns import event_patterns, fleet_pattern

TOKEN = "spotgpu:aws:InterruptionEvents"


@dataclass(frozen=True)
class InterruptionEventsArgs:
    pool: str
    queue_name: str
    group_names: list[str]
    fleet_arn: pulumi.Output[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)


class InterruptionEvents(pulumi.ComponentResource):
    queue_url: pulumi.Output[str]
    queue_arn: pulumi.Output[str]

    def __init__(self, name: str, args: InterruptionEventsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        queue = aws.sqs.Queue(
            f"{name}-queue",
            name=args.queue_name,
            sqs_managed_sse_enabled=True,
            # Retention, long polling and visibility: the contract's, which the controller assumes.
            message_retention_seconds=AWS_QUEUE.retention_seconds,
            receive_wait_time_seconds=AWS_QUEUE.receive_wait_seconds,
            visibility_timeout_seconds=AWS_QUEUE.visibility_timeout_seconds,
            tags=args.tags,
            opts=child,
        )
        patterns: dict[str, str | pulumi.Output[str]] = {
            key: json.dumps(pattern, sort_keys=True) for key, pattern in event_patterns(args.group_names).items()
        }
        if args.fleet_arn is not None:
            patterns["fleet"] = args.fleet_arn.apply(lambda arn: json.dumps(fleet_pattern(arn), sort_keys=True))
        rule_arns: list[pulumi.Output[str]] = []
        for key, pattern in patterns.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{key}",
                description=f"spotgpu pool {args.pool}: {key}",
                event_pattern=pattern,
                state="ENABLED",
                tags=args.tags,
                opts=child,
            )
            # No role_arn on an SQS target: EventBridge delivers under the queue policy.
            aws.cloudwatch.EventTarget(
                f"{name}-{key}-to-queue", rule=rule.name, arn=queue.arn, target_id="spotgpu-queue", opts=child
            )
            rule_arns.append(rule.arn)
        aws.sqs.QueuePolicy(
            f"{name}-queue-policy",
            queue_url=queue.url,
            policy=pulumi.Output.all(queue.arn, *rule_arns).apply(
                lambda v: json.dumps(queue_policy(v[0], list(v[1:])))
            ),
            opts=child,
        )
        self.queue_url = queue.url
        self.queue_arn = queue.arn
        self.register_outputs({"queueUrl": self.queue_url, "queueArn": self.queue_arn})
