"""The AWS controller job under the mock runtime: schedule, concurrency, identity and config in wire form.

The snapshot (tests/aws/snapshots/controller_job.json) is every input of the job's
resources in a preview; accept an intended change with
``SPOTGPU_UPDATE_SNAPSHOTS=1 pytest tests/aws/test_aws_controller_job.py`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_fixtures import config_with, one, policy_of, pool_args, record_pool

from spotgpu.config import ConfigError
from spotgpu.contract.tags import POOL, ROLE
from spotgpu.controller.aws_lambda import CONFIG_ENV
from spotgpu.controller.config import parse_controller_config
from spotgpu_pulumi.aws.plan import plan_pool
from spotgpu_pulumi.clouds import plan_stack
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import record
from tests.controller.job_snapshot import check_snapshot

SNAPSHOT = Path(__file__).parent / "snapshots" / "controller_job.json"
FUNCTION = "aws:lambda/function:Function"
SCHEDULE = "aws:scheduler/schedule:Schedule"
MAPPING = "aws:lambda/eventSourceMapping:EventSourceMapping"
LOGS = "aws:cloudwatch/logGroup:LogGroup"
ROLE_TYPE = "aws:iam/role:Role"
JOB = "spotgpu:aws:ControllerJob"


@pytest.fixture(scope="module")
def prod() -> list[RecordedResource]:
    return record_pool(pool_args("prod"))


def _mock_arn(r: RecordedResource) -> str:
    """The ARN the mock runtime gives a resource (components/offline/mocks.py)."""
    return f"arn:aws:{r.type.split(':')[1].split('/')[0]}:us-east-1:123456789012:{r.name}"


def test_the_function_runs_one_tick_at_a_time_as_the_controller_role(prod: list[RecordedResource]) -> None:
    fn = one(prod, FUNCTION)
    inputs = fn.inputs
    assert inputs["name"] == "spotgpu-prod-train-aws-controller"
    assert inputs["reservedConcurrentExecutions"] == 1
    assert (inputs["runtime"], inputs["handler"]) == ("python3.11", "spotgpu.controller.aws_lambda.handler")
    assert inputs["timeout"] == 60 and inputs["architectures"] == ["x86_64"]
    controller_role = one(prod, ROLE_TYPE, "-fallback-controller")
    assert inputs["role"] == _mock_arn(controller_role)
    trust = policy_of(controller_role, "assumeRolePolicy")["Statement"]
    assert {"Service": "lambda.amazonaws.com"} in [s["Principal"] for s in trust]
    assert inputs["loggingConfig"]["logGroup"] == "/aws/lambda/spotgpu-prod-train-aws-controller"
    assert one(prod, LOGS).inputs["retentionInDays"] == 30
    assert (inputs["tags"][ROLE], inputs["tags"][POOL]) == ("controller", "train-aws")


def test_the_schedule_fires_every_minute_without_overlapping_retries(prod: list[RecordedResource]) -> None:
    schedule = one(prod, SCHEDULE).inputs
    assert schedule["scheduleExpression"] == "rate(1 minute)"
    assert schedule["flexibleTimeWindow"] == {"mode": "OFF"}
    assert schedule["target"]["arn"] == _mock_arn(one(prod, FUNCTION))
    assert schedule["target"]["retryPolicy"]["maximumRetryAttempts"] == 0
    assert json.loads(schedule["target"]["input"]) == {"source": "spotgpu.schedule"}
    invoker = one(prod, ROLE_TYPE, "-controller-scheduler")
    assert policy_of(invoker, "assumeRolePolicy")["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    mapping = one(prod, MAPPING).inputs
    assert mapping["functionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["eventSourceArn"] == _mock_arn(one(prod, "aws:sqs/queue:Queue"))
    assert mapping["functionName"] == _mock_arn(one(prod, FUNCTION))


def test_the_config_in_the_environment_is_the_stack_rendered_and_validates(prod: list[RecordedResource]) -> None:
    env = one(prod, FUNCTION).inputs["environment"]["variables"][CONFIG_ENV]
    config = parse_controller_config(json.loads(env))
    pool = config.pools[0]
    assert pool.name == "train-aws" and pool.cloud == "aws"
    assert [(g.name, g.role.value) for g in pool.groups] == [
        ("spotgpu-prod-train-aws-spot", "same_pool"), ("spotgpu-prod-train-aws-fallback", "on_demand")]
    assert config.state_url == "s3://spotgpu-prod-train-aws-checkpoints/train-aws/_controller"
    assert config.tick_seconds == 60 and config.lease_ttl_seconds == 90
    args = pool_args("prod")
    assert config.ladders["training-aws"] == args.ladder
    assert config.workloads["llm-finetune"] == args.workload.model_copy(update={"sources": {}})  # annotations stay home


def test_preview_snapshot_of_the_controller_resources() -> None:
    from spotgpu_pulumi.aws import GpuPool

    args = pool_args("prod")
    check_snapshot(record(lambda: GpuPool(args.spec.name, plan_pool(args)), preview=True), JOB, SNAPSHOT)


def test_opting_out_creates_no_job_and_fleet_mode_needs_asg() -> None:
    off = record_pool(pool_args("prod", controller={"enabled": False, "waiver": "the batch scheduler grows it"}))
    assert not [r for r in off if r.type in (FUNCTION, SCHEDULE, JOB)]
    trust = policy_of(one(off, ROLE_TYPE, "-fallback-controller"), "assumeRolePolicy")["Statement"]
    assert all("Service" not in s["Principal"] for s in trust)
    assert plan_pool(pool_args("prod", mode="fleet")).controller_job is None  # the AWS adapter drives groups only


def test_a_timeout_lambda_refuses_is_refused_when_the_stack_is_planned() -> None:
    """Defect: the job was planned only inside the ControllerJob component, so the config edge
    (``spotgpu preview``'s check, ``load_config``) passed a timeout Lambda's SQS trigger refuses."""
    config = config_with("prod", controller={"timeoutSeconds": 120})
    with pytest.raises(ConfigError) as err:
        plan_stack(config)
    assert str(err.value) == (
        "spotgpu:pools[train-aws].controller.timeoutSeconds: is above the event queue's visibility timeout (60s), "
        "which Lambda's SQS trigger refuses (value: 120); fix: use at most 60"
    )
