"""The one vocabulary of interruptions: what a notice or an observed loss of a VM is called.

Two parts speak it. The node agent's monitors read the VM's own metadata and say what a
notice *means for the VM* (:data:`NOTICE_KINDS`: ``rebalance``, ``maintenance``,
``preempt``, ``terminate``, ``drain``). The controller's cloud adapters read the fleet-wide
event sources (:mod:`spotgpu.contract.sources`) and VM states and say what they *saw*
(:data:`OBSERVED_KINDS`: ``interruption``, ``rebalance``, ``terminating``, ``terminated``,
``preempted``, ``evicted``). Both sets are written to telemetry as these strings, so the
values never change; a reader of telemetry (``spotgpu.economics.telemetry``) tells a lost VM
by :data:`LOSS_NOTICES` (agent records) and :data:`LOSS_KINDS` (controller events).
"""

from __future__ import annotations

from enum import StrEnum


class InterruptionKind(StrEnum):
    # What a node agent's notice means for its VM (the kind of spotgpu.agent.events.InterruptionEvent).
    REBALANCE = "rebalance"  # elevated risk, no deadline (AWS rebalance recommendation); also observed by the controller
    MAINTENANCE = "maintenance"  # host maintenance ahead (GCP maintenance-event, Azure Freeze/Reboot/Redeploy)
    PREEMPT = "preempt"  # spot capacity reclaimed (AWS instance-action, GCP preempted, Azure Preempt)
    TERMINATE = "terminate"  # scale-in / deletion of a regular VM (Azure Terminate)
    DRAIN = "drain"  # the fallback controller gives this VM back once its workload committed
    # What the controller's adapters observe of a VM from the fleet-wide sources.
    INTERRUPTION = "interruption"  # AWS: EC2 Spot Instance Interruption Warning
    # AWS: the Auto Scaling terminate lifecycle action, an EC2 Fleet termination_notified;
    # Azure: a Terminate scheduled event (Event Grid)
    TERMINATING = "terminating"
    # AWS: the instance state changed to stopping, stopped, shutting-down or terminated; an EC2 Fleet
    # instance terminated
    TERMINATED = "terminated"
    PREEMPTED = "preempted"  # GCP: the compute.instances.preempted system-event audit entry
    # Azure: a Preempt scheduled event (Event Grid), or a Spot VM deallocating, deallocated, stopped or deleting
    EVICTED = "evicted"
    # AWS Health scheduledChange for an instance (retirement, reboot ahead); Azure Freeze, Reboot or
    # Redeploy scheduled events (Event Grid): the VM is kept until then
    MAINTENANCE_SCHEDULED = "maintenance-scheduled"
    # Cloud names accepted in telemetry v1 records written by other emitters (never produced here).
    INSTANCE_ACTION = "instance-action"  # AWS IMDS spot/instance-action
    SCHEDULED_EVENT = "scheduled-event"  # Azure Scheduled Events

    @property
    def terminal(self) -> bool:
        """A terminal notice ends the VM's work: final checkpoint and drain (and a cloud
        acknowledgement, except for a controller drain, which the cloud never sent)."""
        return self in _TERMINAL


_TERMINAL = frozenset({InterruptionKind.PREEMPT, InterruptionKind.TERMINATE, InterruptionKind.DRAIN})

_K = InterruptionKind
#: What the node agent's monitors report.
NOTICE_KINDS = frozenset({_K.REBALANCE, _K.MAINTENANCE, _K.PREEMPT, _K.TERMINATE, _K.DRAIN})
#: Notice kinds a telemetry record may carry: the agent's, and the clouds' names other emitters write.
TELEMETRY_NOTICE_KINDS = NOTICE_KINDS | {_K.INSTANCE_ACTION, _K.PREEMPTED, _K.SCHEDULED_EVENT}
#: What the controller's cloud adapters report.
OBSERVED_KINDS = frozenset(
    {_K.INTERRUPTION, _K.REBALANCE, _K.TERMINATING, _K.TERMINATED, _K.PREEMPTED, _K.EVICTED, _K.MAINTENANCE_SCHEDULED}
)
#: Observed kinds that mean the VM is (about to be) gone: they start the ladder and latency clocks.
#: The others (``rebalance``, ``terminating``, ``maintenance-scheduled``) are logged only.
LOSS_KINDS = frozenset({_K.INTERRUPTION, _K.PREEMPTED, _K.EVICTED, _K.TERMINATED})
#: Notice kinds in telemetry records that mean the provider is taking the VM (a spot interruption).
LOSS_NOTICES = frozenset({_K.PREEMPT, _K.INSTANCE_ACTION, _K.PREEMPTED})
