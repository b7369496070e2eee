"""``spotgpu:azure:OnDemandFallbackGroup``: Regular-priority capacity the ladder falls back to.

A Flexible scale set with the pool's image and bootstrap (agent config says
``capacityType: on-demand``), created empty: the fallback controller grows it
when the ladder reaches its ``on_demand`` step and shrinks it when spot
returns, up to ``capacity.fallbackMax``. Unlike Spot VMs, Regular VMs can get a
Terminate notification (5-15 min, ``terminateNotificationTimeout``), so a
scale-in drains the job and takes a final checkpoint instead of cutting it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native.compute as compute

from spotgpu_pulumi.azure.plan import AzurePoolPlan
from spotgpu_pulumi.azure.profile import scale_set_args, vm_profile

TOKEN = "spotgpu:azure:OnDemandFallbackGroup"


@dataclass(frozen=True)
class OnDemandFallbackGroupArgs:
    plan: AzurePoolPlan
    identity_id: pulumi.Input[str]
    #: a gang pool's application security group (the rendezvous host admits its members); None: no group
    pool_group_id: pulumi.Input[str] | None = None


class OnDemandFallbackGroup(pulumi.ComponentResource):
    """One Regular-priority Flexible scale set at capacity 0 with Terminate notifications."""

    scale_set: compute.VirtualMachineScaleSet
    scale_set_name: str
    """Deterministic name, also carried by the spot scale sets' ``spotgpu-fallback-group`` tag."""

    def __init__(self, name: str, args: OnDemandFallbackGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        pool, plan = args.plan, args.plan.fallback
        profile = vm_profile(pool.spec, plan, pool.fallback_custom_data, spot=False, pool_group_id=args.pool_group_id)
        self.scale_set = compute.VirtualMachineScaleSet(
            f"{name}-{plan.key}",
            scale_set_args(pool.spec, pool, plan, profile, args.identity_id, spot=False),
            # The controller owns capacity after creation; `pulumi up` must not undo a resize.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["sku.capacity"]),
        )
        self.scale_set_name = plan.name
        self.register_outputs({"scale_set_name": plan.name, "scale_set_id": self.scale_set.id})
