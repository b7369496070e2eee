"""AWS adapter: Auto Scaling groups plus the pool's EventBridge -> SQS queue.

Observe: ``describe_auto_scaling_groups`` (desired, instances, lifecycle state),
``describe_scaling_activities`` (Failed activities carry the launch error text),
and SQS messages from the pool's EventBridge rules. The routed shapes are
:data:`spotgpu.contract.sources.AWS_ROUTED` (the components build their rules from it) and
:func:`parse_event` has one branch per shape: spot interruption warnings and rebalance
recommendations, instance state changes into a gone state, Auto Scaling launch outcomes and
terminate lifecycle actions, EC2 Fleet errors, information and instance changes (fleet
failures feed the launch-failure telemetry like Auto Scaling's), and AWS Health
``scheduledChange`` events for EC2. Every message becomes an observation or a counted
:class:`~spotgpu.controller.observe.Dropped` with its reason; an event without a usable ``time``
takes the time SQS received it (``SentTimestamp``) and says so (``timeBasis: received``).
Act: ``set_desired_capacity`` (or ``update_auto_scaling_group`` when the fallback
group's MaxSize must rise first) and ``terminate_instance_in_auto_scaling_group``
with ``ShouldDecrementDesiredCapacity`` for one drained instance. Messages are
deleted only in :meth:`ack`, after the controller saved its record.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spotgpu.contract import tags
from spotgpu.contract.sources import (
    AWS_FLEET_FAILURES,
    AWS_FLEET_INSTANCE_KINDS,
    AWS_FLEET_LAUNCHED,
    AWS_GONE_KIND,
    AWS_GONE_STATES,
    AWS_HEALTH_DETAIL,
    AWS_HEALTH_KIND,
    AWS_INTERRUPTIONS,
    AWS_LAUNCH_SUCCESSFUL,
    AWS_QUEUE,
    AWS_ROUTED,
    AWS_TEST_NOTIFICATION,
    DropReason,
    EventTimeBasis,
)
from spotgpu.contract.times import parse_time
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.classify import classify
from spotgpu.controller.config import AwsControlledPool
from spotgpu.controller.observe import Dropped, GroupObservation, Interruption, LaunchFailure, PoolObservation, Vm

#: ASG lifecycle states of instances that are leaving; they are not capacity any more.
_LEAVING = ("Terminating", "Terminated", "Detaching", "Detached", "Standby", "EnteringStandby", "Warmed")
#: Most SQS receives per tick (10 messages each): bounds one tick's work.
MAX_RECEIVES = 10
SOURCE = "sqs"
#: An Availability Zone name inside free text or an ARN (``us-east-1a``, ``eu-west-3c``).
_ZONE = re.compile(r"\b([a-z]{2}(?:-[a-z]+)+-\d+[a-z])\b")


@dataclass(frozen=True)
class Launched:
    """A launch that succeeded: when the VM became ready (Auto Scaling ``EndTime``, a Fleet ``launched``)."""

    vm_id: str
    at: float


Parsed = Interruption | LaunchFailure | Launched | Dropped


def _ts(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value)


def _event_time(value: object, received_at: float) -> tuple[float, EventTimeBasis]:
    """The event's own time, or the receive time when it has none that can be read."""
    try:
        at = parse_time(value)
    except ValueError:
        at = None
    return (at, EventTimeBasis.CLOUD) if at is not None else (received_at, EventTimeBasis.RECEIVED)


def _zone_in(*texts: object) -> str:
    for text in texts:
        found = _ZONE.search(text) if isinstance(text, str) else None
        if found:
            return found.group(1)
    return ""


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


def _spot(body: dict[str, Any], detail: dict[str, Any], at: float, basis: EventTimeBasis) -> list[Parsed]:
    vm = detail.get("instance-id")
    if not vm:
        return [Dropped(DropReason.NO_INSTANCE, SOURCE, body["detail-type"])]
    # The warning's resource ARN carries the Availability Zone in its region slot.
    zone = _zone_in(*(body.get("resources") or []))
    return [Interruption(str(body.get("id", "")), vm, AWS_INTERRUPTIONS[body["detail-type"]], at, zone, basis)]


def _state(body: dict[str, Any], detail: dict[str, Any], at: float, basis: EventTimeBasis) -> list[Parsed]:
    state, vm = detail.get("state"), detail.get("instance-id")
    if state not in AWS_GONE_STATES:
        return [Dropped(DropReason.UNKNOWN_VALUE, SOURCE, f"state {state}")]
    if not vm:
        return [Dropped(DropReason.NO_INSTANCE, SOURCE, body["detail-type"])]
    return [Interruption(str(body.get("id", "")), vm, AWS_GONE_KIND, at, "", basis)]


