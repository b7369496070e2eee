"""Azure adapter: one Flexible scale set per GPU size, plus the VMs' own states.

Observe (shared facts azure.md §5): ``virtual_machine_scale_sets.get`` for
``sku.capacity``; ``virtual_machines.list(resource_group, filter=
"'virtualMachineScaleSet/id' eq '<id>'", expand="instanceView")`` for each VM's
provisioning and power state. A Flexible scale set has no VMSS instance view,
so allocation errors (``ProvisioningState/failed/AllocationFailed`` and friends)
and evictions (Spot VMs going ``deallocated`` or ``deleting``) are read per VM.
Act: ``begin_update`` with the new ``sku.capacity`` and ``begin_delete_instances``
for one drained VM (Flexible instance ids are VM names). Pollers are not waited on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from spotgpu.contract.interruptions import InterruptionKind
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.classify import classify
from spotgpu.controller.config import AzureControlledPool
from spotgpu.controller.observe import GroupObservation, Interruption, LaunchFailure, PoolObservation, Vm

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
            interruption = Interruption(f"azure:{vm.name}:{gone}", vm.name, InterruptionKind.EVICTED, now)
        return None, failure, interruption
    ready = "ProvisioningState/succeeded" in codes and "PowerState/running" in codes
    return Vm(vm.name, group, ready, zone=zone, sku=getattr(vm.hardware_profile, "vm_size", "") or ""), failure, None


class AzurePoolAdapter:
    def __init__(self, pool: AzureControlledPool, compute: Any) -> None:
        self.pool = pool
        self.compute = compute
        self._skus: dict[str, Any] = {}

    def observe(self, now: float) -> PoolObservation:
        rg = self.pool.resource_group_name
        groups: dict[str, GroupObservation] = {}
        failures: list[LaunchFailure] = []
        interruptions: list[Interruption] = []
        for spec in self.pool.groups:
            vmss = self.compute.virtual_machine_scale_sets.get(rg, spec.name)
            self._skus[spec.name] = vmss.sku
            vms: list[Vm] = []
            listing = self.compute.virtual_machines.list(
                rg, filter=f"'virtualMachineScaleSet/id' eq '{vmss.id}'", expand="instanceView"
            )
            for vm in listing:
                capacity, failure, interruption = vm_state(vm, spec.name, now)
                if capacity is not None:
                    vms.append(capacity)
                if failure is not None:
                    failures.append(failure)
                if interruption is not None:
                    interruptions.append(interruption)
            groups[spec.name] = GroupObservation(spec.name, int(vmss.sku.capacity or 0), tuple(sorted(vms, key=lambda v: v.id)))
        return PoolObservation(self.pool.name, now, groups, tuple(failures), tuple(interruptions))

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
        return None  # VM states are read, not consumed
