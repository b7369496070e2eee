"""GCP and Azure adapters against recorded responses at the client boundary.

The fakes return the SDKs' own types (compute_v1 protos from recorded REST JSON,
azure-mgmt-compute models from recorded ARM JSON) and check every call's keyword
arguments against the real client method's signature, so a renamed argument fails here.
"""

from __future__ import annotations

import inspect
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from controller_factories import ladder, workload
from fake_pubsub import FakeSubscription, serve

from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.config import ControllerConfig
from spotgpu.controller.gcp import GcpPoolAdapter, GooglePubSubSource, parse_log_entry
from spotgpu.controller.observe import Dropped, FailureReason, Interruption

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    from google.cloud import compute_v1

from azure.mgmt.compute import models as az
from azure.mgmt.compute.operations import VirtualMachineScaleSetsOperations, VirtualMachinesOperations

from spotgpu.controller.azure import AzurePoolAdapter


def _config(cloud: dict[str, Any], groups: list[dict[str, str]]) -> ControllerConfig:
    return ControllerConfig.model_validate(
        {
            "stateUrl": "file:///tmp/unused",
            "workloads": {"train": workload().model_dump(by_alias=True)},
            "ladders": {"main": ladder().model_dump(by_alias=True, mode="json")},
            "pools": [
                {
                    "name": "pool-a",
                    "workload": "train",
                    "ladder": "main",
                    "capacity": {"target": 2, "max": 4},
                    "groups": groups,
                    **cloud,
                }
            ],
        }
    )


def _checked(method: Any, **kwargs: Any) -> None:
    inspect.signature(method).bind(None, **kwargs)  # raises TypeError on a wrong argument name


# ---------------------------------------------------------------- GCP
ZONE_URL = "https://www.googleapis.com/compute/v1/projects/ml-dev-123456/zones/{zone}/instances/{name}"
RECORDED_MANAGED: dict[str, list[dict[str, Any]]] = {
    "spot-mig": [
        {
            "name": "spot-1",
            "instance": ZONE_URL.format(zone="us-central1-a", name="spot-1"),
            "instanceStatus": "RUNNING",
            "currentAction": "NONE",
            "propertiesFromFlexibilityPolicy": {"machineType": "zones/us-central1-a/machineTypes/g2-standard-8"},
        },
        {
            "name": "spot-2",
            "instance": ZONE_URL.format(zone="us-central1-b", name="spot-2"),
            "currentAction": "CREATING",
            "lastAttempt": {
                "errors": {
                    "errors": [
                        {
                            "code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                            "message": "The zone 'projects/ml-dev-123456/zones/us-central1-b' does not have enough resources available to fulfill the request.",
                        }
                    ]
                }
            },
        },
        {
            "name": "spot-3",
            "instance": ZONE_URL.format(zone="us-central1-a", name="spot-3"),
            "instanceStatus": "STOPPING",
            "currentAction": "DELETING",
        },
    ],
    "od-mig": [
        {
            "name": "od-1",
            "instance": ZONE_URL.format(zone="us-central1-c", name="od-1"),
            "instanceStatus": "RUNNING",
            "currentAction": "NONE",
        },
    ],
}
RECORDED_ERRORS: dict[str, list[dict[str, Any]]] = {
    "spot-mig": [
        {
            "error": {
                "code": "QUOTA_EXCEEDED",
                "message": "Quota 'PREEMPTIBLE_NVIDIA_L4_GPUS' exceeded. Limit: 8.0 in region us-central1.",
            },
            "instanceActionDetails": {
                "action": "CREATING",
                "instance": ZONE_URL.format(zone="us-central1-a", name="spot-4"),
            },
            "timestamp": "2026-11-30T11:59:00.000-08:00",
        },
    ],
    "od-mig": [],
}
RECORDED_TARGET = {"spot-mig": 2, "od-mig": 1}


