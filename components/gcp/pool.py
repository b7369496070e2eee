"""``spotgpu:gcp:GpuPool``: a diversified Spot GPU pool on Google Cloud, made safe to use.

Composition (all children parented here, names from pool + environment + stable keys):

* ``NodeIdentity``: the VMs' service account (logs/metrics only project-wide);
* ``CheckpointBucket``: versioned private GCS bucket, object access for the VMs;
* ``PreemptionEvents``: log sink -> Pub/Sub topic -> subscription;
* one ``SpotGroup`` per accelerator signature (see :mod:`spotgpu_pulumi.gcp.plan`);
* ``OnDemandFallbackGroup``: size-0 on-demand MIG plus the controller's identity.

Every decision is made by :mod:`spotgpu_pulumi.gcp.plan` before any resource exists,
so invalid pools fail at construction with the field to fix.
"""

from __future__ import annotations

from typing import Any

import pulumi

from spotgpu.bootstrap import control_store_url
from spotgpu.models.pools import GcpPoolSpec
from spotgpu.models.stack import fallback_types
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.gcp import links, plan
from spotgpu_pulumi.gcp.bucket import CheckpointBucket
from spotgpu_pulumi.gcp.controller_job import ControllerJob, plan_gcp_controller_job
from spotgpu_pulumi.gcp.events import PreemptionEvents
from spotgpu_pulumi.gcp.fallback import OnDemandFallbackGroup
from spotgpu_pulumi.gcp.identity import NodeIdentity
from spotgpu_pulumi.gcp.rendezvous import GcpRendezvousHost, plan_gcp_rendezvous
from spotgpu_pulumi.gcp.spot import SpotGroup, SpotGroupSettings
from spotgpu_pulumi.outputs import PoolOutputs, common_exports

TOKEN = "spotgpu:gcp:GpuPool"


def _gcp_spec(args: PoolArgs) -> GcpPoolSpec:
    if not isinstance(args.spec, GcpPoolSpec):
        raise plan.GcpPlanError(
            f"spotgpu:pools[{args.spec.name}].cloud: spotgpu_pulumi.gcp.GpuPool builds only Google Cloud pools "
            f"(value: {args.spec.cloud!r}); fix: build it with spotgpu_pulumi.{args.spec.cloud}.GpuPool, or let "
            "spotgpu_pulumi.platform.deploy pick the class"
        )
    return args.spec


class GpuPool(PoolOutputs, pulumi.ComponentResource):
    exports: dict[str, Any]
    """What the stack exports: the common keys (spotgpu_pulumi.outputs) plus MIG, identity, bucket and topic names."""

    def __init__(self, name: str, args: PoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec = _gcp_spec(args)
        layout = plan.plan_pool(spec, args.environment)
        zones, groups, names, store_url = layout.zones, layout.groups, layout.names, layout.store_url
        spot_migs, fallback_mig = layout.spot_migs, layout.fallback_mig
        child = pulumi.ResourceOptions(parent=self)
        try:  # planned before any child: a bad gang block leaves no half-built tree
            rendezvous = plan_gcp_rendezvous(spec, names.prefix, links.pool_labels(args))
        except ValueError as err:
            raise plan.GcpPlanError(f"spotgpu:pools[{spec.name}].gang: {err}") from None
        gang = rendezvous.launch if rendezvous else None

        identity = NodeIdentity(
            f"{name}-node",
            project=spec.project,
            account_id=layout.node_account_id,
            display_name=f"spotgpu pool {spec.name} ({args.environment}) VMs",
            opts=child,
        )
        bucket = CheckpointBucket(
            f"{name}-ckpt",
            project=spec.project,
            location=spec.bucket_location or spec.region,
            bucket_name=names.bucket,
            store=spec.checkpoint,
            labels=links.labels(args, "checkpoint-store"),
            writer_member=identity.member,
            opts=child,
        )
        events = PreemptionEvents(
            f"{name}-events",
            project=spec.project,
            topic=names.topic,
            subscription=names.subscription,
            sink=names.sink,
            log_filter=plan.preemption_log_filter(spec.project, names.spot_base_instance_prefix),
            labels=links.labels(args, "events"),
            opts=child,
        )
        if rendezvous is not None:
            host = GcpRendezvousHost(f"{name}-rendezvous", rendezvous, identity.email, opts=child)
        spot_metadata = links.spot_metadata(args, spec, store_url, fallback_mig)
        spot_script = links.startup_script(args, spec, store_url, "spot", gang)
        spot_groups = [
            SpotGroup(
                f"{name}-spot-{group.key}",
                SpotGroupSettings(
                    spec=spec,
                    group=group,
                    primary=i == 0,
                    mig_name=mig,
                    template_prefix=names.template_prefix(f"spot-{group.key}"),
                    zones=zones,
                    metadata=spot_metadata,
                    startup_script=spot_script,
                    labels=links.labels(args, "spot-pool"),
                ),
                identity.email,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[bucket]),
            )
            for i, (group, mig) in enumerate(zip(groups, spot_migs, strict=True))
        ]
        fallback = OnDemandFallbackGroup(
            f"{name}-fallback",
            spec=spec,
            group=groups[0],
            mig_name=fallback_mig,
            template_prefix=names.template_prefix("od"),
            zones=zones,
            metadata=links.fallback_metadata(args, spec, store_url),
            startup_script=links.startup_script(args, spec, store_url, "on-demand", gang),
            labels=links.labels(args, "fallback"),
            node_service_account=identity.email,
            controller_account_id=layout.controller_account_id,
            controller_role_id=names.controller_role_id,
            controlled_migs=(*spot_migs, fallback_mig),
            bucket_name=bucket.bucket_name,
            state_condition=plan.controller_state_condition(names.bucket, plan.checkpoint_prefix(spec)),
            subscription_name=events.subscription_name,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[bucket]),
        )
        job = None
        if spec.controller.enabled:
            job = ControllerJob(
                f"{name}-controller",
                spec=spec,
                job=plan_gcp_controller_job(
                    spec,
                    args.workload,
                    args.ladder,
                    base_name=names.prefix,
                    state_url=control_store_url(store_url),
                    spot_migs=list(spot_migs),
                    fallback_mig=fallback_mig,
                    subscription=names.subscription,
                    topic=names.topic,
                    labels=links.labels(args, "controller"),
                    group_types={**{mig: g.machine_types for g, mig in zip(groups, spot_migs, strict=True)},
                                 fallback_mig: fallback_types(spec)},
                ),
                service_account_email=fallback.controller_email,
                opts=child,
            )
        self.exports = {
            **common_exports(
                self,
                cloud="gcp",
                region=spec.region,
                checkpointStore=store_url,
                spotGroups=pulumi.Output.all(*[g.mig_name for g in spot_groups]),
                fallbackGroup=fallback.mig_name,
                events=events.subscription_name,
                nodeIdentity=identity.email,
                controllerIdentity=fallback.controller_email,
                controllerStateUrl=control_store_url(store_url),
            ),
            "project": spec.project,
            "mig": spot_groups[0].mig_name,
            "alternateMigs": list(spot_migs[1:]),
            "fallbackMig": fallback.mig_name,
            "serviceAccount": identity.email,
            "controllerServiceAccount": fallback.controller_email,
            "bucket": bucket.bucket_name,
            "topic": events.topic_name,
            "subscription": events.subscription_name,
        }
        if job is not None:
            self.exports |= {"controllerJob": job.job_name, "controllerConfig": job.controller_config}
        if rendezvous is not None:
            self.exports |= {"rendezvousAddress": host.address, "rendezvousInstance": host.instance_name}
        self.register_outputs(self.exports)
