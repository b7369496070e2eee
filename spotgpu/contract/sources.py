"""The fleet-wide event sources per cloud, written once for the side that routes and the side that reads.

The components route a pool's events (``components/aws/patterns.py`` and ``events.py``: EventBridge
rules into an SQS queue; ``components/gcp/plan.py`` and ``events.py``: a log sink into Pub/Sub;
``components/azure/events.py``: the Scheduled Events system topic into a Storage queue through an
Event Grid subscription) and the controller's adapters parse what arrives (``spotgpu.controller.aws``,
``.gcp``, ``.azure``). Both import the names below, and ``tests/controller/test_event_sources.py``
checks both directions: every shape a rule routes has a parser branch, every branch is routed.

Every message the controller receives becomes an observation or a counted drop with a
:class:`DropReason`; an event without a usable time takes the time it was received and says so
(:class:`EventTimeBasis`), as aws-node-termination-handler falls back to the receive time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from spotgpu.contract.interruptions import InterruptionKind


class EventTimeBasis(StrEnum):
    """Where an observed event's time came from (the ``timeBasis`` of the controller's records)."""

    CLOUD = "cloud"  # the event's own time
    RECEIVED = "received"  # the event carried no usable time: when the queue or the controller received it


class DropReason(StrEnum):
    """Why a received message became no observation (``spotgpu_controller_events_dropped_total{source,reason}``)."""

    NOT_JSON = "not-json"  # the body is not JSON at all
    MALFORMED = "malformed"  # JSON, but not the documented shape (no detail, no data)
    UNKNOWN_SHAPE = "unknown-shape"  # a detail-type, audit method or event type no parser branch reads
    UNKNOWN_VALUE = "unknown-value"  # a known shape with a value the parser does not know (an Azure EventType)
    NO_INSTANCE = "no-instance"  # names no VM
    TEST_NOTIFICATION = "test-notification"  # Auto Scaling's autoscaling:TEST_NOTIFICATION (a hook was created)
    CANCELED = "canceled"  # the cloud says the event will not happen (Azure Canceled)
    OTHER_POOL = "other-pool"  # an account-wide event about a VM that is not this pool's


#: Drops that are the sources working as designed: an account-wide rule's event about another pool's
#: VM, the test notification a new lifecycle hook sends, an event the cloud canceled. They are counted
#: like the others, but only the rest (a message nobody can read) raise ``SpotgpuControllerEventsDropped``
#: (``spotgpu/observability/alerts.yaml``; a test keeps its reason filter equal to this set).
EXPECTED_DROPS = frozenset({DropReason.OTHER_POOL, DropReason.TEST_NOTIFICATION, DropReason.CANCELED})

# --- AWS: EventBridge detail-types, delivered to the pool's SQS queue -------------------------

AWS_SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
AWS_REBALANCE = "EC2 Instance Rebalance Recommendation"
AWS_STATE_CHANGE = "EC2 Instance State-change Notification"
AWS_LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"
AWS_LAUNCH_SUCCESSFUL = "EC2 Instance Launch Successful"
AWS_TERMINATE_ACTION = "EC2 Instance-terminate Lifecycle Action"
#: An Auto Scaling lifecycle notification sent when a hook is created (no instance; ignored).
AWS_TEST_NOTIFICATION = "autoscaling:TEST_NOTIFICATION"
AWS_FLEET_ERROR = "EC2 Fleet Error"
AWS_FLEET_INFORMATION = "EC2 Fleet Information"
AWS_FLEET_INSTANCE_CHANGE = "EC2 Fleet Instance Change"
#: Fleet events the fleet rule routes: failures (Error blocks fulfilment, Information does not:
#: both are launch failures, like Auto Scaling's) and instance changes. Fleet State Change is not
#: routed: nothing reads a fleet's own state.
AWS_FLEET_FAILURES = (AWS_FLEET_ERROR, AWS_FLEET_INFORMATION)
AWS_FLEET_EVENTS = (*AWS_FLEET_FAILURES, AWS_FLEET_INSTANCE_CHANGE)
#: ``EC2 Fleet Instance Change`` sub-types that are a loss or a notice (``launched`` is a launch).
AWS_FLEET_INSTANCE_KINDS = {"terminated": InterruptionKind.TERMINATED, "termination_notified": InterruptionKind.TERMINATING}
AWS_FLEET_LAUNCHED = "launched"
#: AWS Health: scheduled changes to EC2 resources (instance retirement, reboots), as
#: aws-node-termination-handler routes them; ``affectedEntities`` names the instances.
AWS_HEALTH_EVENT = "AWS Health Event"
AWS_HEALTH_DETAIL = {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]}
AWS_HEALTH_KIND = InterruptionKind.MAINTENANCE_SCHEDULED

#: The spot signals (source ``aws.ec2``), routed account-wide: they carry only an instance id.
AWS_SPOT_SIGNALS = (AWS_SPOT_WARNING, AWS_REBALANCE)
#: Launch outcomes (source ``aws.autoscaling``): failures are the "capacity unavailable" signal;
#: a success's ``EndTime`` is when the replacement became ready (the end of a reacquisition).
AWS_LAUNCH_OUTCOMES = (AWS_LAUNCH_UNSUCCESSFUL, AWS_LAUNCH_SUCCESSFUL)
#: Instance states the state-change rule routes: those that mean the VM is gone (a Spot
#: interruption with the stop or hibernate behaviour ends in ``stopped``).
AWS_GONE_STATES = ("stopping", "stopped", "shutting-down", "terminated")
AWS_WATCHED_STATES = AWS_GONE_STATES
#: The detail-types the controller reads as an interruption of one instance, and what it calls each.
AWS_INTERRUPTIONS = {
    AWS_SPOT_WARNING: InterruptionKind.INTERRUPTION,
    AWS_REBALANCE: InterruptionKind.REBALANCE,
    AWS_TERMINATE_ACTION: InterruptionKind.TERMINATING,
}
#: A state change into one of :data:`AWS_GONE_STATES`.
AWS_GONE_KIND = InterruptionKind.TERMINATED
#: Every (source, detail-type) the components' rules route to the pool's queue. The parser
#: (``spotgpu.controller.aws``) has one branch per entry, and no other.
AWS_ROUTED = {
    **{("aws.ec2", t): "spot" for t in AWS_SPOT_SIGNALS},
    ("aws.ec2", AWS_STATE_CHANGE): "state",
    **{("aws.autoscaling", t): "launch" for t in AWS_LAUNCH_OUTCOMES},
    ("aws.autoscaling", AWS_TERMINATE_ACTION): "lifecycle",
    **{("aws.ec2fleet", t): "fleet" for t in AWS_FLEET_EVENTS},
    ("aws.health", AWS_HEALTH_EVENT): "health",
}


@dataclass(frozen=True)
class QueueSettings:
    """The pool's SQS queue as the component creates it and the controller (and its Lambda) assume it."""

    #: Four days: long enough to survive a controller outage over a weekend night.
    retention_seconds: int = 4 * 24 * 3600
    #: Long polling keeps the controller's idle cost near zero.
    receive_wait_seconds: int = 20
    #: How long a received message stays hidden; Lambda's SQS trigger refuses a function whose
    #: timeout is longer, so it bounds ``controller.timeoutSeconds`` on AWS.
    visibility_timeout_seconds: int = 60
    #: Messages per receive (SQS's maximum).
    max_messages: int = 10


