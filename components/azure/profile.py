"""The VM model shared by the spot scale sets and the on-demand fallback group.

Both run the same image and the same bootstrap (only ``capacityType`` differs in
the agent config), so a job moved to the fallback group finds the same agent,
checkpoint store and interval it left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_azure_native.compute as compute

from spotgpu.models.pools import AzurePoolSpec
from spotgpu_pulumi.azure.plan import AzurePoolPlan, ScaleSetPlan
from spotgpu_pulumi.inputs import as_input


def vm_profile(
    spec: AzurePoolSpec,
    scale_set: ScaleSetPlan,
    data: str,
    *,
    spot: bool,
    pool_group_id: pulumi.Input[str] | None = None,
) -> compute.VirtualMachineScaleSetVMProfileArgs:
    """The per-VM model; Spot settings only when ``spot``, Terminate notifications only when not.

    Spot VMs get no Terminate notification (Azure sends them ``Preempt``, >= 30 s,
    best effort); the fallback group gets one so scale-in can drain. ``pool_group_id``
    (a gang pool only) puts every NIC in the application security group the rendezvous
    host's NSG admits; without it the NIC is exactly as before.
    """
    terminate = compute.ScheduledEventsProfileArgs(
        terminate_notification_profile=compute.TerminateNotificationProfileArgs(
            enable=True, not_before_timeout=spec.terminate_notification_timeout
        )
    )
    return compute.VirtualMachineScaleSetVMProfileArgs(
        os_profile=compute.VirtualMachineScaleSetOSProfileArgs(
            computer_name_prefix=scale_set.computer_name_prefix,
            admin_username=spec.admin_username,
            custom_data=data,
            linux_configuration=linux_ssh_only(spec.admin_username, spec.ssh_public_key),
        ),
        storage_profile=compute.VirtualMachineScaleSetStorageProfileArgs(
            image_reference=compute.ImageReferenceArgs(
                publisher=spec.image.publisher, offer=spec.image.offer, sku=spec.image.sku, version=spec.image.version
            ),
            os_disk=compute.VirtualMachineScaleSetOSDiskArgs(
                create_option=compute.DiskCreateOptionTypes.FROM_IMAGE,
                caching=compute.CachingTypes.READ_WRITE,
                # Flexible only: an evicted (deleted) VM takes its disk with it, so no orphan bills.
                delete_option=compute.DiskDeleteOptionTypes.DELETE,
                disk_size_gb=spec.os_disk_gb,
                managed_disk=compute.VirtualMachineScaleSetManagedDiskParametersArgs(
                    storage_account_type=compute.StorageAccountTypes.PREMIUM_LRS
                ),
            ),
        ),
        network_profile=compute.VirtualMachineScaleSetNetworkProfileArgs(
            network_api_version=compute.NetworkApiVersion.NETWORK_API_VERSION_2020_11_01,
            network_interface_configurations=[
                compute.VirtualMachineScaleSetNetworkConfigurationArgs(
                    name=f"{scale_set.key}-nic",
                    primary=True,
                    enable_accelerated_networking=spec.accelerated_networking,
                    delete_option=compute.DeleteOptions.DELETE,
                    ip_configurations=[
                        compute.VirtualMachineScaleSetIPConfigurationArgs(
                            name=f"{scale_set.key}-ip",
                            primary=True,
                            subnet=compute.ApiEntityReferenceArgs(id=as_input(spec.subnet_id)),
                            application_security_groups=(
                                None if pool_group_id is None else [compute.SubResourceArgs(id=pool_group_id)]
                            ),
                        )
                    ],
                )
            ],
        ),
        priority=compute.VirtualMachinePriorityTypes.SPOT if spot else compute.VirtualMachinePriorityTypes.REGULAR,
        eviction_policy=spec.eviction_policy if spot else None,
        billing_profile=compute.BillingProfileArgs(max_price=spec.max_price) if spot else None,
        scheduled_events_profile=None if spot else terminate,
    )


@dataclass(frozen=True)
class SpotPolicies:
    """Optional Spot-only scale-set policies; None leaves the argument out."""

    spot_restore: compute.SpotRestorePolicyArgs | None = None
    scheduled_events: compute.ScheduledEventsPolicyArgs | None = None
    priority_mix: compute.PriorityMixPolicyArgs | None = None


def spot_policies(spec: AzurePoolSpec) -> SpotPolicies:
    restore = events = mix = None
    if spec.spot_restore_timeout:
        # Retries evicted capacity for up to the timeout (Spot only; off under Autoscale).
        restore = compute.SpotRestorePolicyArgs(enabled=True, restore_timeout=spec.spot_restore_timeout)
    if spec.publish_events_to_event_grid:
        # Scheduled events (incl. Preempt) also reach Event Grid / Resource Graph for the controller.
        events = compute.ScheduledEventsPolicyArgs(
            scheduled_events_additional_publishing_targets=compute.ScheduledEventsAdditionalPublishingTargetsArgs(
                event_grid_and_resource_graph=compute.EventGridAndResourceGraphArgs(enable=True)
            )
        )
    if spec.priority_mix is not None:
        mix = compute.PriorityMixPolicyArgs(
            base_regular_priority_count=spec.priority_mix.base_regular_priority_count,
            regular_priority_percentage_above_base=spec.priority_mix.regular_priority_percentage_above_base,
        )
    return SpotPolicies(restore, events, mix)


def scale_set_args(
    spec: AzurePoolSpec,
    plan: AzurePoolPlan,
    scale_set: ScaleSetPlan,
    profile: compute.VirtualMachineScaleSetVMProfileArgs,
    identity_id: pulumi.Input[str],
    *,
    spot: bool,
) -> compute.VirtualMachineScaleSetArgs:
    """Every scale set of the pool: Flexible, FD=1, zone-spanning, the pool identity; Spot policies if ``spot``."""
    policies = spot_policies(spec) if spot else SpotPolicies()
    return compute.VirtualMachineScaleSetArgs(
        vm_scale_set_name=scale_set.name,
        resource_group_name=as_input(plan.resource_group),
        location=plan.location,
        orchestration_mode=compute.OrchestrationMode.FLEXIBLE,
        platform_fault_domain_count=spec.platform_fault_domain_count,
        single_placement_group=spec.single_placement_group,
        zones=list(plan.zones.zones),
        zone_balance=plan.zones.zone_balance,
        sku=compute.SkuArgs(name=scale_set.vm_size, tier="Standard", capacity=scale_set.capacity),
        identity=compute.VirtualMachineScaleSetIdentityArgs(
            type=compute.ResourceIdentityType.USER_ASSIGNED, user_assigned_identities=[identity_id]
        ),
        # A model change must not reimage GPUs mid-training: new VMs pick it up, old ones on request.
        upgrade_policy=compute.UpgradePolicyArgs(mode=compute.UpgradeMode.MANUAL),
        virtual_machine_profile=profile,
        tags=scale_set.tags,
        spot_restore_policy=policies.spot_restore,
        scheduled_events_policy=policies.scheduled_events,
        priority_mix_policy=policies.priority_mix,
    )


def linux_ssh_only(admin_username: str, ssh_public_key: Any) -> compute.LinuxConfigurationArgs:
    """Key-only SSH for the admin user, the VM agent on: every Linux VM the components create."""
    return compute.LinuxConfigurationArgs(
        disable_password_authentication=True,
        provision_vm_agent=True,
        ssh=compute.SshConfigurationArgs(
            public_keys=[
                compute.SshPublicKeyArgs(key_data=ssh_public_key, path=f"/home/{admin_username}/.ssh/authorized_keys")
            ]
        ),
    )
