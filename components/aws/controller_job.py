"""``spotgpu:aws:ControllerJob``: the pool's fallback controller, deployed as a scheduled Lambda function.

* An EventBridge Scheduler schedule, ``rate(N minutes)``, invokes the function
  with a fixed input; no retries (the next tick supersedes a missed one).
* The Lambda function runs one tick (``spotgpu.controller.aws_lambda.handler``)
  with reserved concurrency 1, as the pool's ``-controller`` role (the identity
  ``OnDemandFallbackGroup`` creates; its trust policy admits
  ``lambda.amazonaws.com`` when the job is on). Code: the zip
  ``spotgpu controller package`` builds (the runtime package, no Pulumi SDK).
* The pool's SQS queue is an event source too, so an interruption warning starts
  a tick at once; the handler reports unacknowledged messages as batch item
  failures.
* Logs go to a CloudWatch log group with a set retention, created before the function.

The config is rendered from the stack's models (``spotgpu.controller.render``)
and passed in the function's environment. Pure planning lives in
:func:`plan_controller_job`, which the pool's planner calls.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws

from spotgpu.config import PlanError
from spotgpu.contract.sources import AWS_QUEUE
from spotgpu.controller.package import DEFAULT_ZIP, HANDLER, LAMBDA_RUNTIME
from spotgpu.controller.render import CONFIG_ENV, config_json, render_controller_config
from spotgpu.models.base import FieldProblem
from spotgpu.models.pool_types import fallback_types
from spotgpu.models.pools import AwsPoolSpec
from spotgpu_pulumi.aws.documents import assume_role_policy, document

if TYPE_CHECKING:  # the plan holds this job's plan: its module imports this one
    from spotgpu_pulumi.aws.plan import AwsPoolPlan

TOKEN = "spotgpu:aws:ControllerJob"
#: Lambda's limit on all environment variables of a function together.
ENV_LIMIT_BYTES = 4096
#: The pool queue's visibility timeout (the contract's, which components/aws/events.py sets):
#: Lambda refuses an SQS event source whose function may run longer than that.
QUEUE_VISIBILITY_SECONDS = AWS_QUEUE.visibility_timeout_seconds
SCHEDULE_INPUT = json.dumps({"source": "spotgpu.schedule"})


@dataclass(frozen=True)
class ControllerJobPlan:
    function_name: str
    schedule_name: str
    schedule_expression: str
    timeout_seconds: int
    log_retention_days: int
    package_path: str
    tags: dict[str, str]


def plan_controller_job(spec: AwsPoolSpec, base_name: str, tags: dict[str, str]) -> ControllerJobPlan:
    """The job of an asg pool whose controller is enabled (``spotgpu_pulumi.aws.plan.plan_pool`` decides that);
    ``base_name`` is the pool's physical prefix, ``spotgpu-<environment>-<pool>``."""
    deploy = spec.controller
    if deploy.timeout_seconds > QUEUE_VISIBILITY_SECONDS:
        raise PlanError(
            FieldProblem(
                f"is above the event queue's visibility timeout ({QUEUE_VISIBILITY_SECONDS}s), which Lambda's SQS "
                "trigger refuses", at="controller.timeoutSeconds", value=deploy.timeout_seconds,
                fix=f"use at most {QUEUE_VISIBILITY_SECONDS}",
            ),
            pool=spec.name,
        )
    minutes = deploy.schedule_minutes
    base = f"{base_name}-controller"
    return ControllerJobPlan(
        function_name=base[:64],
        schedule_name=base[:64],
        schedule_expression=f"rate({minutes} minute{'s' if minutes > 1 else ''})",
        timeout_seconds=deploy.timeout_seconds,
        log_retention_days=deploy.log_retention_days,
        package_path=deploy.package or str(DEFAULT_ZIP),
        tags=tags,
    )


def controller_trust_policy(principal_arn: str, lambda_job: bool) -> str:
    """The controller role's trust: the configured principal, plus Lambda when the job runs as it."""
    trust = assume_role_policy(principal_arn=principal_arn)
    if lambda_job:
        trust["Statement"].append(assume_role_policy(service="lambda.amazonaws.com")["Statement"][0])
    return json.dumps(trust)


@dataclass(frozen=True)
class ControllerJobArgs:
    plan: AwsPoolPlan
    job: ControllerJobPlan
    role_arn: pulumi.Output[str]
    role_name: pulumi.Output[str]
    queue_arn: pulumi.Output[str]
    queue_url: pulumi.Output[str]
    region: pulumi.Input[str]


