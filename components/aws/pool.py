"""``spotgpu:aws:GpuPool``: one AWS spot GPU pool with everything that makes spot safe.

The pool is a tree of thin components over :func:`components.aws.plan.plan_pool`:

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

import pulumi
import pulumi_aws as aws

from components.args import PoolArgs
from components.aws.bucket import CheckpointBucket, CheckpointBucketArgs
from components.aws.controller_job import ControllerJob, ControllerJobArgs
from components.aws.drill import InterruptionDrill, InterruptionDrillArgs
from components.aws.events import InterruptionEvents, InterruptionEventsArgs
from components.aws.fallback import FallbackArgs, OnDemandFallbackGroup
from components.aws.identity import NodeIdentity, NodeIdentityArgs
from components.aws.plan import plan_pool
from components.aws.spot import SpotCapacity, SpotCapacityArgs
from spotgpu.bootstrap import control_store_url

TOKEN = "spotgpu:aws:GpuPool"


class GpuPool(pulumi.ComponentResource):
    exports: dict[str, pulumi.Output[str] | str]
    """What the stack exports for this pool: names, ARNs, the queue URL, the drill template id."""

    def __init__(self, name: str, args: PoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        plan = plan_pool(args)  # before registering: bad input fails with no half-built tree
        super().__init__(TOKEN, name, None, opts)
        spec = plan.spec
        child = pulumi.ResourceOptions(parent=self)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition

        bucket = CheckpointBucket(
            f"{name}-checkpoints",
            CheckpointBucketArgs(
                bucket_name=plan.names.bucket,
                prefix=plan.prefix,
                keep_generations=spec.checkpoint.keep_generations,
                noncurrent_version_days=spec.checkpoint.noncurrent_version_days,
                kms_key_arn=spec.kms_key_arn,
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
                controller_principal=_controller_principal(spec.controller_principal_arn, partition, self),
            ),
            child,
        )
        drill = InterruptionDrill(
            f"{name}-drill",
            InterruptionDrillArgs(pool=plan.pool, partition=partition, drill=spec.drill, tags=plan.role_tags("drill")),
            child,
        )
        job = None
        if spec.controller.enabled and plan.mode == "fleet":
            pulumi.log.warn(
                f"pool {plan.pool}: no controller job in fleet mode (the controller's AWS adapter drives Auto Scaling "
                "groups); the policy pack fails this pool unless controller.enabled is false with a waiver",
                resource=self,
            )
        elif spec.controller.enabled:
            job = ControllerJob(
                f"{name}-controller",
                ControllerJobArgs(
                    plan=plan,
                    workload=args.workload,
                    ladder=args.ladder,
                    role_arn=fallback.controller_role_arn,
                    role_name=fallback.controller_role_name,
                    queue_arn=events.queue_arn,
                    queue_url=events.queue_url,
                    region=aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=self)).region,
                ),
                child,
            )
        self.exports = {
            "mode": plan.mode,
            "groupName": spot.group_name,
            "roleArn": identity.role_arn,
            "bucketName": bucket.bucket_name,
            "checkpointStore": plan.checkpoint_store,
            "queueUrl": events.queue_url,
            "experimentTemplateId": drill.template_id,
            "fallbackGroupName": fallback.group_name,
            "controllerRoleArn": fallback.controller_role_arn,
            "controllerStateUrl": control_store_url(plan.checkpoint_store),
        }
        if job is not None:
            self.exports |= {"controllerFunction": job.function_name, "controllerConfig": job.controller_config}
        self.register_outputs(self.exports)


def _controller_principal(
    configured: str | None, partition: pulumi.Output[str], parent: pulumi.Resource
) -> pulumi.Output[str]:
    """The principal trusted to assume the controller role: as configured, else this account's root.

    Trusting the account root delegates the decision to IAM: only principals the
    platform team grants ``sts:AssumeRole`` on this role can use it.
    """
    if configured:
        return pulumi.Output.from_input(configured)
    identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    return pulumi.Output.all(identity.account_id, partition).apply(lambda v: f"arn:{v[1]}:iam::{v[0]}:root")
