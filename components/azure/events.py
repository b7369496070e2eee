"""``spotgpu:azure:ScheduledEventsRoute``: the pool's Scheduled Events, delivered to a queue the controller reads.

With ``publishEventsToEventGrid`` the pool's scale sets publish every Scheduled Event
(``Preempt`` included) to the subscription's ``Microsoft.ResourceNotifications.MaintenanceResources``
system topic (MicrosoftDocs azure-compute-docs, scheduled-events-event-grid.md). This
component gives that a reader, the way the AWS pool routes EventBridge into SQS:

    ScheduledEventsRoute <pool>-events
    ├─ Queue                        scheduled-events, in the pool's own storage account
    ├─ SystemTopic                  <pool>-<env>-scheduled-events (source: the subscription; its own identity)
    ├─ RoleAssignment               the topic's identity: Storage Queue Data Message Sender on the queue only
    └─ SystemTopicEventSubscription <pool>-<env>-to-queue: ScheduledEventEmitted of this resource group,
                                     delivered with the topic's identity (the account takes no shared keys)

The controller (``eventsQueueUrl`` in its config) reads the queue with Storage Queue Data
Message Processor, granted by :class:`~spotgpu_pulumi.azure.controller.ControllerIdentity`.
The event type and queue settings are the contract's (:mod:`spotgpu.contract.sources`),
which the controller parses. Azure allows one system topic per source and type, so one pool
creates it (``topic``) and every other pool in the subscription subscribes to it: those of the
same stack by themselves (``share_topic``), another stack's through ``scheduledEventsTopic``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native.eventgrid as eventgrid
import pulumi_azure_native.storage as storage

from spotgpu.contract.sources import AZURE_QUEUE, AZURE_ROUTED, AZURE_SYSTEM_TOPIC_TYPE
from spotgpu.models.refs import Ref
from spotgpu_pulumi.azure.assign import assign_role
from spotgpu_pulumi.azure.plan import EventsPlan, EventsTopic
from spotgpu_pulumi.azure.roles import Grant
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:azure:ScheduledEventsRoute"
#: Event Grid's retry: keep trying for a day (the queue keeps a delivered event four days).
MAX_DELIVERY_ATTEMPTS = 30
EVENT_TTL_MINUTES = 24 * 60


@dataclass(frozen=True)
class ScheduledEventsRouteArgs:
    plan: EventsPlan
    #: the resource group's name, or an Output of it
    resource_group: Ref
    #: the pool's storage account (the checkpoint store's): its name and ARM id
    account_name: pulumi.Input[str]
    account_id: pulumi.Input[str]
    subscription_id: pulumi.Output[str]
    #: the topic identity's queue grant (Storage Queue Data Message Sender)
    sender_grant: Grant
    tags: dict[str, str]


def subject_prefix(subscription_id: str, resource_group: str) -> str:
    """Scheduled events of this resource group's VMs and scale sets (Event Grid matches it case-insensitively)."""
    return f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/"


class ScheduledEventsRoute(pulumi.ComponentResource):
    queue_name: pulumi.Output[str]
    queue_url: str

    def __init__(self, name: str, args: ScheduledEventsRouteArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        plan, group = args.plan, as_input(args.resource_group)
        child = pulumi.ResourceOptions(parent=self)
        queue = storage.Queue(
            f"{name}-queue", account_name=args.account_name, resource_group_name=group, queue_name=plan.queue, opts=child
        )
        self.topic: EventsTopic | None = None
        if plan.creates_topic:
            topic = eventgrid.SystemTopic(
                f"{name}-topic",
                system_topic_name=plan.system_topic,
                resource_group_name=group,
                location="global",
                source=args.subscription_id.apply(lambda sub: f"/subscriptions/{sub}"),
                topic_type=AZURE_SYSTEM_TOPIC_TYPE,
                identity=eventgrid.IdentityInfoArgs(type=eventgrid.IdentityType.SYSTEM_ASSIGNED),
                tags=args.tags,
                opts=child,
            )
            own_principal = topic.identity.apply(lambda identity: (identity.principal_id or "") if identity else "")
            self.topic = EventsTopic(args.resource_group, plan.system_topic, own_principal)
            principal: pulumi.Input[str] = own_principal
            topic_name: pulumi.Input[str] = topic.name
        else:  # another pool's topic (scheduledEventsTopic, or shared within the stack): subscribe to it
            principal, topic_name = as_input(plan.topic_principal or ""), plan.system_topic
        sender = assign_role(
            f"{name}-{args.sender_grant.key}",
            args.sender_grant,
            principal_id=principal,
            subscription_id=args.subscription_id,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[queue]),
        )
        eventgrid.SystemTopicEventSubscription(
            f"{name}-subscription",
            event_subscription_name=plan.subscription,
            system_topic_name=topic_name,
            # the topic's group: the subscription is a child of the topic
            resource_group_name=as_input(plan.topic_resource_group or args.resource_group),
            event_delivery_schema=eventgrid.EventDeliverySchema.EVENT_GRID_SCHEMA,
            filter=eventgrid.EventSubscriptionFilterArgs(
                included_event_types=list(AZURE_ROUTED),
                subject_begins_with=pulumi.Output.all(args.subscription_id, group).apply(
                    lambda known: subject_prefix(known[0], known[1])
                ),
            ),
            delivery_with_resource_identity=eventgrid.DeliveryWithResourceIdentityArgs(
                identity=eventgrid.EventSubscriptionIdentityArgs(
                    type=eventgrid.EventSubscriptionIdentityType.SYSTEM_ASSIGNED
                ),
                destination=eventgrid.StorageQueueEventSubscriptionDestinationArgs(
                    endpoint_type="StorageQueue",
                    resource_id=args.account_id,
                    queue_name=plan.queue,
                    queue_message_time_to_live_in_seconds=AZURE_QUEUE.message_ttl_seconds,
                ),
            ),
            retry_policy=eventgrid.RetryPolicyArgs(
                max_delivery_attempts=MAX_DELIVERY_ATTEMPTS, event_time_to_live_in_minutes=EVENT_TTL_MINUTES
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[sender, queue]),
        )
        self.queue = queue
        self.queue_name = queue.name
        self.queue_url = plan.queue_url
        self.register_outputs({"queueName": self.queue_name, "queueUrl": self.queue_url})
