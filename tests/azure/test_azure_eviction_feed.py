"""An Azure pool whose evictions would reach the controller only through the VM list is warned about.

Defect (issue 36 audit): ``publishEventsToEventGrid`` defaults to false while ``evictionPolicy``
defaults to Delete, so a default pool read its evictions from the VM list, which an evicted VM
leaves within seconds: most evictions went unrecorded, and nothing said so. The default stays
false (turning it on creates or joins the subscription's one Scheduled Events topic, docs/azure.md
"Reading evictions"); leaving the key unset under Delete now warns with one line.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from azure_fixtures import pool_args, stack_raw
from doc_blocks import marked_block

from spotgpu.config import parse_stack_config
from spotgpu.models.pools import AzurePoolSpec
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.azure.plan import eviction_warnings, plan_pool
from spotgpu_pulumi.clouds import plan_stack
from spotgpu_pulumi.offline.testing import record
from spotgpu_pulumi.platform import deploy

DOC_WARNING = marked_block("azure.md", "azure-eviction-warning").strip()


def _dev_unset() -> dict[str, Any]:
    """The dev stack with its Azure pool's publishEventsToEventGrid left unset (the default)."""
    raw = stack_raw("dev")
    [pool] = [p for p in raw["pools"] if p["cloud"] == "azure"]
    assert pool["publishEventsToEventGrid"] is False  # the dev stack states its choice
    del pool["publishEventsToEventGrid"]
    return raw


def test_unset_under_delete_is_one_line_naming_the_key_the_value_and_the_fix() -> None:
    spec = parse_stack_config(_dev_unset()).pools_for("azure")[0]
    assert isinstance(spec, AzurePoolSpec)
    assert spec.eviction_policy == "Delete" and spec.publish_events_to_event_grid is False
    (line,) = eviction_warnings(spec)
    assert line == DOC_WARNING  # docs/azure.md shows it as the preview prints it
    assert line.startswith("pools[dev-az].publishEventsToEventGrid: ") and "\n" not in line
    assert "(value: false, the default); fix: set it to true" in line


@pytest.mark.parametrize(
    "changes",
    [
        {"publishEventsToEventGrid": True},  # read from the Scheduled Events queue
        {"publishEventsToEventGrid": False},  # stated: the VM list is accepted
        {"evictionPolicy": "Deallocate"},  # the evicted VM stays listed: every eviction is read
    ],
)
def test_a_stated_choice_or_deallocate_is_not_warned(changes: dict[str, Any]) -> None:
    raw = _dev_unset()
    raw["pools"] = [{**p, **changes} if p["cloud"] == "azure" else p for p in raw["pools"]]
    config = parse_stack_config(raw)
    assert plan_pool(PoolArgs.for_pool(config, config.pools_for("azure")[0])).warnings == ()


def test_the_shipped_stacks_state_their_choice() -> None:
    """The main job's preview (the dev stack) and prod carry no such warning."""
    for stack in ("dev", "prod"):
        assert plan_pool(pool_args(stack)).warnings == (), stack


def test_the_pool_component_logs_the_warning_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `spotgpu preview` and `pulumi preview` print: the component's own warning, on the pool."""
    logged: list[tuple[str, Any]] = []
    real = pulumi.log.warn

    def warn(msg: str, resource: Any = None, *args: Any, **kw: Any) -> None:
        logged.append((msg, resource))
        real(msg, resource, *args, **kw)

    monkeypatch.setattr(pulumi.log, "warn", warn)
    raw = _dev_unset()
    record(lambda: deploy(plan_stack(parse_stack_config(raw))), stack="dev")
    mine = [(msg, r) for msg, r in logged if "publishEventsToEventGrid" in msg]
    assert [msg for msg, _ in mine] == [DOC_WARNING]
    assert type(mine[0][1]).__name__ == "GpuPool"