class FakeMigs:
    real = compute_v1.RegionInstanceGroupManagersClient

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get(self, **kw: Any) -> Any:
        _checked(self.real.get, **kw)
        return compute_v1.InstanceGroupManager(
            name=kw["instance_group_manager"], target_size=RECORDED_TARGET[kw["instance_group_manager"]]
        )

    def list_managed_instances(self, **kw: Any) -> list[Any]:
        _checked(self.real.list_managed_instances, **kw)
        return [
            compute_v1.ManagedInstance.from_json(json.dumps(x)) for x in RECORDED_MANAGED[kw["instance_group_manager"]]
        ]

    def list_errors(self, **kw: Any) -> list[Any]:
        _checked(self.real.list_errors, **kw)
        return [
            compute_v1.InstanceManagedByIgmError.from_json(json.dumps(x))
            for x in RECORDED_ERRORS[kw["instance_group_manager"]]
        ]

    def resize(self, **kw: Any) -> None:
        _checked(self.real.resize, **kw)
        self.calls.append(("resize", kw))

    def delete_instances(self, **kw: Any) -> None:
        _checked(self.real.delete_instances, **kw)
        self.calls.append(("delete_instances", kw))


class FakePubSub:
    def __init__(self, messages: list[tuple[str, dict[str, Any] | None, float | None]]) -> None:
        self.messages, self.acked = messages, []  # type: ignore[var-annotated]

    def pull(self, max_messages: int) -> list[tuple[str, dict[str, Any] | None, float | None]]:
        out, self.messages = self.messages[:max_messages], self.messages[max_messages:]
        return out

    def ack(self, ack_ids: list[str]) -> None:
        self.acked += ack_ids

    def release(self, ack_ids: list[str]) -> None:
        raise AssertionError("only a peek releases")


PREEMPTED_LOG = {
    "insertId": "-x1y2z3",
    "logName": "projects/ml-dev-123456/logs/cloudaudit.googleapis.com%2Fsystem_event",
    "protoPayload": {
        "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
        "methodName": "compute.instances.preempted",
        "resourceName": "projects/ml-dev-123456/zones/us-central1-a/instances/spot-1",
        "serviceName": "compute.googleapis.com",
    },
    "resource": {"type": "gce_instance", "labels": {"instance_id": "1234567890", "zone": "us-central1-a"}},
    "timestamp": "2026-11-30T20:00:00.123Z",
}


def _gcp() -> tuple[GcpPoolAdapter, FakeMigs, FakePubSub]:
    config = _config(
        {
            "cloud": "gcp",
            "project": "ml-dev-123456",
            "region": "us-central1",
            "subscription": "projects/ml-dev-123456/subscriptions/pool-a",
        },
        [{"name": "spot-mig", "role": "same_pool"}, {"name": "od-mig", "role": "on_demand"}],
    )
    migs, pubsub = FakeMigs(), FakePubSub([("ack-1", PREEMPTED_LOG, 4990.0), ("ack-2", {"unrelated": True}, 4991.0)])
    return GcpPoolAdapter(config.pools[0], migs, pubsub), migs, pubsub  # type: ignore[arg-type]


def test_gcp_observe_reads_states_errors_and_preemptions() -> None:
    adapter, _, pubsub = _gcp()
    obs = adapter.observe(5000.0)
    spot = obs.groups["spot-mig"]
    assert spot.desired == 2
    assert [(v.id, v.ready, v.zone, v.sku) for v in spot.vms] == [
        ("spot-1", True, "us-central1-a", "g2-standard-8"),
        ("spot-2", False, "us-central1-b", ""),
    ]
    assert obs.groups["od-mig"].desired == 1 and len(obs.groups["od-mig"].ready) == 1
    assert sorted((f.reason, f.code, f.zone) for f in obs.failures) == [
        (FailureReason.CAPACITY, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "us-central1-b"),
        (FailureReason.QUOTA, "QUOTA_EXCEEDED", "us-central1-a"),
    ]
    assert [(i.vm_id, i.kind) for i in obs.interruptions] == [("spot-1", "preempted")]
    adapter.ack(obs.receipts)
    assert pubsub.acked == ["ack-1", "ack-2"]


def test_gcp_apply_resizes_and_deletes_by_instance_url() -> None:
    adapter, migs, _ = _gcp()
    adapter.observe(0.0)
    adapter.apply(SetDesired("od-mig", 3, "t"))
    adapter.apply(RemoveInstance("od-mig", "od-1"))
    (op1, kw1), (op2, kw2) = migs.calls
    assert op1 == "resize" and kw1 == {
        "project": "ml-dev-123456",
        "region": "us-central1",
        "instance_group_manager": "od-mig",
        "size": 3,
    }
    assert op2 == "delete_instances"
    body = kw2["region_instance_group_managers_delete_instances_request_resource"]
    assert list(body.instances) == [ZONE_URL.format(zone="us-central1-c", name="od-1")]
    with pytest.raises(LookupError, match="not in MIG"):
        adapter.apply(RemoveInstance("od-mig", "never-seen"))


