"""``spotgpu:gcp:OnDemandFallbackGroup``: the ladder's on-demand rung, plus the controller identity.

A STANDARD-provisioning regional MIG with the same image, shape and bootstrap as
the primary spot group, held at size 0. The fallback controller resizes it (and
the alternate-SKU spot groups), so Pulumi ignores ``targetSize`` after creation.

The controller gets its own service account with least privilege:

* a custom role with only ``instanceGroupManagers.get/update`` (resize, read,
  list managed instances and errors, delete one drained instance), conditioned
  on this pool's MIG names;
* subscriber on this pool's preemption subscription only;
* object access on the checkpoint bucket, conditioned on its state prefix
  (``<prefix>/_controller/``: record, drain requests, agent commits).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import compute, projects, pubsub, serviceaccount, storage

from spotgpu_pulumi.gcp import plan
from spotgpu_pulumi.gcp.template import region_template

TOKEN = "spotgpu:gcp:OnDemandFallbackGroup"


@dataclass(frozen=True)
class OnDemandFallbackGroupArgs:
    """The pool's plan and what the group needs from the pool's other parts (their Outputs)."""

    plan: plan.GcpPoolPlan
    #: the nodes' service account the template runs as
    node_service_account: pulumi.Input[str]
    #: the checkpoint bucket the controller's state lives in
    bucket_name: pulumi.Input[str]
    #: the preemption subscription the controller pulls
    subscription_name: pulumi.Input[str]


class OnDemandFallbackGroup(pulumi.ComponentResource):
    mig_name: pulumi.Output[str]
    controller_email: pulumi.Output[str]

    def __init__(self, name: str, args: OnDemandFallbackGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        pool, spec = args.plan, args.plan.spec
        group, mig_name, labels = pool.groups[0], pool.fallback_mig, pool.labels("fallback")
        template = region_template(
            f"{name}-template",
            spec=spec,
            group=group,
            scheduling=plan.on_demand_scheduling(),
            name_prefix=pool.names.template_prefix("od"),
            metadata=pool.fallback_metadata,
            startup_script=pool.fallback_startup_script,
            labels=labels,
            service_account_email=args.node_service_account,
            parent=self,
        )
        mig = compute.RegionInstanceGroupManager(
            f"{name}-mig",
            project=spec.project,
            region=spec.region,
            name=mig_name,
            base_instance_name=mig_name,
            description=f"spotgpu on-demand fallback for pool {spec.name}",
            versions=[{"name": "primary", "instance_template": template.self_link}],
            distribution_policy_zones=list(pool.zones),
            distribution_policy_target_shape=spec.target_shape,
            instance_flexibility_policy=plan.flexibility_policy(group),
            update_policy=plan.update_policy(spec.target_shape),
            instance_lifecycle_policy=plan.lifecycle_policy(),
            all_instances_config={"labels": labels},
            target_size=0,
            wait_for_instances=False,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["targetSize"]),
        )
        account = serviceaccount.Account(
            f"{name}-controller",
            project=spec.project,
            account_id=pool.controller_account_id,
            display_name=f"spotgpu fallback controller for pool {spec.name}",
            opts=child,
        )
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        role = projects.IAMCustomRole(
            f"{name}-controller-role",
            project=spec.project,
            role_id=pool.names.controller_role_id,
            title=f"spotgpu controller {spec.name}",
            description="Resize and inspect one spotgpu pool's MIGs",
            permissions=list(plan.CONTROLLER_MIG_PERMISSIONS),
            opts=child,
        )
        projects.IAMMember(
            f"{name}-controller-migs",
            project=spec.project,
            role=role.name,
            member=member,
            condition={
                "title": f"spotgpu-{spec.name}-migs",
                "expression": plan.controller_mig_condition(spec.project, spec.region, (*pool.spot_migs, mig_name)),
            },
            opts=child,
        )
        pubsub.SubscriptionIAMMember(
            f"{name}-controller-subscriber",
            project=spec.project,
            subscription=args.subscription_name,
            role="roles/pubsub.subscriber",
            member=member,
            opts=child,
        )
        storage.BucketIAMMember(
            f"{name}-controller-state",
            bucket=args.bucket_name,
            role="roles/storage.objectUser",
            member=member,
            condition={"title": f"spotgpu-{spec.name}-state", "expression": pool.state_condition},
            opts=child,
        )
        self.mig_name = mig.name
        self.controller_email = account.email
        self.register_outputs({"migName": self.mig_name, "controllerEmail": self.controller_email})
