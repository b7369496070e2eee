"""Azure adapter: one Flexible scale set per GPU size, the VMs' own states, and Scheduled Events.

Observe (shared facts azure.md §5): ``virtual_machine_scale_sets.get`` for
``sku.capacity``; ``virtual_machines.list(resource_group, filter=
"'virtualMachineScaleSet/id' eq '<id>'", expand="instanceView")`` for each VM's
provisioning and power state. A Flexible scale set has no VMSS instance view,
so allocation errors (``ProvisioningState/failed/AllocationFailed`` and friends) are read per VM.

Evictions come from the Scheduled Events the pool's scale sets publish to Event Grid
(``publishEventsToEventGrid``): the component routes the ``MaintenanceResources`` system
topic's ``ScheduledEventEmitted`` events into a Storage queue (``eventsQueueUrl``), and this
adapter reads them like the AWS adapter reads SQS: a ``Preempt`` naming one of the pool's VMs
is an eviction at the event's time, even when the VM is already gone from the list (the
default Delete policy removes it within seconds, so a VM list read on a tick sees the eviction
only if it lands while the VM shows "deleting"). Without a queue the adapter falls back to that
VM-list reading (a Spot VM going ``deallocated`` or ``deleting``). Messages are deleted after
the record is saved; a dry run releases them. An event carries a location, not a zone: a VM
still listed gives its zone here, and one already deleted gets the zone the controller's record
remembers from an earlier tick (:func:`spotgpu.controller.runner.with_known_zones`).
Act: ``begin_update`` with the new ``sku.capacity`` and ``begin_delete_instances``
for one drained VM (Flexible instance ids are VM names). Pollers are not waited on.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any, Protocol

from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.contract.sources import (
    AZURE_CANCELED,
    AZURE_EVENT_KINDS,
    AZURE_QUEUE,
    AZURE_ROUTED,
    DropReason,
    EventTimeBasis,
)
from spotgpu.contract.times import parse_time
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.classify import classify
from spotgpu.controller.config import AzureControlledPool
from spotgpu.controller.observe import Dropped, GroupObservation, Interruption, LaunchFailure, PoolObservation, Vm

SOURCE = "eventgrid"


class QueueSource(Protocol):
    """The Storage queue Event Grid delivers to: receive, delete after the record is saved, release (dry run)."""

    def receive(self, max_messages: int) -> list[tuple[object, str, float | None]]:
        """``(receipt, text, inserted_at)`` per message; the message stays hidden until deleted or released."""
        ...

    def delete(self, receipts: list[object]) -> None: ...
    def release(self, receipts: list[object]) -> None: ...


def _decoded(text: str) -> object:
    """The event JSON: Event Grid writes plain text; a Base64-encoded copy is read too."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(base64.b64decode(text, validate=True))
    except (ValueError, binascii.Error):
        return None


def parse_scheduled_event(body: object, received_at: float) -> list[Interruption | Dropped]:
    """One Event Grid event (``ScheduledEventEmitted``) -> one interruption per VM it names, or a drop."""
    try:
        return _parse_scheduled_event(body, received_at)
    except (AttributeError, TypeError, ValueError, KeyError) as err:  # a field of the wrong type
        return [Dropped(DropReason.MALFORMED, SOURCE, f"scheduled event: {type(err).__name__}")]


def _parse_scheduled_event(body: object, received_at: float) -> list[Interruption | Dropped]:
    if not isinstance(body, dict):
        return [Dropped(DropReason.MALFORMED, SOURCE, "not an Event Grid event")]
    event_type = body.get("eventType") or body.get("type")  # Event Grid or CloudEvents schema
    if event_type not in AZURE_ROUTED:
        return [Dropped(DropReason.UNKNOWN_SHAPE, SOURCE, str(event_type))]
    data = body.get("data")
    info = data.get("resourceInfo") if isinstance(data, dict) else None
    props = info.get("properties") if isinstance(info, dict) else None
    if not isinstance(props, dict):
        return [Dropped(DropReason.MALFORMED, SOURCE, f"{event_type}: no data.resourceInfo.properties")]
    status, kind_name = props.get("EventStatus"), props.get("EventType")
    if status == AZURE_CANCELED:
        return [Dropped(DropReason.CANCELED, SOURCE, f"{kind_name} {props.get('EventId')}")]
    kind = AZURE_EVENT_KINDS.get(str(kind_name))
    if kind is None:
        return [Dropped(DropReason.UNKNOWN_VALUE, SOURCE, f"EventType {kind_name}")]
    vms = [vm for vm in props.get("Resources") or [] if isinstance(vm, str) and vm]
    if not vms:
        return [Dropped(DropReason.NO_INSTANCE, SOURCE, f"{kind_name} {props.get('EventId')}")]
    try:
        at = parse_time(body.get("eventTime") or body.get("time"))
    except ValueError:
        at = None
    basis = EventTimeBasis.CLOUD if at is not None else EventTimeBasis.RECEIVED
    # EventId is the event's identity through Scheduled, Started and Completed: counted once.
    event_id = str(props.get("EventId") or body.get("id", ""))
    return [Interruption(f"azure:{event_id}:{vm}", vm, kind, received_at if at is None else at, "", basis) for vm in vms]