def test_gcp_log_entry_shapes() -> None:
    other = parse_log_entry(
        {"protoPayload": {"methodName": "v1.compute.instances.insert"}, "timestamp": "2026-11-30T00:00:00Z"}, 0.0
    )
    assert isinstance(other, Dropped) and other.reason == "unknown-shape"
    event = parse_log_entry(PREEMPTED_LOG, 0.0)
    assert isinstance(event, Interruption) and (event.event_id, event.zone) == ("gcp:-x1y2z3", "us-central1-a")


@pytest.fixture
def subscription(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSubscription]:
    """A loopback Pub/Sub Subscriber service holding one preemption and one unrelated entry."""
    sub = FakeSubscription("projects/ml-dev-123456/subscriptions/pool-a")
    sub.publish(PREEMPTED_LOG)
    sub.publish({"unrelated": True})
    server, port = serve(sub)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", f"127.0.0.1:{port}")
    yield sub
    server.stop(grace=None)


def _adapter_on(sub: FakeSubscription, *, peek: bool) -> GcpPoolAdapter:
    adapter, _, _ = _gcp()
    return GcpPoolAdapter(adapter.pool, FakeMigs(), GooglePubSubSource(sub.name), peek=peek)  # type: ignore[arg-type]


def test_gcp_pubsub_source_pulls_and_acks_through_the_real_client(subscription: FakeSubscription) -> None:
    adapter = _adapter_on(subscription, peek=False)
    obs = adapter.observe(5000.0)
    assert [(i.vm_id, i.kind) for i in obs.interruptions] == [("spot-1", "preempted")]
    assert subscription.visible() == []  # leased to this controller until it acks (or the deadline passes)
    adapter.ack(obs.receipts)
    assert subscription.messages == [] and subscription.calls == ["Pull", "Acknowledge"]


def test_gcp_dry_run_peek_leaves_every_message_for_the_real_controller(subscription: FakeSubscription) -> None:
    """The dry run sees the preemption, but the subscription is as it was: nothing acked, nothing held."""
    dry = _adapter_on(subscription, peek=True)
    obs = dry.observe(5000.0)
    assert [(i.vm_id, i.kind) for i in obs.interruptions] == [("spot-1", "preempted")]
    assert obs.receipts == ()
    assert subscription.calls == ["Pull", "ModifyAckDeadline(0)"]
    assert subscription.visible() == ["1", "2"]  # deliverable again at once, not after the 60 s ack deadline
    real = _adapter_on(subscription, peek=False)
    again = real.observe(5060.0)
    assert [i.event_id for i in again.interruptions] == [i.event_id for i in obs.interruptions]
    real.ack(again.receipts)
    assert subscription.messages == []


