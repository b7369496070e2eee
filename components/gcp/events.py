"""``spotgpu:gcp:PreemptionEvents``: this pool's preemptions as Pub/Sub messages.

A project log sink routes the ``compute.instances.preempted`` system-event audit
entries of the pool's spot VMs to a topic (the filter, from
:func:`spotgpu_pulumi.gcp.plan.preemption_log_filter`, selects the methods of
:data:`spotgpu.contract.sources.GCP_INTERRUPTIONS`, which the controller parses); the fallback controller and telemetry
pull them from a subscription. The sink writes with its own identity, which gets
publisher on this topic only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import logging, pubsub

TOKEN = "spotgpu:gcp:PreemptionEvents"


@dataclass(frozen=True)
class PreemptionEventsArgs:
    project: str
    topic: str
    subscription: str
    sink: str
    #: the sink's filter (:func:`spotgpu_pulumi.gcp.plan.preemption_log_filter`)
    log_filter: str
    labels: dict[str, str]


class PreemptionEvents(pulumi.ComponentResource):
    topic_name: pulumi.Output[str]
    subscription_name: pulumi.Output[str]

    def __init__(self, name: str, args: PreemptionEventsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        project, topic, labels = args.project, args.topic, args.labels
        topic_res = pubsub.Topic(
            f"{name}-topic", project=project, name=topic, labels=labels, message_retention_duration="86400s", opts=child
        )
        sub = pubsub.Subscription(
            f"{name}-sub",
            project=project,
            name=args.subscription,
            topic=topic_res.id,
            ack_deadline_seconds=60,
            message_retention_duration="604800s",
            # Never expire: a quiet pool (no preemptions for 31 days) must keep its subscription.
            expiration_policy={"ttl": ""},
            labels=labels,
            opts=child,
        )
        log_sink = logging.ProjectSink(
            f"{name}-sink",
            project=project,
            name=args.sink,
            destination=f"pubsub.googleapis.com/projects/{project}/topics/{topic}",
            filter=args.log_filter,
            unique_writer_identity=True,
            description="spotgpu: spot preemptions of this pool's VMs",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[topic_res]),
        )
        pubsub.TopicIAMMember(
            f"{name}-sink-publisher",
            project=project,
            topic=topic_res.name,
            role="roles/pubsub.publisher",
            member=log_sink.writer_identity,
            opts=child,
        )
        self.topic_name = topic_res.name
        self.subscription_name = sub.name
        self.register_outputs({"topic": self.topic_name, "subscription": self.subscription_name})
