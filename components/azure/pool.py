"""``spotgpu:azure:GpuPool``: a spot GPU pool on Azure, composed of thin children.

Tree (names from stable keys, so a new size adds a scale set and touches none
of the others)::

    GpuPool <pool>
    ├─ UserAssignedIdentity        <pool>-identity        (on every VM)
    ├─ CheckpointStorage           <pool>-checkpoints     (account, blob service, container, lifecycle, grant)
    ├─ VirtualMachineScaleSet      <pool>-spot-<size key> (one per GPU size: Flexible, Spot, FD=1)
    ├─ OnDemandFallbackGroup       <pool>-fallback        (Regular, capacity 0, Terminate notice)
    ├─ ScheduledEventsRoute        <pool>-events          (publishEventsToEventGrid: system topic -> queue)
    ├─ ControllerIdentity          <pool>-controller      (identity, custom roles, scoped grants)
    └─ RendezvousHost              <pool>-rendezvous      (a gang pool only: pool group, NSG, NIC, Regular VM)

All decisions come from :func:`spotgpu_pulumi.azure.plan.plan_pool` (an
:class:`~spotgpu_pulumi.azure.plan.AzurePoolPlan`, roles and bootstrap included), which the
pool is given: a bad spec was refused before any resource is registered.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_azure_native.authorization as authorization
import pulumi_azure_native.compute as compute
import pulumi_azure_native.managedidentity as managedidentity

from spotgpu_pulumi.azure.controller import ControllerIdentity, ControllerIdentityArgs
from spotgpu_pulumi.azure.controller_job import (
    AzureControllerJobArgs,
    ControllerJob,
    azure_config_output,
    plan_azure_controller_job,
)
from spotgpu_pulumi.azure.events import ScheduledEventsRoute, ScheduledEventsRouteArgs
from spotgpu_pulumi.azure.fallback import OnDemandFallbackGroup, OnDemandFallbackGroupArgs
from spotgpu_pulumi.azure.plan import AzurePoolPlan
from spotgpu_pulumi.azure.profile import scale_set_args, vm_profile
from spotgpu_pulumi.azure.rendezvous import AzureRendezvousHost
from spotgpu_pulumi.azure.storage import CheckpointStorage, CheckpointStorageArgs
from spotgpu_pulumi.inputs import as_input
from spotgpu_pulumi.outputs import PoolOutputs, common_exports

TOKEN = "spotgpu:azure:GpuPool"


class GpuPool(PoolOutputs, pulumi.ComponentResource):
    """Spot GPU scale sets (one per size) with checkpoint storage, fallback group and controller identity.

    Eviction policy: ``Delete`` (default) frees the VM, its disk and its Spot quota
    at eviction; ``Deallocate`` keeps the stopped VM, which still counts against
    the Spot quota and the scale set's capacity and keeps billing its disks, in
    exchange for a faster restart on the same disk when capacity returns.
    """

    exports: dict[str, Any]
    """What the stack exports: the common keys (spotgpu_pulumi.outputs) plus group, identity and storage names."""

    def __init__(self, name: str, plan: AzurePoolPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec, roles = plan.spec, plan.roles
        for line in plan.warnings:
            pulumi.log.warn(line, resource=self)
        client = authorization.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=self))
        subscription_id = client.subscription_id

        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity",
            resource_name_=plan.pool_identity,
            resource_group_name=as_input(plan.resource_group),
            location=plan.location,
            tags=plan.identity_tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        checkpoints = CheckpointStorage(
            f"{name}-checkpoints",
            CheckpointStorageArgs(
                plan=plan.storage,
                resource_group=plan.resource_group,
                location=plan.location,
                subscription_id=subscription_id,
                writer_principal_id=identity.principal_id,
                writer_grant=roles.for_principal("pool")[0],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        host = pool_group = None
        if plan.rendezvous is not None:  # a gang pool: its VMs join the group the host's NSG admits
            host = AzureRendezvousHost(f"{name}-rendezvous", plan.rendezvous, opts=pulumi.ResourceOptions(parent=self))
            pool_group = host.pool_group_id
        spot_sets = [
            compute.VirtualMachineScaleSet(
                f"{name}-spot-{s.key}",
                scale_set_args(
                    spec,
                    plan,
                    s,
                    vm_profile(spec, s, plan.spot_custom_data, spot=True, pool_group_id=pool_group),
                    identity.id,
                    spot=True,
                ),
                # The controller resizes after creation; `pulumi up` must not undo it.
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=["sku.capacity"]),
            )
            for s in plan.spot
        ]
        fallback = OnDemandFallbackGroup(
            f"{name}-fallback",
            OnDemandFallbackGroupArgs(plan, identity.id, pool_group),
            opts=pulumi.ResourceOptions(parent=self),
        )
        route = None
        if plan.events is not None:
            route = ScheduledEventsRoute(
                f"{name}-events",
                ScheduledEventsRouteArgs(
                    plan=plan.events,
                    resource_group=plan.resource_group,
                    account_name=checkpoints.account_name,
                    account_id=checkpoints.account_id,
                    subscription_id=subscription_id,
                    sender_grant=roles.for_principal("eventgrid")[0],
                    tags=plan.controller_tags,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[checkpoints]),
            )
        #: the Scheduled Events topic this pool created (the stack's other pools share it); else None
        self.events_topic = route.topic if route is not None else None
        controller = ControllerIdentity(
            f"{name}-controller",
            ControllerIdentityArgs(
                identity_name=plan.controller_identity,
                resource_group=plan.resource_group,
                location=plan.location,
                tags=plan.controller_tags,
                roles=roles,
                subscription_id=subscription_id,
                scoped_resources=[*spot_sets, fallback.scale_set, checkpoints, *([route.queue] if route else [])],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        job = None
        if spec.controller.enabled:
            config = azure_config_output(
                spec,
                plan.args.workload,
                plan.args.ladder,
                subscription_id=subscription_id,
                state_url=plan.control_store,
                spot_sets=[s.name for s in plan.spot],
                fallback_set=plan.fallback.name,
                group_types={**{s.name: (s.vm_size,) for s in plan.spot}, plan.fallback.name: (plan.fallback.vm_size,)},
                events_queue_url=plan.events.queue_url if plan.events is not None else None,
            )
            job = ControllerJob(
                f"{name}-controller-job",
                AzureControllerJobArgs(
                    spec=spec,
                    job=plan_azure_controller_job(spec, plan.environment, plan.controller_tags),
                    config=config,
                    identity_id=controller.identity.id,
                    identity_client_id=controller.client_id,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.exports = {
            **common_exports(
                self,
                cloud="azure",
                region=plan.location,
                checkpointStore=plan.checkpoint_store,
                spotGroups=[s.name for s in plan.spot],
                fallbackGroup=plan.fallback.name,
                # The Scheduled Events queue (publishEventsToEventGrid); otherwise each VM reads its own.
                events=plan.events.queue_url if plan.events is not None else "",
                nodeIdentity=identity.client_id,
                controllerIdentity=controller.client_id,
                controllerStateUrl=plan.control_store,
            ),
            "resourceGroup": as_input(plan.resource_group),
            "location": plan.location,
            "scaleSets": [s.name for s in plan.spot],
            "fallbackScaleSet": plan.fallback.name,
            "fallbackMax": str(plan.fallback_max),
            "identityClientId": identity.client_id,
            "identityPrincipalId": identity.principal_id,
            "storageAccount": checkpoints.account_name,
            "container": checkpoints.container_name,
            "controllerClientId": controller.client_id,
            "controllerPrincipalId": controller.principal_id,
        }
        if job is not None:
            self.exports |= {"controllerJob": job.job_name, "controllerConfig": job.controller_config}
        if host is not None:
            self.exports |= {"rendezvousAddress": host.address, "rendezvousVm": host.vm_name}
        if self.events_topic is not None:  # what another stack's pools name in scheduledEventsTopic
            topic = self.events_topic
            self.exports["eventsTopic"] = {
                "resourceGroup": as_input(topic.resource_group),
                "name": topic.name,
                "principalId": as_input(topic.principal_id),
            }
        self.register_outputs(self.exports)