@pytest.mark.parametrize("dry", [True, False])
def test_the_cli_builds_a_peeking_gcp_adapter_only_for_a_dry_run(
    dry: bool, subscription: FakeSubscription, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotgpu.controller.cli import build_adapter

    monkeypatch.setattr(compute_v1, "RegionInstanceGroupManagersClient", FakeMigs)
    adapter, _, _ = _gcp()
    built = build_adapter(adapter.pool, peek=dry)
    assert isinstance(built, GcpPoolAdapter) and built.peek is dry
    assert isinstance(built.pubsub, GooglePubSubSource) and built.pubsub.subscription == adapter.pool.subscription


# ---------------------------------------------------------------- Azure
SUB = "00000000-0000-0000-0000-000000000000"
VMSS_ID = "/subscriptions/" + SUB + "/resourceGroups/ml-dev/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"
RECORDED_VMSS = {
    "nc4-spot": {
        "id": VMSS_ID.format(name="nc4-spot"),
        "location": "eastus",
        "sku": {"name": "Standard_NC4as_T4_v3", "tier": "Standard", "capacity": 2},
    },
    "nc4-od": {
        "id": VMSS_ID.format(name="nc4-od"),
        "location": "eastus",
        "sku": {"name": "Standard_NC4as_T4_v3", "tier": "Standard", "capacity": 0},
    },
}


def _vm(name: str, statuses: list[dict[str, str]], priority: str = "Spot") -> dict[str, Any]:
    return {
        "name": name,
        "location": "eastus",
        "zones": ["1"],
        "properties": {
            "priority": priority,
            "hardwareProfile": {"vmSize": "Standard_NC4as_T4_v3"},
            "instanceView": {"statuses": statuses},
        },
    }


RECORDED_VMS = {
    VMSS_ID.format(name="nc4-spot"): [
        _vm("nc4-spot_a1", [{"code": "ProvisioningState/succeeded"}, {"code": "PowerState/running"}]),
        _vm(
            "nc4-spot_b2",
            [
                {
                    "code": "ProvisioningState/failed/ZonalAllocationFailed",
                    "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.",
                    "time": "2026-11-30T12:00:00Z",
                }
            ],
        ),
        _vm("nc4-spot_c3", [{"code": "ProvisioningState/succeeded"}, {"code": "PowerState/deallocated"}]),
        _vm(
            "nc4-spot_d4",
            [{"code": "ProvisioningState/failed/SpotPriceGreaterThanProvidedMaxPrice", "message": "price"}],
        ),
    ],
    VMSS_ID.format(name="nc4-od"): [],
}


class FakePoller:
    def result(self) -> None:
        return None


class FakeScaleSets:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def get(self, rg: str, name: str) -> Any:
        _checked(VirtualMachineScaleSetsOperations.get, resource_group_name=rg, vm_scale_set_name=name)
        return az.VirtualMachineScaleSet(RECORDED_VMSS[name])

    def begin_update(self, rg: str, name: str, parameters: Any) -> FakePoller:
        _checked(
            VirtualMachineScaleSetsOperations.begin_update,
            resource_group_name=rg,
            vm_scale_set_name=name,
            parameters=parameters,
        )
        self.calls.append(("update", (name, parameters)))
        return FakePoller()

    def begin_delete_instances(self, rg: str, name: str, ids: Any) -> FakePoller:
        _checked(
            VirtualMachineScaleSetsOperations.begin_delete_instances,
            resource_group_name=rg,
            vm_scale_set_name=name,
            vm_instance_i_ds=ids,
        )
        self.calls.append(("delete", (name, ids)))
        return FakePoller()


class FakeVms:
    def list(self, rg: str, *, filter: str, expand: str) -> list[Any]:
        _checked(VirtualMachinesOperations.list, resource_group_name=rg, filter=filter, expand=expand)
        vmss_id = filter.split(" eq ")[1].strip("'")
        return [az.VirtualMachine(x) for x in RECORDED_VMS[vmss_id]]


class FakeCompute:
    def __init__(self) -> None:
        self.virtual_machine_scale_sets = FakeScaleSets()
        self.virtual_machines = FakeVms()


def _azure() -> tuple[AzurePoolAdapter, FakeCompute]:
    config = _config(
        {"cloud": "azure", "subscriptionId": SUB, "resourceGroupName": "ml-dev"},
        [{"name": "nc4-spot", "role": "same_pool"}, {"name": "nc4-od", "role": "on_demand"}],
    )
    compute = FakeCompute()
    return AzurePoolAdapter(config.pools[0], compute), compute  # type: ignore[arg-type]


def test_azure_observe_reads_capacity_allocation_errors_and_evictions() -> None:
    adapter, _ = _azure()
    obs = adapter.observe(7000.0)
    spot = obs.groups["nc4-spot"]
    assert spot.desired == 2
    assert [(v.id, v.ready) for v in spot.vms] == [
        ("nc4-spot_a1", True),
        ("nc4-spot_b2", False),
        ("nc4-spot_d4", False),
    ]
    assert sorted((f.reason, f.code) for f in obs.failures) == [
        (FailureReason.CAPACITY, "ZonalAllocationFailed"),
        (FailureReason.PRICE, "SpotPriceGreaterThanProvidedMaxPrice"),
    ]
    assert [(i.vm_id, i.kind, i.zone) for i in obs.interruptions] == [("nc4-spot_c3", "evicted", "1")]
    assert obs.groups["nc4-od"].desired == 0


def test_azure_apply_updates_capacity_and_deletes_one_instance() -> None:
    adapter, compute = _azure()
    adapter.observe(0.0)
    adapter.apply(SetDesired("nc4-od", 2, "t"))
    adapter.apply(RemoveInstance("nc4-od", "nc4-od_x9"))
    (op1, (name1, update)), (op2, (name2, ids)) = compute.virtual_machine_scale_sets.calls
    assert (op1, name1, update.sku.capacity, update.sku.name) == ("update", "nc4-od", 2, "Standard_NC4as_T4_v3")
    assert (op2, name2, ids.instance_ids) == ("delete", "nc4-od", ["nc4-od_x9"])