class ControllerJob(pulumi.ComponentResource):
    function_name: pulumi.Output[str]
    controller_config: pulumi.Output[str]
    schedule_name: pulumi.Output[str]

    def __init__(self, name: str, args: ControllerJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        plan, job = args.plan, args.job
        if not os.path.exists(job.package_path):
            pulumi.log.warn(
                f"pool {plan.pool}: the controller package {os.path.abspath(job.package_path)} does not exist yet "
                f"(controller.package, relative to the project directory: {job.package_path}); build it there with "
                f"`spotgpu controller package --out {job.package_path}` before `pulumi up`",
                resource=self,
            )
        config = pulumi.Output.all(args.region, args.queue_url).apply(lambda v: _config_json(args, v[0], v[1]))
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/lambda/{job.function_name}",
            retention_in_days=job.log_retention_days,
            tags=job.tags,
            opts=child,
        )
        logs_policy = aws.iam.RolePolicy(
            f"{name}-logs-policy",
            role=args.role_name,
            policy=logs.arn.apply(
                lambda arn: json.dumps(document({
                    "Sid": "ControllerLogs",
                    "Effect": "Allow",
                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                    "Resource": f"{arn}:*",
                }))
            ),
            opts=child,
        )  # fmt: skip
        function = aws.lambda_.Function(
            f"{name}-function",
            name=job.function_name,
            description=f"spotgpu fallback controller for pool {plan.pool}: one tick per invocation",
            role=args.role_arn,
            runtime=LAMBDA_RUNTIME,
            handler=HANDLER,
            architectures=["x86_64"],
            code=pulumi.FileArchive(job.package_path),
            timeout=job.timeout_seconds,
            memory_size=512,
            reserved_concurrent_executions=1,
            environment=aws.lambda_.FunctionEnvironmentArgs(variables={CONFIG_ENV: config}),
            logging_config=aws.lambda_.FunctionLoggingConfigArgs(log_format="Text", log_group=logs.name),
            tags=job.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[logs, logs_policy]),
        )
        aws.lambda_.EventSourceMapping(
            f"{name}-queue-trigger",
            event_source_arn=args.queue_arn,
            function_name=function.arn,
            batch_size=10,
            maximum_batching_window_in_seconds=1,
            function_response_types=["ReportBatchItemFailures"],
            opts=child,
        )
        scheduler_role = aws.iam.Role(
            f"{name}-scheduler",
            description=f"EventBridge Scheduler invoking the spotgpu controller of pool {plan.pool}",
            assume_role_policy=json.dumps(assume_role_policy(service="scheduler.amazonaws.com")),
            tags=job.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-scheduler-policy",
            role=scheduler_role.id,
            policy=function.arn.apply(
                lambda arn: json.dumps(document(
                    {"Sid": "InvokeController", "Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": arn}
                ))
            ),
            opts=child,
        )  # fmt: skip
        schedule = aws.scheduler.Schedule(
            f"{name}-schedule",
            name=job.schedule_name,
            description=f"spotgpu controller tick for pool {plan.pool}",
            schedule_expression=job.schedule_expression,
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            target=aws.scheduler.ScheduleTargetArgs(
                arn=function.arn,
                role_arn=scheduler_role.arn,
                input=SCHEDULE_INPUT,
                retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(
                    maximum_retry_attempts=0, maximum_event_age_in_seconds=60
                ),
            ),
            state="ENABLED",
            opts=child,
        )
        self.function_name = function.name
        self.controller_config = config
        self.schedule_name = schedule.name
        self.register_outputs(
            {"functionName": self.function_name, "scheduleName": self.schedule_name, "controllerConfig": config}
        )


def _config_json(args: ControllerJobArgs, region: str, queue_url: str) -> str:
    plan = args.plan
    text = config_json(
        render_controller_config(
            plan.spec,
            plan.args.workload,
            plan.args.ladder,
            state_url=plan.control_store,
            primary_group=plan.names.spot_group,
            fallback_group=plan.names.fallback_group,
            cloud={"region": region, "queueUrl": queue_url},
            group_types={plan.names.spot_group: plan.spec.instance_types,
                         plan.names.fallback_group: fallback_types(plan.spec, plan.args.workload)},
        )
    )
    if len(CONFIG_ENV) + len(text.encode()) > ENV_LIMIT_BYTES:
        raise PlanError(
            FieldProblem(
                f"makes the rendered controller config {len(text.encode())} bytes, above Lambda's {ENV_LIMIT_BYTES}-byte "
                "environment limit", at="workload", value=plan.spec.workload, fix="shorten the workload and ladder names",
            ),
            pool=plan.pool,
        )
    return text
