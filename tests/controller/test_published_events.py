"""Every published event shape (tests/controller/published_events.py) through the controller's own
channel: an SQS queue on moto (AWS), the Pub/Sub subscription through google-cloud-pubsub against
the loopback Subscriber (GCP), a Storage queue on Azurite as Event Grid fills it (Azure). Each
becomes the right VM, kind, zone and time, or a drop counted with its reason and logged once.

Issue 36's defects, each a case below: an AWS event with an unreadable ``time`` and a GCP entry
without ``timestamp`` were dropped silently; EC2 Fleet events were routed but never parsed; an
Auto Scaling TEST_NOTIFICATION became a "terminating" with no instance; "instance(s) are already
running" was ``other``; AWS Health scheduledChange was not read; the interruption had no zone;
Azure evictions were read only from the VM list.
"""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from controller_factories import ladder, workload
from fake_pubsub import FakeSubscription, _Message, serve
from prometheus_client import CollectorRegistry
from published_events import AWS, AZURE, GCP, Published

from spotgpu.contract.state_store import MemoryJsonStore
from spotgpu.contract.times import parse_time
from spotgpu.controller.aws import AwsPoolAdapter, Launched
from spotgpu.controller.azure import AzurePoolAdapter, StorageQueueSource
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.gcp import GcpPoolAdapter, GooglePubSubSource
from spotgpu.controller.observe import PoolObservation
from spotgpu.controller.runner import Controller
from spotgpu.controller.telemetry import ControllerTelemetry

REGION = "us-east-1"


def _config(cloud: dict[str, Any], groups: list[str]) -> ControllerConfig:
    return ControllerConfig.model_validate(
        {
            "stateUrl": "file:///tmp/unused",
            "workloads": {"train": workload().model_dump(by_alias=True)},
            "ladders": {"main": ladder((300, 300, 300, 3600)).model_dump(by_alias=True, mode="json")},
            "pools": [
                {**cloud, "name": "pool-a", "workload": "train", "ladder": "main", "capacity": {"target": 1, "max": 4},
                 "groups": [{"name": groups[0], "role": "same_pool"}, {"name": groups[1], "role": "on_demand"}]}
            ],
        }
    )  # fmt: skip


def _check(case: Published, obs: PoolObservation, received_near: float) -> None:
    """The one thing ``case`` must have become."""
    kind = case.expect[0]
    found: list[object] = [*obs.interruptions, *obs.failures, *obs.dropped]
    found += [v for g in obs.groups.values() for v in g.vms if v.ready_at is not None]
    if kind == "dropped":
        assert [(d.reason,) for d in obs.dropped] == [case.expect[1:]], case.name
        assert not obs.interruptions and not obs.failures, case.name
        return
    assert not obs.dropped, (case.name, obs.dropped)
    if kind == "interruption":
        [event] = [e for e in obs.interruptions if e.vm_id == case.expect[2]]
        assert (event.kind, event.vm_id, event.zone, event.time_basis) == case.expect[1:], case.name
        got_at = event.at
    elif kind == "launch_failure":
        [failure] = obs.failures
        assert (failure.reason.value, failure.group, failure.zone, failure.time_basis) == case.expect[1:], case.name
        got_at = failure.at
    else:
        return  # "launched" is checked by the caller (it sets a VM's ready time)
    if case.at is not None:
        assert got_at == pytest.approx(parse_time(case.at)), case.name
    else:
        assert abs(got_at - received_near) < 120, (case.name, got_at, received_near)  # the receive time


# --- AWS: EventBridge events on the pool's SQS queue (moto) ---------------------------------------


