"""``spotgpu:gcp:SpotGroup``: one Spot template + regional MIG for one accelerator signature.

The pool's primary group holds ``capacity.target`` VMs (or is autoscaled); an
alternate-SKU group starts at 0 and belongs to the fallback controller, which
resizes it (so Pulumi ignores its size after creation).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import compute

from spotgpu.models.pools import GcpPoolSpec
from spotgpu_pulumi.gcp import plan
from spotgpu_pulumi.gcp.template import region_template

TOKEN = "spotgpu:gcp:SpotGroup"


@dataclass(frozen=True)
class SpotGroupSettings:
    """Everything one spot group needs, already decided by the planner."""

    spec: GcpPoolSpec
    group: plan.MachineGroup
    primary: bool
    mig_name: str
    template_prefix: str
    zones: tuple[str, ...]
    metadata: dict[str, str]
    startup_script: str
    labels: dict[str, str]


class SpotGroup(pulumi.ComponentResource):
    mig_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        settings: SpotGroupSettings,
        service_account_email: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(TOKEN, name, None, opts)
        s, spec = settings, settings.spec
        template = region_template(
            f"{name}-template",
            spec=spec,
            group=s.group,
            scheduling=plan.spot_scheduling(spec),
            name_prefix=s.template_prefix,
            metadata=s.metadata,
            startup_script=s.startup_script,
            labels=s.labels,
            service_account_email=service_account_email,
            parent=self,
        )
        autoscaled = s.primary and spec.autoscaling is not None
        mig = compute.RegionInstanceGroupManager(
            f"{name}-mig",
            project=spec.project,
            region=spec.region,
            name=s.mig_name,
            base_instance_name=s.mig_name,
            description=f"spotgpu spot pool {spec.name} ({s.group.key})",
            versions=[{"name": "primary", "instance_template": template.self_link}],
            distribution_policy_zones=list(s.zones),
            distribution_policy_target_shape=spec.target_shape,
            instance_flexibility_policy=plan.flexibility_policy(s.group),
            update_policy=plan.update_policy(spec.target_shape),
            instance_lifecycle_policy=plan.lifecycle_policy(),
            all_instances_config={"labels": s.labels},
            target_size=None if autoscaled else (spec.capacity.target if s.primary else 0),
            wait_for_instances=False,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=None if s.primary else ["targetSize"]),
        )
        if autoscaled and spec.autoscaling is not None:
            scaling = spec.autoscaling
            compute.RegionAutoscaler(
                f"{name}-autoscaler",
                project=spec.project,
                region=spec.region,
                name=s.mig_name,
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
