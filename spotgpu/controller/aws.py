"""AWS adapter: Auto Scaling groups plus the pool's EventBridge -> SQS queue.

Observe: ``describe_auto_scaling_groups`` (desired, instances, lifecycle state),
``describe_scaling_activities`` (Failed activities carry the launch error text),
and SQS messages from the pool's EventBridge rules (spot interruption warnings,
rebalance recommendations, state changes, ASG launch-unsuccessful events; the detail-types
and queue settings are :mod:`spotgpu.contract.sources`, which the component routes and sets).
Act: ``set_desired_capacity`` (or ``update_auto_scaling_group`` when the fallback
group's MaxSize must rise first) and ``terminate_instance_in_auto_scaling_group``
with ``ShouldDecrementDesiredCapacity`` for one drained instance. Messages are
deleted only in :meth:`ack`, after the controller saved its record.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from spotgpu import tags
from spotgpu.contract.sources import (
    AWS_GONE_KIND,
    AWS_GONE_STATES,
    AWS_INTERRUPTIONS,
    AWS_LAUNCH_UNSUCCESSFUL,
    AWS_QUEUE,
    AWS_STATE_CHANGE,
)
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.classify import classify
from spotgpu.controller.config import AwsControlledPool
from spotgpu.controller.observe import GroupObservation, Interruption, LaunchFailure, PoolObservation, Vm

#: ASG lifecycle states of instances that are leaving; they are not capacity any more.
_LEAVING = ("Terminating", "Terminated", "Detaching", "Detached", "Standby", "EnteringStandby", "Warmed")
#: Most SQS receives per tick (10 messages each): bounds one tick's work.
MAX_RECEIVES = 10


def _ts(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value)


def parse_activity(group: str, activity: dict[str, Any]) -> LaunchFailure | None:
    """A Failed/Cancelled scaling activity -> LaunchFailure; others -> None."""
    if activity.get("StatusCode") not in ("Failed", "Cancelled"):
        return None
    message = activity.get("StatusMessage") or activity.get("Description") or ""
    reason, code = classify(None, message)
    details = json.loads(activity.get("Details") or "{}")
    return LaunchFailure(
        group, reason, code, _ts(activity["StartTime"]), f"aws:{activity['ActivityId']}", message[:300],
        details.get("Availability Zone", ""),
    )


def parse_event(body: dict[str, Any]) -> Interruption | LaunchFailure | None:
    """One EventBridge event (as delivered to SQS) -> an interruption or a launch failure."""
    kind, detail = body.get("detail-type", ""), body.get("detail") or {}
    event_id, at = str(body.get("id", "")), _ts(body.get("time", 0))
    if kind == AWS_LAUNCH_UNSUCCESSFUL:
        message = detail.get("StatusMessage", "")
        reason, code = classify(detail.get("StatusCode") if detail.get("StatusCode") != "Failed" else None, message)
        zone = (detail.get("Details") or {}).get("Availability Zone", "")
        return LaunchFailure(detail.get("AutoScalingGroupName", ""), reason, code, at, f"aws:{detail.get('ActivityId', event_id)}", message[:300], zone)
    if kind in AWS_INTERRUPTIONS:
        vm = detail.get("instance-id") or detail.get("EC2InstanceId", "")
        return Interruption(event_id, vm, AWS_INTERRUPTIONS[kind], at)
    if kind == AWS_STATE_CHANGE and detail.get("state") in AWS_GONE_STATES:
        return Interruption(event_id, detail.get("instance-id", ""), AWS_GONE_KIND, at)
    return None


class AwsPoolAdapter:
    def __init__(
        self, pool: AwsControlledPool, autoscaling: Any, sqs: Any | None = None, ec2: Any | None = None, *, peek: bool = False
    ) -> None:
        self.pool = pool
        #: A dry run's peek: receive with VisibilityTimeout 0, so the real controller still gets every message.
        self.peek = peek
        self.autoscaling = autoscaling
        self.sqs = sqs
        self.ec2 = ec2
        self._max_size: dict[str, int] = {}

    def observe(self, now: float) -> PoolObservation:
        names = [g.name for g in self.pool.groups]
        groups: dict[str, GroupObservation] = {}
        pages = self.autoscaling.get_paginator("describe_auto_scaling_groups").paginate(AutoScalingGroupNames=names)
        for page in pages:
            for asg in page["AutoScalingGroups"]:
                name = asg["AutoScalingGroupName"]
                self._max_size[name] = int(asg["MaxSize"])
                vms = tuple(
                    Vm(i["InstanceId"], name, i["LifecycleState"] == "InService" and i.get("HealthStatus", "Healthy") == "Healthy",
                       zone=i.get("AvailabilityZone", ""), sku=i.get("InstanceType", ""))
                    for i in sorted(asg.get("Instances", []), key=lambda i: i["InstanceId"])
                    if not i["LifecycleState"].startswith(_LEAVING)
                )
                groups[name] = GroupObservation(name, int(asg["DesiredCapacity"]), vms)
        missing = sorted(set(names) - set(groups))
        if missing:
            raise LookupError(f"Auto Scaling groups {missing} not found in {self.pool.region}; check the group names in the config")
        failures: list[LaunchFailure] = []
        for name in names:
            resp = self.autoscaling.describe_scaling_activities(AutoScalingGroupName=name, MaxRecords=20)
            failures += [f for a in resp.get("Activities", []) if (f := parse_activity(name, a)) is not None]
        interruptions, receipts = self._drain_queue(failures)
        interruptions = self._ours(interruptions, {v.id for g in groups.values() for v in g.vms})
        return PoolObservation(self.pool.name, now, groups, tuple(failures), tuple(interruptions), receipts=tuple(receipts))

    def _ours(self, events: list[Interruption], members: set[str]) -> list[Interruption]:
        """Keep events for this pool's instances: the EC2 rules are account-wide.

        An instance still in one of the groups is ours; one that already left is
        checked by its ``spotgpu-pool`` tag (terminated instances stay describable
        for about an hour). Without an EC2 client every event is kept.
        """
        unknown = sorted({e.vm_id for e in events if e.vm_id not in members})
        if not unknown or self.ec2 is None:
            return events
        resp = self.ec2.describe_instances(
            Filters=[{"Name": "instance-id", "Values": unknown}, {"Name": f"tag:{tags.POOL}", "Values": [self.pool.name]}]
        )
        tagged = {i["InstanceId"] for r in resp.get("Reservations", []) for i in r.get("Instances", [])}
        return [e for e in events if e.vm_id in members or e.vm_id in tagged]

    def _drain_queue(self, failures: list[LaunchFailure]) -> tuple[list[Interruption], list[str]]:
        if self.sqs is None or self.pool.queue_url is None:
            return [], []
        interruptions: list[Interruption] = []
        receipts: list[str] = []
        for _ in range(MAX_RECEIVES):
            extra = {"VisibilityTimeout": 0} if self.peek else {}
            resp = self.sqs.receive_message(
                QueueUrl=self.pool.queue_url, MaxNumberOfMessages=AWS_QUEUE.max_messages, WaitTimeSeconds=0, **extra
            )
            messages = resp.get("Messages", [])
            for msg in messages:
                receipts.append(msg["ReceiptHandle"])
                try:
                    parsed = parse_event(json.loads(msg["Body"]))
                except (ValueError, KeyError, TypeError):
                    continue  # not an EventBridge event: delete it rather than loop on it
                if isinstance(parsed, Interruption):
                    interruptions.append(parsed)
                elif isinstance(parsed, LaunchFailure):
                    failures.append(parsed)
            if len(messages) < AWS_QUEUE.max_messages or self.peek:
                break  # a peek sees each message once at most: visible messages would come back again
        return interruptions, receipts

    def apply(self, action: SetDesired | RemoveInstance) -> None:
        if isinstance(action, RemoveInstance):
            self.autoscaling.terminate_instance_in_auto_scaling_group(
                InstanceId=action.vm_id, ShouldDecrementDesiredCapacity=True
            )
            return
        if action.desired > self._max_size.get(action.group, action.desired):
            # The fallback group is usually created with MaxSize 0: raise it with the desired count.
            self.autoscaling.update_auto_scaling_group(
                AutoScalingGroupName=action.group, MaxSize=action.desired, DesiredCapacity=action.desired
            )
            self._max_size[action.group] = action.desired
        else:
            self.autoscaling.set_desired_capacity(
                AutoScalingGroupName=action.group, DesiredCapacity=action.desired, HonorCooldown=False
            )

    def ack(self, receipts: tuple[object, ...]) -> None:
        if self.sqs is None or self.pool.queue_url is None:
            return
        handles = [str(r) for r in receipts]
        batch = AWS_QUEUE.max_messages  # delete_message_batch takes as many as a receive returns
        for start in range(0, len(handles), batch):
            entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles[start : start + batch])]
            self.sqs.delete_message_batch(QueueUrl=self.pool.queue_url, Entries=entries)