@pytest.fixture(scope="module")
def aws(moto_endpoint: str) -> Iterator[dict[str, Any]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")

        def client(name: str) -> Any:
            return boto3.client(name, region_name=REGION, endpoint_url=moto_endpoint)

        ec2 = client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
        ec2.create_launch_template(LaunchTemplateName="lt-pub", LaunchTemplateData={"ImageId": "ami-12c6146b"})
        asg = client("autoscaling")
        for name, desired in (("spot-pub", 0), ("od-pub", 0), ("spot-ready", 1), ("od-ready", 0)):
            asg.create_auto_scaling_group(AutoScalingGroupName=name, MinSize=0, MaxSize=2, DesiredCapacity=desired,
                                          LaunchTemplate={"LaunchTemplateName": "lt-pub"}, VPCZoneIdentifier=subnet)  # fmt: skip
        yield {"client": client}


def _aws_adapter(aws: dict[str, Any], queue_name: str) -> tuple[AwsPoolAdapter, Any, str]:
    sqs = aws["client"]("sqs")
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    config = _config({"cloud": "aws", "region": REGION, "queueUrl": url}, ["spot-pub", "od-pub"])
    return AwsPoolAdapter(config.pools[0], aws["client"]("autoscaling"), sqs), sqs, url  # type: ignore[arg-type]


@pytest.mark.parametrize("case", AWS, ids=lambda c: c.name)
def test_aws_event_through_the_sqs_queue(aws: dict[str, Any], case: Published) -> None:
    adapter, sqs, url = _aws_adapter(aws, f"q-{case.name}")
    sent = time.time()
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(case.body))
    obs = adapter.observe(sent + 5)
    _check(case, obs, sent)
    if case.expect[0] == "launched":
        assert adapter._drain_queue(sent) == ([], [])  # nothing left: the message was received once
    adapter.ack(obs.receipts)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"] == {
        "ApproximateNumberOfMessages": "0"}  # fmt: skip


def test_aws_launch_successful_sets_the_vms_ready_time(aws: dict[str, Any]) -> None:
    """A routed Launch Successful is parsed, not ignored: its EndTime is when the replacement became ready."""
    sqs = aws["client"]("sqs")
    url = sqs.create_queue(QueueName="q-ready")["QueueUrl"]
    config = _config({"cloud": "aws", "region": REGION, "queueUrl": url}, ["spot-ready", "od-ready"])
    adapter = AwsPoolAdapter(config.pools[0], aws["client"]("autoscaling"), sqs)  # type: ignore[arg-type]
    [vm] = adapter.observe(0.0).groups["spot-ready"].vms
    assert vm.ready_at is None
    [case] = [c for c in AWS if c.name == "launch-successful-asg-guide"]
    body = json.loads(json.dumps(case.body))
    body["detail"].update(EC2InstanceId=vm.id, EndTime="2026-11-30T12:01:05Z")  # the guide's, naming this VM
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    [vm] = adapter.observe(0.0).groups["spot-ready"].vms
    assert vm.ready_at == parse_time("2026-11-30T12:01:05Z")
    from spotgpu.controller.aws import parse_event

    [fleet] = [c for c in AWS if c.name == "fleet-instance-launched"]
    assert parse_event(fleet.body, 0.0) == [Launched("i-0c594155dd5ff1829", parse_time("2020-11-09T09:00:23Z"))]


def test_aws_every_message_counted_and_logged_once_through_a_tick(aws: dict[str, Any]) -> None:
    """Defect: an unreadable time, a test notification or a non-JSON body vanished without a trace."""
    adapter, sqs, url = _aws_adapter(aws, "q-tick")
    for case in AWS:
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(case.body))
    sqs.send_message(QueueUrl=url, MessageBody="not json at all")
    lines, registry = io.StringIO(), CollectorRegistry()
    config = _config({"cloud": "aws", "region": REGION, "queueUrl": url}, ["spot-pub", "od-pub"])
    controller = Controller(config, {"pool-a": adapter}, MemoryJsonStore(), ControllerTelemetry(registry, lines))
    controller.tick(time.time())
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    dropped = Counter(r["reason"] for r in records if r["kind"] == "event_dropped")
    assert dropped == {"test-notification": 1, "not-json": 1}
    for reason, count in dropped.items():
        assert registry.get_sample_value("spotgpu_controller_events_dropped_total", {"pool": "pool-a", "source": "sqs", "reason": reason}) == count
    interruptions = [r for r in records if r["kind"] == "interruption"]
    assert {(r["vm"], r["type"], r["zone"], r["timeBasis"]) for r in interruptions} >= {
        ("i-1234567890abcdef0", "interruption", "us-east-2a", "received"),
        ("i-12345678", "maintenance-scheduled", "", "cloud"),
        ("i-0c594155dd5ff1829", "terminated", "us-east-1d", "cloud"),
    }
    failures = {(r["group"], r["reason"]) for r in records if r["kind"] == "launch_failure"}
    assert failures == {("my-auto-scaling-group", "other"), ("my-auto-scaling-group", "quota"),
                        ("fleet-8becf5fe-bb9e-415d-8f54-3fa5a8628b91", "price"),
                        ("fleet-9bb19bc6-60d3-4fd2-ae47-d33e68eafa08", "other"),
                        ("fleet-9bb19bc6-60d3-4fd2-ae47-d33e68eafa08", "quota")}  # fmt: skip
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert attrs == {"ApproximateNumberOfMessages": "0"}  # every message acknowledged after the record was saved


