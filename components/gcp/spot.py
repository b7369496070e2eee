"""``spotgpu:gcp:SpotGroup``: one Spot template + regional MIG for one accelerator signature.

The pool's primary group holds ``capacity.target`` VMs (or is autoscaled); an
alternate-SKU group starts at 0 and belongs to the fallback controller, which
resizes it (so Pulumi ignores its size after creation).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import compute

from spotgpu_pulumi.gcp import plan
from spotgpu_pulumi.gcp.template import region_template

TOKEN = "spotgpu:gcp:SpotGroup"


@dataclass(frozen=True)
class SpotGroupArgs:
    """One of the pool's spot groups: the planner decided it (``plan.groups[index]``, ``plan.spot_migs[index]``)."""

    plan: plan.GcpPoolPlan
    #: which group: 0 is the primary (``capacity.target`` VMs or autoscaled), the others start at 0
    index: int
    #: the nodes' service account the template runs as
    service_account_email: pulumi.Input[str]


class SpotGroup(pulumi.ComponentResource):
    mig_name: pulumi.Output[str]

    def __init__(self, name: str, args: SpotGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        pool, spec = args.plan, args.plan.spec
        group, mig_name, primary = pool.groups[args.index], pool.spot_migs[args.index], args.index == 0
        labels = pool.labels("spot-pool")
        template = region_template(
            f"{name}-template",
            spec=spec,
            group=group,
            scheduling=plan.spot_scheduling(spec),
            name_prefix=pool.names.template_prefix(f"spot-{group.key}"),
            metadata=pool.spot_metadata,
            startup_script=pool.spot_startup_script,
            labels=labels,
            service_account_email=args.service_account_email,
            parent=self,
        )
        autoscaled = primary and spec.autoscaling is not None
        mig = compute.RegionInstanceGroupManager(
            f"{name}-mig",
            project=spec.project,
            region=spec.region,
            name=mig_name,
            base_instance_name=mig_name,
            description=f"spotgpu spot pool {spec.name} ({group.key})",
            versions=[{"name": "primary", "instance_template": template.self_link}],
            distribution_policy_zones=list(pool.zones),
            distribution_policy_target_shape=spec.target_shape,
            instance_flexibility_policy=plan.flexibility_policy(group),
            update_policy=plan.update_policy(spec.target_shape),
            instance_lifecycle_policy=plan.lifecycle_policy(),
            all_instances_config={"labels": labels},
            target_size=None if autoscaled else (spec.capacity.target if primary else 0),
            wait_for_instances=False,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=None if primary else ["targetSize"]),
        )
        if autoscaled and spec.autoscaling is not None:
            scaling = spec.autoscaling
            compute.RegionAutoscaler(
                f"{name}-autoscaler",
                project=spec.project,
                region=spec.region,
                name=mig_name,
                target=mig.self_link,
                autoscaling_policy={
                    "min_replicas": scaling.min_replicas,
                    "max_replicas": scaling.max_replicas,
                    "cooldown_period": scaling.cooldown_seconds,
                    "cpu_utilization": {"target": scaling.cpu_utilization_target},
                },
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.mig_name = mig.name
        self.register_outputs({"migName": self.mig_name})
