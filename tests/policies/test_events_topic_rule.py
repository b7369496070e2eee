"""``azure-one-scheduled-events-topic``: Azure refuses a second MaintenanceResources system topic in a subscription."""

from __future__ import annotations

import pulumi_azure_native.eventgrid as eventgrid
from guard_helpers import by_policy, judge

from spotgpu.contract.sources import AZURE_SYSTEM_TOPIC_TYPE

RULE = "azure-one-scheduled-events-topic"
SOURCE = "/subscriptions/00000000-0000-0000-0000-000000000000"


def topic(name: str, source: str = SOURCE, topic_type: str = AZURE_SYSTEM_TOPIC_TYPE) -> eventgrid.SystemTopic:
    return eventgrid.SystemTopic(
        name, system_topic_name=name, resource_group_name="ml", location="global", source=source, topic_type=topic_type
    )


def messages(*names: str, **kw: str) -> list[str]:
    def program() -> None:
        for name in names:
            topic(name, **kw)

    return [d["message"] for d in by_policy(judge(program), RULE)]


def test_a_second_topic_of_a_subscription_is_named_with_the_first() -> None:
    (found,) = messages("pool-a-events", "pool-b-events")
    assert found.startswith(f"'pool-b-events' (azure-native:eventgrid:SystemTopic) is a second {AZURE_SYSTEM_TOPIC_TYPE}")
    assert f"of {SOURCE} (the first is 'pool-a-events')" in found
    assert "fix: drop it and point this pool's SystemTopicEventSubscription at 'pool-a-events'" in found


def test_which_topic_is_the_second_does_not_depend_on_the_engine_order() -> None:
    """Defect (CI, 0f0ed0b): the first topic was the first the engine listed, which varies, so
    the same stack named either topic (about half the runs each way). It is the first by URN."""
    for names in [("pool-b-events", "pool-a-events"), ("pool-a-events", "pool-b-events")] * 4:
        (found,) = messages(*names)
        assert found.startswith("'pool-b-events' (azure-native:eventgrid:SystemTopic) is a second"), names


def test_one_topic_or_topics_of_other_types_pass() -> None:
    assert messages("pool-a-events") == []
    assert messages("a", "b", topic_type="Microsoft.Storage.StorageAccounts") == []


def test_a_stack_of_two_spotgpu_azure_pools_has_one_topic() -> None:
    """Two Azure pools routing their events, built by the components, pass (they share the first's topic)."""
    import copy

    from guard_helpers import REPO

    from spotgpu.config import parse_stack_config, read_stack_file
    from spotgpu_pulumi.clouds import plan_stack
    from spotgpu_pulumi.platform import deploy

    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    first = next(p for p in raw["pools"] if p["cloud"] == "azure")
    raw["pools"] = [p for p in raw["pools"] if p["cloud"] == "azure"]
    raw["pools"].append({**copy.deepcopy(first), "name": "infer-az", "storageAccountName": "spotgpuprodinfer"})
    diagnostics = judge(lambda: deploy(plan_stack(parse_stack_config(raw))))
    assert by_policy(diagnostics, RULE) == []