# --- GCP: audit log entries on the pool's subscription (google-cloud-pubsub, loopback Subscriber) ---


@pytest.fixture
def subscription(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSubscription]:
    sub = FakeSubscription("projects/mock-project/subscriptions/pool-a")
    server, port = serve(sub)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", f"127.0.0.1:{port}")
    yield sub
    server.stop(grace=None)


class _NoMigs:
    """The MIG side is covered elsewhere (test_gcp_azure_adapters.py): empty groups here."""

    def get(self, **kw: Any) -> Any:
        return SimpleNamespace(target_size=0)

    def list_managed_instances(self, **kw: Any) -> list[Any]:
        return []

    def list_errors(self, **kw: Any) -> list[Any]:
        return []


def _gcp_adapter(sub: FakeSubscription) -> GcpPoolAdapter:
    config = _config({"cloud": "gcp", "project": "mock-project", "region": "europe-west1", "subscription": sub.name},
                     ["spot-mig", "od-mig"])  # fmt: skip
    return GcpPoolAdapter(config.pools[0], _NoMigs(), GooglePubSubSource(sub.name))  # type: ignore[arg-type]


@pytest.mark.parametrize("case", GCP, ids=lambda c: c.name)
def test_gcp_entry_through_the_subscription(subscription: FakeSubscription, case: Published) -> None:
    subscription.publish(case.body)
    adapter = _gcp_adapter(subscription)
    now = time.time()
    obs = adapter.observe(now)
    _check(case, obs, now)
    adapter.ack(obs.receipts)
    assert subscription.messages == []  # counted and acknowledged, not redelivered forever


def test_gcp_entry_without_a_timestamp_takes_its_publish_time_not_the_tick(subscription: FakeSubscription) -> None:
    """Defect: it took the tick's receive time, so a controller that was down an hour dated the
    preemption an hour late (AWS already takes SQS SentTimestamp)."""
    [case] = [c for c in GCP if c.name == "preempted-minimal-no-timestamp"]
    now = time.time()
    subscription.publish(case.body, published_at=now - 3600.0)  # published, then the controller was down an hour
    subscription.messages.append(_Message("9", json.dumps(case.body).encode()))  # no publish_time: the tick's time
    adapter = _gcp_adapter(subscription)
    obs = adapter.observe(now)
    got = sorted((e.at, e.time_basis) for e in obs.interruptions)
    assert got == [(pytest.approx(now - 3600.0, abs=1e-3), "received"), (now, "received")]
    adapter.ack(obs.receipts)
    assert subscription.messages == []


def test_gcp_a_body_that_is_not_json_is_a_counted_drop(subscription: FakeSubscription) -> None:
    subscription.messages.append(_Message("9", b"\x00not json"))
    obs = _gcp_adapter(subscription).observe(0.0)
    assert [d.reason for d in obs.dropped] == ["not-json"]


# --- Azure: Scheduled Events from Event Grid on a Storage queue (Azurite) -------------------------


class _Compute:
    """The pool's scale sets, empty unless a test lists VMs in ``listed`` (scale set -> VMs): with the Delete
    eviction policy an evicted VM is gone from the list."""

    def __init__(self) -> None:
        sets = {name: SimpleNamespace(id=f"/vmss/{name}", sku=SimpleNamespace(capacity=1, name="Standard_NC4as_T4_v3"))
                for name in ("myvmss", "myvmss-od")}  # fmt: skip
        self.listed: dict[str, list[Any]] = {}
        self.virtual_machine_scale_sets = SimpleNamespace(get=lambda rg, name: sets[name])
        self.virtual_machines = SimpleNamespace(
            list=lambda rg, filter, expand: self.listed.get(filter.split(" eq ")[1].strip("'"), []))


