"""One Scheduled Events system topic per subscription: a stack's Azure pools share it, another stack names it.

Azure allows one ``MaintenanceResources`` system topic per source and type, so a second pool with
``publishEventsToEventGrid`` that made its own failed at ``pulumi up`` (docs/controller.md listed it).
"""

from __future__ import annotations

import copy
import textwrap
from typing import Any

import pytest
import yaml
from azure_fixtures import stack_raw
from doc_blocks import marked_block

from spotgpu.config import ConfigError, parse_stack_config
from spotgpu_pulumi.clouds import plan_stack
from spotgpu_pulumi.offline.mocks import RecordedResource
from spotgpu_pulumi.offline.testing import index, record
from spotgpu_pulumi.platform import deploy

TOPIC = "azure-native:eventgrid:SystemTopic"
SUBSCRIPTION = "azure-native:eventgrid:SystemTopicEventSubscription"
ASSIGN = "azure-native:authorization:RoleAssignment"
OTHER_PRINCIPAL = "0b5c3c1e-1f6a-4c55-9d1e-2b8f3a9e7c10"


def _two_azure_pools(**second: Any) -> dict[str, Any]:
    """The prod stack with a second Azure pool (its own account), both publishing to Event Grid."""
    raw = stack_raw("prod")
    first = next(p for p in raw["pools"] if p["cloud"] == "azure")
    assert first["publishEventsToEventGrid"] is True
    other = {**copy.deepcopy(first), "name": "infer-az", "storageAccountName": "spotgpuprodinfer", **second}
    raw["pools"] = [*raw["pools"], other]
    return raw


def _record(raw: dict[str, Any]) -> tuple[list[RecordedResource], dict[str, Any]]:
    pools: dict[str, Any] = {}

    def program() -> None:
        pools.update(deploy(plan_stack(parse_stack_config(raw))))

    return record(program, stack="prod"), pools


def _grant_principals(resources: list[RecordedResource]) -> dict[str, str]:
    return {r.name: r.inputs["principalId"] for r in index(resources)[ASSIGN] if "-events-eventgrid-" in r.name}


def test_a_stacks_second_pool_subscribes_to_the_first_pools_topic() -> None:
    resources, pools = _record(_two_azure_pools())
    (topic,) = index(resources)[TOPIC]  # was two: the second fails at `pulumi up`
    assert topic.name == "train-az-events-topic"
    subs = {r.name: r.inputs for r in index(resources)[SUBSCRIPTION]}
    assert set(subs) == {"train-az-events-subscription", "infer-az-events-subscription"}
    assert topic.inputs["systemTopicName"] == "train-az-prod-scheduled-events"
    assert subs["infer-az-events-subscription"]["systemTopicName"] == "train-az-prod-scheduled-events"
    assert {s["resourceGroupName"] for s in subs.values()} == {"ml-prod"}
    # each pool's own queue, its own resource group's events
    assert {s["deliveryWithResourceIdentity"]["destination"]["queueName"] for s in subs.values()} == {"scheduled-events"}
    grants = _grant_principals(resources)
    assert set(grants) == {"train-az-events-eventgrid-events-queue", "infer-az-events-eventgrid-events-queue"}
    assert len(set(grants.values())) == 1 and next(iter(grants.values()))  # both to the one topic's identity
    exported = pools["train-az"].exports["eventsTopic"]
    assert "eventsTopic" not in pools["infer-az"].exports
    assert exported["name"] == "train-az-prod-scheduled-events" and exported["resourceGroup"] == "ml-prod"


def test_a_pool_of_another_stack_names_the_topic_and_creates_none() -> None:
    """docs/azure.md's block, as written, on the prod stack's Azure pool."""
    named = yaml.safe_load(textwrap.dedent(marked_block("azure.md", "azure-shared-topic")))
    raw = stack_raw("prod")
    raw["pools"] = [{**p, **named} if p["cloud"] == "azure" else p for p in raw["pools"]]
    resources, pools = _record(raw)
    assert TOPIC not in index(resources)
    (sub,) = index(resources)[SUBSCRIPTION]
    assert sub.inputs["systemTopicName"] == "infer-az-prod-scheduled-events"
    assert sub.inputs["resourceGroupName"] == "ml-shared"  # a subscription lives under its topic
    assert sub.inputs["filter"]["subjectBeginsWith"].endswith("/resourceGroups/ml-prod/")  # still this pool's VMs
    assert _grant_principals(resources) == {"train-az-events-eventgrid-events-queue": OTHER_PRINCIPAL}
    assert "eventsTopic" not in pools["train-az"].exports


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"publishEventsToEventGrid": False, "scheduledEventsTopic": {
                "resourceGroup": "ml-platform", "name": "sub-scheduled-events", "principalId": OTHER_PRINCIPAL}},
            "spotgpu:pools[train-az].scheduledEventsTopic: names a topic, but the pool publishes no Scheduled "
            'Events to Event Grid (value: "sub-scheduled-events"); fix: set publishEventsToEventGrid: true, '
            "or remove scheduledEventsTopic",
        ),
        (
            {"scheduledEventsTopic": {"resourceGroup": "ml-platform", "name": "t", "principalId": OTHER_PRINCIPAL}},
            "scheduledEventsTopic.name",
        ),
        (
            {"scheduledEventsTopic": {"resourceGroup": "ml-platform", "name": "topic", "principalId": "my-topic"}},
            "scheduledEventsTopic.principalId",
        ),
    ],
)
def test_a_bad_topic_reference_is_one_line(changes: dict[str, Any], expected: str) -> None:
    raw = stack_raw("prod")
    raw["pools"] = [{**p, **changes} if p["cloud"] == "azure" else p for p in raw["pools"]]
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw)
    assert expected in str(err.value) and "\n" not in str(err.value)
