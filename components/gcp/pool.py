"""``spotgpu:gcp:GpuPool``: a diversified Spot GPU pool on Google Cloud, made safe to use.

Composition (all children parented here, names from pool + environment + stable keys):

* ``NodeIdentity``: the VMs' service account (logs/metrics only project-wide);
* ``CheckpointBucket``: versioned private GCS bucket, object access for the VMs;
* ``PreemptionEvents``: log sink -> Pub/Sub topic -> subscription;
* one ``SpotGroup`` per accelerator signature (see :mod:`spotgpu_pulumi.gcp.plan`);
* ``OnDemandFallbackGroup``: size-0 on-demand MIG plus the controller's identity.

Every decision is made by :func:`spotgpu_pulumi.gcp.plan.plan_pool` (a
:class:`~spotgpu_pulumi.gcp.plan.GcpPoolPlan`, which the pool is given) before the pool
registers itself, so an invalid pool fails with the field to fix and leaves no half-built tree.
Each child takes its name, one args object and its options, as on AWS and Azure.
"""

from __future__ import annotations

from typing import Any

import pulumi

from spotgpu_pulumi.gcp.bucket import CheckpointBucket, CheckpointBucketArgs
from spotgpu_pulumi.gcp.controller_job import ControllerJob, ControllerJobArgs
from spotgpu_pulumi.gcp.events import PreemptionEvents, PreemptionEventsArgs
from spotgpu_pulumi.gcp.fallback import OnDemandFallbackGroup, OnDemandFallbackGroupArgs
from spotgpu_pulumi.gcp.identity import NodeIdentity, NodeIdentityArgs
from spotgpu_pulumi.gcp.plan import GcpPoolPlan
from spotgpu_pulumi.gcp.rendezvous import GcpRendezvousHost
from spotgpu_pulumi.gcp.spot import SpotGroup, SpotGroupArgs
from spotgpu_pulumi.outputs import PoolOutputs, common_exports

TOKEN = "spotgpu:gcp:GpuPool"


class GpuPool(PoolOutputs, pulumi.ComponentResource):
    exports: dict[str, Any]
    """What the stack exports: the common keys (spotgpu_pulumi.outputs) plus MIG, identity, bucket and topic names."""

    def __init__(self, name: str, plan: GcpPoolPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec, names = plan.spec, plan.names
        child = pulumi.ResourceOptions(parent=self)

        identity = NodeIdentity(
            f"{name}-node",
            NodeIdentityArgs(
                project=spec.project,
                account_id=plan.node_account_id,
                display_name=f"spotgpu pool {spec.name} ({plan.args.environment}) VMs",
            ),
            child,
        )
        bucket = CheckpointBucket(
            f"{name}-ckpt",
            CheckpointBucketArgs(
                project=spec.project,
                location=spec.bucket_location or spec.region,
                bucket_name=plan.bucket,
                store=spec.checkpoint,
                labels=plan.labels("checkpoint-store"),
                writer_member=identity.member,
            ),
            child,
        )
        events = PreemptionEvents(
            f"{name}-events",
            PreemptionEventsArgs(
                project=spec.project,
                topic=names.topic,
                subscription=names.subscription,
                sink=names.sink,
                log_filter=plan.log_filter,
                labels=plan.labels("events"),
            ),
            child,
        )
        if plan.rendezvous is not None:
            host = GcpRendezvousHost(f"{name}-rendezvous", plan.rendezvous, identity.email, child)
        after_bucket = pulumi.ResourceOptions(parent=self, depends_on=[bucket])
        spot_groups = [
            SpotGroup(f"{name}-spot-{group.key}", SpotGroupArgs(plan, i, identity.email), after_bucket)
            for i, group in enumerate(plan.groups)
        ]
        fallback = OnDemandFallbackGroup(
            f"{name}-fallback",
            OnDemandFallbackGroupArgs(
                plan, node_service_account=identity.email, bucket_name=bucket.bucket_name,
                subscription_name=events.subscription_name,
            ),
            after_bucket,
        )
        job = None
        if plan.controller_job is not None:
            job = ControllerJob(
                f"{name}-controller",
                ControllerJobArgs(spec=spec, job=plan.controller_job, service_account_email=fallback.controller_email),
                child,
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