def _azure_config(url: str, state_url: str = "file:///tmp/unused") -> ControllerConfig:
    config = _config({"cloud": "azure", "subscriptionId": "00000000-0000-0000-0000-000000000000",
                      "resourceGroupName": "rg-name", "eventsQueueUrl": url}, ["myvmss", "myvmss-od"])  # fmt: skip
    return config.model_copy(update={"state_url": state_url})


def _azure_adapter(azurite_queue: dict[str, str], queue: str) -> tuple[AzurePoolAdapter, Any]:
    from azure.storage.queue import QueueClient

    url = f"{azurite_queue['url']}/{queue}"
    credential = {"account_name": azurite_queue["account_name"], "account_key": azurite_queue["account_key"]}
    client = QueueClient.from_queue_url(url, credential=credential)
    client.create_queue()
    config = _azure_config(url)
    adapter = AzurePoolAdapter(config.pools[0], _Compute(), StorageQueueSource(url, credential))  # type: ignore[arg-type]
    return adapter, client


@pytest.mark.parametrize("case", AZURE, ids=lambda c: c.name)
def test_azure_scheduled_event_through_the_event_grid_queue(azurite_queue: dict[str, str], case: Published) -> None:
    """Defect: evictions were read only from the VM list; under Delete the VM is gone before a tick sees it."""
    adapter, client = _azure_adapter(azurite_queue, case.name.replace("_", "-").lower()[:63])
    client.send_message(json.dumps(case.body))  # Event Grid writes the event as plain text
    now = time.time()
    obs = adapter.observe(now)
    assert all(not g.vms for g in obs.groups.values())  # nothing to read evictions from in the VM list
    _check(case, obs, now)
    adapter.ack(obs.receipts)
    assert list(client.peek_messages(max_messages=32)) == []


def test_azure_events_of_other_vms_and_shapes_are_counted_drops(azurite_queue: dict[str, str]) -> None:
    adapter, client = _azure_adapter(azurite_queue, "drops")
    other = json.loads(json.dumps(AZURE[1].body))
    other["data"]["resourceInfo"]["properties"]["Resources"] = ["someone-elses-vm"]
    other["subject"] = other["data"]["resourceInfo"]["id"] = "/subscriptions/x/resourceGroups/rg/providers/" \
        "Microsoft.Compute/virtualMachines/someone-elses-vm"
    unknown = json.loads(json.dumps(AZURE[1].body))
    unknown["data"]["resourceInfo"]["properties"]["EventType"] = "Hibernate"
    for body in (other, unknown, {"eventType": "Microsoft.Storage.BlobCreated", "data": {}}):
        client.send_message(json.dumps(body))
    client.send_message("{{ not json")
    obs = adapter.observe(time.time())
    assert sorted(d.reason for d in obs.dropped) == ["not-json", "other-pool", "unknown-shape", "unknown-value"]
    assert obs.interruptions == ()


def test_azure_dry_run_peek_leaves_the_events_for_the_real_controller(azurite_queue: dict[str, str]) -> None:
    adapter, client = _azure_adapter(azurite_queue, "peek")
    client.send_message(json.dumps(AZURE[1].body))
    peek = AzurePoolAdapter(adapter.pool, _Compute(), adapter.events, peek=True)
    seen = peek.observe(time.time())
    assert [i.kind for i in seen.interruptions] == ["evicted"] and seen.receipts == ()
    real = adapter.observe(time.time())  # released at once, not after the visibility timeout
    assert [i.event_id for i in real.interruptions] == [i.event_id for i in seen.interruptions]


def _running_spot_vm(name: str, zone: str) -> Any:
    from azure.mgmt.compute import models as az

    return az.VirtualMachine({
        "name": name, "location": "eastus", "zones": [zone],
        "properties": {"priority": "Spot", "hardwareProfile": {"vmSize": "Standard_NC4as_T4_v3"},
                       "instanceView": {"statuses": [{"code": "ProvisioningState/succeeded"},
                                                     {"code": "PowerState/running"}]}},
    })  # fmt: skip