def _launch(body: dict[str, Any], detail: dict[str, Any], at: float, basis: EventTimeBasis) -> list[Parsed]:
    zone = (detail.get("Details") or {}).get("Availability Zone", "")
    if body["detail-type"] == AWS_LAUNCH_SUCCESSFUL:
        vm = detail.get("EC2InstanceId")
        if not vm:
            return [Dropped(DropReason.NO_INSTANCE, SOURCE, body["detail-type"])]
        ready, _ = _event_time(detail.get("EndTime"), at)
        return [Launched(vm, ready)]
    message = detail.get("StatusMessage", "")
    reason, code = classify(detail.get("StatusCode") if detail.get("StatusCode") != "Failed" else None, message)
    key = f"aws:{detail.get('ActivityId', body.get('id', ''))}"
    return [LaunchFailure(detail.get("AutoScalingGroupName", ""), reason, code, at, key, message[:300], zone, basis)]


def _lifecycle(body: dict[str, Any], detail: dict[str, Any], at: float, basis: EventTimeBasis) -> list[Parsed]:
    if AWS_TEST_NOTIFICATION in (detail.get("LifecycleTransition"), detail.get("Event")):
        return [Dropped(DropReason.TEST_NOTIFICATION, SOURCE, detail.get("AutoScalingGroupName", ""))]
    vm = detail.get("EC2InstanceId")
    if not vm:
        return [Dropped(DropReason.NO_INSTANCE, SOURCE, body["detail-type"])]
    return [Interruption(str(body.get("id", "")), vm, AWS_INTERRUPTIONS[body["detail-type"]], at, "", basis)]


def _fleet_id(body: dict[str, Any]) -> str:
    return next((r.rsplit("/", 1)[-1] for r in body.get("resources") or [] if ":fleet/" in r), "")


def _fleet(body: dict[str, Any], detail: dict[str, Any], at: float, basis: EventTimeBasis) -> list[Parsed]:
    sub_type, description = str(detail.get("sub-type", "")), str(detail.get("description", ""))
    if body["detail-type"] in AWS_FLEET_FAILURES:
        reason, code = classify(sub_type, description)
        zone = _zone_in(description)
        key = f"aws:fleet:{body.get('id', '')}"
        return [LaunchFailure(_fleet_id(body), reason, code, at, key, f"{sub_type}: {description}"[:300], zone, basis)]
    vm = detail.get("instance-id")
    if not vm:
        return [Dropped(DropReason.NO_INSTANCE, SOURCE, f"{body['detail-type']} {sub_type}")]
    if sub_type == AWS_FLEET_LAUNCHED:
        return [Launched(vm, at)]
    kind = AWS_FLEET_INSTANCE_KINDS.get(sub_type)
    if kind is None:
        return [Dropped(DropReason.UNKNOWN_VALUE, SOURCE, f"{body['detail-type']} {sub_type}")]
    try:
        zone = str(json.loads(description).get("availabilityZone", ""))
    except (ValueError, AttributeError):
        zone = _zone_in(description)
    return [Interruption(str(body.get("id", "")), vm, kind, at, zone, basis)]


def _health(body: dict[str, Any], detail: dict[str, Any], at: float, basis: EventTimeBasis) -> list[Parsed]:
    if any(detail.get(k) not in allowed for k, allowed in AWS_HEALTH_DETAIL.items()):
        what = f"{detail.get('service')}/{detail.get('eventTypeCategory')}"
        return [Dropped(DropReason.UNKNOWN_VALUE, SOURCE, f"{body['detail-type']} {what}")]
    entities = [e.get("entityValue") for e in detail.get("affectedEntities") or [] if isinstance(e, dict)]
    vms = [vm for vm in entities if isinstance(vm, str) and vm.startswith("i-")]
    if not vms:
        return [Dropped(DropReason.NO_INSTANCE, SOURCE, f"{body['detail-type']} {detail.get('eventTypeCode')}")]
    eid = str(body.get("id", ""))
    return [Interruption(f"{eid}:{vm}", vm, AWS_HEALTH_KIND, at, "", basis) for vm in vms]


#: One branch per routed shape (:data:`spotgpu.contract.sources.AWS_ROUTED`'s values).
_BRANCHES: dict[str, Callable[[dict[str, Any], dict[str, Any], float, EventTimeBasis], list[Parsed]]] = {
    "spot": _spot,
    "state": _state,
    "launch": _launch,
    "lifecycle": _lifecycle,
    "fleet": _fleet,
    "health": _health,
}
_BRANCH_OF = {detail_type: branch for (_source, detail_type), branch in AWS_ROUTED.items()}


