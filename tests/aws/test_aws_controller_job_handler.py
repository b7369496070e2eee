"""The controller's Lambda handler, invoked locally with real event shapes against moto's server.

The config is rendered from the prod stack's AWS pool (spotgpu.controller.render), the
record lives in moto's S3, the groups are moto Auto Scaling groups, and the SQS event
carries a message the test received from the real queue (so its receipt handle is real).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest
from aws_fixtures import config_with

from spotgpu.contract.state_store import ObjectJsonStore
from spotgpu.controller.aws_lambda import CONFIG_ENV, ENDPOINT_ENV, handler
from spotgpu.controller.config import parse_controller_config
from spotgpu.controller.lease import FENCE_FIELD, LEASE_KEY
from spotgpu.controller.render import config_json, render_controller_config
from spotgpu.controller.runner import RECORD_KEY

REGION = "us-east-1"


@pytest.fixture(scope="module")
def endpoint(moto_endpoint: str) -> str:
    return moto_endpoint  # tests/conftest.py: moto's server on loopback


@pytest.fixture
def pool(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two moto groups (spot at target, fallback empty), a queue, a bucket, and the env a deployed function has."""
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", REGION), ("AWS_REGION", REGION), (ENDPOINT_ENV, endpoint)):
        monkeypatch.setenv(key, value)
    suffix = uuid.uuid4().hex[:6]
    client = lambda name: boto3.client(name, region_name=REGION, endpoint_url=endpoint)  # noqa: E731
    ec2 = client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    ec2.create_launch_template(
        LaunchTemplateName=f"lt-{suffix}", LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g5.xlarge"}
    )
    for name, desired, max_size in ((f"spot-{suffix}", 2, 8), (f"od-{suffix}", 0, 4)):
        client("autoscaling").create_auto_scaling_group(
            AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateName": f"lt-{suffix}", "Version": "$Latest"},
            MinSize=0, MaxSize=max_size, DesiredCapacity=desired, VPCZoneIdentifier=subnet,
        )  # fmt: skip
    queue = client("sqs").create_queue(QueueName=f"events-{suffix}")["QueueUrl"]
    bucket = f"ckpt-{suffix}"
    client("s3").create_bucket(Bucket=bucket)
    stack = config_with("prod")
    spec = stack.pools[0]
    config = render_controller_config(
        spec, stack.workload_for(spec), stack.ladder_for(spec),
        state_url=f"s3://{bucket}/{spec.name}/_controller", primary_group=f"spot-{suffix}",
        fallback_group=f"od-{suffix}", cloud={"region": REGION, "queueUrl": queue},
    )  # fmt: skip
    monkeypatch.setenv(CONFIG_ENV, config_json(config))
    store = ObjectJsonStore(config.state_url, endpoint=endpoint, client_options={"allow_http": True})
    return {"sqs": client("sqs"), "queue": queue, "store": store, "suffix": suffix, "config": config}


def _sqs_event(msg: dict[str, Any], queue_url: str) -> dict[str, Any]:
    """The event a Lambda SQS event source mapping delivers (AWS Lambda developer guide, 'Using Lambda with SQS')."""
    name = queue_url.rsplit("/", 1)[-1]
    return {"Records": [{
        "messageId": msg["MessageId"], "receiptHandle": msg["ReceiptHandle"], "body": msg["Body"],
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1764590400000",
                       "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": "1764590400001"},
        "messageAttributes": {}, "md5OfBody": msg.get("MD5OfBody", ""), "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:{name}", "awsRegion": REGION,
    }]}  # fmt: skip


def _interruption(sqs: Any, queue: str, instance_id: str) -> dict[str, Any]:
    body = json.dumps({"version": "0", "id": f"evt-{uuid.uuid4().hex[:8]}", "source": "aws.ec2",
                       "detail-type": "EC2 Spot Instance Interruption Warning", "account": "123456789012",
                       "time": "2026-12-01T12:00:00Z", "region": REGION, "resources": [],
                       "detail": {"instance-id": instance_id, "instance-action": "terminate"}})  # fmt: skip
    sqs.send_message(QueueUrl=queue, MessageBody=body)
    return dict(sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=1, VisibilityTimeout=30)["Messages"][0])


def test_rendered_config_round_trips_through_validate(pool: dict[str, Any]) -> None:
    import os

    assert parse_controller_config(json.loads(os.environ[CONFIG_ENV])) == pool["config"]


def test_a_scheduled_invocation_ticks_saves_the_record_and_releases_the_lease(pool: dict[str, Any]) -> None:
    summary = handler({"source": "spotgpu.schedule"}, None)
    assert summary["trigger"] == "schedule" and summary["leaseHeld"] and summary["token"] == 1
    assert summary["pools"] == {"train-aws": {"step": "whole", "actions": 0}}
    record = pool["store"].get(RECORD_KEY)
    assert record is not None and record[FENCE_FIELD] == 1
    assert pool["store"].get(LEASE_KEY)["released"] is True
    again = handler({"source": "spotgpu.schedule"}, None)
    assert again["leaseHeld"] and again["token"] == 2, "the next run takes the released lease at once"


def test_an_sqs_invocation_consumes_the_delivered_message_and_acknowledges_it(pool: dict[str, Any]) -> None:
    asg = boto3.client("autoscaling", region_name=REGION, endpoint_url=pool["sqs"].meta.endpoint_url)
    spot = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[f"spot-{pool['suffix']}"])["AutoScalingGroups"][0]
    msg = _interruption(pool["sqs"], pool["queue"], spot["Instances"][0]["InstanceId"])
    summary = handler(_sqs_event(msg, pool["queue"]), None)
    assert summary["trigger"] == "sqs" and summary["leaseHeld"]
    assert summary["batchItemFailures"] == []
    attrs = pool["sqs"].get_queue_attributes(
        QueueUrl=pool["queue"], AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert attrs == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}
    record = pool["store"].get(RECORD_KEY)
    event_id = json.loads(msg["Body"])["id"]
    assert any(event_id in key for key in record["pools"]["train-aws"]["seen"]), "the delivered event was counted"


def test_an_sqs_invocation_that_cannot_take_the_lease_hands_the_message_back(pool: dict[str, Any]) -> None:
    import time

    pool["store"].write_if(LEASE_KEY, {"holder": "someone-else", "token": 7, "expiresAt": time.time() + 300}, None)
    msg = _interruption(pool["sqs"], pool["queue"], "i-0123456789abcdef0")
    summary = handler(_sqs_event(msg, pool["queue"]), None)
    assert not summary["leaseHeld"] and "held by someone-" in summary["reason"]
    assert summary["batchItemFailures"] == [{"itemIdentifier": msg["MessageId"]}]
    assert pool["store"].get(RECORD_KEY) is None, "a refused tick wrote nothing"


def test_a_missing_or_bad_config_is_one_line(pool: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, json.dumps({"stateUrl": "s3://x/y"}))
    with pytest.raises(RuntimeError, match=r"SPOTGPU_CONTROLLER_CONFIG: .*workloads") as info:
        handler({"source": "spotgpu.schedule"}, None)
    assert "\n" not in str(info.value)
