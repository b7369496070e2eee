"""GCP adapter: regional managed instance groups plus a Pub/Sub subscription of preemptions.

Observe (shared facts gcp.md §6): ``RegionInstanceGroupManagersClient.get`` for the
target size, ``list_managed_instances`` for per-VM state (``instance_status`` and
``current_action``; ``last_attempt.errors`` while a create keeps failing) and
``list_errors`` for the group's recent launch errors. Preemptions arrive on the
pool's Pub/Sub subscription as Cloud Audit Log entries (``compute.instances.preempted``)
routed by a log sink; the sink's filter and this parser share one list of methods
(:data:`spotgpu.contract.sources.GCP_INTERRUPTIONS`). An entry names its zone (``resource.labels.zone``,
or the zone in ``resourceName``); one without a usable ``timestamp`` (the minimal message
spot-interruption-exporter tells its users to publish) takes the message's Pub/Sub
``publish_time`` (else the tick's time) and says so, so a controller that was down an hour does
not date it an hour late; a message that is not such an entry is a counted drop. Act: ``resize`` and ``delete_instances``
(which lowers the target size by the instances deleted). Operations are not waited on: the next
tick observes their effect, so one slow operation cannot stall every pool.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from spotgpu.contract.sources import GCP_INTERRUPTIONS, DropReason, EventTimeBasis
from spotgpu.contract.times import parse_time
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.classify import classify
from spotgpu.controller.config import GcpControlledPool
from spotgpu.controller.observe import Dropped, GroupObservation, Interruption, LaunchFailure, PoolObservation, Vm

SOURCE = "pubsub"

_LEAVING_ACTIONS = ("DELETING", "ABANDONING")


class PubSubSource(Protocol):
    """Pulls decoded JSON message bodies (None for a body that is not JSON) with their ack ids and
    publish times (Unix seconds; None when the message carries none)."""

    def pull(self, max_messages: int) -> list[tuple[str, dict[str, Any] | None, float | None]]: ...
    def ack(self, ack_ids: list[str]) -> None: ...
    def release(self, ack_ids: list[str]) -> None:
        """Make pulled messages deliverable again at once (ack deadline 0): a dry run's peek."""
        ...


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _zone(url: str) -> str:
    parts = url.split("/")
    return parts[parts.index("zones") + 1] if "zones" in parts else ""


def parse_log_entry(entry: object, received_at: float) -> Interruption | Dropped:
    """A Cloud Audit Log entry (system event) -> Interruption, for the methods the sink routes
    (:data:`spotgpu.contract.sources.GCP_INTERRUPTIONS`: preemptions only); anything else is a drop."""
    try:
        return _parse_log_entry(entry, received_at)
    except (AttributeError, TypeError, ValueError, KeyError) as err:  # a field of the wrong type
        return Dropped(DropReason.MALFORMED, SOURCE, f"audit entry: {type(err).__name__}")


def _parse_log_entry(entry: object, received_at: float) -> Interruption | Dropped:
    if not isinstance(entry, dict) or not isinstance(entry.get("protoPayload"), dict):
        return Dropped(DropReason.MALFORMED, SOURCE, "not an audit log entry")
    payload = entry["protoPayload"]
    method = payload.get("methodName", "")
    kind = GCP_INTERRUPTIONS.get(method)
    if kind is None:
        return Dropped(DropReason.UNKNOWN_SHAPE, SOURCE, str(method))
    labels = (entry.get("resource") or {}).get("labels") or {}
    resource = str(payload.get("resourceName", ""))
    name = _last(resource) or str(labels.get("instance_id", ""))
    if not name:
        return Dropped(DropReason.NO_INSTANCE, SOURCE, str(method))
    try:
        at = parse_time(entry.get("timestamp"))
    except ValueError:
        at = None
    basis = EventTimeBasis.CLOUD if at is not None else EventTimeBasis.RECEIVED
    zone = str(labels.get("zone") or _zone(resource))
    when = received_at if at is None else at
    # insertId is the entry's identity; a message without one (hand-published) is named by what
    # it says and when, so a MIG's recreated VM of the same name preempted again is a new event.
    event_id = f"gcp:{entry.get('insertId') or f'{method}:{resource or name}:{when:.0f}'}"
    return Interruption(event_id, name, kind, when, zone, basis)


