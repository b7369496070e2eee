"""The fleet-wide event sources per cloud, written once for the side that routes and the side that reads.

The components route a pool's events (``components/aws/patterns.py`` and ``events.py``: EventBridge
rules into an SQS queue; ``components/gcp/plan.py`` and ``events.py``: a log sink into Pub/Sub) and
the controller's adapters parse what arrives (``spotgpu.controller.aws``, ``spotgpu.controller.gcp``).
Both import the names below, so a rule cannot route an event the parser ignores, nor the parser
wait for an event no rule routes. Azure has no event source: the controller reads VM states.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu.contract.interruptions import InterruptionKind

# --- AWS: EventBridge detail-types, delivered to the pool's SQS queue -------------------------

AWS_SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
AWS_REBALANCE = "EC2 Instance Rebalance Recommendation"
AWS_STATE_CHANGE = "EC2 Instance State-change Notification"
AWS_LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"
AWS_LAUNCH_SUCCESSFUL = "EC2 Instance Launch Successful"
AWS_TERMINATE_ACTION = "EC2 Instance-terminate Lifecycle Action"
AWS_FLEET_EVENTS = ("EC2 Fleet Error", "EC2 Fleet Information", "EC2 Fleet Instance Change", "EC2 Fleet State Change")

#: The spot signals (source ``aws.ec2``), routed account-wide: they carry only an instance id.
AWS_SPOT_SIGNALS = (AWS_SPOT_WARNING, AWS_REBALANCE)
#: Launch outcomes (source ``aws.autoscaling``): failures are the "capacity unavailable" signal;
#: successes end a reacquisition.
AWS_LAUNCH_OUTCOMES = (AWS_LAUNCH_UNSUCCESSFUL, AWS_LAUNCH_SUCCESSFUL)
#: Instance states the state-change rule routes, and those of them that mean the VM is gone.
AWS_WATCHED_STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")
AWS_GONE_STATES = ("shutting-down", "terminated")
#: The detail-types the controller reads as an interruption of one instance, and what it calls each.
AWS_INTERRUPTIONS = {
    AWS_SPOT_WARNING: InterruptionKind.INTERRUPTION,
    AWS_REBALANCE: InterruptionKind.REBALANCE,
    AWS_TERMINATE_ACTION: InterruptionKind.TERMINATING,
}
#: A state change into one of :data:`AWS_GONE_STATES`.
AWS_GONE_KIND = InterruptionKind.TERMINATED


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
