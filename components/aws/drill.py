"""``spotgpu:aws:InterruptionDrill``: an AWS FIS template that interrupts this pool's Spot nodes.

A drill is the only honest test of the whole chain (rebalance signal, 2-minute
notice, drain hook, final checkpoint, replacement, restore). FIS sends a real
rebalance recommendation and interruption notice to ``instanceCount`` running
Spot instances tagged ``spotgpu-pool=<pool>``; fallback (on-demand) nodes carry
the tag too but are never Spot, so they are never selected. Run it with
``spotgpu drill aws --pool <pool>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from spotgpu.contract import tags as link
from spotgpu.models.pools import AwsDrillSpec
from spotgpu_pulumi.aws.documents import assume_role_policy, fis_policy

TOKEN = "spotgpu:aws:InterruptionDrill"
ACTION_ID = "aws:ec2:send-spot-instance-interruptions"
TARGET = "SpotInstances"


@dataclass(frozen=True)
class InterruptionDrillArgs:
    pool: str
    partition: pulumi.Output[str]
    drill: AwsDrillSpec = field(default_factory=AwsDrillSpec)
    tags: dict[str, str] = field(default_factory=dict)


class InterruptionDrill(pulumi.ComponentResource):
    template_id: pulumi.Output[str]
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: InterruptionDrillArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-role",
            description=f"AWS FIS: interrupt Spot nodes of spotgpu pool {args.pool}",
            assume_role_policy=json.dumps(assume_role_policy(service="fis.amazonaws.com")),
            tags=args.tags,
            opts=child,
        )
        role_policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=role.id,
            policy=args.partition.apply(lambda p: json.dumps(fis_policy(p, args.pool))),
            opts=child,
        )
        alarm = args.drill.stop_alarm_arn
        stop = (
            aws.fis.ExperimentTemplateStopConditionArgs(source="aws:cloudwatch:alarm", value=alarm)
            if alarm
            else aws.fis.ExperimentTemplateStopConditionArgs(source="none")
        )
        template = aws.fis.ExperimentTemplate(
            f"{name}-template",
            description=f"spotgpu drill: interrupt {args.drill.instance_count} Spot node(s) of pool {args.pool}",
            role_arn=role.arn,
            stop_conditions=[stop],
            actions=[
                aws.fis.ExperimentTemplateActionArgs(
                    name="interrupt-spot",
                    action_id=ACTION_ID,
                    parameters=[
                        aws.fis.ExperimentTemplateActionParameterArgs(
                            key="durationBeforeInterruption", value=args.drill.duration_before_interruption
                        )
                    ],
                    target=aws.fis.ExperimentTemplateActionTargetArgs(key=TARGET, value="pool-spot-nodes"),
                )
            ],
            targets=[
                aws.fis.ExperimentTemplateTargetArgs(
                    name="pool-spot-nodes",
                    resource_type="aws:ec2:spot-instance",
                    selection_mode=f"COUNT({args.drill.instance_count})",
                    resource_tags=[aws.fis.ExperimentTemplateTargetResourceTagArgs(key=link.POOL, value=args.pool)],
                    filters=[aws.fis.ExperimentTemplateTargetFilterArgs(path="State.Name", values=["running"])],
                )
            ],
            # A drill that finds no Spot node to interrupt must fail loudly, not "complete".
            experiment_options=aws.fis.ExperimentTemplateExperimentOptionsArgs(empty_target_resolution_mode="fail"),
            tags=args.tags,
            # The role must carry its permissions before FIS validates the template.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role_policy]),
        )
        self.template_id = template.id
        self.role_arn = role.arn
        self.register_outputs({"templateId": self.template_id, "roleArn": self.role_arn})