def _scale_set_of(body: object) -> str:
    """The scale set a scheduled event's resource id or subject names ('' when it names a VM)."""
    if not isinstance(body, dict):
        return ""
    data = body.get("data")
    info = data.get("resourceInfo") if isinstance(data, dict) else None
    for text in (info.get("id") if isinstance(info, dict) else None, body.get("subject")):
        parts = str(text or "").split("/")
        lowered = [part.lower() for part in parts]
        if "virtualmachinescalesets" in lowered:
            return parts[lowered.index("virtualmachinescalesets") + 1]
    return ""

_GONE_POWER = ("PowerState/deallocating", "PowerState/deallocated", "PowerState/stopped", "PowerState/stopping")


def _time(value: Any, default: float) -> float:
    return value.timestamp() if isinstance(value, datetime) else default


def vm_state(vm: Any, group: str, now: float) -> tuple[Vm | None, LaunchFailure | None, Interruption | None]:
    """One VM (with instance view) -> (capacity or None if leaving, failure, eviction)."""
    statuses = list(getattr(getattr(vm, "instance_view", None), "statuses", None) or [])
    codes = [s.code or "" for s in statuses]
    zone = (vm.zones or [""])[0] if getattr(vm, "zones", None) else ""
    priority = getattr(vm, "priority", None)
    spot = str(getattr(priority, "value", priority) or "").lower() == "spot"
    failure = interruption = None
    for status in statuses:
        code = status.code or ""
        if code.startswith("ProvisioningState/failed/"):
            reason, leaf = classify(code, status.message or "")
            failure = LaunchFailure(group, reason, leaf, _time(status.time, now), f"azure:{vm.name}:{leaf}", (status.message or "")[:300], zone)
    leaving = any(c in _GONE_POWER for c in codes) or "ProvisioningState/deleting" in codes
    if leaving:
        if spot:
            gone = next(c for c in codes if c in _GONE_POWER or c == "ProvisioningState/deleting")
            interruption = Interruption(f"azure:{vm.name}:{gone}", vm.name, InterruptionKind.EVICTED, now, zone)
        return None, failure, interruption
    ready = "ProvisioningState/succeeded" in codes and "PowerState/running" in codes
    return Vm(vm.name, group, ready, zone=zone, sku=getattr(vm.hardware_profile, "vm_size", "") or ""), failure, None


