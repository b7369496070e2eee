"""``spotgpu:gcp:GpuPool``: a diversified Spot GPU pool on Google Cloud, made safe to use.

Composition (all children parented here, names from pool + environment + stable keys):

* ``NodeIdentity``: the VMs' service account (logs/metrics only project-wide);
* ``CheckpointBucket``: versioned private GCS bucket, object access for the VMs;
* ``PreemptionEvents``: log sink -> Pub/Sub topic -> subscription;
* one ``SpotGroup`` per accelerator signature (see :mod:`spotgpu_pulumi.gcp.plan`);
* ``OnDemandFallbackGroup``: size-0 on-demand MIG plus the controller's identity.

Every decision is made by :func:`spotgpu_pulumi.gcp.plan.plan_pool` (a
:class:`~spotgpu_pulumi.gcp.plan.GcpPoolPlan`) before the pool registers itself, so an
invalid pool fails at construction with the field to fix and leaves no half-built tree.
"""

from __future__ import annotations

from typing import Any

import pulumi

from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.gcp.bucket import CheckpointBucket
from spotgpu_pulumi.gcp.controller_job import ControllerJob
from spotgpu_pulumi.gcp.events import PreemptionEvents
from spotgpu_pulumi.gcp.fallback import OnDemandFallbackGroup
from spotgpu_pulumi.gcp.identity import NodeIdentity
from spotgpu_pulumi.gcp.plan import plan_pool
from spotgpu_pulumi.gcp.rendezvous import GcpRendezvousHost
from spotgpu_pulumi.gcp.spot import SpotGroup, SpotGroupSettings
from spotgpu_pulumi.outputs import PoolOutputs, common_exports

TOKEN = "spotgpu:gcp:GpuPool"


class GpuPool(PoolOutputs, pulumi.ComponentResource):
    exports: dict[str, Any]
    """What the stack exports: the common keys (spotgpu_pulumi.outputs) plus MIG, identity, bucket and topic names."""

    def __init__(self, name: str, args: PoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        plan = plan_pool(args)  # before registering: bad input fails with no half-built tree
        super().__init__(TOKEN, name, None, opts)
        spec, names = plan.spec, plan.names
        child = pulumi.ResourceOptions(parent=self)

        identity = NodeIdentity(
            f"{name}-node",
            project=spec.project,
            account_id=plan.node_account_id,
            display_name=f"spotgpu pool {spec.name} ({args.environment}) VMs",
            opts=child,
        )
        bucket = CheckpointBucket(
            f"{name}-ckpt",
            project=spec.project,
            location=spec.bucket_location or spec.region,
            bucket_name=plan.bucket,
            store=spec.checkpoint,
            labels=plan.labels("checkpoint-store"),
            writer_member=identity.member,
            opts=child,
        )
        events = PreemptionEvents(
            f"{name}-events",
            project=spec.project,
            topic=names.topic,
            subscription=names.subscription,
            sink=names.sink,
            log_filter=plan.log_filter,
            labels=plan.labels("events"),
            opts=child,
        )
        if plan.rendezvous is not None:
            host = GcpRendezvousHost(f"{name}-rendezvous", plan.rendezvous, identity.email, opts=child)
        spot_groups = [
            SpotGroup(
                f"{name}-spot-{group.key}",
                SpotGroupSettings(
                    spec=spec,
                    group=group,
                    primary=i == 0,
                    mig_name=mig,
                    template_prefix=names.template_prefix(f"spot-{group.key}"),
                    zones=plan.zones,
                    metadata=plan.spot_metadata,
                    startup_script=plan.spot_startup_script,
                    labels=plan.labels("spot-pool"),
                ),
                identity.email,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[bucket]),
            )
            for i, (group, mig) in enumerate(zip(plan.groups, plan.spot_migs, strict=True))
        ]
        fallback = OnDemandFallbackGroup(
            f"{name}-fallback",
            spec=spec,
            group=plan.groups[0],
            mig_name=plan.fallback_mig,
            template_prefix=names.template_prefix("od"),
            zones=plan.zones,
            metadata=plan.fallback_metadata,
            startup_script=plan.fallback_startup_script,
            labels=plan.labels("fallback"),
            node_service_account=identity.email,
            controller_account_id=plan.controller_account_id,
            controller_role_id=names.controller_role_id,
            controlled_migs=(*plan.spot_migs, plan.fallback_mig),
            bucket_name=bucket.bucket_name,
            state_condition=plan.state_condition,
            subscription_name=events.subscription_name,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[bucket]),
        )
        job = None
        if plan.controller_job is not None:
            job = ControllerJob(
                f"{name}-controller",
                spec=spec,
                job=plan.controller_job,
                service_account_email=fallback.controller_email,
                opts=child,
            )
        self.exports = {
            **common_exports(
                self,
                cloud="gcp",
                region=spec.region,
                checkpointStore=plan.checkpoint_store,
                spotGroups=pulumi.Output.all(*[g.mig_name for g in spot_groups]),
                fallbackGroup=fallback.mig_name,
                events=events.subscription_name,
                nodeIdentity=identity.email,
                controllerIdentity=fallback.controller_email,
                controllerStateUrl=plan.control_store,
            ),
            "project": spec.project,
            "mig": spot_groups[0].mig_name,
            "alternateMigs": list(plan.spot_migs[1:]),
            "fallbackMig": fallback.mig_name,
            "serviceAccount": identity.email,
            "controllerServiceAccount": fallback.controller_email,
            "bucket": bucket.bucket_name,
            "topic": events.topic_name,
            "subscription": events.subscription_name,
        }
        if job is not None:
            self.exports |= {"controllerJob": job.job_name, "controllerConfig": job.controller_config}
        if plan.rendezvous is not None:
            self.exports |= {"rendezvousAddress": host.address, "rendezvousInstance": host.instance_name}
        self.register_outputs(self.exports)