def parse_event(body: object, received_at: float) -> list[Parsed]:
    """One EventBridge event (as delivered to SQS) -> its observations, or one drop with the reason.

    ``received_at`` is when SQS received it: the event's time when it has none that can be read.
    """
    if not isinstance(body, dict) or not isinstance(body.get("detail-type"), str):
        return [Dropped(DropReason.MALFORMED, SOURCE, "not an EventBridge event")]
    detail_type = body["detail-type"]
    branch = _BRANCH_OF.get(detail_type)
    if branch is None:
        return [Dropped(DropReason.UNKNOWN_SHAPE, SOURCE, f"{body.get('source')}/{detail_type}")]
    detail = body.get("detail")
    if not isinstance(detail, dict):
        return [Dropped(DropReason.MALFORMED, SOURCE, f"{detail_type}: no detail")]
    at, basis = _event_time(body.get("time"), received_at)
    try:
        return _BRANCHES[branch](body, detail, at, basis)
    except (AttributeError, TypeError, ValueError, KeyError) as err:  # a field of the wrong type
        return [Dropped(DropReason.MALFORMED, SOURCE, f"{detail_type}: {type(err).__name__}")]


def parsed_branches() -> set[str]:
    """The branches :func:`parse_event` has (the contract test matches them with the routes)."""
    return set(_BRANCHES)


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
        parsed, receipts = self._drain_queue(now)
        failures += [p for p in parsed if isinstance(p, LaunchFailure)]
        dropped = [p for p in parsed if isinstance(p, Dropped)]
        members = {v.id: v.zone for g in groups.values() for v in g.vms}
        interruptions = self._ours([p for p in parsed if isinstance(p, Interruption)], members, dropped)
        ready_at = {p.vm_id: p.at for p in parsed if isinstance(p, Launched)}
        if ready_at:
            groups = {
                name: dataclasses.replace(g, vms=tuple(
                    dataclasses.replace(v, ready_at=ready_at[v.id]) if v.id in ready_at else v for v in g.vms))
                for name, g in groups.items()
            }  # fmt: skip
        return PoolObservation(
            self.pool.name, now, groups, tuple(failures), tuple(interruptions), receipts=tuple(receipts),
            dropped=tuple(dropped),
        )

    def _ours(self, events: list[Interruption], members: dict[str, str], dropped: list[Dropped]) -> list[Interruption]:
        """Keep events for this pool's instances (the EC2 and Health rules are account-wide), with their zone.

        An instance still in one of the groups is ours; one that already left is
        checked by its ``spotgpu-pool`` tag (terminated instances stay describable
        for about an hour). Without an EC2 client every event is kept. The others are
        counted drops (``other-pool``).
        """
        zones = dict(members)
        unknown = sorted({e.vm_id for e in events if e.vm_id not in members})
        if unknown and self.ec2 is not None:
            resp = self.ec2.describe_instances(
                Filters=[{"Name": "instance-id", "Values": unknown}, {"Name": f"tag:{tags.POOL}", "Values": [self.pool.name]}]
            )
            tagged = {
                i["InstanceId"]: (i.get("Placement") or {}).get("AvailabilityZone", "")
                for r in resp.get("Reservations", []) for i in r.get("Instances", [])
            }  # fmt: skip
            zones.update(tagged)
            for e in events:
                if e.vm_id not in zones:
                    dropped.append(Dropped(DropReason.OTHER_POOL, SOURCE, f"{e.kind} {e.vm_id}"))
            events = [e for e in events if e.vm_id in zones]
        return [dataclasses.replace(e, zone=e.zone or zones.get(e.vm_id, "")) for e in events]

    def _drain_queue(self, now: float) -> tuple[list[Parsed], list[str]]:
        if self.sqs is None or self.pool.queue_url is None:
            return [], []
        parsed: list[Parsed] = []
        receipts: list[str] = []
        for _ in range(MAX_RECEIVES):
            extra = {"VisibilityTimeout": 0} if self.peek else {}
            resp = self.sqs.receive_message(
                QueueUrl=self.pool.queue_url,
                MaxNumberOfMessages=AWS_QUEUE.max_messages,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["SentTimestamp"],
                **extra,
            )
            messages = resp.get("Messages", [])
            for msg in messages:
                receipts.append(msg["ReceiptHandle"])
                sent = str((msg.get("Attributes") or {}).get("SentTimestamp") or "")
                received_at = int(sent) / 1000 if sent.isdigit() else now
                try:
                    body = json.loads(msg["Body"])
                except ValueError:
                    # Not an EventBridge event: counted, then deleted rather than looped on.
                    parsed.append(Dropped(DropReason.NOT_JSON, SOURCE, str(msg.get("MessageId", ""))))
                    continue
                parsed += parse_event(body, received_at)
            if len(messages) < AWS_QUEUE.max_messages or self.peek:
                break  # a peek sees each message once at most: visible messages would come back again
        return parsed, receipts

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