class AzurePoolAdapter:
    def __init__(
        self, pool: AzureControlledPool, compute: Any, events: QueueSource | None = None, *, peek: bool = False
    ) -> None:
        self.pool = pool
        self.compute = compute
        #: The Event Grid queue of the pool's Scheduled Events; None: evictions from the VM list.
        self.events = events
        #: A dry run's peek: received messages are released at once, never deleted.
        self.peek = peek
        self._skus: dict[str, Any] = {}

    def observe(self, now: float) -> PoolObservation:
        rg = self.pool.resource_group_name
        groups: dict[str, GroupObservation] = {}
        failures: list[LaunchFailure] = []
        interruptions: list[Interruption] = []
        zones: dict[str, str] = {}
        for spec in self.pool.groups:
            vmss = self.compute.virtual_machine_scale_sets.get(rg, spec.name)
            self._skus[spec.name] = vmss.sku
            vms: list[Vm] = []
            listing = self.compute.virtual_machines.list(
                rg, filter=f"'virtualMachineScaleSet/id' eq '{vmss.id}'", expand="instanceView"
            )
            for vm in listing:
                capacity, failure, interruption = vm_state(vm, spec.name, now)
                zones[vm.name] = (vm.zones or [""])[0] if getattr(vm, "zones", None) else ""
                if capacity is not None:
                    vms.append(capacity)
                if failure is not None:
                    failures.append(failure)
                if interruption is not None and self.events is None:
                    interruptions.append(interruption)  # the fallback: no Scheduled Events queue
            groups[spec.name] = GroupObservation(spec.name, int(vmss.sku.capacity or 0), tuple(sorted(vms, key=lambda v: v.id)))
        receipts: list[object] = []
        dropped: list[Dropped] = []
        if self.events is not None:
            for receipt, text, inserted_at in self.events.receive(AZURE_QUEUE.max_messages):
                receipts.append(receipt)
                body = _decoded(text)
                if body is None:
                    dropped.append(Dropped(DropReason.NOT_JSON, SOURCE, text[:60]))
                    continue
                for item in parse_scheduled_event(body, now if inserted_at is None else inserted_at):
                    if isinstance(item, Dropped):
                        dropped.append(item)
                    elif self._ours(item.vm_id, _scale_set_of(body), zones):
                        interruptions.append(Interruption(item.event_id, item.vm_id, item.kind, item.at,
                                                          zones.get(item.vm_id, ""), item.time_basis))  # fmt: skip
                    else:
                        dropped.append(Dropped(DropReason.OTHER_POOL, SOURCE, f"{item.kind} {item.vm_id}"))
            if self.peek and receipts:
                self.events.release(receipts)
                receipts = []
        return PoolObservation(
            self.pool.name, now, groups, tuple(failures), tuple(interruptions), receipts=tuple(receipts),
            dropped=tuple(dropped),
        )

    def _ours(self, vm: str, scale_set: str, known: dict[str, str]) -> bool:
        """A VM of this pool: listed now, in one of its scale sets by the event's resource id, or
        named like a Flexible member of one (``<scale set>_<suffix>``; a deleted VM is listed no more)."""
        sets = {g.name for g in self.pool.groups}
        return vm in known or scale_set in sets or any(vm.startswith(f"{name}_") for name in sets)

    def apply(self, action: SetDesired | RemoveInstance) -> None:
        from azure.mgmt.compute.models import (
            Sku,
            VirtualMachineScaleSetUpdate,
            VirtualMachineScaleSetVMInstanceRequiredIDs,
        )

        rg = self.pool.resource_group_name
        if isinstance(action, SetDesired):
            current = self._skus.get(action.group)
            sku = Sku(name=getattr(current, "name", None), tier=getattr(current, "tier", None), capacity=action.desired)
            self.compute.virtual_machine_scale_sets.begin_update(rg, action.group, VirtualMachineScaleSetUpdate(sku=sku))
            return
        ids = VirtualMachineScaleSetVMInstanceRequiredIDs(instance_ids=[action.vm_id])
        self.compute.virtual_machine_scale_sets.begin_delete_instances(rg, action.group, ids)

    def ack(self, receipts: tuple[object, ...]) -> None:
        if self.events is not None and receipts:
            self.events.delete(list(receipts))


class StorageQueueSource:
    """:class:`QueueSource` over azure-storage-queue's ``QueueClient`` (the ``azure`` extra).

    ``queue_url`` is the queue's URL (``https://<account>.queue.core.windows.net/<queue>``); the
    credential is the controller's identity (``DefaultAzureCredential``), which needs Storage
    Queue Data Message Processor on the queue (the component grants it).
    """

    def __init__(self, queue_url: str, credential: Any) -> None:
        try:
            from azure.storage.queue import QueueClient
        except ImportError as err:
            raise ImportError(
                "reading Scheduled Events from the Event Grid queue needs azure-storage-queue; "
                "fix: pip install 'spotgpu[azure]'"
            ) from err
        self.client = QueueClient.from_queue_url(queue_url, credential=credential)

    def receive(self, max_messages: int) -> list[tuple[object, str, float | None]]:
        messages = self.client.receive_messages(
            messages_per_page=min(max_messages, 32),
            max_messages=max_messages,
            visibility_timeout=AZURE_QUEUE.visibility_timeout_seconds,
        )
        out: list[tuple[object, str, float | None]] = []
        for msg in messages:
            inserted = msg.inserted_on.timestamp() if isinstance(msg.inserted_on, datetime) else None
            content = msg.content if isinstance(msg.content, str) else bytes(msg.content or b"").decode("utf-8", "replace")
            out.append(((msg.id, msg.pop_receipt), content, inserted))
        return out

    @staticmethod
    def _ids(receipt: object) -> tuple[str, str]:
        """A receipt is ``(message id, pop receipt)``, as :meth:`receive` hands them out."""
        if not isinstance(receipt, tuple) or len(receipt) != 2:
            raise TypeError(f"not a Storage queue receipt: {receipt!r}")
        return str(receipt[0]), str(receipt[1])

    def delete(self, receipts: list[object]) -> None:
        for receipt in receipts:
            self.client.delete_message(*self._ids(receipt))

    def release(self, receipts: list[object]) -> None:
        for receipt in receipts:
            message_id, pop_receipt = self._ids(receipt)
            self.client.update_message(message_id, pop_receipt, visibility_timeout=0)
