"""AWS adapter against moto's ThreadedMotoServer (real boto3 over HTTP on 127.0.0.1).

moto gaps (shared facts aws.md §6): describe_scaling_activities always returns [],
so launch-failure parsing is tested with botocore's Stubber on the same client calls.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from controller_factories import ladder, workload

from spotgpu.contract.drain import DrainChannel
from spotgpu.contract.state_store import MemoryJsonStore
from spotgpu.controller.actions import RemoveInstance, RequestDrain, SetDesired
from spotgpu.controller.aws import AwsPoolAdapter, parse_event
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.observe import Dropped, FailureReason, Interruption, LaunchFailure
from spotgpu.controller.runner import RECORD_KEY, Controller
from spotgpu.controller.state import ControllerRecord, PoolState

REGION = "us-east-1"


@pytest.fixture(scope="module")
def endpoint(moto_endpoint: str) -> str:
    return moto_endpoint  # tests/conftest.py: moto's server on loopback


@pytest.fixture(autouse=True)
def _fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


def _client(name: str, endpoint: str) -> Any:
    return boto3.client(name, region_name=REGION, endpoint_url=endpoint)


def _pool_config(queue_url: str, suffix: str) -> ControllerConfig:
    return ControllerConfig.model_validate(
        {
            "stateUrl": "file:///tmp/unused",
            "stableSpotSeconds": 0,
            "workloads": {"train": workload().model_dump(by_alias=True)},
            "ladders": {"main": ladder((300, 300, 300, 3600)).model_dump(by_alias=True, mode="json")},
            "pools": [
                {
                    "cloud": "aws",
                    "name": "pool-a",
                    "region": REGION,
                    "queueUrl": queue_url,
                    "workload": "train",
                    "ladder": "main",
                    "capacity": {"target": 2, "max": 4},
                    "groups": [
                        {"name": f"spot-{suffix}", "role": "same_pool"},
                        {"name": f"od-{suffix}", "role": "on_demand"},
                    ],
                }
            ],
        }
    )


def _make_groups(endpoint: str, suffix: str, spot_desired: int) -> None:
    ec2 = _client("ec2", endpoint)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    ec2.create_launch_template(
        LaunchTemplateName=f"lt-{suffix}", LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g5.xlarge"}
    )
    asg = _client("autoscaling", endpoint)
    for name, desired, max_size in ((f"spot-{suffix}", spot_desired, 4), (f"od-{suffix}", 0, 0)):
        asg.create_auto_scaling_group(
            AutoScalingGroupName=name,
            LaunchTemplate={"LaunchTemplateName": f"lt-{suffix}", "Version": "$Latest"},
            MinSize=0,
            MaxSize=max_size,
            DesiredCapacity=desired,
            VPCZoneIdentifier=subnet,
        )


def _event(detail_type: str, detail: dict[str, Any], event_id: str, source: str = "aws.ec2") -> str:
    return json.dumps(
        {"version": "0", "id": event_id, "detail-type": detail_type, "source": source, "account": "123456789012",
         "time": "2026-11-30T12:00:00Z", "region": REGION, "resources": [], "detail": detail}
    )


def test_observe_apply_and_ack_over_http(endpoint: str) -> None:
    _make_groups(endpoint, "obs", spot_desired=2)
    sqs = _client("sqs", endpoint)
    queue = sqs.create_queue(QueueName="pool-a-events")["QueueUrl"]
    spot_ids = [i["InstanceId"] for i in _client("autoscaling", endpoint).describe_auto_scaling_groups(
        AutoScalingGroupNames=["spot-obs"])["AutoScalingGroups"][0]["Instances"]]
    sqs.send_message(QueueUrl=queue, MessageBody=_event(
        "EC2 Spot Instance Interruption Warning", {"instance-id": spot_ids[0], "instance-action": "terminate"}, "evt-1"))
    sqs.send_message(QueueUrl=queue, MessageBody=_event(
        "EC2 Instance Launch Unsuccessful",
        {"AutoScalingGroupName": "spot-obs", "ActivityId": "act-9", "StatusCode": "Failed",
         "StatusMessage": "We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested (us-east-1a).",
         "Details": {"Availability Zone": "us-east-1a"}},
        "evt-2", source="aws.autoscaling"))
    sqs.send_message(QueueUrl=queue, MessageBody="not json")
    # account-wide rule: another pool's instance, and one of ours that already left the group
    ec2 = _client("ec2", endpoint)
    other = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": "spotgpu-pool", "Value": "pool-b"}]}])["Instances"][0]["InstanceId"]
    left = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": "spotgpu-pool", "Value": "pool-a"}]}])["Instances"][0]["InstanceId"]
    for n, vm in enumerate((other, left)):
        sqs.send_message(QueueUrl=queue, MessageBody=_event(
            "EC2 Spot Instance Interruption Warning", {"instance-id": vm, "instance-action": "terminate"}, f"evt-x{n}"))

    config = _pool_config(queue, "obs")
    adapter = AwsPoolAdapter(config.pools[0], _client("autoscaling", endpoint), sqs, ec2)  # type: ignore[arg-type]
    obs = adapter.observe(1000.0)
    assert obs.groups["spot-obs"].desired == 2 and len(obs.groups["spot-obs"].ready) == 2
    assert obs.groups["od-obs"].desired == 0 and obs.groups["od-obs"].vms == ()
    assert [(i.event_id, i.vm_id, i.kind) for i in obs.interruptions] == [
        ("evt-1", spot_ids[0], "interruption"), ("evt-x1", left, "interruption")]
    assert [(f.group, f.reason, f.zone) for f in obs.failures] == [("spot-obs", FailureReason.CAPACITY, "us-east-1a")]
    assert len(obs.receipts) == 5

    # fallback group has MaxSize 0: the adapter raises it together with the desired count
    adapter.apply(SetDesired("od-obs", 2, "test"))
    od = _client("autoscaling", endpoint).describe_auto_scaling_groups(AutoScalingGroupNames=["od-obs"])["AutoScalingGroups"][0]
    assert (od["DesiredCapacity"], od["MaxSize"], len(od["Instances"])) == (2, 2, 2)
    victim = od["Instances"][0]["InstanceId"]
    adapter.apply(RemoveInstance("od-obs", victim))
    od = _client("autoscaling", endpoint).describe_auto_scaling_groups(AutoScalingGroupNames=["od-obs"])["AutoScalingGroups"][0]
    assert od["DesiredCapacity"] == 1 and victim not in [i["InstanceId"] for i in od["Instances"]]

    adapter.ack(obs.receipts)
    attrs = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
    assert attrs["Attributes"] == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}


def test_controller_grows_the_fallback_then_scales_in_after_commits(endpoint: str) -> None:
    """Spot lost long ago (record says so) -> on-demand; spot returns -> drain, commit, remove."""
    _make_groups(endpoint, "ctl", spot_desired=0)
    sqs = _client("sqs", endpoint)
    queue = sqs.create_queue(QueueName="pool-ctl-events")["QueueUrl"]
    config = _pool_config(queue, "ctl")
    store = MemoryJsonStore()
    store.put(RECORD_KEY, ControllerRecord({"pool-a": PoolState(lost_since=0.0, last_tick=1999.0)}).to_doc())
    asg = _client("autoscaling", endpoint)
    controller = Controller(config, {"pool-a": AwsPoolAdapter(config.pools[0], asg, sqs)}, store)  # type: ignore[arg-type]

    results = controller.tick(2000.0)  # waited 2000 s > 1500 s of spot waits: on-demand rung
    assert results["pool-a"].step is not None and results["pool-a"].step.kind.value == "on_demand"
    groups = {g["AutoScalingGroupName"]: g for g in asg.describe_auto_scaling_groups(
        AutoScalingGroupNames=["spot-ctl", "od-ctl"])["AutoScalingGroups"]}
    assert groups["spot-ctl"]["DesiredCapacity"] == 2  # the same pool keeps retrying at target
    assert groups["od-ctl"]["DesiredCapacity"] == 2

    # moto fills both groups at once, so the pool now has 4 ready for a target of 2
    results = controller.tick(2030.0)
    drains = [a for a in results["pool-a"].actions if isinstance(a, RequestDrain)]
    assert len(drains) == 2 and not [a for a in results["pool-a"].actions if isinstance(a, RemoveInstance)]
    od_ids = sorted(a.vm_id for a in drains if isinstance(a, RequestDrain))
    # one agent commits after the drain request, the other has not yet
    DrainChannel(store).report_commit("pool-a", od_ids[0], 2040.0)
    results = controller.tick(2060.0)
    assert [a for a in results["pool-a"].actions if isinstance(a, RemoveInstance)] == [RemoveInstance("od-ctl", od_ids[0])]
    od = asg.describe_auto_scaling_groups(AutoScalingGroupNames=["od-ctl"])["AutoScalingGroups"][0]
    assert [i["InstanceId"] for i in od["Instances"]] == [od_ids[1]] and od["DesiredCapacity"] == 1


def _activity(activity_id: str, message: str, status: str = "Failed") -> dict[str, Any]:
    return {
        "ActivityId": activity_id, "AutoScalingGroupName": "spot-x", "Cause": "launch", "StartTime": datetime(2026, 11, 30, tzinfo=UTC),
        "StatusCode": status, "StatusMessage": message, "Progress": 100, "Details": '{"Availability Zone":"us-east-1b"}',
    }


def test_scaling_activity_failures_are_classified_with_stubber() -> None:
    client = boto3.client("autoscaling", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [
        {"AutoScalingGroupName": name, "MinSize": 0, "MaxSize": 4, "DesiredCapacity": 2, "DefaultCooldown": 300,
         "AvailabilityZones": ["us-east-1a"], "HealthCheckType": "EC2", "CreatedTime": datetime(2026, 1, 1, tzinfo=UTC),
         "Instances": []} for name in ("spot-x", "od-x")]})
    stub.add_response("describe_scaling_activities", {"Activities": [
        _activity("a1", "Launching a new EC2 instance. Status Reason: We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested (us-east-1b). Launching EC2 instance failed."),
        _activity("a2", "Launching a new EC2 instance. Status Reason: Max spot instance count exceeded. Launching EC2 instance failed."),
        _activity("a3", "Status Reason: Your Spot request price of 0.1 is lower than the minimum required Spot request fulfillment price of 0.3 (SpotMaxPriceTooLow)."),
        _activity("a4", "Status Reason: The requested configuration is currently not supported. Please check the documentation."),
        _activity("a5", "Launching a new EC2 instance: i-0abc", status="Successful"),
    ]}, {"AutoScalingGroupName": "spot-x", "MaxRecords": 20})
    stub.add_response("describe_scaling_activities", {"Activities": []}, {"AutoScalingGroupName": "od-x", "MaxRecords": 20})
    config = _pool_config("https://sqs.us-east-1.amazonaws.com/1/q", "x")
    with stub:
        obs = AwsPoolAdapter(config.pools[0], client).observe(0.0)  # type: ignore[arg-type]
    got = [(f.key, f.reason, f.code, f.zone) for f in obs.failures]
    assert got == [
        ("aws:a1", FailureReason.CAPACITY, "capacity", "us-east-1b"),
        ("aws:a2", FailureReason.QUOTA, "quota", "us-east-1b"),
        ("aws:a3", FailureReason.PRICE, "SpotMaxPriceTooLow", "us-east-1b"),
        ("aws:a4", FailureReason.OTHER, "unknown", "us-east-1b"),
    ]


def test_eventbridge_shapes() -> None:
    [rebalance] = parse_event(json.loads(_event("EC2 Instance Rebalance Recommendation", {"instance-id": "i-1"}, "e1")), 0.0)
    assert rebalance == Interruption("e1", "i-1", "rebalance", rebalance.at)  # type: ignore[union-attr]
    [gone] = parse_event(json.loads(_event("EC2 Instance State-change Notification", {"instance-id": "i-2", "state": "terminated"}, "e2")), 0.0)
    assert isinstance(gone, Interruption) and gone.kind == "terminated"
    [running] = parse_event(json.loads(_event("EC2 Instance State-change Notification", {"instance-id": "i-2", "state": "running"}, "e3")), 0.0)
    assert isinstance(running, Dropped) and running.reason == "unknown-value"  # not routed: the rule routes gone states
    [fail] = parse_event(json.loads(_event("EC2 Instance Launch Unsuccessful", {
        "AutoScalingGroupName": "g", "StatusCode": "InsufficientInstanceCapacity", "StatusMessage": "x"}, "e4")), 0.0)
    assert isinstance(fail, LaunchFailure) and fail.reason is FailureReason.CAPACITY and fail.code == "InsufficientInstanceCapacity"


def test_cli_run_once_against_the_local_aws_api(endpoint: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`spotgpu controller run --once` with real boto3 clients pointed at moto via AWS_ENDPOINT_URL."""
    import yaml

    from spotgpu.cli import main

    _make_groups(endpoint, "cli", spot_desired=0)
    queue = _client("sqs", endpoint).create_queue(QueueName="pool-cli-events")["QueueUrl"]
    doc = json.loads(_pool_config(queue, "cli").model_dump_json(by_alias=True))
    doc["stateUrl"] = f"file://{tmp_path}/state"
    doc["telemetry"] = {"jsonLines": str(tmp_path / "events.jsonl")}
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)

    assert main(["controller", "run", "--config", str(path), "--once", "--dry-run"]) == 0
    assert "would SetDesired(group='spot-cli', desired=2" in capsys.readouterr().out
    spot = _client("autoscaling", endpoint).describe_auto_scaling_groups(AutoScalingGroupNames=["spot-cli"])["AutoScalingGroups"][0]
    assert spot["DesiredCapacity"] == 0  # dry run changed nothing

    assert main(["controller", "run", "--config", str(path), "--once"]) == 0
    assert "pool-a: same_pool, 1 action(s)" in capsys.readouterr().out
    spot = _client("autoscaling", endpoint).describe_auto_scaling_groups(AutoScalingGroupNames=["spot-cli"])["AutoScalingGroups"][0]
    assert spot["DesiredCapacity"] == 2
    assert main(["controller", "status", "--config", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["pools"]["pool-a"]["lostSince"] is not None
    assert main(["controller", "status", "--config", str(path)]) == 0
    assert capsys.readouterr().out.startswith("pool-a: capacity lost since ")

    assert main(["controller", "validate", "--config", str(path), "--json"]) == 0
    assert [p["pool"] for p in json.loads(capsys.readouterr().out)["pools"]] == ["pool-a"]
    assert main(["controller", "run", "--config", str(path), "--once", "--dry-run", "--json"]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)  # stdout is exactly one document; the "would" lines moved to stderr
    assert report["dryRun"] is True and set(report["pools"]) == {"pool-a"}
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "action" and e["action"] == "SetDesired" for e in events)


def _snapshot(endpoint: str, bucket: str, groups: list[str], queue: str) -> tuple[object, ...]:
    """Everything a dry run could touch: every object's key and bytes, the groups as described, the queue."""
    s3 = _client("s3", endpoint)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))
    objects = [(k, s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys]
    described = _client("autoscaling", endpoint).describe_auto_scaling_groups(AutoScalingGroupNames=groups)
    asgs = json.dumps(described["AutoScalingGroups"], sort_keys=True, default=str)
    attrs = _client("sqs", endpoint).get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    return objects, asgs, attrs["Attributes"]


def test_dry_run_changes_no_byte_of_the_bucket_or_the_groups(
    endpoint: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run that would drain two on-demand VMs: it says so, and the bucket, groups and queue are untouched."""
    import yaml

    from spotgpu.cli import main

    _make_groups(endpoint, "dry", spot_desired=2)
    asg = _client("autoscaling", endpoint)
    asg.update_auto_scaling_group(AutoScalingGroupName="od-dry", MaxSize=2, DesiredCapacity=2)  # surplus: 4 for 2
    s3 = _client("s3", endpoint)
    s3.create_bucket(Bucket="dry-ckpt")
    prefix = "pool-a/_controller"
    record = ControllerRecord({"pool-a": PoolState(surplus_since=0.0, last_tick=1.0, whole_since=0.0)})
    s3.put_object(Bucket="dry-ckpt", Key=f"{prefix}/{RECORD_KEY}", Body=record.dumps())
    s3.put_object(Bucket="dry-ckpt", Key="pool-a/generations/000000000007/rank0.bin", Body=b"\x00weights")
    sqs = _client("sqs", endpoint)
    queue = sqs.create_queue(QueueName="pool-dry-events")["QueueUrl"]
    spot_ids = [i["InstanceId"] for i in asg.describe_auto_scaling_groups(AutoScalingGroupNames=["spot-dry"])["AutoScalingGroups"][0]["Instances"]]
    sqs.send_message(QueueUrl=queue, MessageBody=_event("EC2 Instance Rebalance Recommendation", {"instance-id": spot_ids[0]}, "evt-dry"))
    doc = json.loads(_pool_config(queue, "dry").model_dump_json(by_alias=True))
    doc["stateUrl"] = f"s3://dry-ckpt/{prefix}"
    doc["telemetry"] = {"jsonLines": str(tmp_path / "events.jsonl")}
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")

    before = _snapshot(endpoint, "dry-ckpt", ["spot-dry", "od-dry"], queue)
    assert main(["controller", "run", "--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("dry-run: would RequestDrain(group='od-dry'") == 2
    assert "pool-a: whole, would take 2 action(s)" in out
    assert _snapshot(endpoint, "dry-ckpt", ["spot-dry", "od-dry"], queue) == before
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events and {e["kind"] for e in events} == {"would"}

    # the real run does what the dry run said
    assert main(["controller", "run", "--config", str(path), "--once"]) == 0
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="dry-ckpt")["Contents"]}
    assert sum(k.startswith(f"{prefix}/drains/pool-a/") for k in keys) == 2


def test_unobservable_pool_is_one_line_and_non_zero(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    import yaml

    from spotgpu.cli import main

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    doc = json.loads(_pool_config("https://sqs.us-east-1.amazonaws.com/1/q", "gone").model_dump_json(by_alias=True))
    doc["stateUrl"] = f"file://{tmp_path}/state"
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    for flags in (["--dry-run"], ["--once"]):
        assert main(["controller", "run", "--config", str(path), *flags]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cannot observe pool pool-a: endpoint unreachable" in err[0], err