AWS_QUEUE = QueueSettings()

# --- GCP: Cloud Audit Log system events, routed by a log sink to Pub/Sub ----------------------

#: The system-event audit log (URL-encoded, as a log name in a filter).
GCP_SYSTEM_EVENT_LOG = "cloudaudit.googleapis.com%2Fsystem_event"
#: The audit ``methodName`` values the sink routes and the controller parses, and what it calls each.
#: Only preemptions: ``compute.instances.guestTerminate`` (a shutdown from inside the guest) is not
#: a loss of spot capacity, so it is neither routed nor parsed.
GCP_INTERRUPTIONS = {"compute.instances.preempted": InterruptionKind.PREEMPTED}


def gcp_method_filter() -> str:
    """The log filter term selecting :data:`GCP_INTERRUPTIONS`' methods."""
    methods = [f'"{m}"' for m in GCP_INTERRUPTIONS]
    return f"protoPayload.methodName={methods[0] if len(methods) == 1 else '(' + ' OR '.join(methods) + ')'}"


# --- Azure: Scheduled Events published to Event Grid, delivered to a Storage queue ------------

#: The system topic type Scheduled Events are published to, with ``scheduledEventsPolicy
#: .scheduledEventsAdditionalPublishingTargets.eventGridAndResourceGraph.enable`` on a scale set
#: (MicrosoftDocs azure-compute-docs, articles/virtual-machines/scheduled-events-event-grid.md).
#: One system topic per source and type: its source is the subscription.
AZURE_SYSTEM_TOPIC_TYPE = "Microsoft.ResourceNotifications.MaintenanceResources"
#: The Event Grid event type of every scheduled event (Scheduled, Started, Completed, Canceled).
AZURE_SCHEDULED_EVENT = "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted"
#: The event types the subscription routes and the controller parses.
AZURE_ROUTED = (AZURE_SCHEDULED_EVENT,)
#: What the controller calls each ``EventType`` for the VMs in ``Resources``.
AZURE_EVENT_KINDS = {
    "Preempt": InterruptionKind.EVICTED,
    "Terminate": InterruptionKind.TERMINATING,
    "Freeze": InterruptionKind.MAINTENANCE_SCHEDULED,
    "Reboot": InterruptionKind.MAINTENANCE_SCHEDULED,
    "Redeploy": InterruptionKind.MAINTENANCE_SCHEDULED,
}
#: ``EventStatus`` of an event that will not happen.
AZURE_CANCELED = "Canceled"


@dataclass(frozen=True)
class AzureQueueSettings:
    """The Storage queue Event Grid delivers to, as the component creates it and the controller reads it."""

    #: Event Grid's message time to live on the queue: four days, like the AWS queue.
    message_ttl_seconds: int = 4 * 24 * 3600
    #: How long a received message stays hidden before another reader may take it.
    visibility_timeout_seconds: int = 60
    #: Messages per receive (the Queue service's maximum is 32).
    max_messages: int = 32


AZURE_QUEUE = AzureQueueSettings()