def test_azure_eviction_of_a_vm_listed_at_an_earlier_tick_carries_its_zone(
    azurite_queue: dict[str, str], tmp_path: Path
) -> None:
    """Defect: Event Grid carries a location, not a zone, and under Delete the evicted VM is gone from the
    list, so every Azure eviction had zone "" (the fitted rates and the twin are per zone)."""
    from spotgpu.contract.state_store import ObjectJsonStore
    from spotgpu.controller.runner import RECORD_KEY

    adapter, client = _azure_adapter(azurite_queue, "zones")
    compute = adapter.compute
    state_url = f"file://{tmp_path}"
    config = _azure_config(adapter.pool.events_queue_url or "", state_url)
    t0 = time.time()

    def tick(now: float) -> list[dict[str, Any]]:
        """One tick of a fresh controller process (``controller run --once``): the record comes from the store."""
        lines = io.StringIO()
        controller = Controller(config, {"pool-a": adapter}, ObjectJsonStore(state_url),
                                ControllerTelemetry(CollectorRegistry(), lines))  # fmt: skip
        controller.tick(now)
        return [json.loads(line) for line in lines.getvalue().splitlines()]

    compute.listed["/vmss/myvmss"] = [_running_spot_vm("myvmss_1", "2")]
    tick(t0)
    compute.listed.clear()  # evicted and deleted before the next tick lists the scale set
    for vm in ("myvmss_1", "myvmss_9"):  # myvmss_9 was never listed: no zone to give, and no error
        body = json.loads(json.dumps(AZURE[1].body))
        body["data"]["resourceInfo"]["properties"]["Resources"] = [vm]
        body["data"]["resourceInfo"]["properties"]["EventId"] = f"evict-{vm}"
        body["eventTime"] = datetime.fromtimestamp(t0 + 30, UTC).isoformat()
        client.send_message(json.dumps(body))
    records = tick(t0 + 60)
    got = {(r["vm"], r["type"], r["zone"], r["stale"]) for r in records if r["kind"] == "interruption"}
    assert got == {("myvmss_1", "evicted", "2", False), ("myvmss_9", "evicted", "", False)}
    assert not [r for r in records if r["kind"] == "action_failed" and r["action"] == "observe"]
    saved = ObjectJsonStore(state_url).get(RECORD_KEY)
    assert saved is not None and saved["pools"]["pool-a"]["zones"] == {"myvmss_1": {"zone": "2", "seen_at": t0}}
    tick(t0 + config.event_max_age_seconds + 1)  # gone for longer than the event max age: forgotten
    saved = ObjectJsonStore(state_url).get(RECORD_KEY)
    assert saved is not None and saved["pools"]["pool-a"]["zones"] == {}


def test_every_published_event_names_its_source_and_expectation() -> None:
    cases = [*AWS, *GCP, *AZURE]
    assert len(cases) >= 23 and len({c.name for c in cases}) == len(cases)
    for case in cases:
        assert len(case.source) > 20 and case.expect[0] in ("interruption", "launch_failure", "launched", "dropped")
        assert case.at is None or parse_time(case.at) is not None


def test_the_lambda_batch_keeps_sqs_sent_timestamp_for_events_without_a_time(aws: dict[str, Any]) -> None:
    """The Lambda handler's first receive is the event's records: their SentTimestamp is the receive time."""
    from spotgpu.controller.aws_lambda import EventFirstSqs

    [case] = [c for c in AWS if c.name == "spot-warning-ec2-user-guide"]  # "time": "yyyy-mm-ddThh:mm:ssZ"
    adapter, sqs, _ = _aws_adapter(aws, "q-lambda")
    record = {"messageId": "m1", "receiptHandle": "r1", "body": json.dumps(case.body), "eventSource": "aws:sqs",
              "attributes": {"SentTimestamp": "1764590400123", "ApproximateReceiveCount": "1"}}  # fmt: skip
    adapter.sqs = EventFirstSqs(sqs, [record])
    [event] = adapter.observe(1764590500.0).interruptions
    assert (event.at, event.time_basis) == (1764590400.123, "received")
