"""``spotgpu:aws:GpuPool``: one AWS spot GPU pool with everything that makes spot safe.

The pool is a tree of thin components over the :class:`~spotgpu_pulumi.aws.plan.AwsPoolPlan` it is
given, which :func:`spotgpu_pulumi.aws.plan.plan_pool` decided (the cloud's entry in
:mod:`spotgpu_pulumi.clouds`; ``platform.deploy`` hands each pool the plan the config edge made):

* ``CheckpointBucket``: where periodic checkpoints are committed (always created).
* ``NodeIdentity``: the nodes' role, limited to the pool's prefix and drain hooks.
* ``SpotCapacity``: the Spot Auto Scaling group (or EC2 Fleet) and its launch template.
* ``InterruptionEvents``: warnings, rebalance, launch and termination events in one queue.
* ``OnDemandFallbackGroup``: the on-demand rung of the ladder (always created, empty by
  default) and the fallback controller's least-privilege role.
* ``InterruptionDrill``: the FIS template ``spotgpu drill aws`` starts.

The resource graph is static: which resources exist depends only on the spec
(``mode``, ``kmsKeyArn``), never on values known after creation.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from spotgpu.models.refs import Ref
from spotgpu_pulumi.aws.bucket import CheckpointBucket, CheckpointBucketArgs
from spotgpu_pulumi.aws.controller_job import ControllerJob, ControllerJobArgs
from spotgpu_pulumi.aws.drill import InterruptionDrill, InterruptionDrillArgs
from spotgpu_pulumi.aws.events import InterruptionEvents, InterruptionEventsArgs
from spotgpu_pulumi.aws.fallback import FallbackArgs, OnDemandFallbackGroup
from spotgpu_pulumi.aws.identity import NodeIdentity, NodeIdentityArgs
from spotgpu_pulumi.aws.plan import AwsPoolPlan
from spotgpu_pulumi.aws.rendezvous import RendezvousHost
from spotgpu_pulumi.aws.spot import SpotCapacity, SpotCapacityArgs
from spotgpu_pulumi.inputs import as_input, optional_input
from spotgpu_pulumi.outputs import PoolOutputs, common_exports

TOKEN = "spotgpu:aws:GpuPool"


class GpuPool(PoolOutputs, pulumi.ComponentResource):
    exports: dict[str, Any]
    """What the stack exports for this pool: the common keys (spotgpu_pulumi.outputs) plus names, ARNs, the drill template id."""

    def __init__(self, name: str, plan: AwsPoolPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec = plan.spec
        child, invoke = region_options(name, spec.region, self)
        partition = aws.get_partition_output(opts=invoke).partition

        bucket = CheckpointBucket(
            f"{name}-checkpoints",
            CheckpointBucketArgs(
                bucket_name=plan.names.bucket,
                prefix=plan.prefix,
                keep_generations=spec.checkpoint.keep_generations,
                noncurrent_version_days=spec.checkpoint.noncurrent_version_days,
                kms_key_arn=optional_input(spec.kms_key_arn),
                force_destroy=spec.checkpoint.force_destroy,
                tags={**plan.role_tags("checkpoint-store"), "Name": plan.names.bucket},
            ),
            child,
        )
        group_names = [plan.names.fallback_group] + ([plan.names.spot_group] if plan.mode == "asg" else [])
        identity = NodeIdentity(
            f"{name}-node",
            NodeIdentityArgs(
                bucket_arn=bucket.arn,
                prefix=plan.prefix,
                partition=partition,
                group_names=group_names,
                kms_key_arn=spec.kms_key_arn,
                tags=plan.pool_tags(),
            ),
            child,
        )
        spot = SpotCapacity(f"{name}-spot", SpotCapacityArgs(plan=plan, profile_name=identity.profile_name), child)
        events = InterruptionEvents(
            f"{name}-events",
            InterruptionEventsArgs(
                pool=plan.pool,
                queue_name=plan.names.queue,
                group_names=group_names,
                fleet_arn=spot.fleet_arn,
                tags=plan.role_tags("events"),
            ),
            child,
        )
        fallback = OnDemandFallbackGroup(
            f"{name}-fallback",
            FallbackArgs(
                plan=plan,
                profile_name=identity.profile_name,
                bucket_arn=bucket.arn,
                queue_arn=events.queue_arn,
                spot_group_arn=spot.group_arn,
                fleet_arn=spot.fleet_arn,
                controller_principal=controller_principal_output(spec.controller_principal_arn, partition, invoke),
            ),
            child,
        )
        drill = InterruptionDrill(
            f"{name}-drill",
            InterruptionDrillArgs(pool=plan.pool, partition=partition, drill=spec.drill, tags=plan.role_tags("drill")),
            child,
        )
        region = spec.region or aws.get_region_output(opts=invoke).region
        job = None
        if spec.controller.enabled and plan.controller_job is None:
            pulumi.log.warn(
                f"pool {plan.pool}: no controller job in fleet mode (the controller's AWS adapter drives Auto Scaling "
                "groups); the policy pack fails this pool unless controller.enabled is false with a waiver",
                resource=self,
            )
        elif plan.controller_job is not None:
            job = ControllerJob(
                f"{name}-controller",
                ControllerJobArgs(
                    plan=plan,
                    job=plan.controller_job,
                    role_arn=fallback.controller_role_arn,
                    role_name=fallback.controller_role_name,
                    queue_arn=events.queue_arn,
                    queue_url=events.queue_url,
                    region=region,
                ),
                child,
            )
        rendezvous = RendezvousHost(f"{name}-rendezvous", plan.rendezvous, child) if plan.rendezvous else None
        spot_groups = pulumi.Output.from_input(spot.group_name).apply(lambda group: [group])
        self.exports = {
            **common_exports(
                self,
                cloud="aws",
                region=region,
                checkpointStore=plan.checkpoint_store,
                spotGroups=spot_groups,
                fallbackGroup=fallback.group_name,
                events=events.queue_url,
                nodeIdentity=identity.role_arn,
                controllerIdentity=fallback.controller_role_arn,
                controllerStateUrl=plan.control_store,
            ),
            "mode": plan.mode,
            "groupName": spot.group_name,
            "roleArn": identity.role_arn,
            "bucketName": bucket.bucket_name,
            "queueUrl": events.queue_url,
            "experimentTemplateId": drill.template_id,
            "fallbackGroupName": fallback.group_name,
            "controllerRoleArn": fallback.controller_role_arn,
        }
        if job is not None:
            self.exports |= {"controllerFunction": job.function_name, "controllerConfig": job.controller_config}
        if rendezvous is not None:
            self.exports |= {"rendezvousAddress": rendezvous.address, "rendezvousInstanceId": rendezvous.instance_id}
        self.register_outputs(self.exports)


def region_options(
    name: str, region: str | None, pool: pulumi.Resource
) -> tuple[pulumi.ResourceOptions, pulumi.InvokeOutputOptions]:
    """Children's options: inherit the caller's providers, or pin the pool's own ``region``.

    With ``region`` set, one ``aws.Provider`` (``<pool>-region``) parents every
    AWS resource of the pool, so pools of one stack can run in several regions.
    The default provider, or one passed in ``opts.providers``, applies otherwise.
    """
    if region is None:
        return pulumi.ResourceOptions(parent=pool), pulumi.InvokeOutputOptions(parent=pool)
    provider = aws.Provider(f"{name}-region", region=region, opts=pulumi.ResourceOptions(parent=pool))
    return (
        pulumi.ResourceOptions(parent=pool, providers={"aws": provider}),
        pulumi.InvokeOutputOptions(parent=pool, provider=provider),
    )


def controller_principal_output(
    configured: Ref | None, partition: pulumi.Output[str], invoke: pulumi.InvokeOutputOptions
) -> pulumi.Output[str]:
    """The principal trusted to assume the controller role: as configured, else this account's root.

    Trusting the account root delegates the decision to IAM: only principals the
    platform team grants ``sts:AssumeRole`` on this role can use it.
    """
    if configured is not None:
        return pulumi.Output.from_input(as_input(configured))
    identity = aws.get_caller_identity_output(opts=invoke)
    return pulumi.Output.all(identity.account_id, partition).apply(lambda v: f"arn:{v[1]}:iam::{v[0]}:root")