class GcpPoolAdapter:
    def __init__(
        self,
        pool: GcpControlledPool,
        migs: Any,
        pubsub: PubSubSource | None = None,
        max_messages: int = 100,
        *,
        peek: bool = False,
    ) -> None:
        self.pool = pool
        self.migs = migs
        self.pubsub = pubsub
        self.max_messages = max_messages
        #: A dry run's peek: pulled messages are released at once (never acked), so the real
        #: controller still gets every one; the delivery attempt count is the only trace left.
        self.peek = peek
        self._urls: dict[str, str] = {}

    def _where(self, group: str) -> dict[str, str]:
        return {"project": self.pool.project, "region": self.pool.region, "instance_group_manager": group}

    def observe(self, now: float) -> PoolObservation:
        groups: dict[str, GroupObservation] = {}
        failures: list[LaunchFailure] = []
        for spec in self.pool.groups:
            where = self._where(spec.name)
            target = int(self.migs.get(**where).target_size)
            vms: list[Vm] = []
            for mi in self.migs.list_managed_instances(**where):
                if mi.current_action in _LEAVING_ACTIONS:
                    continue
                name = mi.name or _last(mi.instance)
                self._urls[name] = mi.instance
                ready = mi.instance_status == "RUNNING" and mi.current_action in ("NONE", "VERIFYING")
                sku = (
                    mi.properties_from_flexibility_policy.machine_type
                    if "properties_from_flexibility_policy" in mi
                    else ""
                )
                vms.append(Vm(name, spec.name, ready, zone=_zone(mi.instance), sku=_last(sku) if sku else ""))
                if "last_attempt" in mi:
                    for err in mi.last_attempt.errors.errors:
                        reason, code = classify(err.code, err.message)
                        failures.append(
                            LaunchFailure(
                                spec.name,
                                reason,
                                code,
                                now,
                                f"gcp:{name}:{err.code}",
                                err.message[:300],
                                _zone(mi.instance),
                            )
                        )
            for item in self.migs.list_errors(**where):
                reason, code = classify(item.error.code, item.error.message)
                instance = item.instance_action_details.instance
                failures.append(
                    LaunchFailure(
                        spec.name,
                        reason,
                        code,
                        _ts(item.timestamp),
                        f"gcp:{item.timestamp}:{_last(instance)}:{item.error.code}",
                        item.error.message[:300],
                        _zone(instance),
                    )
                )
            groups[spec.name] = GroupObservation(spec.name, target, tuple(sorted(vms, key=lambda v: v.id)))
        interruptions: list[Interruption] = []
        dropped: list[Dropped] = []
        receipts: list[str] = []
        if self.pubsub is not None:
            for ack_id, body, published_at in self.pubsub.pull(self.max_messages):
                receipts.append(ack_id)
                # the receive time of an entry without its own: when Pub/Sub got it, not this tick
                received_at = now if published_at is None else published_at
                event = (
                    Dropped(DropReason.NOT_JSON, SOURCE, ack_id) if body is None else parse_log_entry(body, received_at)
                )
                if isinstance(event, Interruption):
                    interruptions.append(event)
                else:
                    dropped.append(event)
            if self.peek and receipts:
                self.pubsub.release(receipts)
                receipts = []  # nothing for a dry run to acknowledge
        return PoolObservation(
            self.pool.name, now, groups, tuple(failures), tuple(interruptions), receipts=tuple(receipts),
            dropped=tuple(dropped),
        )

    def apply(self, action: SetDesired | RemoveInstance) -> None:
        where = self._where(action.group)
        if isinstance(action, SetDesired):
            self.migs.resize(**where, size=action.desired)
            return
        from google.cloud import compute_v1

        url = self._urls.get(action.vm_id)
        if url is None:
            raise LookupError(f"instance {action.vm_id} is not in MIG {action.group}; it may already be gone")
        body = compute_v1.RegionInstanceGroupManagersDeleteInstancesRequest(instances=[url])
        self.migs.delete_instances(**where, region_instance_group_managers_delete_instances_request_resource=body)

    def ack(self, receipts: tuple[object, ...]) -> None:
        if self.pubsub is not None and receipts:
            self.pubsub.ack([str(r) for r in receipts])


class GooglePubSubSource:
    """PubSubSource over google-cloud-pubsub's synchronous pull (optional dependency)."""

    def __init__(self, subscription: str) -> None:
        try:
            from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]
        except ImportError as err:
            raise ImportError(
                "reading preemptions from Pub/Sub needs google-cloud-pubsub; fix: pip install google-cloud-pubsub"
            ) from err
        self.subscription = subscription
        self.client = pubsub_v1.SubscriberClient()

    def pull(self, max_messages: int) -> list[tuple[str, dict[str, Any] | None, float | None]]:
        import json

        resp = self.client.pull(request={"subscription": self.subscription, "max_messages": max_messages}, timeout=10)
        out: list[tuple[str, dict[str, Any] | None, float | None]] = []
        for received in resp.received_messages:
            try:
                body = json.loads(received.message.data)
            except ValueError:
                body = None  # counted as a drop, then acknowledged rather than redelivered forever
            # set by Pub/Sub when it accepted the message (proto-plus gives a datetime, None if unset)
            published = received.message.publish_time
            published_at = published.timestamp() if isinstance(published, datetime) else None
            out.append((received.ack_id, body if isinstance(body, dict) or body is None else {"body": body}, published_at))
        return out

    def ack(self, ack_ids: list[str]) -> None:
        self.client.acknowledge(request={"subscription": self.subscription, "ack_ids": ack_ids})

    def release(self, ack_ids: list[str]) -> None:
        request = {"subscription": self.subscription, "ack_ids": ack_ids, "ack_deadline_seconds": 0}
        self.client.modify_ack_deadline(request=request)
